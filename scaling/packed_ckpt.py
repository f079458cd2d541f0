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
between two links leaves each member with a whole one, older or newer. On relaunch the newest
checkpoint among the members to train that holds all of them is restored, their rows only: members
whose records were written meanwhile are not trained again.
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
MEMBER_KEYS = ("curve", "losses", "window", "failure", "train_time", "pack_tokens", "ema")


def job_id(run_ids: list[str]) -> str:
    """12 hex characters of sha256 over the sorted run ids of a packed job's members."""
    return hashlib.sha256(",".join(sorted(run_ids)).encode()).hexdigest()[:12]


def save(run, paths: list[RunPaths]) -> None:
    """Checkpoint ``run`` (a `scaling.packed_train.PackedRun`; ``paths``: its members' run paths)."""
    rows = [k for k, m in enumerate(run.members) if m.active]
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


def _link(src: Path, dst: Path) -> None:
    """``dst`` becomes ``src``'s file, atomically (a temporary name that `remove_partial_writes` knows)."""
    tmp = dst.with_name(f".{dst.name}.{secrets.token_hex(4)}.tmp")
    try:
        os.link(src, tmp)
    except OSError:  # no hard links here (some network file systems)
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def restore(run, paths: list[RunPaths], log) -> bool:
    """Load the newest usable checkpoint of ``run``'s members into it (their rows); True when one was."""
    ckpt = newest(paths, [m.plan.run_id for m in run.members], run.model.params[0].device, log)
    if ckpt is None:
        return False
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
    return True


def newest(paths: list[RunPaths], run_ids: list[str], device, log) -> dict[str, Any] | None:
    """The checkpoint of the highest step among the members' ``ckpt.pt`` files that holds every one
    of ``run_ids``; None to train from step 0. A file that cannot be read is set aside as
    ``ckpt.pt.corrupt-<time>``; one of a single run, or of a pack without all of them, is left alone."""
    best, seen = None, set()
    for p, run_id in zip(paths, run_ids):
        path = p.checkpoint
        if not path.exists() or (key := (path.stat().st_dev, path.stat().st_ino)) in seen:
            continue
        seen.add(key)
        try:
            ckpt = torch.load(path, map_location=device, weights_only=False)
        except Exception as err:  # torch.load raises many types for a damaged file
            kept = set_aside(path, "corrupt")
            log(f"[{run_id}] checkpoint {path} cannot be read ({type(err).__name__}); kept as {kept.name}")
            continue
        if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
            log(f"[{run_id}] {path} is not a packed job's checkpoint: the packed job trains this run from step 0")
        elif not set(run_ids) <= set(ckpt["run_ids"]):
            log(f"[{run_id}] {path} is the checkpoint of another pack ({', '.join(ckpt['run_ids'])}); not resumed")
        elif best is None or ckpt["step"] > best["step"]:
            best = ckpt
    return best
