"""Train K packed runs (`scaling.packed`) to their ends: each member as its separate run would be.

`train_packed(cfgs)` takes K run configs of one shape that differ in seed, learning rate (peak,
multiplier or law) and length (budget), and trains them in one batched step. Member k sees exactly
its separate run's batches (`data.train_batch` with its seed), its schedule (`schedule.lr_at` on its own
plan), its clipping (its own global norm), its curve points and held-out evaluations (the steps
`scaling.train.run_loop` uses) and the same divergence rule. A member that has finished (or diverged)
leaves the pack after its step: the others train on as a smaller pack, as they would after a relaunch
that resumed them (so a resumed job repeats an uninterrupted one's steps exactly).
`PackedRun.run` hands each member to its caller as it ends (its record), and checkpoints the job on
a signal and periodically (`scaling.packed_ckpt`), so that a killed job resumes.

What must be equal across members (else ConfigError naming the key): the shape, the batch, the
data, the optimizer's betas, eps, weight decay, clipping and schedule shape, and the evaluation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from scaling import data as data_lib
from scaling import evalsets
from scaling.arch import target_of
from scaling.devices import autocast_for, step_function, to_device
from scaling.errors import ConfigError
from scaling.packed import PackedAdamW, PackedGPT, build_members, clip_per_member
from scaling.packed_ckpt import job_id
from scaling.plan import RunPlan, plan_run
from scaling.preemption import Preempted
from scaling.schedule import lr_at

SHARED_KEYS = (
    "data",
    "optim.beta1",
    "optim.beta2",
    "optim.eps",
    "optim.weight_decay",
    "optim.grad_clip",
    "optim.min_lr_ratio",
    "train.seq_len",
    "train.eval_tokens",
    "train.evals",
    "train.log_points",
    "train.divergence_factor",
    "train.precision",
    "train.device",
    "train.compile",
    "train.compile_mode",
)


@dataclass
class Member:
    """One packed run: its config, plan, and what a TrainState would hold of it."""

    cfg: DictConfig
    plan: RunPlan
    curve: list[dict[str, float]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # every step's training loss
    window: list[float] = field(default_factory=list)  # training losses since the last curve point
    failure: str = ""  # why the member stopped early (diverged), else ""
    train_time: float = 0.0  # seconds of the packed steps this member trained in
    pack_tokens: int = 0  # tokens every active member trained in those steps (the job's, this run's included)
    ema: float | None = None

    @property
    def active(self) -> bool:
        return not self.failure and len(self.losses) < self.plan.steps

    def observe(self, loss: float, step: int, factor: float) -> bool:
        """`TrainState.observe`'s divergence rule; a diverged member is stopped, not raised (True)."""
        if not math.isfinite(loss):
            self.failure = f"diverged: training loss {loss} at step {step}"
            return True
        self.ema = loss if self.ema is None else 0.9 * self.ema + 0.1 * loss
        start = self.losses[0] if self.losses else loss
        self.losses.append(loss)
        self.window.append(loss)
        if step >= 10 and self.ema > factor * start:
            self.failure = f"diverged: smoothed training loss {self.ema:.3f} at step {step} exceeds {factor}x its start ({start:.3f})"
        return bool(self.failure)

    @property
    def val_loss(self) -> float:
        return next((p["val_loss"] for p in reversed(self.curve) if math.isfinite(p["val_loss"])), math.nan)


def check_packable(cfgs: list[DictConfig], plans: list[RunPlan]) -> None:
    """ConfigError naming the first key on which the members differ and must not."""
    first, plan0 = cfgs[0], plans[0]
    for cfg, plan in zip(cfgs[1:], plans[1:]):
        if plan.shape != plan0.shape:
            raise ConfigError(f"model: packed runs need one shape, not {plan0.shape.name} and {plan.shape.name}")
        if plan.batch_size != plan0.batch_size:
            raise ConfigError(
                f"train.batch_size: packed runs need one batch, not {plan0.batch_size} and {plan.batch_size}"
            )
        for key in SHARED_KEYS:
            a, b = OmegaConf.select(first, key), OmegaConf.select(cfg, key)
            if a != b:
                raise ConfigError(f"{key}: packed runs must share it, not {a} and {b}")
    for cfg in cfgs:
        check_config(cfg)


def check_config(cfg: DictConfig) -> None:
    """ConfigError naming the key when a run of this config cannot be packed at all."""
    if target_of(cfg.model):
        raise ConfigError(f"model._target_: packing trains the gpt2 block only, not {target_of(cfg.model)!r}")
    if cfg.model.get("arch", "gpt2") != "gpt2":
        raise ConfigError(f"model.arch: packing trains the gpt2 block only, not {cfg.model.arch!r}")
    if evalsets.configured(cfg.get("eval")):
        raise ConfigError("eval.sets: packed runs evaluate on val only; unpack runs with evaluation sets")


def packed_device(t) -> torch.device:
    """The device of packed runs with ``train`` settings ``t``; ConfigError naming the key if they
    cannot run packed there. On CUDA, precision auto or bf16 trains in bf16 autocast, as separate
    runs do; on a CPU packed runs train in fp32."""
    if t.device not in ("auto", "cpu", "cuda") and not t.device.startswith("cuda:"):
        raise ConfigError(f"train.device: packed runs run on cpu or cuda, not {t.device!r}")
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if t.device == "auto" else t.device)
    if t.precision == "bf16" and device.type != "cuda":
        raise ConfigError(
            f"train.precision: packed runs on {device.type} train in fp32 (bf16 autocast on cuda only), "
            "not 'bf16'; set train.precision=fp32 or auto"
        )
    return device


@torch.no_grad()
def evaluate_packed(model: PackedGPT, eval_x: torch.Tensor, batch: int, autocast) -> list[float]:
    """Each member's mean held-out cross-entropy over the same evaluation windows (as
    `scaling.train.evaluate`: chunks of ``batch`` windows, weighted by their sizes)."""
    total = torch.zeros(model.k, dtype=torch.float64, device=eval_x.device)
    for i in range(0, eval_x.size(0), batch):
        chunk = eval_x[i : i + batch].expand(model.k, -1, -1)
        with autocast():
            losses = model(chunk[..., :-1], chunk[..., 1:])
        total += losses.double() * chunk.size(1)
    return (total / eval_x.size(0)).tolist()


class PackedRun:
    """K members set up to train: the packed model, its optimizer, the corpus and evaluation set."""

    def __init__(self, cfgs: list[DictConfig], plans: list[RunPlan] | None = None):
        plans = plans if plans is not None else [plan_run(cfg) for cfg in cfgs]
        check_packable(cfgs, plans)
        self.members = [Member(cfg, plan) for cfg, plan in zip(cfgs, plans)]
        cfg, self.shape = cfgs[0], plans[0].shape
        self.device = packed_device(cfg.train)
        self.autocast = autocast_for(cfg.train.precision, self.device)  # as a separate run's (`packed_device`)
        self.corpus = data_lib.load_corpus(cfg.data)
        self.model = PackedGPT(build_members(self.shape, [c.seed for c in cfgs])).to(self.device)
        # train.compile: the training forward under torch.compile (recompiled when members leave)
        self.step_fn = step_function(self.model, cfg.train)
        o = cfg.optim
        self.optimizer = PackedAdamW(
            self.model.params, betas=(o.beta1, o.beta2), eps=o.eps, weight_decay=o.weight_decay
        )
        t = cfg.train
        self.eval_x = torch.from_numpy(data_lib.eval_set(self.corpus, t.seq_len, t.eval_tokens)).to(self.device)
        self.eval_batch = max(1, min(64, plans[0].batch_size * 4))
        self.train_time = 0.0
        self.step = 0
        self.job_members = [m.plan.run_id for m in self.members]  # as first launched (a resumed job: restored)
        self.job = job_id(self.job_members)
        self.pending: list[tuple[int, torch.Tensor]] = []  # (step, [K] losses on the device), not yet read

    def batch(self, step: int) -> torch.Tensor:
        """int64 [K, B, T+1]: member k's batch of this step, as its separate run draws it."""
        t, b = self.members[0].cfg.train, self.members[0].plan.batch_size
        rows = [data_lib.train_batch(self.corpus, step, b, t.seq_len, m.cfg.seed) for m in self.members]
        return to_device(torch.from_numpy(np.stack(rows)), self.device)

    def lrs(self, step: int) -> list[float]:
        ratio = self.members[0].cfg.optim.min_lr_ratio
        return [lr_at(step, m.plan, ratio) for m in self.members]

    def train_step(self, step: int) -> torch.Tensor:
        """One packed optimizer step; each member's training loss, [K] on the device and unread
        (nothing here waits for the device: `settle` reads the losses at the log points)."""
        lrs = self.lrs(step)
        xy = self.batch(step)
        with self.autocast():
            losses = self.step_fn(xy[..., :-1], xy[..., 1:])
        losses.sum().backward()
        clip = self.members[0].cfg.optim.grad_clip
        if clip > 0:
            clip_per_member(self.model.params, clip)
        self.optimizer.step(to_device(torch.tensor(lrs, dtype=torch.float32), self.device))
        self.optimizer.zero_grad()
        return losses.detach().clone()  # a copy: under CUDA graphs the next replay overwrites the output

    def settle(self) -> None:
        """Read the losses of the steps since the last read in one transfer, and hand each to its
        member's divergence rule (a member that diverged ignores its later steps). Called only while
        the members are those of every pending step: at curve points, and by `settled`."""
        if not self.pending:
            return
        t0 = time.perf_counter()
        steps, rows = [s for s, _ in self.pending], torch.stack([x for _, x in self.pending]).tolist()
        waited = time.perf_counter() - t0  # for the device's queued steps: training time, as TrainState.settle
        self.train_time += waited
        for m in self.members:
            m.train_time += waited
        self.pending = []
        factor = self.members[0].cfg.train.divergence_factor
        for step, row in zip(steps, rows):
            for m, loss in zip(self.members, row):
                if not m.failure:
                    m.observe(loss, step, factor)

    def run(self, log=print, guard=None, ended=None, checkpoint=None) -> list[Member]:
        """Train every member to its last step (or its divergence). ``ended(member)`` is called once
        for each member, as it ends; ``checkpoint()`` saves the job (`scaling.packed_ckpt`): every
        ``train.checkpoint_interval_s`` and, when ``guard`` (a `PreemptionGuard`) caught a signal,
        before Preempted is raised (unless every member has ended)."""
        t = self.members[0].cfg.train
        ended, everyone = ended or (lambda m: None), list(self.members)
        self.drop_ended(ended)  # a member restored after its end, its record not written
        last_checkpoint = time.perf_counter()
        while self.members:
            self.step_once(self.step)
            self.step += 1
            self.drop_ended(ended)
            if not self.members or checkpoint is None:
                continue
            if guard is not None and guard.requested:
                if self.settled(ended):  # members that diverged since the last point leave first
                    checkpoint()
                    raise Preempted(f"{guard.name} at step {self.step}; checkpoint saved, relaunch to resume")
                continue
            if t.checkpoint_interval_s and time.perf_counter() - last_checkpoint > t.checkpoint_interval_s:
                if self.settled(ended):
                    checkpoint()
                last_checkpoint = time.perf_counter()
        for m in everyone:
            log(f"[{m.plan.run_id}] {m.failure or 'completed'}: val loss {m.val_loss:.4f} (packed, K={len(everyone)})")
        return everyone

    def settled(self, ended) -> bool:
        """`settle`, then hand the members that ended to ``ended`` (`drop_ended`): whether any remain."""
        self.settle()
        self.drop_ended(ended)
        return bool(self.members)

    def drop_ended(self, ended) -> None:
        """Hand each member that ended to ``ended`` and take it out of the model and optimizer."""
        rows = [k for k, m in enumerate(self.members) if m.active]
        if len(rows) == len(self.members):
            return
        for m in self.members:
            if not m.active:
                ended(m)
        if rows:
            self.model.keep(rows)
            self.optimizer.keep(rows, self.model.params)
        self.members = [self.members[k] for k in rows]

    def step_once(self, step: int) -> None:
        """Step ``step`` for every member, with its curve point and evaluation when due."""
        t = self.members[0].cfg.train
        lrs = self.lrs(step)
        t0 = time.perf_counter()
        self.pending.append((step, self.train_step(step)))
        dt = time.perf_counter() - t0
        self.train_time += dt
        tokens = len(self.members) * self.members[0].plan.tokens_per_step
        for m in self.members:
            m.train_time, m.pack_tokens = m.train_time + dt, m.pack_tokens + tokens
        points = [_point_due(m.plan, t, step) for m in self.members]
        if all(p is None for p in points):
            return  # no curve point (a member's last step always has one): the losses stay unread
        self.settle()
        due = [None if m.failure else p for m, p in zip(self.members, points)]
        vals = evaluate_packed(self.model, self.eval_x, self.eval_batch, self.autocast) if True in due else None
        for k, (m, evaluated) in enumerate(zip(self.members, due)):
            if evaluated is not None:
                _add_point(m, step, lrs[k], vals[k] if evaluated else math.nan)
                if evaluated and not math.isfinite(vals[k]):
                    m.failure = f"diverged: held-out loss {vals[k]} at step {step + 1}"


def _point_due(plan: RunPlan, t, step: int) -> bool | None:
    """Whether `run_loop` evaluates at the curve point it adds after ``step``; None: no point."""
    log_every = max(1, plan.steps // t.log_points)
    evaluated = step in {round(plan.steps * (i + 1) / t.evals) - 1 for i in range(t.evals)}
    return evaluated if evaluated or (step + 1) % log_every == 0 else None


def _add_point(m: Member, step: int, lr: float, val_loss: float) -> None:
    plan = m.plan
    m.curve.append(
        {
            "step": step + 1,
            "tokens": (step + 1) * plan.tokens_per_step,
            "flops": plan.flops * (step + 1) / plan.steps,
            "train_loss": sum(m.window) / len(m.window),
            "val_loss": val_loss,
            "lr": lr,
        }
    )
    m.window = []


def train_packed(cfgs: list[DictConfig], plans: list[RunPlan] | None = None, log=print) -> list[dict[str, Any]]:
    """Train the K runs packed; per member: run id, curve, every step's loss, val loss, failure."""
    run = PackedRun(cfgs, plans)
    members = run.run(log)
    return [
        {"run_id": m.plan.run_id, "curve": m.curve, "losses": m.losses, "val_loss": m.val_loss, "failure": m.failure}
        for m in members
    ]
