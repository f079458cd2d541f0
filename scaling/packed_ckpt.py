"""A packed job's checkpoint: one file holding every unfinished member's state, so that a killed or
preempted packed job resumes as a single run does (`scaling.train_state`).

The file holds the stacked weights and the optimizer's moments and step (`PackedAdamW`), the packed
step, and per member its run id and what `scaling.packed_train.Member` keeps: curve so far, every
step's training loss (the divergence rule's start), the loss window since the last curve point, the
smoothed loss, its failure, its training seconds and the job's tokens in its steps. Batches need no
RNG state: `data.train_batch` draws step ``s`` of a seed the same way every time.

It is written once, atomically (`atomic_write_bytes`), into the first unfinished member's
``runs/<id>/ckpt.pt``, and hard-linked (copied where the file system has no hard links) as each
other unfinished member's ``ckpt.pt``, each link replaced atomically. So every member's run
directory holds a whole checkpoint of the job (`scaling status` shows the member partial), and a kill
between two links leaves each member with a whole one, older or newer. On relaunch each checkpoint
restores the members to train that it holds, their rows only (`resume_groups`: the one that holds
the most of them first, then the newest): members whose records were written meanwhile are not
trained again, and members it lacks train from step 0 in a pack of their own. A run relaunched
unpacked resumes from its row (`member_checkpoint`, taken by `scaling.train_state`); relaunched
packed again after that, from its own single-run checkpoint, alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import torch

from scaling.store import RunPaths, atomic_write_bytes, set_aside

FORMAT = "packed-1"
KEYS = ("format", "job", "job_members", "run_ids", "step", "train_time", "t", "params", "m", "v", "members")
MEMBER_KEYS = ("curve", "losses", "window", "failure", "train_time", "pack_tokens", "ema")


def is_packed(ckpt: Any) -> bool:
    """Whether a loaded ``ckpt.pt`` is a packed job's checkpoint (else a single run's, or not one)."""
    return isinstance(ckpt, dict) and ckpt.get("format") == FORMAT


def job_id(run_ids: list[str]) -> str:
    """12 hex characters of sha256 over the sorted run ids of a packed job's members."""
    return hashlib.sha256(",".join(sorted(run_ids)).encode()).hexdigest()[:12]


def save(run, paths: list[RunPaths]) -> None:
    """Checkpoint ``run`` (a `scaling.packed_train.PackedRun`; ``paths``: its members' run paths)."""
    rows = [k for k, m in enumerate(run.members) if m.active]
    if not rows:  # every member has ended: nothing to resume
        return
    opt = run.optimizer
    state = {
        "format": FORMAT,
        "job": run.job,
        "job_members": run.job_members,
        "run_ids": [run.members[k].plan.run_id for k in rows],
        "step": run.step,
        "train_time": run.train_time,
        "t": opt.t,
        "params": [p.detach()[rows].cpu() for p in run.model.params],
        "m": [m[rows].cpu() for m in opt.m],
        "v": [v[rows].cpu() for v in opt.v],
        "members": [{key: getattr(run.members[k], key) for key in MEMBER_KEYS} for k in rows],
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    first, *others = [paths[k].checkpoint for k in rows]
    atomic_write_bytes(first, buf.getvalue())
    for path in others:
        _link(first, path)


def member_checkpoint(ckpt: dict[str, Any], run_id: str, model, optimizer) -> dict[str, Any]:
    """Member ``run_id``'s row of packed checkpoint ``ckpt`` as the checkpoint its separate run would
    have written at that step (`scaling.train_state.TrainState.save`), for ``model`` (the run's GPT, whose
    parameters the packed model stacks in ``named_parameters`` order) and ``optimizer`` (its
    torch.optim.AdamW, `scaling.train.make_optimizer`: `PackedAdamW`'s moments and step are AdamW's)."""
    row = ckpt["run_ids"].index(run_id)
    index = {id(p): i for i, (_, p) in enumerate(model.named_parameters())}

    def saved(tensors: list[torch.Tensor], p) -> torch.Tensor:
        return tensors[index[id(p)]][row].clone()

    order = [p for group in optimizer.param_groups for p in group["params"]]  # as state_dict numbers them
    moments = {  # a step tensor each: AdamW increments them in place
        i: {"step": torch.tensor(float(ckpt["t"])), "exp_avg": saved(ckpt["m"], p), "exp_avg_sq": saved(ckpt["v"], p)}
        for i, p in enumerate(order)
    }
    member = ckpt["members"][row]
    return {
        "run_id": run_id,
        "step": ckpt["step"],
        "model": {key: saved(ckpt["params"], p) for key, p in model.state_dict(keep_vars=True).items()},
        "optimizer": {**optimizer.state_dict(), "state": moments},
        "curve": member["curve"],
        "train_time": member["train_time"],
        "loss_start": member["losses"][0] if member["losses"] else None,
        "window_sum": sum(member["window"]),
        "window_n": len(member["window"]),
        "ema": member["ema"],
    }


def _link(src: Path, dst: Path) -> None:
    """``dst`` becomes ``src``'s file, atomically (a temporary name that `remove_partial_writes` knows)."""
    tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.tmp")
    try:
        os.link(src, tmp)
    except OSError:  # no hard links here (some network file systems)
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def resume_groups(paths: list[RunPaths], run_ids: list[str], log) -> tuple[list[tuple[list[int], Any]], list[int]]:
    """How the members ``run_ids`` (their run ``paths``) resume: (packs of them, as [(their indices,
    the checkpoint they resume from, or None to train from step 0)], the indices of those that resume
    alone and unpacked from their own single-run checkpoint: relaunched unpacked, then killed). The
    packed checkpoint that holds the most of the others (then the one of the highest step) takes those
    it holds, and so on; the members none holds (a grown sweep's new runs, a run whose record was
    deleted) make the last pack, from step 0. So no member's progress is dropped, whatever joined it.
    The checkpoints are held in host memory until their packs are trained (`restore` copies them)."""
    ckpts, alone = _readable(paths, run_ids, log)
    left, groups = [i for i in range(len(run_ids)) if i not in alone], []
    while left:
        held = {id(c): [i for i in left if run_ids[i] in c["run_ids"]] for c in ckpts}
        best = max(ckpts, key=lambda c: (len(held[id(c)]), c["step"]), default=None)
        if best is None or not held[id(best)]:
            return [*groups, (left, None)], alone
        groups.append((held[id(best)], best))
        left = [i for i in left if i not in held[id(best)]]
    return groups, alone


def restore(run, ckpt: dict[str, Any]) -> None:
    """Load ``ckpt`` (from `resume_groups`) into ``run`` (a `scaling.packed_train.PackedRun`): its members' rows."""
    rows = [ckpt["run_ids"].index(m.plan.run_id) for m in run.members]
    opt = run.optimizer
    with torch.no_grad():
        for p, saved in zip(run.model.params, ckpt["params"]):
            p.copy_(saved[rows])
        for m, saved in zip(opt.m, ckpt["m"]):
            m.copy_(saved[rows])
        for v, saved in zip(opt.v, ckpt["v"]):
            v.copy_(saved[rows])
    opt.t, run.step, run.train_time = ckpt["t"], ckpt["step"], ckpt["train_time"]
    run.job, run.job_members = ckpt["job"], ckpt["job_members"]
    run.members = [dataclasses.replace(m, **ckpt["members"][k]) for m, k in zip(run.members, rows)]


def _readable(paths: list[RunPaths], run_ids: list[str], log) -> tuple[list[dict[str, Any]], list[int]]:
    """The packed checkpoints among the members' ``ckpt.pt`` files (each file once: members share
    it by hard links), and the members whose file is their own single run's checkpoint. A file that
    cannot be read is set aside as ``ckpt.pt.corrupt-<time>``; any other is left alone."""
    from scaling.train_state import CHECKPOINT_KEYS  # which imports this module

    found, alone, seen = [], [], set()
    for i, (p, run_id) in enumerate(zip(paths, run_ids)):
        path = p.checkpoint
        if not path.exists() or (key := (path.stat().st_dev, path.stat().st_ino)) in seen:
            continue
        seen.add(key)
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as err:  # torch.load raises many types for a damaged file
            kept = set_aside(path, "corrupt")
            log(f"[{run_id}] checkpoint {path} cannot be read ({type(err).__name__}); kept as {kept.name}")
            continue
        if is_packed(ckpt) and run_id in ckpt["run_ids"]:
            found.append(ckpt)
        elif is_packed(ckpt):
            log(f"[{run_id}] {path} is the checkpoint of another pack ({', '.join(ckpt['run_ids'])}); not resumed")
        elif isinstance(ckpt, dict) and ckpt.get("run_id") == run_id and set(CHECKPOINT_KEYS) <= set(ckpt):
            log(f"[{run_id}] {path} is this run's own checkpoint (step {ckpt['step']}): it resumes unpacked, alone")
            alone.append(i)
        else:
            log(f"[{run_id}] {path} is not a packed job's checkpoint: the packed job trains this run from step 0")
    return found, alone
