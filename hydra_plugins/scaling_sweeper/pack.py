"""``hydra.sweeper.pack: true``: the runs of an LR sweep that differ only in their learning rate
(one shape, budget and everything else) are launched as one packed job (scaling/packed_store.py),
which trains them in one batched step and writes each run's own record: the same run ids, records
and store as unpacked, losses within tests/test_packed.py's tolerance.

``pack: null`` (the default) packs where it was measured to pay (README, Benchmarks 6 and 9): when
the runs train on GPUs with ``train.compile=true``, the LR groups that `AUTO` allows (at least 4
runs, as measured, of widths up to d128, the widest measured: a wider model's K copies may not fit
where one does). ``pack: false`` never packs.

The job is the first run's overrides plus ``pack='<JSON>'``: the other runs' LR overrides and plans.
"""

import dataclasses
import json
from typing import Any

from hydra_plugins.scaling_sweeper.hyper import LR_KEYS


@dataclasses.dataclass(frozen=True)
class Rule:
    """Which LR groups a sweep packs: those of at least ``min_members`` runs and, with ``max_width``,
    of models no wider."""

    min_members: int = 1
    max_width: int | None = None

    def packs(self, plans: list[Any]) -> bool:
        wide = self.max_width is not None and any(p.shape.d_model > self.max_width for p in plans)
        return len(plans) >= self.min_members and not wide

    def describe(self) -> str:
        return f" (pack: null packs {self.min_members} or more LRs up to d{self.max_width} on GPUs with train.compile)"


EVERY = Rule()  # pack: true
AUTO = Rule(min_members=4, max_width=128)  # pack: null, where packing was measured to pay


def auto(config: Any, lr_axis: bool) -> bool:
    """Whether ``pack: null`` packs this sweep: an LR axis, runs on GPUs (`scaling.devices.sweep_gpus`,
    which ``SCALING_FAKE_GPUS`` fakes), ``train.compile`` on, and runs that can be packed at all."""
    from scaling import devices
    from scaling.errors import ConfigError

    if not (lr_axis and config.train.compile and devices.sweep_gpus(str(config.train.device))):
        return False
    try:
        check(config, lr_axis)
    except ConfigError:
        return False
    return True


def check(config: Any, lr_axis: bool) -> None:
    """ConfigError naming the key when this sweep cannot be packed."""
    from scaling.errors import ConfigError
    from scaling.packed_train import check_config, packed_device

    if not lr_axis:
        raise ConfigError(
            "hydra.sweeper.pack: packs the learning rates of an LR sweep; set hydra.sweeper.lr_multipliers or lr_grid"
        )
    check_config(config)
    packed_device(config.train)


def _lr_override(overrides: list[str]) -> tuple[str, str] | None:
    for o in overrides:
        key, _, value = o.partition("=")
        if key in LR_KEYS.values():
            return key, value
    return None


def _lr_setting(job: dict) -> dict[str, float]:
    key, value = _lr_override(job["overrides"])
    return {key: float(value)}


def pack_jobs(to_run: list[dict], batch: list[list[str]], rule: Rule = EVERY) -> tuple[list[list[str]], list[dict]]:
    """(the launched jobs' overrides, the first run of each): runs whose overrides are equal but for
    the LR share a job, in the order of their first run; a group that ``rule`` does not pack is
    launched as separate jobs."""
    groups: dict[tuple, list[int]] = {}
    for i, job in enumerate(to_run):
        lr = _lr_override(job["overrides"])
        key = tuple(o for o in job["overrides"] if lr is None or o != f"{lr[0]}={lr[1]}")
        groups.setdefault(key if lr else (i,), []).append(i)
    groups = {k: g for key, members in groups.items() for k, g in _split(key, members, rule, to_run)}
    launched, leaders = [], []
    for members in groups.values():
        first, rest = members[0], members[1:]
        others = [{"set": _lr_setting(to_run[i]), "plan": dataclasses.asdict(to_run[i]["plan"])} for i in rest]
        launched.append(batch[first] + ([f"pack='{json.dumps(others, separators=(',', ':'))}'"] if others else []))
        leaders.append(to_run[first])
    return launched, leaders


def _split(key: tuple, members: list[int], rule: Rule, to_run: list[dict]) -> list[tuple[tuple, list[int]]]:
    """The group as one job, or each of its runs as its own when ``rule`` does not pack it."""
    if rule.packs([to_run[i]["plan"] for i in members]):
        return [(key, members)]
    return [((*key, i), [i]) for i in members]
