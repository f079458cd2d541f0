"""Hyperparameter axes of a sweep: the learning rate per (shape, budget), and optionally the batch
size and the warmup, each job's values as overrides of its config (so in its run id and record).

Sweep settings (``hydra.sweeper.*``)::

    lr_multipliers: [0.25, 0.5, 1, 2, 4]   # optim.lr_multiplier: × the shape's own LR (or the law's)
    lr_grid: [1e-3, 3e-3, 1e-2]            # or optim.lr: the same LRs for every shape
    batch_sizes: [8, 16]                   # train.batch_size, sequences per step
    warmup_fracs: [0.02, 0.1]              # optim.warmup_frac
    lr_refine: true                        # stage 2: geometric midpoints around each best LR

With none of them a sweep's jobs, run ids and plan are exactly those of a sweep without this module.
`cost_line` states what the axes multiply the sweep's cost by. With ``lr_refine``, `refinements`
gives stage 2, planned from the records of stage 1 (the coarse LRs): for each (budget, shape and
every other axis), the coarse LR with the lowest val_loss, and the geometric midpoints between it
and its neighbours in the coarse grid. It depends on the coarse records only, so a relaunch plans
the same stage 2 (and skips what of it is done).

(No ``from __future__ import annotations`` here: Hydra's plugin scan imports this module without
registering it in sys.modules, where a dataclass with string annotations looks itself up.)
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LR_KEYS = {"lr_multipliers": "optim.lr_multiplier", "lr_grid": "optim.lr"}


def _numbers(values: Any, key: str, integer: bool = False, upper: float = math.inf) -> list[float]:
    """A list of positive numbers (below ``upper``), or ConfigError naming hydra.sweeper.KEY. A fraction
    (``upper`` 1: warmup_fracs) may be 0, as optim.warmup_frac may (no warmup but the first step's)."""
    from scaling.errors import ConfigError

    kind = "positive integers, e.g. [8, 16]" if integer else "positive numbers, e.g. [0.5, 1, 2]"
    if upper < math.inf:  # warmup_fracs: the example above would be refused
        kind = f"numbers in [0, {upper:g}), e.g. [0, 0.02, 0.1]"
    if values is None:
        return []
    try:
        out = [float(v) for v in values if not isinstance(v, bool)]
        ok = len(out) == len(list(values)) and all(
            math.isfinite(v) and (v > 0 or (v == 0 and upper < math.inf)) and v < upper for v in out
        )
    except (TypeError, ValueError):
        ok = False
    if not ok or (integer and not all(v.is_integer() for v in out)):
        raise ConfigError(f"hydra.sweeper.{key}: {values!r} is not a list of {kind}")
    if len(set(out)) != len(out):
        raise ConfigError(f"hydra.sweeper.{key}: {list(values)!r} repeats a value; give each once")
    return [int(v) for v in out] if integer else out


@dataclass
class HyperAxes:
    lr_multipliers: list[float]
    lr_grid: list[float]
    batch_sizes: list[int]
    warmup_fracs: list[float]
    lr_refine: bool

    @classmethod
    def from_settings(cls, lr_multipliers, lr_grid, batch_sizes, warmup_fracs, lr_refine) -> "HyperAxes":
        """Checked settings, or ConfigError naming the bad one."""
        from scaling.errors import ConfigError

        axes = cls(
            _numbers(lr_multipliers, "lr_multipliers"),
            _numbers(lr_grid, "lr_grid"),
            _numbers(batch_sizes, "batch_sizes", integer=True),
            _numbers(warmup_fracs, "warmup_fracs", upper=1.0),
            bool(lr_refine),
        )
        if axes.lr_multipliers and axes.lr_grid:
            raise ConfigError("hydra.sweeper.lr_grid: give either lr_multipliers or lr_grid, not both")
        if axes.lr_refine and len(axes.lr_values) < 2:
            raise ConfigError(
                "hydra.sweeper.lr_refine: needs a coarse LR grid of at least 2 values to refine; "
                "set hydra.sweeper.lr_multipliers (e.g. [0.25, 1, 4]) or hydra.sweeper.lr_grid"
            )
        return axes

    @property
    def lr_key(self) -> str:
        return LR_KEYS["lr_grid" if self.lr_grid else "lr_multipliers"]

    @property
    def lr_values(self) -> list[float]:
        return sorted(self.lr_grid or self.lr_multipliers)

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys these axes set (those a no-hyperparameter sweep leaves alone); with branches, a
        trunk's warmup in steps follows its warmup_frac (`branching.plan_trunks`)."""
        keys = (self.lr_key, "train.batch_size", "optim.warmup_frac")
        return (*keys, "optim.warmup_steps") if self.warmup_fracs else keys

    def axes(self) -> dict[str, list[str]]:
        """Swept key -> its overrides, in the order the sweeper crosses them (none: no axis)."""
        out = {}
        for key, values in (
            (self.lr_key, self.lr_grid or self.lr_multipliers),
            ("train.batch_size", self.batch_sizes),
            ("optim.warmup_frac", self.warmup_fracs),
        ):
            if values:
                out[key] = [f"{key}={v!r}" for v in values]
        return out

    # ------------------------------------------------------------ cost
    def base_key(self, overrides: list[str]) -> tuple[str, ...]:
        """A job's overrides without its hyperparameter values: its run in a sweep without the axes."""
        return tuple(o for o in overrides if o.split("=", 1)[0] not in self.keys)

    def cost_line(self, jobs: list[dict]) -> str | None:
        """Runs and FLOPs (6ND) planned, and × against the same sweep without these axes; None when
        the sweep has none."""
        from hydra_plugins.scaling_sweeper.branching import job_flops

        if not self.axes():
            return None
        base: dict[tuple, list[float]] = {}
        spent = [job_flops(j) for j in jobs]  # a cooldown branch: its cooldown only
        for j, flops in zip(jobs, spent):
            base.setdefault(self.base_key(j["overrides"]), []).append(flops)
        total = sum(spent)
        without = sum(sum(f) / len(f) for f in base.values())
        line = (
            f"cost: {len(jobs)} runs, {total:.3g} FLOPs (6ND): {total / without:.2f}x the {len(base)} runs "
            f"({without:.3g} FLOPs) of this sweep without hyperparameter axes"
        )
        if self.lr_refine:
            line += f"; lr_refine adds up to 2 runs per (shape, budget) after stage 1 (up to {2 * without:.3g} FLOPs)"
        return line

    # ------------------------------------------------------------ refine
    def midpoints(self, best: float) -> list[float]:
        """Geometric midpoints between the best coarse value and its neighbours in the grid."""
        grid = self.lr_values
        i = grid.index(best)
        return [math.sqrt(grid[k] * best) for k in (i - 1, i + 1) if 0 <= k < len(grid)]

    def refinements(self, jobs: list[dict], store: Path) -> tuple[list[list[str]], list[str]]:
        """Stage 2's override lists (not among ``jobs``), and one note per group left unrefined:
        its coarse runs are not all finished, or none completed."""
        from scaling.run_status import RunState
        from scaling.store import RunPaths, read_record, run_state

        groups: dict[tuple, dict[float, dict]] = {}
        for j in jobs:
            value = self.value_of(j["overrides"])
            if value in self.lr_values:
                groups.setdefault(self.lr_free(j["overrides"]), {})[value] = j
        planned = {tuple(j["overrides"]) for j in jobs}
        extra, notes = [], []
        for group, by_value in groups.items():
            losses = {}
            for value, j in by_value.items():
                paths = RunPaths(Path(store), j["run_id"])
                if run_state(paths) not in (RunState.COMPLETED, RunState.FAILED):
                    losses = None
                    break
                rec = read_record(paths.record)
                loss = rec.get("val_loss") if rec.get("status") == "completed" else None
                if loss is not None and math.isfinite(loss):
                    losses[value] = loss
            if not losses:
                why = "no coarse run completed" if losses == {} else "its coarse runs are not all finished"
                notes.append(f"{self.label(group)}: not refined ({why})")
                continue
            best = min(losses, key=losses.get)
            if best in (self.lr_values[0], self.lr_values[-1]):
                notes.append(f"{self.label(group)}: best LR at the edge of the grid ({self.lr_key}={best:g}); widen it")
            for value in self.midpoints(best):
                overrides = self.with_value(group, value)
                if tuple(overrides) not in planned:
                    extra.append(overrides)
        return extra, notes

    def value_of(self, overrides: list[str]) -> float | None:
        for o in overrides:
            key, _, value = o.partition("=")
            if key == self.lr_key:
                return float(value)
        return None

    def lr_free(self, overrides: list[str]) -> tuple[str, ...]:
        """The overrides with the LR one as a placeholder (its place kept for `with_value`)."""
        return tuple(None if o.partition("=")[0] == self.lr_key else o for o in overrides)

    def with_value(self, group: tuple, value: float) -> list[str]:
        """The group's overrides with the LR axis at ``value``, in the coarse jobs' place."""
        return [f"{self.lr_key}={value!r}" if o is None else o for o in group]

    @staticmethod
    def label(group: tuple) -> str:
        return " ".join(o for o in group if o is not None and not o.startswith("store="))
