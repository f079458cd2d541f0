"""A run's peak learning rate and batch size when they come from a law (``optim.lr_law``) or are
swept (``optim.lr_multiplier``): the arithmetic `scaling.plan.plan_run` does for them, no torch.

- ``optim.lr_law=NAME|FIT.json`` (a preset of `scaling.hplaws`, or a saved fit's
  ``hyperparameter_laws``): the peak LR is the law's η* at the run's N (non-embedding), D (the
  tokens it trains on) and C = 6·N·D (the run's recorded C, `scaling.flops.flops_6nd` of the N that
  defines D). Unless ``optim.batch_law=false``, a law with ``batch_tokens`` sets the batch too: B*
  tokens at the budget's D = C/(6N) (before D is rounded to whole steps, which needs the batch),
  rounded to whole sequences of train.seq_len, at least 1.
- ``optim.lr_multiplier``: the peak LR is the shape's (or optim.lr's, or the law's) × this.

These keys are not part of a run's identity: what they resolve to (model.lr, train.batch_size) is,
so a sweep without them plans the run ids it always did, and two ways to the same LR are one run.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from scaling import hplaws
from scaling.errors import ConfigError

# optim keys that only say how the LR and batch are chosen; identity holds the resolved values.
NOT_IDENTITY_OPTIM = ("lr_multiplier", "lr_law", "batch_law")


def law_of(cfg: DictConfig) -> dict[str, Any] | None:
    """The laws ``optim.lr_law`` names ({"lr": LAW, "batch_tokens": LAW?, ...}), or None when unset.
    A bad name or file is a ConfigError naming optim.lr_law (`scaling.hplaws.load`)."""
    name = cfg.optim.get("lr_law")
    if name in (None, ""):
        return None
    if cfg.optim.lr is not None:
        raise ConfigError(
            f"optim.lr_law: {name!r} and optim.lr={cfg.optim.lr:g} both set the peak learning rate; give one"
        )
    return hplaws.load(str(name), key="optim.lr_law")


def law_warnings(cfg: DictConfig, laws: dict[str, Any] | None) -> list[str]:
    """A line per law optim.lr_law trains with whose fit called a value unidentified (`hplaws.unidentified_in`):
    `scaling optimal` marks its recommendation so; a run trained with it used to say nothing (review15c)."""
    used = [("lr", True), ("batch_tokens", bool(cfg.optim.batch_law))]
    return [
        f"optim.lr_law: {cfg.optim.lr_law}: the {target} law's {', '.join(why)} unidentified by its fit "
        f"({next(iter(why.values()))}): the run trains with its value anyway"
        for target, on in used
        if on and laws and (why := hplaws.unidentified_in(laws.get(target)))
    ]


def check_batch_not_set(cfg: DictConfig, laws: dict[str, Any] | None, key: str) -> None:
    """ConfigError when ``key`` (train.batch_size given on the command line, hydra.sweeper.batch_sizes) sets a
    batch that optim.lr_law's batch law sets too (user19: the batch axis was ignored, silently)."""
    if laws and cfg.optim.batch_law and "batch_tokens" in laws:
        raise ConfigError(
            f"{key}: optim.lr_law={cfg.optim.lr_law} sets each run's batch (its batch_tokens law), so {key} would "
            f"be ignored; give optim.batch_law=false to set the batch yourself, or drop {key}"
        )


def _value(law: Any, what: str, source: str, **at: float) -> float:
    """One law's value, or ConfigError naming optim.lr_law when it is not a positive number."""
    try:
        value = hplaws.evaluate(law, **at)
    except (TypeError, ValueError, AttributeError, OverflowError) as err:
        raise ConfigError(f"optim.lr_law: {source}: the {what} law {law!r} cannot be evaluated ({err})") from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"optim.lr_law: {source}: the {what} law gives {value!r} at N={at['n_non_embedding']:.3g}, "
            f"D={at['tokens']:.3g}; it must be a positive number"
        )
    return value


def batch_size(cfg: DictConfig, laws: dict[str, Any] | None, n_non_embedding: int, tokens: float) -> int:
    """Sequences per optimizer step: the law's B* (tokens at the budget's D, C = the budget) in whole
    sequences, at least 1; else train.batch_size."""
    if laws is None or not cfg.optim.batch_law or "batch_tokens" not in laws:
        return int(cfg.train.batch_size)
    at = {"n_non_embedding": n_non_embedding, "tokens": tokens, "flops": float(cfg.budget)}
    b_tokens = _value(laws["batch_tokens"], "batch_tokens", cfg.optim.lr_law, **at)
    return max(1, round(b_tokens / cfg.train.seq_len))


def peak_lr(cfg: DictConfig, laws: dict[str, Any] | None, base_lr: float, law_at: dict[str, float]) -> float:
    """The run's peak LR: the law's η* at ``law_at`` (n_non_embedding, tokens, flops) or ``base_lr``,
    times optim.lr_multiplier."""
    lr = base_lr if laws is None else _value(laws["lr"], "lr", cfg.optim.lr_law, **law_at)
    return lr * float(cfg.optim.lr_multiplier)
