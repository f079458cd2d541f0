"""A killed packed job relaunched otherwise than it was launched (scaling/packed_ckpt.py): unpacked
(the sweep rerun without ``hydra.sweeper.pack``), each run resumes from its row of the job's
checkpoint; packed again after that, each run from its newest checkpoint; packed with a member the
checkpoint lacks (the sweep grew, a record was deleted), the checkpoint's members resume as their
pack and only the others train from step 0. Real kills and
relaunches; no step already trained is trained again, and every record matches an uninterrupted
job's within tests/test_packed.py's tolerance (bit for bit where the resumed pack is the same).
The packed job is killed once for the module; each test relaunches its own copy of that store.
"""

from __future__ import annotations

import math
import signal
import subprocess

import pytest
from conftest import SCALING, _test_env, run_cli
from faults_support import RESUMED, Launch, checkpoint_steps, fault_env, records, wait_until
from test_packed import LOSS_TOL
from test_packed_faults import SHORT_LONG, SWEEP, _same_outcome, packed_job

from scaling.packed_store import train_packed_runs
from scaling.train_app import compose_config

UNPACKED = [o for o in SWEEP if o != "hydra.sweeper.pack=true"]
GROWN = [o.replace("[0.5,2]", "[0.5,2,4]") for o in SWEEP]


@pytest.fixture(scope="module")
def _killed_once(tmp_path_factory) -> tuple:
    """The packed test sweep (one job of 2 runs) SIGTERMed once its checkpoint exists: (store, step).
    Killed once for the module; each test relaunches a copy of it (`killed`)."""
    tmp = tmp_path_factory.mktemp("killed-packed")
    store = tmp / "store"
    env = fault_env(**_test_env(tmp_path_factory))  # set up before _isolated_env, as conftest's packed_sweep_store
    job = Launch(None, tmp / "killed.log", argv=[SCALING, *SWEEP, f"store={store}"], env=env)
    assert wait_until(lambda: any(store.glob("runs/*/ckpt.pt")), job), job.output[-3000:]
    job.signal_group(signal.SIGTERM)
    assert job.wait(120) == 143, job.output[-3000:]
    steps = checkpoint_steps(store)
    assert len(steps) == 2 and len(set(steps.values())) == 1 and not records(store), steps
    return store, max(steps.values())


@pytest.fixture
def killed(_killed_once, tmp_path) -> tuple:
    """A copy of the killed sweep's store for one test to relaunch: (store, step). `cp -a` keeps the
    members' checkpoint one file, hard-linked into each run directory, as the job wrote it."""
    store, step = _killed_once
    subprocess.run(["cp", "-a", str(store), str(tmp_path / "store")], check=True)
    copied = tmp_path / "store"
    assert checkpoint_steps(copied) == checkpoint_steps(store)
    links = lambda root: [p.stat().st_nlink for p in sorted(root.glob("runs/*/ckpt.pt"))]  # noqa: E731
    assert links(copied) == links(store) == [2, 2], "the job's one checkpoint file, in both run directories"
    return copied, step


def _close(ours: dict, theirs: dict) -> None:
    """The same run, losses within LOSS_TOL nats (tests/test_packed.py) at every curve point."""
    assert (ours["status"], ours["steps"], ours["lr"]) == (theirs["status"], theirs["steps"], theirs["lr"])
    assert abs(ours["val_loss"] - theirs["val_loss"]) < LOSS_TOL
    assert [p["step"] for p in ours["curve"]] == [p["step"] for p in theirs["curve"]]
    for a, b in zip(ours["curve"], theirs["curve"]):
        assert abs(a["train_loss"] - b["train_loss"]) < LOSS_TOL
        assert math.isnan(a["val_loss"]) == math.isnan(b["val_loss"])
        assert math.isnan(a["val_loss"]) or abs(a["val_loss"] - b["val_loss"]) < LOSS_TOL


@pytest.mark.slow
def test_a_killed_packed_sweep_relaunched_unpacked_resumes_each_run_from_its_row(tmp_path, killed, packed_sweep_store):
    """Relaunched without pack=true, each run says its checkpoint is the packed job's, resumes at the
    job's step, trains on alone, and ends within tolerance of the uninterrupted packed sweep's and
    the unpacked sweep's records; nothing is set aside as corrupt."""
    store, step = killed
    out = run_cli(*UNPACKED, f"store={store}", check=True).stdout
    ours = records(store)
    assert len(ours) == 2 and {k: int(v) for k, v in RESUMED.findall(out)} == dict.fromkeys(ours, step), out
    for run_id in ours:
        assert f"[{run_id}] {store}/runs/{run_id}/ckpt.pt is packed job " in out, out
        assert f"'s checkpoint (step {step}); relaunched unpacked, the run resumes from its row" in out
    assert "cannot be read" not in out and not list(store.glob("runs/*/ckpt.pt*")), out
    run_cli(*UNPACKED, f"store={tmp_path / 'unpacked'}", check=True)
    for reference in (records(packed_sweep_store), records(tmp_path / "unpacked")):
        assert reference.keys() == ours.keys()
        for run_id, record in ours.items():
            _close(record, reference[run_id])
            assert "pack_job" not in record, "trained unpacked to its end: a separate run's record"


@pytest.mark.slow
def test_packed_unpacked_packed_relaunches_resume_each_run_from_its_newest_checkpoint(
    tmp_path, killed, packed_sweep_store
):
    """Killed packed, relaunched unpacked and killed once the first run has its own checkpoint, then
    relaunched packed: that run resumes alone from its own checkpoint, the other from its row of the
    packed one (a pack of one); both end within tolerance of the uninterrupted packed sweep."""
    store, packed_step = killed
    ckpts = sorted(store.glob("runs/*/ckpt.pt"))
    job = Launch(None, tmp_path / "unpacked.log", argv=[SCALING, *UNPACKED, f"store={store}"])
    assert wait_until(lambda: not ckpts[0].samefile(ckpts[1]), job), job.output[-3000:]  # a single run's file
    job.signal_group(signal.SIGTERM)
    assert job.wait(120) == 143, job.output[-3000:]
    steps = checkpoint_steps(store)
    (own,) = (r for r, s in steps.items() if s > packed_step)  # the run trained unpacked, killed there
    (other,) = steps.keys() - {own}
    assert steps[other] == packed_step and not records(store), steps
    out = run_cli(*SWEEP, f"store={store}", check=True).stdout
    assert f"is this run's own checkpoint (step {steps[own]}): it resumes unpacked, alone" in out, out
    assert {k: int(v) for k, v in RESUMED.findall(out)} == steps, out
    assert not checkpoint_steps(store)
    reference = records(packed_sweep_store)
    for run_id, record in records(store).items():
        _close(record, reference[run_id])
    assert "pack_job" not in records(store)[own]
    assert records(store)[other]["packed_with"] == reference[other]["packed_with"], "its job, as first launched"


@pytest.mark.slow
def test_a_grown_packed_sweep_resumes_the_checkpointed_runs_and_trains_only_the_new_one(
    tmp_path, killed, packed_sweep_store
):
    """The LR grid grows from 2 to 3 multipliers after the kill: the 2 checkpointed runs resume at
    their step as their pack (bit for bit the uninterrupted 2-run sweep's records), the new run
    alone trains from step 0, and all 3 are within tolerance of an uninterrupted 3-run packed sweep."""
    store, step = killed
    old = set(checkpoint_steps(store))
    out = run_cli(*GROWN, f"store={store}", check=True).stdout
    ours = records(store)
    (new,) = ours.keys() - old
    assert {k: int(v) for k, v in RESUMED.findall(out)} == dict.fromkeys(old, step), out
    assert f"packed: 2 of these 3 runs resume from 1 packed checkpoint(s), one pack each; {new}, in none, train" in out
    assert not checkpoint_steps(store)
    two = records(packed_sweep_store)
    for run_id in old:
        _same_outcome(ours[run_id], two[run_id])
        assert ours[run_id]["packed_with"] == two[run_id]["packed_with"]
    assert ours[new]["packed_with"] == [new]
    run_cli(*GROWN, f"store={tmp_path / 'three'}", check=True)
    three = records(tmp_path / "three")
    assert three.keys() == ours.keys()
    for run_id, record in ours.items():
        _close(record, three[run_id])


@pytest.mark.slow
def test_a_member_whose_record_was_deleted_retrains_without_restarting_the_others(tmp_path):
    """SIGTERM once the short run is recorded, then its record deleted: the relaunch resumes the long
    run from the job's checkpoint (bit for bit the uninterrupted job's record) and trains only the
    short one again, from step 0, to within tolerance of its uninterrupted record."""
    store = tmp_path / "store"
    overrides = [[f"store={store}", *o] for o in SHORT_LONG]
    job = packed_job(overrides, tmp_path / "preempted.log")
    assert wait_until(lambda: len(records(store)) == 1, job), job.output[-3000:]
    job.signal_group(signal.SIGTERM)
    assert job.wait(120) == 143, job.output[-3000:]
    ((long_id, step),) = checkpoint_steps(store).items()
    ((short_id, _),) = records(store).items()
    (store / "runs" / short_id / "record.json").unlink()

    again = packed_job(overrides, tmp_path / "resumed.log")
    assert again.wait(300) == 0, again.output[-3000:]
    assert dict(RESUMED.findall(again.output)) == {long_id: str(step)}, again.output
    assert f"{short_id}, in none, train from step 0 as a pack of their own" in again.output
    reference = {
        r["run_id"]: r
        for r in train_packed_runs(
            [compose_config([f"store={tmp_path / 'ref'}", *o]) for o in SHORT_LONG], log=lambda *a: None
        )
    }
    ours = records(store)
    _same_outcome(ours[long_id], reference[long_id])
    _close(ours[short_id], reference[short_id])
