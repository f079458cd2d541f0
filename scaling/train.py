"""`train(cfg) -> record`: one model, one FLOP budget, one atomic record.

Reads top to bottom:
  1. plan      — shape, counts, D = C/(6N) in whole steps, run id; device and corpus checked before any write
  2. claim     — lock the run in the store; a finished run is a no-op, a partial one resumes
  3. set up    — corpus, device, threads, model, optimizer, fixed evaluation set, tracker (`set_up`)
  4. loop      — warmup + cosine schedule of exactly `steps` steps; divergence and preemption checks;
                 held-out evaluations; periodic checkpoints (`run_loop`)
  5. record    — final held-out loss, curve, throughput; written atomically; checkpoint removed

The run's resumable state is `scaling.train_state.TrainState`, the signal handling
`scaling.preemption.PreemptionGuard`, the record's keys `scaling.record.build_record`.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

# OpenMP threads that wait by sleeping, not spinning. With libgomp's default spin-wait, a 2-thread
# run slowed 15-40x whenever another process used one of the cores (bench, 2 cores: d32 4 ktok/s
# against 139 with PASSIVE, d64 2 against 35); on an idle machine PASSIVE costs 0-10% (d32-d64)
# or nothing (d128 up). libgomp reads it once, when torch loads it; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402  (after the line above)

from scaling import data as data_lib
from scaling import evalsets
from scaling.arch import kwargs_of, target_of
from scaling.branch_plan import branches_or_error
from scaling.byo import build_model, module_counts
from scaling.devices import Slot, autocast_for, pick_device, run_device, step_function, to_device
from scaling.errors import ConfigError
from scaling.machine import usable_cores
from scaling.plan import RunPlan, job_config, plan_run
from scaling.preemption import Preempted, PreemptionGuard
from scaling.record import Outcome, now_iso, write_record
from scaling.schedule import lr_at
from scaling.store import (
    FINISHED,
    Failure,
    RunPaths,
    RunState,
    atomic_write_text,
    read_record,
    remove_partial_writes,
    run_lock,
    run_state,
    set_aside,
)
from scaling.tracking import Tracker, start_tracker
from scaling.train_state import Diverged, TrainState


# ---------------------------------------------------------------- helpers
def preflight(cfg: DictConfig) -> None:
    """What a run needs beyond its plan, checked before anything is written: the device exists on
    this machine, and the corpus's validation split holds the evaluation set (cached corpus read)."""
    pick_device(cfg.train.device)
    evalsets.check_evaluation(cfg)


def set_threads(t) -> int:
    """Torch CPU threads: explicit, or cores // concurrent runs (never oversubscribe: docs/NOTES.md)."""
    threads = t.threads or max(1, usable_cores() // t.concurrent_runs)
    torch.set_num_threads(threads)
    return threads


@torch.no_grad()
def evaluate(model: torch.nn.Module, eval_x: torch.Tensor, autocast, batch: int) -> float:
    """Mean held-out cross-entropy (nats per token) over the fixed evaluation set."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, eval_x.size(0), batch):
        chunk = eval_x[i : i + batch]
        with autocast():
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
        total += loss.item() * chunk.size(0)
        count += chunk.size(0)
    model.train()
    return total / count


def train_step(
    model: torch.nn.Module,
    step_fn,
    optimizer: torch.optim.Optimizer,
    batch: torch.Tensor,
    lr: float,
    grad_clip: float,
    autocast,
) -> torch.Tensor:
    """One optimizer step on ``batch`` (int64 [B, T+1]: inputs [:, :-1], targets [:, 1:]) at learning
    rate ``lr``, clipping the global gradient norm to ``grad_clip`` (0: no clipping); returns the
    batch's training loss in nats per token as a 0-d tensor on the device. Nothing here waits for the
    device (no ``.item()``, the clipped norm unread): the loop reads losses at its log points only
    (`TrainState.settle`). ``step_fn`` is the model or its compiled form."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast():
        _, loss = step_fn(batch[:, :-1], batch[:, 1:])
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach().clone()  # a copy: under CUDA graphs the next replay overwrites the output


def make_optimizer(model: torch.nn.Module, cfg: DictConfig, lr: float) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices (2-D weights) only, as nanoGPT."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel updates every tensor (CUDA, and CPU since torch 2.4); CPU's foreach path falls
    # back to a loop of per-tensor ops (bench/bench_trainer.py: optimizer step ~3x cheaper fused at d128)
    fused = next(model.parameters()).device.type in ("cpu", "cuda", "mps")
    kwargs = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps, **kwargs)


# ---------------------------------------------------------------- the run
def _log(*args) -> None:
    """Progress lines, flushed at once: a worker's lines reach the sweep's log even if it is
    killed next, and they show in real time under parallel launchers."""
    print(*args, flush=True)


def train(cfg: DictConfig, *, log=_log, plan: RunPlan | None = None, slot: Slot | None = None) -> dict[str, Any] | None:
    """Train one run to its budget and return its record (None if another process owns the run).
    ``plan`` is the run's plan when the caller (the sweeper) made it; else the run plans itself;
    ``slot`` the device slot the job holds in a sweep on GPUs (`scaling.devices`)."""
    # 1. plan: every config error surfaces here, before data, compute or any file is written
    plan = plan if plan is not None else plan_run(cfg)
    preflight(cfg)
    branches_or_error(cfg, plan)  # a WSD trunk's cooldown branches (none: [])
    paths = RunPaths(Path(cfg.store), plan.run_id)

    # 2. claim
    with run_lock(paths) as owned:
        if not owned:
            log(f"[{plan.run_id}] {plan.run_name}: another process is training this run; skipping")
            return None
        remove_partial_writes(paths.dir)  # of a process killed while writing here
        state = run_state(paths)
        if state in FINISHED:
            rec = read_record(paths.record)
            log(
                f"[{plan.run_id}] {plan.run_name}: already {rec['status']} (val loss {rec['val_loss']:.4f}); nothing to do"
            )
            return rec
        if state in (RunState.CORRUPT, RunState.ERRORED):
            kept = set_aside(paths.record, state)
            log(f"[{plan.run_id}] {plan.run_name}: previous record was {state}; kept as {kept.name}, training again")
        atomic_write_text(paths.config, OmegaConf.to_yaml(job_config(cfg)))
        return train_owned(cfg, plan, paths, log, slot)


@dataclass
class Run:
    """A run set up to train: what the step loop needs."""

    cfg: DictConfig
    plan: RunPlan
    paths: RunPaths
    corpus: data_lib.Corpus
    device: torch.device
    threads: int
    state: TrainState
    step_fn: Callable  # the model, or its compiled form
    autocast: Callable
    eval_x: torch.Tensor
    tracker: Tracker
    log: Callable
    eval_sets: list[evalsets.EvalSet]  # [] without evaluation sets (eval_x: val's windows), else val first
    evals: dict[str, torch.Tensor]  # each set's windows, by name ({} without evaluation sets)
    branches: Any = None  # a WSD trunk's cooldown branches (scaling.branches.Branches), else None
    slot_keys: dict = field(default_factory=dict)  # in a sweep on GPUs, the device slot's record keys

    def batch(self, step: int) -> torch.Tensor:
        t = self.cfg.train
        batch = torch.from_numpy(
            data_lib.train_batch(self.corpus, step, self.plan.batch_size, t.seq_len, self.cfg.seed)
        )
        return to_device(batch, self.device)


def set_up(cfg: DictConfig, plan: RunPlan, paths: RunPaths, log, slot: Slot | None = None) -> Run:
    """3. The corpus, device, model, optimizer, evaluation set and tracker; the state restored from
    the run's checkpoint when it has one."""
    t = cfg.train
    corpus = data_lib.load_corpus(cfg.data)
    device = run_device(t.device, slot)
    threads = set_threads(t)
    autocast = autocast_for(t.precision, device)

    torch.manual_seed(cfg.seed)
    model = build_model(plan.shape, target_of(cfg.model), kwargs_of(cfg.model)).to(device)
    counts = module_counts(getattr(model, "inner", model))  # a factory's module, unwrapped
    if (counts["total"], counts["non_embedding"]) != (plan.params, plan.params_non_embedding):
        raise ConfigError(
            f"model._target_: {target_of(cfg.model) or plan.shape.arch!r} built a model of {counts} parameters, "
            f"not the planned total={plan.params}, non_embedding={plan.params_non_embedding}; it must build the same "
            "model every time"
        )
    state = TrainState(model, make_optimizer(model, cfg, plan.lr))
    step_fn = step_function(model, t)
    eval_x = torch.from_numpy(data_lib.eval_set(corpus, t.seq_len, t.eval_tokens)).to(device)
    sets = evalsets.load_eval_sets(cfg.eval, corpus) if evalsets.configured(cfg.get("eval")) else []
    n_seq = evalsets.check_windows(sets, t.seq_len, t.eval_tokens)
    evals = {s.name: torch.from_numpy(data_lib.evenly_spaced_windows(s.tokens, t.seq_len, n_seq)) for s in sets[1:]}
    evals = {evalsets.DEFAULT: eval_x, **{name: x.to(device) for name, x in evals.items()}} if sets else {}
    if state.restore(paths, plan.run_id, device, log):
        log(f"[{plan.run_id}] resuming from checkpoint at step {state.step}/{plan.steps}")
    tracker = _start_tracker(cfg, plan, paths)
    log(
        f"[{plan.run_id}] {plan.run_name}: N={plan.n_budget:,} ({cfg.param_count}), D={plan.tokens:,} tokens, "
        f"{plan.steps} steps, lr {plan.lr:g}, {device}, {threads} thread(s)" + (f", {slot.describe()}" if slot else "")
    )
    run = Run(cfg, plan, paths, corpus, device, threads, state, step_fn, autocast, eval_x, tracker, log, sets, evals)
    run.slot_keys = slot.record_keys() if slot else {}
    return run


def _start_tracker(cfg: DictConfig, plan: RunPlan, paths: RunPaths) -> Tracker:
    group = cfg.sweep or "single"
    return start_tracker(
        cfg.tracking,
        name=plan.run_name,
        group=group,
        run_id=f"{group}-{plan.run_id}",
        tags=[cfg.sweep, plan.budget_label, plan.shape.name],
        config={
            **job_config(cfg),
            "run_id": plan.run_id,
            "params": plan.params,
            "params_non_embedding": plan.params_non_embedding,
            "tokens": plan.tokens,
            "flops": plan.flops,
        },
        run_dir=paths.dir / "wandb",
    )


def run_loop(run: Run, guard: PreemptionGuard) -> None:
    """4. Train from the state's step to the plan's last: raises Diverged, or Preempted after saving
    a checkpoint when ``guard`` caught a signal (at the last step the run finishes first)."""
    cfg, plan, state, t = run.cfg, run.plan, run.state, run.cfg.train
    log_every, eval_steps = curve_steps(plan, t)
    last_checkpoint = time.perf_counter()
    for step in range(state.step, plan.steps):
        if run.branches:  # fork the cooldown branches that start here
            run.branches.fork(step, guard)
        t0 = time.perf_counter()
        lr = lr_at(step, plan, cfg.optim.min_lr_ratio)
        loss = train_step(
            state.model, run.step_fn, state.optimizer, run.batch(step), lr, cfg.optim.grad_clip, run.autocast
        )
        state.train_time += time.perf_counter() - t0
        state.observe(loss, step, t.divergence_factor)
        state.step = step + 1
        if run.branches:  # the branches' curves until they fork
            run.branches.observe(step, loss, lr)

        if step in eval_steps or (step + 1) % log_every == 0:
            log_point(run, step, lr, evaluated=step in eval_steps)
        last = step + 1 == plan.steps
        if guard.requested and not last:
            state.save(run.paths, plan.run_id, step + 1)
            raise Preempted(f"{guard.name} at step {step + 1}/{plan.steps}; checkpoint saved, relaunch to resume")
        if t.checkpoint_interval_s and time.perf_counter() - last_checkpoint > t.checkpoint_interval_s and not last:
            state.save(run.paths, plan.run_id, step + 1)
            last_checkpoint = time.perf_counter()


def curve_steps(plan: RunPlan, t) -> tuple[int, set[int]]:
    """The loss curve's spacing in steps, and the (0-based) steps after which the run evaluates."""
    return max(1, plan.steps // t.log_points), {round(plan.steps * (i + 1) / t.evals) - 1 for i in range(t.evals)}


def log_point(run: Run, step: int, lr: float, evaluated: bool) -> None:
    """A point of the loss curve after ``step``: the training loss since the last point and, at an
    evaluation step, the held-out loss (Diverged when that is not finite)."""
    plan, state = run.plan, run.state
    state.settle()  # the steps' losses since the last point, read in one transfer: Diverged here
    eval_batch = max(1, min(64, plan.batch_size * 4))
    # every evaluation set at every evaluation point (run.evals is {} without evaluation sets)
    losses = {
        name: evaluate(state.model, x, run.autocast, eval_batch) if evaluated else math.nan
        for name, x in run.evals.items()
    }
    if losses:
        val_loss = losses[evalsets.primary_of(run.cfg.eval)]
    else:
        val_loss = evaluate(state.model, run.eval_x, run.autocast, eval_batch) if evaluated else math.nan
    point = {
        "step": step + 1,
        "tokens": (step + 1) * plan.tokens_per_step,
        "flops": plan.flops * (step + 1) / plan.steps,
        "train_loss": state.window_loss(),
        "val_loss": val_loss,
        "lr": lr,
        **{evalsets.loss_column(name): loss for name, loss in losses.items()},
    }
    if evaluated and not math.isfinite(point["val_loss"]):
        raise Diverged(f"diverged: held-out loss {point['val_loss']} at step {step + 1}")
    state.add_point(point)
    run.tracker.log({k: v for k, v in point.items() if k != "step" and math.isfinite(v)}, step=step + 1)
    if evaluated:
        run.log(
            f"[{plan.run_id}] step {step + 1}/{plan.steps}  train {point['train_loss']:.4f}  val {point['val_loss']:.4f}"
        )


def train_until_stopped(run: Run, guard: PreemptionGuard) -> Outcome:
    """The loop, with how it ended: completed, diverged or errored (a preemption exits here)."""
    plan, log = run.plan, run.log
    try:
        run_loop(run, guard)
    except Diverged as err:
        log(f"[{plan.run_id}] {err}; recorded as failed")
        return Outcome(Failure.DIVERGED, str(err))
    except Preempted as err:
        log(f"[{plan.run_id}] preempted: {err}")
        run.tracker.finish(failed=True)
        guard.exit()  # exits; under submitit's time limit its handler may raise instead: not recorded
    except Exception as err:  # an error (out of memory, disk full, a bug): recorded, retried on relaunch
        if not isinstance(err, (OSError, MemoryError)):  # a bug: its traceback, for the report
            traceback.print_exc()
        reason = f"error: {type(err).__name__}: {err}"
        log(f"[{plan.run_id}] {reason}; recorded as failed (a relaunch retries it)")
        return Outcome(Failure.ERRORED, reason, type(err).__name__)
    return Outcome()


def train_owned(cfg: DictConfig, plan: RunPlan, paths: RunPaths, log, slot: Slot | None) -> dict[str, Any]:
    t_start, started_at = time.perf_counter(), now_iso()
    run = set_up(cfg, plan, paths, log, slot)
    if cfg.train.branches:
        from scaling.branches import Branches  # which imports this module

        run.branches = Branches(run)
    with PreemptionGuard() as guard:
        try:
            outcome = train_until_stopped(run, guard)
            # 5. record, under the guard: a signal while it is written (and the checkpoint removed, and the
            # run's line printed) waits for the three, instead of leaving a recorded run's checkpoint behind
            record = write_record(run, outcome, started_at, t_start)
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once
            step = run.state.saved_step
            kept = f"its checkpoint at step {step} is kept" if step else "no checkpoint was saved"
            print(
                f"[{plan.run_id}] interrupted (second Ctrl-C) before step {run.state.step}/{plan.steps}: "
                f"{kept}; relaunch to {'resume' if step else 'train it'}",
                file=sys.stderr,
                flush=True,
            )
            run.tracker.finish(failed=True)
            raise SystemExit(130) from None
    if guard.requested and not guard.time_limit:  # a time-limit warning needs nothing more: the job ends now
        log(
            f"[{plan.run_id}] {guard.name} arrived at the run's end (its last step or its record): the run is "
            f"recorded; exiting for the {'preemption' if guard.name == 'SIGTERM' else 'interrupt'}"
        )
        guard.exit()
    return record
