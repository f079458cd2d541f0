"""The learning-rate schedules, `train.schedule`: the LR of every optimizer step (no torch).

- ``cosine`` (default): linear warmup over ``optim.warmup_frac`` of the run's steps, then cosine
  decay reaching peak·``optim.min_lr_ratio`` exactly at the last step, so that the schedule's length
  equals the run's (Hoffmann et al. 2022, App. B).
- ``wsd`` (warmup–stable–decay): the same linear warmup, then the peak LR held constant, then a
  cooldown over the last ``train.cooldown_frac`` of the steps to peak·``optim.min_lr_ratio`` at the
  last step. The cooldown's shape is 1−sqrt, lr = min + (peak − min)·(1 − √progress), which Hägele
  et al. 2024 ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations", Sec. 3,
  Fig. 5) found better than a linear cooldown, and with a 10-20% cooldown a match for a cosine
  schedule of the same length. Until its cooldown a WSD run's LR does not depend on its length, so
  one constant-LR trunk serves every shorter budget of its shape (`scaling.branches`) — provided the
  warmup does not depend on the length either: ``optim.warmup_steps`` fixes it in steps.
"""

from __future__ import annotations

import math
from typing import Any

SCHEDULES = ("cosine", "wsd")


def warmup_steps(optim, steps: int) -> int:
    """The warmup's length in steps: ``optim.warmup_steps`` when set, else ``optim.warmup_frac`` of
    the run's ``steps`` (at least 1)."""
    if optim.get("warmup_steps") is not None:
        return int(optim.warmup_steps)
    return max(1, round(optim.warmup_frac * steps))


def cooldown_steps(train, steps: int) -> int:
    """The WSD cooldown's length in steps (``train.cooldown_frac`` of ``steps``, at least 1); 0 for cosine."""
    if train.get("schedule", "cosine") != "wsd":
        return 0
    return max(1, round(train.cooldown_frac * steps))


def decay_start(steps: int, cooldown: int) -> int:
    """The first step of a WSD run's cooldown (the run's steps are 0 .. steps − 1)."""
    return steps - cooldown


def lr_at(step: int, plan, min_lr_ratio: float) -> float:
    """The LR of optimizer step ``step`` (0-based) of the run ``plan`` (a `scaling.plan.RunPlan`)."""
    if step < plan.warmup_steps:
        return plan.lr * (step + 1) / plan.warmup_steps
    min_lr = plan.lr * min_lr_ratio
    if plan.schedule == "wsd":
        start = decay_start(plan.steps, plan.cooldown_steps)
        if step < start:
            return plan.lr
        progress = min(1.0, (step - start + 1) / plan.cooldown_steps)  # 1 at the last step
        return min_lr + (plan.lr - min_lr) * (1 - math.sqrt(progress))
    decay_steps = max(1, plan.steps - 1 - plan.warmup_steps)
    progress = min(
        1.0, (step - plan.warmup_steps) / decay_steps
    )  # (the formula of every cosine run so far, bit for bit)
    return plan.lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def drop_from_identity(c: dict[str, Any]) -> None:
    """Leave the schedule's keys out of a run's identity where they are at their defaults, so that
    cosine runs keep the ids they had before WSD existed: ``train.schedule``/``cooldown_frac`` for
    cosine, ``optim.warmup_steps`` when null (else ``optim.warmup_frac``, which it overrides), and
    ``train.branches`` always (a trunk's own result does not depend on its branches)."""
    train, optim = c["train"], c["optim"]
    train.pop("branches", None)
    if train.get("schedule", "cosine") == "cosine":
        train.pop("schedule", None)
        train.pop("cooldown_frac", None)
    if optim.get("warmup_steps") is None:
        optim.pop("warmup_steps", None)
    else:
        optim.pop("warmup_frac", None)
