"""Planning a run: everything that follows from its config by arithmetic, with no torch.

Each run is planned once. The sweeper plans every job before launching any (to drop impossible
combinations and skip finished runs) and hands each job its plan (the config key ``plan``, the
`RunPlan` as JSON); a standalone `scaling train` plans its own run. The corpus is read (a cached
read) only for its fingerprint, its size and the windows a run needs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from scaling import arch as arch_lib
from scaling import data as data_lib
from scaling import data_config, evalsets, hparams, schedule
from scaling.config import OptimConfig, TrainConfig, validate
from scaling.errors import ConfigError
from scaling.flops import flops_6nd, tokens_6nd
from scaling.shapes import MIN_WIDTH, ModelShape, ladder_lr, nearest_shape, shape_for_width
from scaling.store import RunPaths, run_id

# Config sections that do not change a run's result, so are not part of its identity.
NOT_IDENTITY = ("tracking", "store", "sweep", "hydra", "plan", "pack")
LAUNCHER_SET = ("threads", "concurrent_runs", "device_slots")  # train keys the launchers set per job
NOT_IDENTITY_TRAIN = (
    "device",
    *LAUNCHER_SET,
    "checkpoint_interval_s",
    "compile",
    "compile_mode",
)
# Spellings of one run: settings that only gate a run (refuse it or let it be: train.min_steps, train.allow_repeat)
# and the LR as optim.lr gives it (the identity holds the resolved LR, as model.lr). They enter the identity at the
# schema's defaults, so that runs with the defaults keep their ids: `train.min_steps=50` gave every run of a sweep a
# new id, retrained it, and the fits pooled both copies as seeds. A store's run under the id its own spelling gave
# before 2026-11-27 is still found (`_stored_id`).
SPELLINGS = {
    "train": {"min_steps": TrainConfig.min_steps, "allow_repeat": TrainConfig.allow_repeat},
    "optim": {"lr": OptimConfig.lr},
}


@dataclass(frozen=True)
class RunPlan:
    """Everything about a run that follows from its config by arithmetic alone."""

    run_id: str
    budget: float  # requested C
    shape: ModelShape
    params: int  # total
    params_non_embedding: int
    n_budget: int  # the N that defines D (per cfg.param_count)
    lr: float
    steps: int
    tokens_per_step: int
    tokens: int  # D actually trained on = steps · tokens_per_step
    flops: float  # 6·N·D actual
    flops_attention: float
    warmup_steps: int
    corpus_train_tokens: int  # the corpus's training split (D beyond it repeats data)
    lr_law: str = ""  # optim.lr_law when the LR (and batch) came from a law
    schedule: str = "cosine"  # train.schedule (scaling.schedule)
    cooldown_steps: int = 0  # wsd: the steps of the final cooldown (0 for cosine)

    @property
    def batch_size(self) -> int:
        """Sequences per optimizer step (train.batch_size, or the law's: `scaling.hparams`)."""
        return self.tokens_per_step // self.shape.seq_len

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RunPlan:
        fields = json.loads(text)
        return cls(**{**fields, "shape": ModelShape(**fields["shape"])})

    @property
    def budget_label(self) -> str:
        """The budget as in run names and wandb tags, e.g. ``C1e12``, ``C3e11``."""
        return f"C{self.budget:.3g}".replace("e+", "e")

    @property
    def run_name(self) -> str:
        """Budget and shape, e.g. ``C1e12-d64`` (used for wandb runs and logs)."""
        return f"{self.budget_label}-{self.shape.name}"


def check_settings_used(cfg: DictConfig) -> None:
    """The first of `settings_unused`, refused in one line (a single run's; a sweep's when no job reads it)."""
    for message in settings_unused(cfg).values():
        raise ConfigError(message)


def repeats_unasked(cfg: DictConfig, plan) -> str:
    """Why ``plan`` may not train ("" when it may): it needs more tokens than the corpus's training split holds,
    and train.allow_repeat is false (a sweep drops the job; `scaling train` refuses it: it trained 4.5 epochs
    silently, user18)."""
    if cfg.train.allow_repeat or plan.tokens <= plan.corpus_train_tokens:
        return ""
    return (
        f"needs {plan.tokens:,} tokens but the corpus's training split holds {plan.corpus_train_tokens:,} "
        f"({plan.tokens / plan.corpus_train_tokens:.3g} epochs; set train.allow_repeat=true to repeat data)"
    )


def settings_unused(cfg: DictConfig) -> dict[str, str]:
    """Settings a run would leave silently unused, by key, with the line refusing each: model.target_params with a
    ladder shape (read by model=nearest only), model.kwargs without model._target_ (the ladder's models take none),
    train.compile_mode without train.compile=true. (A sweep may cross model=d32,nearest with one target, or
    train.compile=false,true with one mode: its other jobs ignore them; it refuses one that no job reads.)"""
    m, t = cfg.model, cfg.train
    out = {}
    if m.name != "nearest" and not OmegaConf.is_missing(m, "target_params") and m.target_params is not None:
        out["model.target_params"] = (
            f"model.target_params: {m.target_params:g} is read by model=nearest only, not model={m.name}; "
            "add model=nearest, or drop model.target_params"
        )
    if m.get("kwargs") and not m.get("_target_"):
        out["model.kwargs"] = (
            f"model.kwargs: {dict(m.kwargs)} are read by a model of your own only (model._target_=package.module."
            "factory, docs/MODELS.md); the ladder's models take none: drop them, or set model._target_"
        )
    if t.schedule != "wsd" and t.cooldown_frac != TrainConfig.cooldown_frac:  # user24: read by wsd only, silently
        out["train.cooldown_frac"] = (
            f"train.cooldown_frac: {t.cooldown_frac:g} is read by train.schedule=wsd only, not {t.schedule}; add "
            "train.schedule=wsd, or drop train.cooldown_frac"
        )
    if t.compile_mode != "default" and not t.compile:
        out["train.compile_mode"] = (
            f"train.compile_mode: {t.compile_mode} is read only with train.compile=true; add train.compile=true, "
            "or drop train.compile_mode"
        )
    return out


def _smaller(cfg: DictConfig, shape: ModelShape) -> str:
    """The rest of a too-small budget's advice: a smaller model, unless it is the ladder's smallest shape as the
    ladder builds it (user18: d16 was told "or a smaller model"), or fewer tokens per step."""
    ladder = shape_for_width(MIN_WIDTH, shape.vocab_size, shape.seq_len, shape.arch, shape.tied_head)
    smallest = not cfg.model.get("_target_") and dataclasses.replace(shape, name=ladder.name) == ladder
    model = f" (d{MIN_WIDTH} is the ladder's smallest shape)" if smallest else ", a smaller model"
    return f"{model}, or a smaller train.batch_size or train.seq_len (more steps of fewer tokens)"


def resolve_shape(cfg: DictConfig) -> tuple[ModelShape, float]:
    """The model shape and its peak learning rate (optim.lr overrides the shape's own)."""
    m, t = cfg.model, cfg.train
    vocab = data_lib.vocab_size_of(cfg.data)
    options = arch_lib.shape_options(m)  # model.arch, model.tied_head
    if m.name == "nearest":
        if OmegaConf.is_missing(m, "target_params") or m.target_params is None:
            raise ConfigError(
                "model.target_params: missing; model=nearest needs a target, e.g. model.target_params=3e5"
            )
        if arch_lib.target_of(m):
            raise ConfigError(
                "model._target_: a factory's model needs a ladder shape (model=d64, ...), not model=nearest"
            )
        shape = nearest_shape(m.target_params, kind=cfg.param_count, vocab_size=vocab, seq_len=t.seq_len, **options)
        lr = ladder_lr(shape.name)
    else:
        shape = ModelShape(
            n_layer=m.n_layer,
            d_model=m.d_model,
            n_head=m.n_head,
            vocab_size=vocab,
            seq_len=t.seq_len,
            name=m.name,
            **options,
        )
        lr = float(m.lr)
    if cfg.optim.lr is not None:
        lr = float(cfg.optim.lr)
    return shape, lr


def identity(
    cfg: DictConfig, shape: ModelShape, lr: float, batch_size: int | None = None, spelled: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The parts of the resolved config that determine a run's result: the peak LR and the batch
    as resolved (how they were chosen, `scaling.hparams.NOT_IDENTITY_OPTIM`, is not); `SPELLINGS` at their
    defaults but those ``spelled`` ("train.min_steps": as given, as every run id had it before)."""
    c = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k not in NOT_IDENTITY
    }
    for key in NOT_IDENTITY_TRAIN:
        c["train"].pop(key, None)
    for key in hparams.NOT_IDENTITY_OPTIM:
        c["optim"].pop(key, None)
    for section, defaults in SPELLINGS.items():
        c[section].update({k: v for k, v in defaults.items() if f"{section}.{k}" not in spelled})
    schedule.drop_from_identity(c)  # cosine runs keep their ids
    data_config.drop_unset_from_identity(c["data"])  # and runs without a cut theirs
    if batch_size is not None:
        c["train"]["batch_size"] = batch_size
    if not evalsets.configured(c.get("eval")):  # runs without evaluation sets keep their ids
        c.pop("eval", None)
    c["model"] = {
        "n_layer": shape.n_layer,
        "d_model": shape.d_model,
        "n_head": shape.n_head,
        "lr": lr,
        **arch_lib.identity_fields(cfg.model, shape),  # gpt2: {"architecture": "gpt2-v2"}, as always
    }
    c["budget"] = float(c["budget"])
    return c


def _stored_id(cfg: DictConfig, ids: list[str]) -> str:
    """The run's id (``ids[0]``); or the first of the others, its ids before `SPELLINGS` (`SPELT`: each spelling as
    given or at its default), that the store holds where it does not hold the run's (a sweep with
    train.min_steps=20 relaunched, or with an lr_grid's optim.lr=0.004 where the plain run had none; user26)."""
    store = Path(str(cfg.get("store") or "."))
    return next((run for run in ids if RunPaths(store, run).dir.is_dir()), ids[0])


_KEYS = [f"{section}.{key}" for section, defaults in SPELLINGS.items() for key in defaults]
SPELT = [kept for k in range(len(_KEYS) + 1) for kept in itertools.combinations(_KEYS, k)]  # () first: today's id


class BudgetTooSmall(ConfigError):
    """The budget buys fewer than train.min_steps optimizer steps of the model (a sweep drops the job)."""


def job_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as a run records it (config.yaml, the record, the tracker): without
    ``plan`` and ``pack``, which only carry the sweeper's arithmetic and packing to the job."""
    c = OmegaConf.to_container(cfg, resolve=True)
    c.pop("plan", None)
    c.pop("pack", None)
    if not evalsets.configured(c.get("eval")):  # records of runs without evaluation sets are unchanged
        c.pop("eval", None)
    return c


def planned(cfg: DictConfig) -> RunPlan:
    """The plan the sweeper handed this job, else the run's own (`plan_run`)."""
    return RunPlan.from_json(cfg.plan) if cfg.get("plan") else plan_run(cfg)


def plan_run(cfg: DictConfig) -> RunPlan:
    """Validate the config and work out the run without torch (the corpus is read for its
    fingerprint and size only, a cached read).

    D = C / (6·N), rounded to a whole number of optimizer steps; the recorded C is 6·N·D of the
    tokens actually trained on. Raises ConfigError/DataError on bad input (train.seq_len beyond
    the corpus included), BudgetTooSmall when the budget buys fewer than
    train.min_steps steps."""
    validate(cfg)
    shape, base_lr = resolve_shape(cfg)  # checks the data source's settings and files too
    laws = hparams.law_of(cfg)
    corpus = data_lib.load_corpus(cfg.data)
    data_lib.check_windows(corpus, cfg.train.seq_len)  # the evaluation set: scaling.train.preflight
    counts, flops_per_token = arch_lib.counts_and_flops(cfg.model, shape, cfg.param_count)
    n_budget = counts[cfg.param_count]
    batch_size = hparams.batch_size(cfg, laws, counts["non_embedding"], tokens_6nd(cfg.budget, n_budget))
    tokens_per_step = batch_size * cfg.train.seq_len
    steps = round(tokens_6nd(cfg.budget, n_budget) / tokens_per_step)
    if steps < cfg.train.min_steps:
        min_budget = flops_6nd(n_budget, tokens_per_step * cfg.train.min_steps)
        raise BudgetTooSmall(
            f"budget: {cfg.budget:.3g} FLOPs buys model {shape.name} (N={n_budget:,}) only {steps} optimizer steps of "
            f"{tokens_per_step:,} tokens; train.min_steps is {cfg.train.min_steps}: use budget >= {min_budget:.3g}"
            f"{_smaller(cfg, shape)}"
        )
    tokens = steps * tokens_per_step
    warmup, cooldown = schedule.warmup_steps(cfg.optim, steps), schedule.cooldown_steps(cfg.train, steps)
    if warmup + cooldown > steps:  # a sweep drops the job
        raise BudgetTooSmall(
            f"optim.warmup_steps: {warmup} warmup steps and a cooldown of {cooldown} do not fit in the {steps} "
            f"steps of budget {cfg.budget:.3g} (model {shape.name}); use fewer warmup steps or a larger budget"
        )
    law_at = {"n_non_embedding": counts["non_embedding"], "tokens": tokens, "flops": flops_6nd(n_budget, tokens)}
    lr = hparams.peak_lr(cfg, laws, base_lr, law_at)
    # A run's identity is its resolved config plus its corpus fingerprint: the same config on
    # another Python's stdlib is another run.
    fingerprints = {"corpus_fingerprint": corpus.fingerprint}
    if evalsets.configured(cfg.get("eval")):
        fingerprints["eval_fingerprints"] = {s.name: s.fingerprint for s in evalsets.load_eval_sets(cfg.eval, corpus)}
    return RunPlan(
        run_id=_stored_id(
            cfg, [run_id({**identity(cfg, shape, lr, batch_size, kept), **fingerprints}) for kept in SPELT]
        ),
        budget=float(cfg.budget),
        shape=shape,
        params=counts["total"],
        params_non_embedding=counts["non_embedding"],
        n_budget=n_budget,
        lr=lr,
        steps=steps,
        tokens_per_step=tokens_per_step,
        tokens=tokens,
        flops=flops_6nd(n_budget, tokens),
        flops_attention=flops_per_token * tokens,
        warmup_steps=warmup,
        corpus_train_tokens=corpus.train_tokens,
        lr_law=str(cfg.optim.lr_law or ""),
        schedule=cfg.train.schedule,
        cooldown_steps=cooldown,
    )
