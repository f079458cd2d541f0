"""Typed configuration: dataclass schemas registered in Hydra's ConfigStore.

`conf/config.yaml` lists ``scaling_schema`` first in its defaults, so every YAML file and every
command-line override is checked against these types when the config is composed: a typo in a key
or a word where a number belongs fails before any compute is spent. Values are then checked for
meaning (ranges, names) by `validate`, which raises `ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from scaling import data_config
from scaling.devices import COMPILE_MODES
from scaling.errors import ConfigError


@dataclass
class ModelConfig:
    name: str = MISSING  # ladder name (d32, d64, ...) or "nearest"
    n_layer: int = MISSING
    d_model: int = MISSING
    n_head: int = MISSING
    lr: float = MISSING  # peak learning rate tuned for this size
    target_params: float | None = None  # model=nearest: pick the ladder shape nearest this N
    arch: str = "gpt2"  # gpt2 | llama (scaling/arch.py)
    tied_head: bool = True  # llama: output head tied to the token embedding (gpt2: always tied)
    _target_: str | None = None  # bring your own model: package.module.factory (docs/MODELS.md)
    kwargs: dict[str, Any] = field(default_factory=dict)  # the factory's keyword arguments beside the shape


@dataclass
class OptimConfig:
    name: str = "adamw"
    lr: float | None = None  # overrides model.lr when set
    lr_multiplier: float = 1.0  # the peak LR is (model.lr, optim.lr or the law's) × this (LR sweeps)
    lr_law: str | None = None  # a preset (step_law, deepseek) or FIT.json: peak LR (and batch) from the law
    batch_law: bool = True  # with lr_law: train.batch_size from the law's batch_tokens when it has one
    beta1: float = 0.9
    beta2: float = 0.99  # 0.99 rather than 0.95 at small batch (Porian et al. 2024)
    eps: float = 1e-8
    weight_decay: float = 0.1  # on matrices only (not biases, LayerNorms)
    grad_clip: float = 1.0  # max global gradient norm; 0 disables
    warmup_frac: float = 0.05  # linear warmup over this fraction of the run's steps (>= 1 step)
    warmup_steps: int | None = None  # or over this many steps, whatever the run's length (WSD branches)
    min_lr_ratio: float = 0.1  # cosine decays to lr·min_lr_ratio exactly at the last step


@dataclass
class TrainConfig:
    batch_size: int = 16  # sequences per optimizer step
    seq_len: int = 128  # context length in tokens (also the position-embedding size)
    min_steps: int = 100  # a budget that buys fewer optimizer steps is refused
    allow_repeat: bool = False  # allow D beyond the corpus's training split (data seen more than once)
    eval_tokens: int = 32768  # size of the fixed held-out evaluation set, tokens
    evals: int = 8  # held-out evaluations per run, evenly spaced (the last at the end)
    log_points: int = 32  # points of the training-loss curve kept in the record
    checkpoint_interval_s: float = 60.0  # checkpoint at most this often (and on SIGTERM); 0: never
    divergence_factor: float = 2.0  # stop as diverged when the smoothed loss exceeds this × its start
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    precision: str = "auto"  # auto (bf16 autocast on CUDA, fp32 elsewhere) | fp32 | bf16
    compile: bool = False  # torch.compile the model (pays off on GPUs, not on CPUs: docs/NOTES.md)
    compile_mode: str = "default"  # torch.compile's mode (scaling.devices.COMPILE_MODES); reduce-overhead: CUDA graphs
    threads: int = 0  # torch CPU threads; 0: cores // concurrent_runs
    concurrent_runs: int = 1  # runs sharing this machine at once (set by parallel launchers)
    device_slots: int = 0  # set by the sweeper on GPUs: GPUs x runs_per_gpu; the run claims one (scaling.devices)
    schedule: str = "cosine"  # cosine | wsd: warmup, constant LR, 1-sqrt cooldown (scaling/schedule.py)
    cooldown_frac: float = 0.2  # wsd: the cooldown's share of the run's steps
    branches: list[float] = field(default_factory=list)  # wsd: budgets < budget, each a cooldown branch


@dataclass
class TrackingConfig:
    backend: str = "wandb"  # wandb | none
    project: str = "scaling"
    entity: str | None = None
    mode: str = "auto"  # auto (online if logged in, else offline) | online | offline | disabled
    tags: list[str] = field(default_factory=list)


@dataclass
class EvalConfig:
    primary: str = "val"  # the set whose loss is val_loss; "val": the training corpus's held-out split
    sets: Any = None  # {name: path or data config} (scaling.evalsets); null: none


@dataclass
class Config:
    budget: float = MISSING  # training compute C in FLOPs (C = 6·N·D)
    seed: int = 0
    param_count: str = "total"  # which N defines D = C/(6N): total (Chinchilla) | non_embedding (Kaplan)
    sweep: str = ""  # sweep name; runs of one sweep share a store and a wandb group
    store: str = MISSING  # results-store directory
    plan: str = ""  # set by the sweeper: the job's plan (scaling.plan.RunPlan as JSON); "": the job plans itself
    pack: str = ""  # set by the sweeper (hydra.sweeper.pack): the job's other packed runs, JSON (scaling.packed_store)
    model: ModelConfig = field(default_factory=ModelConfig)
    # checked by scaling.data.load_corpus; every source's optional keys (data.max_train_tokens, data.cut,
    # data.cut_seed: scaling.data_cut) are here, null, so that the command line sets them without `+`
    data: Any = field(default_factory=lambda: dict.fromkeys(data_config.OPTIONAL))
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)  # checked by scaling.evalsets
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


def if_empty(value: Any, default: Any) -> Any:
    """``${if_empty:${sweep},single}``: the value, or the default when the value is "" or null
    (conf/config.yaml's store: a plain `scaling train`, whose sweep is "", writes to results/single)."""
    return default if value in ("", None) else value


def register() -> None:
    ConfigStore.instance().store(name="scaling_schema", node=Config)
    OmegaConf.register_new_resolver("if_empty", if_empty, replace=True)


register()


def valid_keys_hint(key: str, valid: list[str], section: str) -> str:
    """``did you mean X?`` (when one is close) and the valid keys of ``section``, for an unknown ``key``."""
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], valid, n=1)
    where = f" of {section}" if section else ""
    return (f"did you mean {close[0]}? " if close else "") + f"valid keys{where}: {', '.join(valid)}"


def schema_keys(dotted: str, schema: type | None = None) -> list[str] | None:
    """The keys of the schema's section ``dotted`` ("" for the top level, "train", "optim"), or None
    when that section is not a typed dataclass (data, model.kwargs, eval.sets take any keys)."""
    node = schema or Config
    for part in [p for p in dotted.split(".") if p]:
        fields = {f.name: f for f in dataclasses.fields(node)}
        factory = fields[part].default_factory if part in fields else None
        if not callable(factory) or not dataclasses.is_dataclass(default := factory()):
            return None
        node = type(default)
    return [f.name for f in dataclasses.fields(node)]


def check_known_keys(cfg, section: str = "") -> None:
    """Every key of ``cfg`` is one the schema has. Struct mode refuses an unknown key, but a
    ``+key=value`` override (Hydra's own advice for one) adds it anyway, and the trainer would
    never read it: ``+train.min_stpes=3`` would train with the default min_steps under a new run id."""
    if OmegaConf.is_config(cfg):  # a plain dict to walk: no interpolation resolved, no missing value read
        cfg = OmegaConf.to_container(cfg, resolve=False)
    valid = schema_keys(section)
    if valid is None:
        return
    for key, node in cfg.items():
        if key == "hydra" and not section:
            continue
        dotted = f"{section}.{key}" if section else str(key)
        if key not in valid:
            raise ConfigError(
                f"{dotted}: not a key of the config (a `+` override adds keys nothing reads); "
                f"{valid_keys_hint(str(key), valid, section)}"
            )
        if isinstance(node, dict):
            check_known_keys(node, dotted)


def _require(cond: bool, key: str, value: Any, valid: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {value!r} is not valid; {valid}")


def validate_schedule(cfg) -> None:
    """``train.schedule``, its cooldown and its branches (budgets below the run's). Raises ConfigError."""
    t = cfg.train
    _require(t.schedule in ("cosine", "wsd"), "train.schedule", t.schedule, "valid: cosine, wsd")
    _require(0 < t.cooldown_frac <= 1, "train.cooldown_frac", t.cooldown_frac, "it must be in (0, 1]")
    for b in t.branches:
        ok = isinstance(b, (int, float)) and math.isfinite(b) and b > 0
        _require(ok, "train.branches", b, "it must be a positive number")
        _require(b < cfg.budget, "train.branches", b, f"each must be below the run's budget {cfg.budget:g}")
    if t.branches:
        _require(t.schedule == "wsd", "train.branches", list(t.branches), "branches need train.schedule=wsd")
        _require(len(set(t.branches)) == len(t.branches), "train.branches", list(t.branches), "give each budget once")


def validate(cfg) -> None:
    """Check values for meaning (types were checked at compose time). Raises ConfigError."""
    check_known_keys(cfg)

    def positive(key: str, value: Any, integer: bool = False) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        _require(
            ok and (not integer or float(value).is_integer()),
            key,
            value,
            "it must be a positive " + ("integer" if integer else "number"),
        )

    positive("budget", cfg.budget)
    _require(
        cfg.param_count in ("total", "non_embedding"), "param_count", cfg.param_count, "valid: total, non_embedding"
    )
    _require(isinstance(cfg.seed, int) and cfg.seed >= 0, "seed", cfg.seed, "it must be a non-negative integer")
    t, o = cfg.train, cfg.optim
    for key in ("batch_size", "seq_len", "min_steps", "eval_tokens", "evals", "log_points", "concurrent_runs"):
        positive(f"train.{key}", getattr(t, key), integer=True)
    _require(t.threads >= 0, "train.threads", t.threads, "it must be >= 0 (0 = automatic)")
    _require(t.device_slots >= 0, "train.device_slots", t.device_slots, "it must be >= 0 (0 = no slot)")
    _require(t.checkpoint_interval_s >= 0, "train.checkpoint_interval_s", t.checkpoint_interval_s, "it must be >= 0")
    _require(t.divergence_factor > 1, "train.divergence_factor", t.divergence_factor, "it must be > 1")
    _require(t.precision in ("auto", "fp32", "bf16"), "train.precision", t.precision, "valid: auto, fp32, bf16")
    _require(
        t.compile_mode in COMPILE_MODES, "train.compile_mode", t.compile_mode, f"valid: {', '.join(COMPILE_MODES)}"
    )
    _require(
        t.device == "auto" or t.device.split(":")[0] in ("cpu", "cuda", "mps"),
        "train.device",
        t.device,
        "valid: auto, cpu, cuda, cuda:N, mps",
    )
    _require(o.name == "adamw", "optim.name", o.name, "valid: adamw")
    if o.lr is not None:
        positive("optim.lr", o.lr)
    positive("optim.lr_multiplier", o.lr_multiplier)
    if cfg.model.name != "nearest":
        positive("model.lr", cfg.model.lr)
    _require(0 <= o.beta1 < 1, "optim.beta1", o.beta1, "it must be in [0, 1)")
    _require(0 <= o.beta2 < 1, "optim.beta2", o.beta2, "it must be in [0, 1)")
    _require(o.weight_decay >= 0, "optim.weight_decay", o.weight_decay, "it must be >= 0")
    _require(o.grad_clip >= 0, "optim.grad_clip", o.grad_clip, "it must be >= 0 (0 disables clipping)")
    _require(0 <= o.warmup_frac < 1, "optim.warmup_frac", o.warmup_frac, "it must be in [0, 1)")
    if o.warmup_steps is not None:
        positive("optim.warmup_steps", o.warmup_steps, integer=True)
    validate_schedule(cfg)
    _require(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio", o.min_lr_ratio, "it must be in [0, 1]")
    _require(cfg.tracking.backend in ("wandb", "none"), "tracking.backend", cfg.tracking.backend, "valid: wandb, none")
    _require(
        cfg.tracking.mode in ("auto", "online", "offline", "disabled"),
        "tracking.mode",
        cfg.tracking.mode,
        "valid: auto, online, offline, disabled",
    )
