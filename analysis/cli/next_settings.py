"""The settings of a results store's runs that `scaling next`'s sweep file must carry.

A store's sweep.json names its sweep file, not the command line it was launched with: a store swept with
`model.arch=llama` (or `data=bin data.path=...`, `train.schedule=wsd`, `optim.*`) got a sweep file of the bare
sweep, whose runs trained GPT-2 into the llama store (user26: compare's m moved from 2.09 to 1.76). The runs'
own configs (runs/<run_id>/config.yaml, as each job resolved it) hold those settings: every key whose value is the
same in all of them and differs from the sweep file's is carried. Keys that vary between runs are the sweep's axes
(budget, shape, seed, a swept LR) and stay the sweep's; the shape's own keys and what launchers set per job are not
settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.sources.settings import BRANCHING_KEYS, LAUNCHER_KEYS, PER_JOB, SHAPE_KEYS, flatten, run_configs


def base_sweep_path(source: str) -> Path | None:
    """The sweep file the store ``source`` was run from: the one its sweep.json names (`progress.sweep_file`, where
    it still exists), else sweeps/NAME.yaml of its sweep's name (stores before the file was recorded; user: a
    sweep file kept outside sweeps/ lost its tokens-per-parameter window and settings); None when unknown."""
    from scaling.sweep_app import SWEEPS_DIR

    manifest = Path(source) / "sweep.json"
    try:
        plan = json.loads(manifest.read_text()) if manifest.is_file() else {}
    except (OSError, ValueError):
        plan = {}
    recorded = Path(plan["sweep_file"]) if plan.get("sweep_file") else None  # not the project's own config.yaml:
    named = [recorded] if recorded is not None and recorded.stem != "config" else []  # `scaling train --multirun`
    named += [SWEEPS_DIR / f"{plan['sweep']}.yaml"] if plan.get("sweep") else []
    return next((path for path in named if path.is_file()), None)


def base_sweep(source: str, bare: str) -> dict:
    """The sweep file the source store was run from (its settings carry over), or a bare one named ``bare``."""
    import yaml

    path = base_sweep_path(source)
    try:
        base = yaml.safe_load(path.read_text()) if path is not None else None
    except (OSError, yaml.YAMLError):
        base = None
    if not isinstance(base, dict):
        return {
            "defaults": ["config", {"override hydra/sweeper": "scaling"}, "_self_"],
            "sweep": bare,
            "hydra": {"sweeper": {}},
        }
    hydra = base.get("hydra") if isinstance(base.get("hydra"), dict) else {}  # review20: a file whose grid was the
    base["hydra"] = {**hydra, "sweeper": hydra.get("sweeper") or {}}  # command line's had no hydra: (KeyError)
    return base


def carried(source: str, sweep_file: Path | None) -> dict[str, Any] | None:
    """Dotted key -> value: the settings all the store's runs share that ``sweep_file`` (None: the project's config)
    would set otherwise; None when no run's config.yaml could be read."""
    from scaling.train_app import compose_config

    configs = list(run_configs(source).values())
    if not configs:
        return None
    first = configs[0]
    # the sweep file's settings, not a shape's (review18: a fine/ shape's name is no model= option: next failed)
    name, where = (sweep_file.stem, str(sweep_file.parent)) if sweep_file else ("config", None)
    base = flatten(dict(compose_config([], config_name=name, extra_dir=where)))
    shared = {k: v for k, v in first.items() if all(c.get(k, _MISSING) == v for c in configs[1:])}
    return {
        k: v
        for k, v in shared.items()
        if not k.startswith(PER_JOB)
        and k not in SHAPE_KEYS + LAUNCHER_KEYS + BRANCHING_KEYS
        and base.get(k, _MISSING) != v
    }


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """{"model.arch": "llama"} -> {"model": {"arch": "llama"}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def merged(base: dict, extra: dict) -> dict:
    """``base`` with ``extra``'s leaves set (nested dicts merged, not replaced)."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


_MISSING = object()


# The sweeper's hyperparameter axes (`hydra_plugins.scaling_sweeper.hyper`) -> the config key each sets per run.
AXES = {
    "lr_multipliers": "optim.lr_multiplier",
    "lr_grid": "optim.lr",
    "batch_sizes": "train.batch_size",
    "warmup_fracs": "optim.warmup_frac",
}


def swept_axes(source: str, sweeper: dict) -> dict[str, list]:
    """The hyperparameter axes (`AXES`) the store's runs were swept over that ``sweeper`` (its sweep file's
    settings) lacks, as a store swept with `hydra.sweeper.lr_multipliers=[...]` on the command line lacks them:
    per axis, the values of its config key that every (budget, shape) point of the runs has, where at least 2
    (lr_refine's stage 2 adds midpoints at some points only: the coarse grid is what every point shares). One LR
    axis at most (the sweeper refuses both); none where no run's config.yaml could be read."""
    points: dict[tuple, list[dict]] = {}
    for config in run_configs(source).values():
        points.setdefault((config.get("budget"), config.get("model.name")), []).append(config)
    out: dict[str, list] = {}
    for axis, key in AXES.items():
        lr_axes = [a for a in AXES if a.startswith("lr_")] if axis.startswith("lr_") else [axis]
        if not points or any(sweeper.get(a) or a in out for a in lr_axes):
            continue
        values = set.intersection(*({c.get(key) for c in runs} - {None} for runs in points.values()))
        if len(values) >= 2:
            out[axis] = sorted(values)
    return out
