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

from typing import Any

from analysis.sources.settings import BRANCHING_KEYS, LAUNCHER_KEYS, PER_JOB, SHAPE_KEYS, flatten, run_configs


def carried(source: str, sweep_name: str | None) -> dict[str, Any] | None:
    """Dotted key -> value: the settings all the store's runs share that the sweep file ``sweep_name`` (None: the
    project's config) would set otherwise; None when no run's config.yaml could be read."""
    from scaling.train_app import compose_config

    configs = list(run_configs(source).values())
    if not configs:
        return None
    first = configs[0]
    # the sweep file's settings, not a shape's (review18: a fine/ shape's name is no model= option: next failed)
    base = flatten(dict(compose_config([], config_name=sweep_name or "config")))
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
