"""The sweeper's own settings (hydra.sweeper.*), checked when a sweep starts: budgets, grid,
tokens_per_param, runs_per_gpu, the hyperparameter axes and packing; each bad one is a ConfigError
naming it (errors raised in the sweeper's constructor would reach the user wrapped in Hydra's
instantiation traceback)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig

from hydra_plugins.scaling_sweeper import pack
from hydra_plugins.scaling_sweeper.hyper import HyperAxes
from scaling import devices
from scaling.flops import TOKENS_PER_PARAM

MAX_EXTRA_PER_DECADE = 100  # branch budgets 2.3% apart; each is a run of its own cooldown


def keys() -> list[str]:
    """The sweeper's settings, hydra.sweeper.KEY (`ScalingSweeperConf`)."""
    from hydra_plugins.scaling_sweeper.scaling_sweeper import ScalingSweeperConf

    return [f.name for f in dataclasses.fields(ScalingSweeperConf) if f.name != "_target_"]


def budget(value: Any, key: str) -> float:
    """A FLOP budget from a sweep setting, or ConfigError naming the key."""
    from scaling.errors import ConfigError

    try:
        budget = float(value)
    except (TypeError, ValueError):
        budget = math.nan
    if not (math.isfinite(budget) and budget > 0):
        raise ConfigError(f"{key}: {value!r} is not a FLOP budget; it must be a positive number such as 1e12")
    return budget


def given_here(sweeper, key: str) -> bool:
    """Whether hydra.sweeper.KEY was given on the command line (not only in the sweep file)."""
    from scaling.train_app import override_key

    overrides = sweeper.config.hydra.overrides.hydra if sweeper.config is not None else []
    return any(override_key(o) == f"hydra.sweeper.{key}" for o in overrides)


def cut_here(sweeper) -> dict[float, list[str]]:
    """The sweeper's grid cut by the hydra.sweeper.budgets and .models given on the command line
    (`cut_grid`; those of the sweep file yield to its grid), its notes printed."""
    import sys

    cut = [getattr(sweeper, k) if given_here(sweeper, k) else [] for k in ("budgets", "models")]
    grid, notes = cut_grid(sweeper.grid, *cut) if any(cut) else (sweeper.grid, [])
    print("".join(f"note: {n}\n" for n in notes), end="", file=sys.stderr, flush=True)
    return grid


def cut_grid(
    grid: dict[float, list[str]], budgets: list[float], models: list[str]
) -> tuple[dict[float, list[str]], list[str]]:
    """A grid cut by the budgets and models given on the command line beside it (where a mapping can only
    be merged into the file's): its rows at ``budgets`` (all if none), each with its shapes among
    ``models`` (all if none); and a note for each budget or model asked for that the cut leaves out.
    ConfigError naming a budget or model the grid lacks, or a cut that keeps nothing."""
    from scaling.errors import ConfigError

    listed = ", ".join(f"{b:g}" for b in grid)
    rows = {b: next((g for g in grid if math.isclose(b, g, rel_tol=1e-9)), None) for b in budgets}
    missing = [b for b, row in rows.items() if row is None]
    if missing:
        raise ConfigError(
            f"hydra.sweeper.budgets: {missing[0]:g} is not a budget of the sweep's grid ({listed}); beside a grid, "
            "budgets keep some of its rows. To sweep other budgets, sweep them: budget=... model=... (replaces the grid)"
        )
    shapes = sorted({s for row in grid.values() for s in row})
    unknown = [m for m in models if m not in shapes]
    if unknown:
        raise ConfigError(
            f"hydra.sweeper.models: {unknown[0]} is not a shape of the sweep's grid ({', '.join(shapes)}); "
            "beside a grid, models keep some of its shapes. To sweep others: budget=... model=... (replaces the grid)"
        )
    kept = {b: [s for s in grid[b] if not models or s in models] for b in (rows.values() if budgets else grid)}
    notes = [
        f"budget {b:g}: the grid has none of {', '.join(models)} there; left out" for b, r in kept.items() if not r
    ]
    kept = {b: r for b, r in kept.items() if r}
    if not kept:
        at = ", ".join(f"{b:g}" for b in rows.values()) + " (hydra.sweeper.budgets)" if budgets else listed
        raise ConfigError(f"hydra.sweeper.models: none of {', '.join(models)} is in the grid at {at}")
    for m in models:
        if budgets and not any(m in r for r in kept.values()):
            notes.append(f"model {m}: not in the grid at budget(s) {', '.join(f'{b:g}' for b in kept)}; left out")
    return kept, notes


def nothing_to_sweep(grid_budgets: list[float], budgets: list[float]):
    """The ConfigError of a sweep left with no budgets × models; ``grid_budgets``: the sweep file's grid's (none
    without one), which the command line's ``budgets`` replaced (user32: `budget=1e10` read "either one replaces the
    grid"; review21: the advice named 1e10 whatever the grid held)."""
    from scaling.errors import ConfigError

    if grid_budgets:
        given = ",".join(f"{b:g}" for b in budgets) or "..."
        kept = [b for b in budgets if b in grid_budgets] or grid_budgets[:1]
        return ConfigError(
            f"hydra.sweeper: budget={given} on the command line replaces the sweep file's grid and needs model= beside "
            f"it (budget={given} model=d16,d32); to keep some of the grid's rows (budgets "
            f"{', '.join(f'{b:g}' for b in grid_budgets)}), name them instead: "
            f"hydra.sweeper.budgets=[{','.join(f'{b:g}' for b in kept)}] (or its shapes: hydra.sweeper.models=[...])"
        )
    return ConfigError(
        "hydra.sweeper: no budgets × models to sweep; set hydra.sweeper.budgets and hydra.sweeper.models (or "
        "hydra.sweeper.grid) in the sweep file, or sweep both on the command line: budget=1e11,3e11 model=d32,d64"
    )


def text(budget: float) -> str:
    """A budget as a job's override: short where that is exact (1e+12), else every digit (user19: 1.2345678e11
    became 1.23457e+11, its run id not `scaling train`'s, and 1.2345699e11 merged into it)."""
    return next(t for t in (f"{budget:.{digits}g}" for digits in range(6, 18)) if float(t) == budget)


def check(sweeper) -> None:
    """Budgets, grid and tokens_per_param as numbers, runs_per_gpu, the hyperparameter axes and
    packing of ``sweeper`` (a `ScalingSweeper`), normalised in place; ConfigError naming a bad one."""
    from scaling.errors import ConfigError

    sweeper.budgets = [budget(b, "hydra.sweeper.budgets") for b in sweeper.budgets]
    grid = sweeper.grid if sweeper.grid is not None else {}
    if not isinstance(grid, (dict, DictConfig)):
        raise ConfigError(
            f"hydra.sweeper.grid: {grid!r} is not a mapping; write budget -> shapes, "
            "e.g. {1e12: [d32, d64], 3e12: [d64, d96]}"
        )
    sweeper.grid = {}
    for key, shapes in grid.items():
        if isinstance(shapes, str) or not all(isinstance(s, str) for s in shapes or [None]):
            name = text(key) if isinstance(key, (int, float)) else key  # 4e10, not 40000000000.0 (YAML's float)
            raise ConfigError(f"hydra.sweeper.grid.{name}: {shapes!r} is not a list of model names, e.g. [d32, d64]")
        sweeper.grid[budget(key, f"hydra.sweeper.grid key {key!r}")] = list(shapes)
    try:
        lo, hi = (float(x) for x in sweeper.tokens_per_param)
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not 0 <= lo < hi:
        low, high = TOKENS_PER_PARAM
        raise ConfigError(
            f"hydra.sweeper.tokens_per_param: {list(sweeper.tokens_per_param)!r} is not a range; "
            f"give [low, high] tokens per parameter with 0 <= low < high, e.g. [{low:g}, {high:g}] (the default)"
        )
    sweeper.tokens_per_param = (lo, hi)
    _check_counts(sweeper)
    devices.fake_gpus()  # a SCALING_FAKE_GPUS that is not a count: one line, before anything is written
    names = ("lr_multipliers", "lr_grid", "batch_sizes", "warmup_fracs", "lr_refine")
    unknown = sorted(set(sweeper.hyper_settings) - set(names))
    if unknown:  # added by `+hydra.sweeper.KEY=...` (struct mode refuses it without the +)
        from scaling.config import valid_keys_hint

        raise ConfigError(
            f"hydra.sweeper.{unknown[0]}: not a setting of the scaling sweeper; "
            f"{valid_keys_hint(unknown[0], keys(), 'hydra.sweeper')}"
        )
    sweeper.hyper = HyperAxes.from_settings(*(sweeper.hyper_settings.get(k) for k in names))
    if sweeper.hyper_settings.get("batch_sizes") and sweeper.config is not None:
        from scaling.hparams import check_batch_not_set, law_of

        check_batch_not_set(sweeper.config, law_of(sweeper.config), "hydra.sweeper.batch_sizes")
    lr_axis = bool(sweeper.hyper_settings.get("lr_multipliers") or sweeper.hyper_settings.get("lr_grid"))
    sweeper.pack_rule = pack.AUTO if sweeper.pack is None else pack.EVERY
    if sweeper.pack is None:  # pack where it was measured to pay (`pack.auto`)
        sweeper.pack = pack.auto(sweeper.config, lr_axis)
    elif sweeper.pack:
        pack.check(sweeper.config, lr_axis)


def _check_counts(sweeper) -> None:
    """runs_per_gpu, max_batch_size and extra_points_per_decade, or ConfigError naming the bad one."""
    from scaling.errors import ConfigError

    r = sweeper.runs_per_gpu
    if isinstance(r, bool) or not isinstance(r, int) or r <= 0:
        raise ConfigError(
            f"hydra.sweeper.runs_per_gpu: {r!r} is not valid; it must be a positive integer (runs at once per GPU)"
        )
    m = sweeper.max_batch_size
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m <= 0):  # -3 launched nothing
        raise ConfigError(
            f"hydra.sweeper.max_batch_size: {m!r} is not valid; it must be a positive integer (jobs per launch) "
            "or null (all at once)"
        )
    x = sweeper.extra_points_per_decade
    if not (math.isfinite(x) and 0 <= x <= MAX_EXTRA_PER_DECADE):
        raise ConfigError(  # nan and -1 added nothing, silently; 1e6 planned for hours
            f"hydra.sweeper.extra_points_per_decade: {x!r} is not valid; it must be a number in "
            f"[0, {MAX_EXTRA_PER_DECADE}] (more cooldown branches' budgets per decade)"
        )
    if sweeper.branches and sweeper.hyper_settings.get("lr_refine"):  # user19: stage 2 trained unbranched runs
        raise ConfigError(
            "hydra.sweeper.lr_refine with hydra.sweeper.branches=true: stage 2's LRs are chosen per (shape, budget) "
            "and would train as standalone runs beside the trunks; refine without branches, or give a finer lr grid"
        )
    if x and not sweeper.branches and given_here(sweeper, "extra_points_per_decade"):  # user19: added none, silently
        raise ConfigError(  # (a sweep file's, with branches=false on the command line: its separate runs, as asked)
            f"hydra.sweeper.extra_points_per_decade: {x:g} adds cooldown branches, and is read only with "
            "hydra.sweeper.branches=true (and train.schedule=wsd); add them, or drop it"
        )
