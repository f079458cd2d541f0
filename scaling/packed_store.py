"""Packed runs into the results store: K runs trained in one batched step leave K normal records.

`train_packed_runs(cfgs)` does for K runs what `scaling.train.train` does for one: plans each (every
config error before anything is written), claims each run's lock, skips the runs that are already
finished (or that another process is training), sets aside a corrupt or errored record, trains the
rest packed (`scaling.packed_train`), and writes each member's record as the member ends, with
`scaling.record.build_record`: the same run id, keys and curve as its separate run would write
(losses within the tolerance of tests/test_packed.py), plus the packing keys (`packing_keys`:
``packed_with``, ``pack_job``, ``pack_tokens_per_s``). A member's ``tokens_per_s`` is its own tokens
over the seconds of the packed steps it trained in (so about the job's rate / K); the job's rate over
those steps is ``pack_tokens_per_s``.

Preemption and kills as for a single run: the job checkpoints every ``train.checkpoint_interval_s``
(`scaling.packed_ckpt`: one file with every unfinished member's state), and on SIGTERM/SIGINT (or a
scheduler's time-limit warning) finishes its step, checkpoints and exits 128 + the signal. A relaunch
skips the members already recorded and resumes the others from the newest checkpoint; members that no
checkpoint holds (the sweep grew) train from step 0 as a pack of their own, after the resumed ones; a
member with its own single-run checkpoint (relaunched unpacked, then killed) resumes from it, alone.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from scaling import packed_ckpt
from scaling.packed_train import Member, PackedRun, check_packable, packed_device
from scaling.plan import job_config, plan_run, planned
from scaling.preemption import Preempted, PreemptionGuard
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
from scaling.train import preflight, set_threads, train_owned
from scaling.train_state import TrainState


def _log(*args) -> None:
    """Progress lines, flushed at once (as `scaling.train`'s): a killed job's lines reach its log."""
    print(*args, flush=True)


def train_packed_job(cfg: DictConfig, log=_log) -> list[dict[str, Any]]:
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


def train_packed_runs(cfgs: list[DictConfig], plans: list | None = None, log=_log) -> list[dict[str, Any]]:
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
    """Train ``todo`` [(cfg, plan, paths)] as packs (`packed_ckpt.resume_groups`: one, unless the
    checkpoints hold only some of them) one after another, after the runs that resume unpacked from
    their own checkpoints (`scaling.train.train_owned`); the records in the order of ``todo``."""
    run_ids = [plan.run_id for _, plan, _ in todo]
    groups, alone = packed_ckpt.resume_groups([paths for _, _, paths in todo], run_ids, log)
    if len(groups) > 1:
        fresh = [run_ids[i] for i in groups[-1][0]] if groups[-1][1] is None else []
        tail = f"; {', '.join(fresh)}, in none, train from step 0 as a pack of their own, after them" if fresh else ""
        log(
            f"packed: {len(run_ids) - len(alone) - len(fresh)} of these {len(run_ids)} runs resume from "
            f"{len(groups) - bool(fresh)} packed checkpoint(s), one pack each{tail}"
        )
    records = [train_owned(*todo[i], log, None) for i in alone]
    records += [r for rows, ckpt in groups for r in _train_pack([todo[i] for i in rows], ckpt, log)]
    return sorted(records, key=lambda r: run_ids.index(r["run_id"]))


def _train_pack(todo: list, ckpt: dict | None, log) -> list[dict[str, Any]]:
    """Train ``todo`` as one pack, from ``ckpt`` (a packed checkpoint that holds them all) or step 0."""
    t_start, started_at = time.perf_counter(), now_iso()
    threads = set_threads(todo[0][0].train)
    run = PackedRun([cfg for cfg, _, _ in todo], [plan for _, plan, _ in todo])
    by_id = {plan.run_id: (cfg, plan, paths) for cfg, plan, paths in todo}
    if ckpt is not None:
        packed_ckpt.restore(run, ckpt)
        for m in run.members:
            log(f"[{m.plan.run_id}] resuming from checkpoint at step {run.step}/{m.plan.steps}")
    log(f"packed: {len(todo)} runs of {run.shape.name} in one step, {run.device.type}, {threads} thread(s)")
    records = []

    def ended(member: Member) -> None:  # each member's record as it ends, its checkpoint removed
        cfg, plan, paths = by_id[member.plan.run_id]
        machine = {
            "device": str(run.device),
            "threads": threads,
            "started_at": started_at,
            "wall_time_s": time.perf_counter() - t_start,
        }
        state = TrainState(None, None, step=len(member.losses), curve=member.curve, train_time=member.train_time)
        outcome = Outcome(Failure.DIVERGED, member.failure) if member.failure else Outcome()
        record = {**build_record(cfg, plan, run.corpus, state, outcome, machine), **packing_keys(run, member)}
        atomic_write_json(paths.record, record)
        paths.checkpoint.unlink(missing_ok=True)
        records.append(record)

    with PreemptionGuard() as guard:
        try:
            run.run(log, guard, ended, lambda: packed_ckpt.save(run, [by_id[m.plan.run_id][2] for m in run.members]))
        except Preempted:
            for m in (m for m in run.members if m.active):
                step = f"{guard.name} at step {run.step}/{m.plan.steps}"
                log(f"[{m.plan.run_id}] preempted: {step}; checkpoint saved, relaunch to resume")
            guard.exit()
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once; the last periodic checkpoint stays
            print(f"packed job {run.job} interrupted (second Ctrl-C): relaunch to resume", file=sys.stderr, flush=True)
            raise SystemExit(130) from None
    if guard.requested and not guard.time_limit:  # during the last step: the records are written
        log(
            f"packed: {guard.name} arrived at the runs' end (their last step or records): the runs are recorded; exiting"
        )
        guard.exit()
    return records


def packing_keys(run: PackedRun, member: Member) -> dict[str, Any]:
    """The record keys that say a run was packed (docs/CONTRACTS.md): the job's members and id, and
    the job's rate over the steps this run trained in (its own rate is ``tokens_per_s``)."""
    return {
        "packed_with": run.job_members,
        "pack_job": run.job,
        "pack_tokens_per_s": member.pack_tokens / max(member.train_time, 1e-9),
    }
