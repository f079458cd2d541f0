"""Kills and preemption: a sweep killed at random points (SIGKILL) or preempted (SIGTERM) and
relaunched ends with exactly the runs and losses of an uninterrupted sweep; finished runs are never
trained again, interrupted ones resume from their checkpoint.

The test sweep (tests/sweeps/faults.yaml, 6 runs) is deterministic: one torch thread per run, so a
resumed run reproduces the uninterrupted run's losses and curve bit for bit. About 110 s of CPU on
2 cores (each killed-and-relaunched sweep 25-35 s, each preempted one ~15-25 s), plus the
reference sweep (~15 s) when this module runs first.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import run_cli
from faults_support import (
    HOOKS,
    PREEMPTED,
    RESUMED,
    RUN_COMPLETED,
    RUN_STARTED,
    SWEEP,
    Launch,
    assert_same_results,
    checkpoint_steps,
    fault_env,
    outcome,
    record_bytes,
    records,
    reference_store,
    run_sweep,
    set_aside_files,
    wait_until,
)


def kill_at_a_random_point(launch: Launch, store, rng: random.Random, first: bool) -> None:
    """SIGKILL the launch's whole process group at a seeded point: the first kill just after some run
    wrote a checkpoint (so a resume is always exercised), later ones after the k-th run of this
    launch started, or at a random time from launch (planning, setup, evaluation, record writing)."""
    mode = "checkpoint" if first else rng.choice(["run", "run", "time"])
    if mode == "checkpoint":
        reached = wait_until(lambda: any(store.glob("runs/*/ckpt.pt")), launch)
        delay = rng.uniform(0.0, 0.4)
    elif mode == "run":
        k = rng.randint(1, 3)
        reached = wait_until(lambda: len(RUN_STARTED.findall(launch.output)) >= k, launch)
        delay = rng.uniform(0.0, 1.5)
    else:
        reached, delay = True, rng.uniform(1.0, 8.0)
    if reached:
        time.sleep(delay)
    launch.signal_group(signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("seed, launcher, kills", [(0, "basic", 3), (1, "joblib", 1)])
def test_sigkill_at_random_points_then_relaunch_equals_an_uninterrupted_sweep(
    tmp_path, tmp_path_factory, seed, launcher, kills
):
    """Seeded kill points (seeds 0 and 1). The basic launcher is killed three times; joblib, which
    trains two runs at once (so a kill interrupts both), once: its workers make each launch dearer."""
    reference = reference_store(tmp_path_factory)
    rng = random.Random(seed)
    store = tmp_path / "store"
    overrides = ["hydra/launcher=joblib"] if launcher == "joblib" else []
    finished: dict[str, bytes] = {}  # records present after a kill: must never change again
    resumes = 0
    for attempt in range(kills + 1):
        checkpoints = checkpoint_steps(store) if store.exists() else {}
        launch = Launch(store, tmp_path / f"launch{attempt}.log", *overrides)
        if attempt < kills:
            kill_at_a_random_point(launch, store, rng, first=attempt == 0)
            launch.wait(60)
            assert launch.group_is_gone(), "a process of the killed sweep survived it"
        else:
            assert launch.wait() == 0, launch.output[-3000:]
        output = launch.output
        started = set(RUN_STARTED.findall(output))
        # no finished run is trained again ...
        assert not started & set(finished), output[-3000:]
        # ... and an interrupted one resumes from the step of its checkpoint
        resumed = dict(RESUMED.findall(output))
        for run_id in started & set(checkpoints):
            assert resumed.get(run_id) == str(checkpoints[run_id]), (run_id, checkpoints, output[-3000:])
            resumes += 1
        now = record_bytes(store)
        assert {k: now[k] for k in finished} == finished, "a finished record was rewritten"
        finished = now
    assert resumes >= 1, "no kill left a checkpoint to resume from"
    assert_same_results(store, reference)
    assert not set_aside_files(store)


@pytest.mark.slow
@pytest.mark.parametrize(
    "launcher, sig",
    [("basic", signal.SIGTERM), ("joblib", signal.SIGTERM), ("joblib", signal.SIGINT)],  # basic's SIGINT goes to
)  # SIGTERM's handler (`scaling.preemption.HELD`); joblib's workers take a terminal's Ctrl-C apart, so it stays
def test_sigterm_checkpoints_exits_and_the_relaunch_resumes_to_the_same_result(
    tmp_path, tmp_path_factory, launcher, sig
):
    """SIGTERM to the sweep's process group, as a cluster preempting the job, or SIGINT, as Ctrl-C
    in its terminal: each run in training saves a checkpoint and its process exits (128 + the
    signal); no process starts another run or outlives the sweep (joblib's workers used to go on
    with the next runs, and a Ctrl-C used to leave the whole joblib sweep running); the relaunch
    resumes each run at its checkpoint. Four runs, so that joblib's two workers have runs left; the
    two largest (2e10 FLOPs: 43 and 130 steps, 0.6-0.8 s each on an idle core) go first. The signal
    goes off at a run's first checkpoint (after 0.25 s), under joblib once both workers have started
    a run: a worker still being spawned dies of the signal (processes.py's docstring). A run that
    ended before the signal is recorded (on a loaded machine the first may end before the second
    starts); no other is. Under joblib each worker stays until the sweep has gone (`park_worker`):
    loky SIGKILLs every worker when one exits, and it used to kill a run saving its checkpoint."""
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    overrides = ["budget=2e10,1e10", *(["hydra/launcher=joblib"] if launcher == "joblib" else [])]
    launch = Launch(store, tmp_path / "preempted.log", *overrides)
    started = 2 if launcher == "joblib" else 1
    ready = lambda: len(RUN_STARTED.findall(launch.output)) >= started and any(store.glob("runs/*/ckpt.pt"))  # noqa: E731
    assert wait_until(ready, launch), launch.output[-3000:]
    mark = len(launch.output)  # what was logged before the signal
    launch.signal_group(sig)
    rc = launch.wait(60)
    # basic: the run's own exit; joblib: the sweep's, after its workers' checkpoints
    assert rc in ((128 + sig,) if launcher == "basic" else (128 + sig, -sig)), launch.output[-3000:]
    assert launch.group_is_gone(), "a process of the preempted sweep is still running"
    output = launch.output
    preempted = {run_id: int(step) for run_id, step in PREEMPTED.findall(output)}
    assert preempted and checkpoint_steps(store) == preempted, output[-3000:]
    # recorded: runs that ended before the signal, or that it reached at their end (the last step, the record)
    at_end = set(re.findall(r"^\[([0-9a-f]{12})\] SIG\w+ arrived at the run's end", output, re.M))
    ended = set(RUN_COMPLETED.findall(output[:mark])) | at_end
    assert "Traceback" not in output and set(records(store)) == ended, "a run was finished or started after the signal"
    assert "leaked" not in output, "loky's resource tracker warned about its cleanup"

    resumed = run_sweep(store, tmp_path / "resumed.log", *overrides)
    assert {run_id: int(step) for run_id, step in RESUMED.findall(resumed)} == preempted
    assert_same_results(store, reference, runs=4)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM to the group", "SIGTERM to the sweep", "Ctrl-C twice"])
def test_a_signalled_joblib_sweep_with_an_idle_worker_checkpoints_the_running_run(tmp_path, tmp_path_factory, how):
    """Two runs on joblib's two workers: when the short one has finished, its worker is idle and the
    long one trains. SIGTERM to the group: the idle worker used to die of it at once, and loky then
    SIGKILLed the other worker before it saved its checkpoint (no "preempted" line, the run back to
    its last periodic checkpoint: 1 launch in 4 on 2026-11-26). Now the idle worker waits, parked,
    until the sweep has gone, and the running run checkpoints at its current step. The same for
    SIGTERM to the sweep's process alone (it forwards it), and for Ctrl-C pressed twice, 0.3 s apart
    (a parked worker ignores the second; a training one used to raise out of its park, end its job
    and take the next queued run, found by review on 2026-11-26)."""
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    overrides = ["budget=4e10,1e10", "hydra.sweeper.models=[d48]", "hydra/launcher=joblib"]
    launch = Launch(store, tmp_path / "idle.log", *overrides)

    def run_of(name: str) -> str | None:  # the run id the sweep printed for ``name``, None before it started
        found = re.search(rf"^\[([0-9a-f]{{12}})\] {name}:", launch.output, re.M)
        return found.group(1) if found else None

    def short_done_long_training_or_long_done() -> bool:
        done, long = records(store), run_of("C4e10-d48")
        return long in done or (run_of("C1e10-d48") in done and (store / "runs" / str(long) / "ckpt.pt").exists())

    assert wait_until(short_done_long_training_or_long_done, launch), launch.output[-3000:]
    if run_of("C4e10-d48") in records(store):  # under load loky started the short run's worker ~5 s late
        launch.signal_group(signal.SIGKILL)
        launch.wait(60)
        pytest.skip("the long run ended first (loky's second worker started late): no idle worker beside it")
    if how == "SIGTERM to the group":
        launch.signal_group(signal.SIGTERM)
    elif how == "SIGTERM to the sweep":
        os.kill(launch.proc.pid, signal.SIGTERM)
    else:
        launch.signal_group(signal.SIGINT)
        time.sleep(0.3)
        launch.signal_group(signal.SIGINT)
    assert launch.wait(60) == (130 if how == "Ctrl-C twice" else 143), launch.output[-3000:]
    assert launch.group_is_gone(), "a process of the preempted sweep is still running"
    output = launch.output
    preempted = {run_id: int(step) for run_id, step in PREEMPTED.findall(output)}
    assert len(preempted) == 1 and checkpoint_steps(store) == preempted, output[-3000:]
    assert len(records(store)) == 1 and "Traceback" not in output, output[-3000:]

    resumed = run_sweep(store, tmp_path / "resumed.log", *overrides)
    assert {run_id: int(step) for run_id, step in RESUMED.findall(resumed)} == preempted
    assert_same_results(store, reference, runs=2)


@pytest.mark.slow
def test_sigterm_during_the_last_step_records_the_run_then_exits_143(tmp_path, tmp_path_factory):
    """The trainer checks SIGTERM after each step; at the last one it writes the record first (a
    checkpoint there used to resume into a 'completed' record with a NaN loss). The hook in
    tests/fault_hooks sends SIGTERM from inside the run when it logs its last step (65 of 65)."""
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    env = fault_env(PYTHONPATH=str(HOOKS), SCALING_FAULT_SIGTERM_AT_STEP="65")
    launch = Launch(store, tmp_path / "last-step.log", "budget=1e10", "model=d32", env=env)
    assert launch.wait(120) == 143, launch.output[-3000:]
    assert "SIGTERM arrived at the run's end (its last step or its record): the run is recorded" in launch.output
    ((run_id, rec),) = records(store).items()
    assert rec["steps"] == 65 and outcome(rec) == outcome(records(reference)[run_id])
    assert not list(store.glob("runs/*/ckpt.pt"))


@pytest.mark.slow
def test_sigkill_of_the_sweep_process_alone_ends_its_joblib_workers_and_the_relaunch_resumes(tmp_path):
    """`kill -9` of the sweep's own process (not its group): its loky workers used to live on,
    re-parented to PID 1, for good. Each worker watches its parent: its run checkpoints and the
    worker exits, the resource trackers follow; the relaunch resumes the runs and completes them.
    Two runs (one per worker on 2 cores), killed after the first checkpoint."""
    store = tmp_path / "store"
    overrides = ["budget=2e10", "hydra/launcher=joblib"]
    launch = Launch(store, tmp_path / "killed.log", *overrides)

    # both runs started (loky may start the second worker's run late: killed before d32 began, d48's 43 steps
    # then ended and recorded, and no checkpoint was left to resume, though nothing was lost)
    def started():
        return "C2e10-d32" in launch.output and any(store.glob("runs/*/ckpt.pt"))

    assert wait_until(started, launch), launch.output[-3000:]
    os.kill(launch.proc.pid, signal.SIGKILL)
    assert launch.wait(60) == -signal.SIGKILL
    assert launch.group_is_gone(within=30), "a worker of the killed sweep outlived it"
    output = launch.output
    assert "its sweep (pid" in output and "leaked" not in output, output[-3000:]
    checkpoints = checkpoint_steps(store)
    assert checkpoints, output[-3000:]

    resumed = run_sweep(store, tmp_path / "resumed.log", *overrides)
    assert {run_id: int(step) for run_id, step in RESUMED.findall(resumed)} == checkpoints
    assert len(records(store)) == 2 and all(r["status"] == "completed" for r in records(store).values())


def test_a_relaunch_names_live_workers_of_a_dead_sweep_holding_runs(tmp_path):
    """A run lock held by a live process that no running `scaling` command started (a killed
    sweep's worker, here a plain Python process holding the flock): the relaunch says so in one
    line naming its pid, and leaves the run to it."""
    store = tmp_path / "store"
    overrides = [f"store={store}", "budget=1e10", "model=d32", "hydra.sweeper.dry_run=true"]
    run_cli("sweep", SWEEP, *overrides, check=True)
    (run,) = json.loads((store / "sweep.dry-run.json").read_text())["runs"]
    lock = store / "runs" / run["run_id"] / ".lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,sys,time; f=open({str(lock)!r},'w'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = run_cli("sweep", SWEEP, *overrides, check=True)
    finally:
        holder.kill()
        holder.wait()
    lines = [line for line in proc.stdout.splitlines() if "no longer running" in line]
    assert len(lines) == 1 and f"pids {holder.pid}" in lines[0], proc.stdout
    assert "1 running in another process (left to it)" in proc.stdout


def test_a_second_ctrl_c_stops_a_plain_train_at_once_with_one_line(tmp_path):
    """A plain `scaling train` stopped by a second Ctrl-C (KeyboardInterrupt, raised at step 40 by
    tests/fault_hooks: two real SIGINTs inside one backward pass reach Python as one): exit 130 and
    one line saying it was interrupted and which checkpoint is kept; the relaunch resumes from it."""
    from conftest import run_cli

    store = tmp_path / "store"
    args = ("model=d32", "budget=1e10", "tracking=none", "train.batch_size=8", "train.min_steps=20")
    args += ("train.threads=1", "train.checkpoint_interval_s=0.01", "train.log_points=64", f"store={store}")
    env = {"PYTHONPATH": str(HOOKS), "SCALING_FAULT_INTERRUPT_AT_STEP": "40"}
    proc = run_cli("train", *args, env=env, timeout=300)
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "interrupted (second Ctrl-C)" in line]
    kept = checkpoint_steps(store)
    assert len(kept) == 1 and f"its checkpoint at step {next(iter(kept.values()))} is kept; relaunch to resume" in line
    again = run_cli("train", *args, timeout=300)
    assert again.returncode == 0 and "resuming from checkpoint" in again.stdout, again.stderr


# A SLURM job's time limit under submitit: SLURM sends SIGUSR2 shortly before it, and submitit's
# handler requeues the job (and exits) or, with no requeue left, raises UncompletedJobError. The
# hook in tests/fault_hooks installs a handler standing in for submitit's and sends SIGUSR2 at step 30.
USR2_AT = 30
ONE_RUN = ("model=d32", "budget=1e10", "tracking=none", "train.batch_size=8", "train.min_steps=20")
ONE_RUN += ("train.eval_tokens=4096", "train.evals=2", "train.threads=1", "train.checkpoint_interval_s=0.25")


def time_limit_env(how: str, marker) -> dict[str, str]:
    return fault_env(
        PYTHONPATH=str(HOOKS),
        SCALING_FAULT_USR2_AT_STEP=str(USR2_AT),
        SCALING_FAULT_USR2_HANDLER=how,
        SCALING_FAULT_USR2_MARKER=str(marker),
    )


@pytest.mark.slow
def test_a_time_limit_under_submitit_checkpoints_then_requeues_and_the_relaunch_resumes(tmp_path, tmp_path_factory):
    """`scaling train` with submitit's SIGUSR2 handler installed: the run finishes its step, saves a
    checkpoint at that step, and only then calls the handler (which requeues and exits); the run is
    not recorded, its checkpoint is kept, and the relaunch resumes it to the uninterrupted result."""
    reference = reference_store(tmp_path_factory)
    store, marker = tmp_path / "store", tmp_path / "requeued.json"
    proc = run_cli("train", *ONE_RUN, f"store={store}", env=time_limit_env("requeue", marker), timeout=300)
    assert proc.returncode == 255, (proc.stdout, proc.stderr)  # sys.exit(-1), as submitit's handler
    assert f"preempted: SIGUSR2 at step {USR2_AT}/65; checkpoint saved" in proc.stdout, proc.stdout
    ((run_id, step),) = checkpoint_steps(store).items()
    assert step == USR2_AT and json.loads(marker.read_text()) == [str(store / "runs" / run_id / "ckpt.pt")]
    assert not records(store)
    again = run_cli("train", *ONE_RUN, f"store={store}", timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"[{run_id}] resuming from checkpoint at step {USR2_AT}/65" in again.stdout
    assert outcome(records(store)[run_id]) == outcome(records(reference)[run_id])
    assert not checkpoint_steps(store)


@pytest.mark.slow
def test_a_time_limit_with_no_requeue_left_keeps_the_checkpoint_and_the_sweep_exits_1(tmp_path, tmp_path_factory):
    """submitit's handler gives up (UncompletedJobError): the run is not recorded as errored and its
    checkpoint is kept (the run used to be recorded errored, its checkpoint deleted, and trained from
    scratch on relaunch). The sweep exits 1 with one line; its relaunch resumes the run."""
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    env = time_limit_env("give_up", tmp_path / "unused")
    output = run_sweep(store, tmp_path / "gave-up.log", "budget=1e10", "model=d32", env=env, expect_status=1)
    assert "Traceback" not in output, output[-3000:]
    assert "error: sweep faults: 1 of 1 planned runs did not complete (0 diverged, 0 errored, 1 stopped" in output
    ((run_id, step),) = checkpoint_steps(store).items()
    assert step == USR2_AT and not records(store) and not set_aside_files(store)
    resumed = run_sweep(store, tmp_path / "resumed.log", "budget=1e10", "model=d32")
    assert f"[{run_id}] resuming from checkpoint at step {USR2_AT}/65" in resumed
    assert outcome(records(store)[run_id]) == outcome(records(reference)[run_id])
