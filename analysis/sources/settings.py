"""The settings of a results store's runs, from each run's config.yaml (as its job resolved it).

A store's table holds what the fits need (N, D, loss, the hyperparameter columns), not every setting a run was
trained with. Runs relaunched into one store with a setting changed (`optim.min_lr_ratio=1.0`, a schedule, a
tokenizer's vocabulary) are two recipes, and their table rows showed no difference: the fits pooled them as seeds
of one point (user29). `differing` finds the settings that take several values among a store's runs, leaving out
what varies within any one sweep (`PER_JOB`: the budget, the seed; `SHAPE_KEYS`; what launchers set per job;
a WSD trunk's branches) and what a table column already shows (`IN_TABLE`); the store's reader adds them as text
columns under their dotted names, which the separating-column checks (`groups.warn_separating_columns`) name.
`scaling next` (`analysis.cli.next_settings`) carries the settings all runs share into its sweep file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from scaling.plan import LAUNCHER_SET, NOT_IDENTITY, NOT_IDENTITY_TRAIN

# not settings: the job's budget and seed, its place, what the sweeper and launchers set per job
PER_JOB = ("budget", "seed", *(key for key in NOT_IDENTITY if key != "tracking"))  # (next carries tracking)
NOT_RECIPE_TOP = (*NOT_IDENTITY, "param_count")  # not a recipe either: tracking, how N is counted (a table column)
# a WSD trunk's own (review18: a one-shape WSD store's warmup and branches would make every proposed run that trunk)
BRANCHING_KEYS = ("optim.warmup_steps", "train.branches")
SHAPE_KEYS = ("model.name", "model.n_layer", "model.d_model", "model.n_head", "model.lr", "model.target_params")
LAUNCHER_KEYS = tuple(f"train.{key}" for key in LAUNCHER_SET)
# where and how fast a run ran, how often it was measured, when it would have been stopped as diverged
NOT_RECIPE = tuple(f"train.{key}" for key in (*NOT_IDENTITY_TRAIN, "log_points", "evals", "eval_tokens"))
NOT_RECIPE += ("train.divergence_factor", "train.min_steps")
# settings a column of the store's table shows (the LR and its grid, the batch, warmup, sequence length, the
# architecture, the schedule; the corpus and its repetition: corpus, unique_tokens): checked there
IN_TABLE = (
    "optim.lr",
    "optim.lr_multiplier",
    "optim.lr_law",
    "optim.batch_law",
    "optim.warmup_frac",
    "train.batch_size",
    "train.seq_len",
    "train.schedule",
    "train.allow_repeat",
    "model.arch",
    "data.",
    "eval.sets.",  # the evaluation sets' definitions (a store that added sets); `eval.primary`, the loss's set, is one
)


def run_configs(source: str) -> dict[str, dict[str, Any]]:
    """Run id -> the run's resolved config (runs/<run_id>/config.yaml), flattened to dotted keys; a damaged file's
    run is left out (its settings are unknown; the others' stand)."""
    from scaling.store import RunPaths

    paths = sorted(Path(source).glob(str(RunPaths(Path(), "*").config)))
    stamp = tuple((str(path), *_identity(path)) for path in paths if path.is_file())
    return dict(_read_configs(stamp))  # read once per state of the files (`scaling next` asks three times)


def _identity(path: Path) -> tuple:
    """What changes when a file is rewritten, even with its mtime restored (review20: `cp -p`, `rsync -t`)."""
    st = path.stat()
    return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino


@lru_cache(maxsize=4)
def _read_configs(stamp: tuple) -> tuple:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it: ~10x faster
    configs = []
    for name, *_ in stamp:
        path = Path(name)
        try:
            configs.append((path.parent.name, flatten(yaml.load(path.read_text(), Loader=loader) or {})))
        except (OSError, yaml.YAMLError):
            continue
    return tuple(configs)


def differing(source: str, run_ids: pd.Series) -> pd.DataFrame:
    """One text column per setting (dotted key) whose value differs between the store's runs ``run_ids`` and that
    is no per-job, shape, launcher or table key (see the module docstring); a run without a readable config.yaml
    has "" there. Empty (no columns) when all runs agree."""
    configs = run_configs(source)
    rows = [configs.get(str(run), {}) for run in run_ids]
    read = [row for run, row in zip(run_ids, rows) if str(run) in configs]  # not a damaged or missing config.yaml
    keys = dict.fromkeys(k for row in rows for k in row)
    columns = {}
    for key in keys:  # over the runs whose config has the key: an older run's lacks a key added since (review19)
        values = {_text(row[key]) for row in rows if key in row}
        grown = len(values) == 1 and any(key not in row for row in read)  # ran with the default, or before the key
        if not _skipped(key) and (len(values) > 1 or grown and _default_text(key) not in (None, *values)):
            columns[key] = [_text(row[key]) if key in row else "" for row in rows]
    return pd.DataFrame(columns, index=run_ids.index)


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    from omegaconf import OmegaConf

    from scaling.config import Config

    return flatten(OmegaConf.structured(Config))


def _default_text(key: str) -> str | None:
    """A setting's default in this code's schema (`scaling.config.Config`), as text; None for a key it lacks (one
    removed since, a model's own kwargs: nothing to compare with). Runs whose config lacks a key added since ran
    before it existed, as its default would have them (a new key's default keeps the old behaviour): only newer runs
    set to another value are another recipe (a store that grew a `model.tied_head=false` relaunch pooled it with the
    older tied runs, before)."""
    defaults = _defaults()
    return _text(defaults[key]) if key in defaults else None


def _skipped(key: str) -> bool:
    """Whether a setting is no recipe's (`PER_JOB`, `SHAPE_KEYS`, launchers', a trunk's) or a table column's
    (`IN_TABLE`): a name, the section it heads ("seed", "hydra.") or a prefix ending in "."."""
    for name in (*PER_JOB, *NOT_RECIPE_TOP, *SHAPE_KEYS, *LAUNCHER_KEYS, *NOT_RECIPE, *BRANCHING_KEYS, *IN_TABLE):
        if key == name or key.startswith(name if name.endswith(".") else f"{name}."):
            return True
    return False


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys; an empty dict (model.kwargs: {}) is a value."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(node):
        node = OmegaConf.to_container(node, resolve=True)
    if not isinstance(node, dict) or not node:
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
