"""A packed job killed or preempted resumes as a single run does (scaling/packed_ckpt.py): SIGTERM
mid-run checkpoints every unfinished member in one file and exits 143, SIGKILL leaves the last
periodic checkpoint; the relaunch skips the members already recorded, resumes the others, and ends
with the records of a packed job that was never interrupted, bit for bit (one torch thread, and the
same batched ops in the same order: a member that ends leaves the pack in the uninterrupted job as it
does from the relaunched one).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, SCALING, run_cli
from faults_support import OUTCOME_KEYS, RESUMED, Launch, checkpoint_steps, records, wait_until
from test_packed import BASE

from scaling.packed_store import train_packed_runs
from scaling.train_app import compose_config

# d32, one job: a short run (29 steps) that ends and is recorded first, and a long one (97 steps)
SHORT_LONG = [
    ["model=d32", *BASE, "train.checkpoint_interval_s=0.1", "seed=0", "budget=9e9"],
    ["model=d32", *BASE, "train.checkpoint_interval_s=0.1", "seed=1", "budget=3e10", "optim.lr_multiplier=2"],
]
SCRIPT = """
import json, sys
from scaling.packed_store import train_packed_runs
from scaling.train_app import compose_config
train_packed_runs([compose_config(o) for o in json.loads(sys.argv[1])], log=lambda *a: print(*a, flush=True))
"""


def packed_job(overrides: list[list[str]], log) -> Launch:
    """``train_packed_runs`` of ``overrides`` in a process group of its own, output to ``log``."""
    return Launch(None, log, argv=[sys.executable, "-c", SCRIPT, json.dumps(overrides)])


def _same_outcome(ours: dict, theirs: dict) -> None:
    """The fault tests' standard (tests/faults_support.py), with NaN equal to NaN."""
    assert json.dumps([ours[k] for k in OUTCOME_KEYS]) == json.dumps([theirs[k] for k in OUTCOME_KEYS])


@pytest.mark.slow
def test_sigterm_after_one_member_ended_resumes_the_other_and_never_retrains_the_recorded_one(tmp_path):
    """SIGTERM once the short run is recorded: the job checkpoints the long one and exits 143; the
    relaunch leaves the short run's record as it is, resumes the long one at the checkpoint's step,
    and both records match an uninterrupted packed job's."""
    store = tmp_path / "store"
    overrides = [[f"store={store}", *o] for o in SHORT_LONG]
    job = packed_job(overrides, tmp_path / "preempted.log")
    assert wait_until(lambda: len(records(store)) == 1, job), job.output[-3000:]
    job.proc.send_signal(signal.SIGTERM)
    assert job.wait(120) == 143, job.output[-3000:]
    ((long_id, step),) = checkpoint_steps(store).items()
    ((short_id, recorded),) = records(store).items()
    assert f"[{long_id}] preempted: SIGTERM at step {step}/97; checkpoint saved" in job.output
    # the signal may land in the step that ends the short run: the long one then checkpoints at 29
    assert recorded["steps"] == 29 <= step < 97 and not (store / "runs" / short_id / "ckpt.pt").exists()
    short_bytes = (store / "runs" / short_id / "record.json").read_bytes()

    again = packed_job(overrides, tmp_path / "resumed.log")
    assert again.wait(300) == 0, again.output[-3000:]
    lines = again.output.splitlines()
    assert any(line.startswith(f"[{short_id}]") and "already finished" in line for line in lines), again.output
    assert dict(RESUMED.findall(again.output)) == {long_id: str(step)}
    assert (store / "runs" / short_id / "record.json").read_bytes() == short_bytes, "the recorded run was rewritten"
    assert not checkpoint_steps(store)

    reference = {
        r["run_id"]: r
        for r in train_packed_runs(
            [compose_config([f"store={tmp_path / 'ref'}", *o]) for o in SHORT_LONG], log=lambda *a: None
        )
    }
    ours = records(store)
    _same_outcome(ours[short_id], reference[short_id])  # recorded before the kill
    _same_outcome(ours[long_id], reference[long_id])  # resumed alone, as it went on alone
    for run_id in ours:
        assert ours[run_id]["packed_with"] == reference[run_id]["packed_with"] == [short_id, long_id]
        assert ours[run_id]["pack_job"] == reference[run_id]["pack_job"]


SWEEP = [
    "sweep",
    "tiny",
    "hydra.sweeper.budgets=[4e10]",
    "hydra.sweeper.models=[d32]",
    "hydra.sweeper.lr_multipliers=[0.5,2]",
    "hydra.sweeper.pack=true",
    "train.threads=1",
    "train.checkpoint_interval_s=0.1",
]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_packed_sweep_resumes_to_the_uninterrupted_records_bit_for_bit(tmp_path, sig, packed_sweep_store):
    """A packed LR sweep (one job of 2 runs) signalled once its checkpoint exists: SIGTERM exits 143
    with a fresh checkpoint, SIGKILL leaves the last periodic one; each member's run directory holds
    the job's checkpoint at one step, and the relaunch resumes both there, to the records of an
    uninterrupted packed sweep, bit for bit."""
    store = tmp_path / "store"
    out = open(tmp_path / "killed.log", "w")
    proc = subprocess.Popen(
        [SCALING, *SWEEP, f"store={store}"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )

    class Launch:  # what wait_until needs
        output = property(lambda self: (tmp_path / "killed.log").read_text())
        running = staticmethod(lambda: proc.poll() is None)

    assert wait_until(lambda: any(store.glob("runs/*/ckpt.pt")), Launch()), Launch().output[-3000:]
    os.killpg(proc.pid, sig)
    rc = proc.wait(120)
    out.close()
    assert rc == (143 if sig == signal.SIGTERM else -signal.SIGKILL), Launch().output[-3000:]
    steps = checkpoint_steps(store)  # SIGKILL may land between the file and its link: one, or two steps
    assert steps and not records(store), Launch().output[-3000:]
    if sig == signal.SIGTERM:
        assert len(steps) == 2 and len(set(steps.values())) == 1, steps
    resumed = run_cli(*SWEEP, f"store={store}", check=True).stdout
    ours, theirs = records(store), records(packed_sweep_store)
    assert ours.keys() == theirs.keys() and len(ours) == 2
    assert {k: int(v) for k, v in RESUMED.findall(resumed)} == dict.fromkeys(ours, max(steps.values())), resumed
    for run_id in ours:
        _same_outcome(ours[run_id], theirs[run_id])
        assert ours[run_id]["packed_with"] == theirs[run_id]["packed_with"] and len(ours[run_id]["packed_with"]) == 2
    assert not checkpoint_steps(store)


def test_unusable_checkpoints_are_set_aside_or_ignored_and_the_job_trains_from_step_0(tmp_path):
    """A member's ckpt.pt that cannot be read is set aside (``ckpt.pt.corrupt-<time>``); one that is
    not a packed job's (a single run's) is ignored; the job trains from step 0, to the clean job's
    records."""
    import torch

    overrides = [["model=d16", *BASE, "budget=3e9", s] for s in ("seed=0", "seed=1")]
    cfgs = [compose_config([f"store={tmp_path / 'store'}", *o]) for o in overrides]
    clean = train_packed_runs(
        [compose_config([f"store={tmp_path / 'ref'}", *o]) for o in overrides], log=lambda *a: None
    )
    garbled, single = (tmp_path / "store" / "runs" / r["run_id"] / "ckpt.pt" for r in clean)
    garbled.parent.mkdir(parents=True)
    garbled.write_bytes(b"\x00not a checkpoint")
    single.parent.mkdir(parents=True)
    torch.save({"run_id": clean[1]["run_id"], "step": 5}, single)
    lines: list[str] = []
    ours = train_packed_runs(cfgs, log=lines.append)
    assert any("cannot be read" in line and "kept as ckpt.pt.corrupt-" in line for line in lines), lines
    assert any("is not a packed job's checkpoint" in line for line in lines), lines
    assert not any("resuming" in line for line in lines), lines
    assert len(list(garbled.parent.glob("ckpt.pt.corrupt-*"))) == 1 and not checkpoint_steps(tmp_path / "store")
    for a, b in zip(ours, clean):
        _same_outcome(a, b)
