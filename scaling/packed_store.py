"""Packed runs into the results store: K runs trained in one batched step leave K normal records.

`train_packed_runs(cfgs)` does for K runs what `scaling.train.train` does for one: plans each (every
config error before anything is written), claims each run's lock, skips the runs that are already
finished (or that another process is training), sets aside a corrupt or errored record, trains the
rest packed (`scaling.packed_train`), and writes each member's record with `scaling.record.build_record`:
the same run id, keys and curve as its separate run would write (losses within the tolerance of
tests/test_packed.py). A member's ``tokens_per_s`` counts the packed steps it trained in, so it is
the packed job's rate divided by K.

Not (yet) for packed jobs: checkpoints, resume and preemption. A packed job that is killed leaves no
records, and its runs train again, from the start, on relaunch.
"""

from __future__ import annotations

import copy
import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from scaling.packed_train import PackedRun, check_packable, packed_device
from scaling.plan import job_config, plan_run, planned
from scaling.record import Outcome, build_record, now_iso
from scaling.store import (
    FINISHED,
    Failure,
    RunPaths,
    RunState,
    atomic_write_json,
    atomic_write_text,
    remove_partial_writes,
    run_lock,
    run_state,
    set_aside,
)
from scaling.train import preflight, set_threads
from scaling.train_state import TrainState


def train_packed_job(cfg: DictConfig, log=print) -> list[dict[str, Any]]:
    """A sweep's packed job: ``cfg`` is the first run's config, ``cfg.pack`` the others' as JSON,
    ``[{"set": {key: value}, "plan": RunPlan fields}, ...]`` (hydra_plugins/scaling_sweeper/pack.py)."""
    first = copy.deepcopy(cfg)
    first.pack = ""
    cfgs, plans = [first], [planned(first)]
    for member in json.loads(cfg.pack):
        other = copy.deepcopy(first)
        for key, value in member["set"].items():
            OmegaConf.update(other, key, value)
        other.plan = json.dumps(member["plan"])
        cfgs.append(other)
        plans.append(planned(other))
    return train_packed_runs(cfgs, plans, log)


def train_packed_runs(cfgs: list[DictConfig], plans: list | None = None, log=print) -> list[dict[str, Any]]:
    """Train the runs of ``cfgs`` (their ``plans``, else planned here) that are not finished,
    packed; return the records written."""
    plans = plans if plans is not None else [plan_run(cfg) for cfg in cfgs]
    check_packable(cfgs, plans)  # bad input: before anything is written
    packed_device(cfgs[0].train)
    for cfg in cfgs:
        preflight(cfg)
    with ExitStack() as locks:
        todo = []
        for cfg, plan in zip(cfgs, plans):
            paths = RunPaths(Path(cfg.store), plan.run_id)
            if not locks.enter_context(run_lock(paths)):
                log(f"[{plan.run_id}] {plan.run_name}: another process is training this run; skipping")
                continue
            remove_partial_writes(paths.dir)
            state = run_state(paths)
            if state in FINISHED:
                log(f"[{plan.run_id}] {plan.run_name}: already finished; nothing to do")
                continue
            if state in (RunState.CORRUPT, RunState.ERRORED):
                set_aside(paths.record, state)
            atomic_write_text(paths.config, OmegaConf.to_yaml(job_config(cfg)))
            todo.append((cfg, plan, paths))
        if not todo:
            return []
        return _train_and_record(todo, log)


def _train_and_record(todo: list, log) -> list[dict[str, Any]]:
    t_start, started_at = time.perf_counter(), now_iso()
    threads = set_threads(todo[0][0].train)
    run = PackedRun([cfg for cfg, _, _ in todo], [plan for _, plan, _ in todo])
    log(f"packed: {len(todo)} runs of {run.shape.name} in one step, {run.device.type}, {threads} thread(s)")
    members = run.run(log)
    machine = {
        "device": str(run.device),
        "threads": threads,
        "started_at": started_at,
        "wall_time_s": time.perf_counter() - t_start,
    }
    records = []
    for member, (cfg, plan, paths) in zip(members, todo):
        state = TrainState(None, None, step=len(member.losses), curve=member.curve, train_time=member.train_time)
        outcome = Outcome(Failure.DIVERGED, member.failure) if member.failure else Outcome()
        record = build_record(cfg, plan, run.corpus, state, outcome, machine)
        atomic_write_json(paths.record, record)
        records.append(record)
    return records
