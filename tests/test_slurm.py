"""Hydra multiruns through a real SLURM: the local single-node cluster of scripts/slurm-up.sh.

Both tests launch with `hydra/launcher=slurm`, the project's preset over hydra-submitit-launcher's
`submitit_slurm` (conf/hydra/launcher/slurm.yaml):

- tests/slurm_app, two jobs: both results arrive, each job ran inside SLURM (its environment,
  submitit's job folders, sacct), pinned to one CPU, and the two ran at the same time (~5 s);
- `scaling sweep tiny`: the project's smallest IsoFLOP sweep; every planned run's record lands in
  the results store, completed, trained with one thread (~30 s on 2 cores).

Without SLURM both are skipped, except when the environment variable CI is set: there a missing or
silent SLURM fails them (CI starts it with scripts/slurm-up.sh before the suite).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SCALING

from scaling.store import read_store

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "slurm_app" / "app.py"
PARTITION = os.environ.get("SCALING_SLURM_PARTITION", "debug")
MULTIRUN_TIMEOUT_S = 240  # the slower test takes ~30 s; a stuck job must not hold the suite longer
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(MULTIRUN_TIMEOUT_S + 60)]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def slurm_problem() -> str | None:
    """Why this machine cannot run SLURM jobs now, or None when slurmctld answers."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15)
    if "is UP" not in ping.stdout:
        lines = (ping.stdout + ping.stderr).strip().splitlines()
        return f"slurmctld does not answer: `scontrol ping` -> {lines[0] if lines else f'exit {ping.returncode}'}"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = slurm_problem()
    if problem is None:
        return
    if in_ci():
        pytest.fail(f"{problem}; CI is set, so SLURM must be up (scripts/slurm-up.sh starts it)")
    pytest.skip(f"{problem}; start a local SLURM with `sudo bash scripts/slurm-up.sh` (make slurm)")


def submitit_job_folders(root: Path) -> list[Path]:
    """submitit's per-job folders anywhere under root: .../.submitit/<array id>_<task index>."""
    return sorted(p for p in root.glob("**/.submitit/*_*") if p.is_dir())


def array_ids(root: Path) -> set[str]:
    return {folder.name.split("_")[0] for folder in submitit_job_folders(root)}


def logs_of(root: Path) -> str:
    return "\n".join(
        f"--- {log}\n{log.read_text()[-2000:]}"
        for folder in submitit_job_folders(root)
        for log in sorted(folder.glob("*_log.*"))
    )


def run_multirun(command: list[str], cwd: Path, root: Path) -> None:
    """Run a multirun to its end; on a timeout cancel its SLURM jobs (found under root) and fail."""
    try:
        run = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=MULTIRUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stuck = sorted(array_ids(root))
        if stuck:
            subprocess.run(["scancel", *stuck], timeout=15)
        pytest.fail(f"multirun still running after {MULTIRUN_TIMEOUT_S} s (cancelled jobs {stuck})\n{logs_of(root)}")
    assert run.returncode == 0, f"multirun failed (exit {run.returncode}):\n{run.stdout}\n{run.stderr}\n{logs_of(root)}"


def sacct_rows(array_id: str, fields: str, done: Callable[[list[list[str]]], bool], timeout_s: float = 30):
    """sacct's rows (one list of ``fields`` per job or task) of an array, polled until ``done`` says
    they are complete or ``timeout_s`` has passed: accounting lags the jobs' end by a few seconds, and
    slurmdbd lists a finished array as one row ("ID") until it has recorded its tasks ("ID_0", ...)."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", array_id, "-o", fields],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
        rows = [line.split("|") for line in out.splitlines() if line]
        if done(rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def accounting_states(array_id: str, n_tasks: int) -> dict[str, str]:
    """{task id: "STATE|partition"} of an array's tasks from sacct, once all n_tasks have finished."""
    rows = sacct_rows(
        array_id,
        "JobID,State,Partition",
        lambda rows: len(rows) == n_tasks and all(state.split()[0] in FINISHED for _, state, _ in rows),
    )
    return {task_id: f"{state}|{partition}" for task_id, state, partition in rows}


def test_hydra_multirun_runs_through_slurm(slurm, tmp_path):
    jobs = 2
    sweep_dir, results_dir = tmp_path / "sweep", tmp_path / "results"
    run_multirun(
        [
            sys.executable,
            str(APP),
            "--multirun",
            "hydra/launcher=slurm",
            f"hydra.searchpath=[file://{ROOT / 'conf'}]",
            f"hydra.sweep.dir={sweep_dir}",
            "hydra.launcher.timeout_min=5",
            "hydra.launcher.mem_gb=1",
            f"out_dir={results_dir}",
            f"index={','.join(str(i) for i in range(jobs))}",
            f"peers={jobs}",
        ],
        cwd=tmp_path,
        root=sweep_dir,
    )

    results = [json.loads((results_dir / f"result_{i}.json").read_text()) for i in range(jobs)]
    assert [r["index"] for r in results] == list(range(jobs))

    # Each job ran inside SLURM, in one array, in the partition asked for, with the preset's sizing.
    environments = [r["environment"] for r in results]
    array_id = environments[0]["SLURM_ARRAY_JOB_ID"]
    assert array_id and array_id.isdigit(), environments
    assert [e["SLURM_ARRAY_JOB_ID"] for e in environments] == [array_id] * jobs
    assert sorted(e["SLURM_ARRAY_TASK_ID"] for e in environments) == [str(i) for i in range(jobs)]
    assert len({e["SLURM_JOB_ID"] for e in environments}) == jobs
    for env in environments:
        assert env["SUBMITIT_EXECUTOR"] == "slurm"
        assert env["SLURM_JOB_PARTITION"] == PARTITION
        assert env["SLURM_CPUS_PER_TASK"] == "1"
        assert env["OMP_NUM_THREADS"] == "1"  # the preset's `setup` lines reached the job
    # SLURM pinned each 1-CPU job to one CPU (task/affinity): what the trainer sizes its threads by.
    assert [r["cpus_visible"] for r in results] == [1] * jobs
    # The two 1-CPU jobs ran side by side: each saw both jobs started before it finished.
    assert [r["peers_started"] for r in results] == [jobs] * jobs

    # submitit kept each job's folder under the sweep dir, named by its SLURM id, with its result.
    task_ids = [f"{array_id}_{i}" for i in range(jobs)]
    assert [p.name for p in submitit_job_folders(sweep_dir)] == task_ids
    for task_id in task_ids:
        assert (sweep_dir / ".submitit" / task_id / f"{task_id}_0_result.pkl").is_file()

    # SLURM's accounting recorded both tasks as completed in that partition.
    assert accounting_states(array_id, jobs) == {task_id: f"COMPLETED|{PARTITION}" for task_id in task_ids}


def node_gpus() -> int:
    """GPUs the test node declares as GRES (scripts/slurm-up.sh: SLURM_UP_FAKE_GPUS, no hardware)."""
    out = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True, timeout=15).stdout
    return sum(int(g.split(":")[-1].split("(")[0]) for g in out.split(",") if g.startswith("gpu:"))


# slurm_gpu's sizing (8 CPUs, 64 GB per run) is a GPU node's; the 2-CPU test node gets 1 CPU, 1 GB.
SMALL_GPU_JOBS = ["hydra/launcher=slurm_gpu", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"]


def test_gpu_preset_gives_each_job_a_gpu_of_its_own(slurm, tmp_path):
    """hydra/launcher=slurm_gpu: two jobs at once each get one of the node's two GPUs from SLURM."""
    if node_gpus() < 2:
        pytest.skip("the SLURM node declares fewer than 2 GPUs (scripts/slurm-up.sh: SLURM_UP_FAKE_GPUS)")
    sweep_dir, results_dir = tmp_path / "sweep", tmp_path / "results"
    overrides = [f"hydra.searchpath=[file://{ROOT / 'conf'}]", f"hydra.sweep.dir={sweep_dir}", *SMALL_GPU_JOBS]
    command = [sys.executable, str(APP), "--multirun", *overrides, "hydra.launcher.timeout_min=5"]
    run_multirun([*command, f"out_dir={results_dir}", "index=0,1", "peers=2"], cwd=tmp_path, root=sweep_dir)
    results = [json.loads((results_dir / f"result_{i}.json").read_text()) for i in range(2)]
    assert [r["peers_started"] for r in results] == [2, 2]  # side by side
    gpus = [r["environment"]["SLURM_STEP_GPUS"] for r in results]
    assert sorted(gpus) == ["0", "1"], results  # one GPU each, not the same one
    assert all(r["environment"]["CUDA_VISIBLE_DEVICES"] for r in results), results
    (array_id,) = array_ids(sweep_dir)
    assert gpu_requests(array_id, 2) == {f"{array_id}_{i}": 1 for i in range(2)}


def gpu_requests(array_id: str, tasks: int) -> dict[str, int]:
    """GPUs each task of an array was allocated, from sacct's AllocTRES (gres/gpu=N)."""
    rows = sacct_rows(array_id, "JobID,AllocTRES", lambda rows: len(rows) >= tasks)
    return {job: sum(int(t.split("=")[1]) for t in tres.split(",") if t.startswith("gres/gpu=")) for job, tres in rows}


def test_tiny_sweep_through_slurm_gpu_preset_one_gpu_per_run(slurm, tmp_path):
    """`scaling sweep tiny hydra/launcher=slurm_gpu`: every run lands in the store, each job was
    allocated one GPU (sacct), and the runs trained where train.device says (no CUDA here: the CPU)."""
    if node_gpus() < 1:
        pytest.skip("the SLURM node declares no GPUs (scripts/slurm-up.sh: SLURM_UP_FAKE_GPUS)")
    store = tmp_path / "store"
    two_runs = ["hydra.sweeper.budgets=[4e10,8e10]", "hydra.sweeper.models=[d32]", "train.eval_tokens=1024"]
    command = [SCALING, "sweep", "tiny", *two_runs, *SMALL_GPU_JOBS, f"store={store}", "hydra.launcher.timeout_min=10"]
    run_multirun(command, cwd=tmp_path, root=store)
    planned = {run["run_id"] for run in json.loads((store / "sweep.json").read_text())["runs"]}
    table = read_store(store)
    assert set(table.runs["run_id"]) == planned and (table.runs["status"] == "completed").all()
    assert (table.runs["device"] == "cpu").all()
    (array_id,) = array_ids(store)
    assert accounting_states(array_id, len(planned)) == {
        f"{array_id}_{i}": f"COMPLETED|{PARTITION}" for i in range(len(planned))
    }
    assert gpu_requests(array_id, len(planned)) == {f"{array_id}_{i}": 1 for i in range(len(planned))}


def test_tiny_sweep_through_slurm_lands_in_store(slurm, tmp_path):
    store = tmp_path / "store"
    run_multirun(
        [
            SCALING,
            "sweep",
            "tiny",
            "hydra/launcher=slurm",
            f"store={store}",
            "hydra.launcher.mem_gb=1",
            "hydra.launcher.timeout_min=10",
        ],
        cwd=tmp_path,
        root=store,
    )

    planned = {run["run_id"] for run in json.loads((store / "sweep.json").read_text())["runs"]}
    assert len(planned) >= 2
    table = read_store(store)
    assert table.problems == []
    assert set(table.runs["run_id"]) == planned
    assert (table.runs["status"] == "completed").all(), table.runs[["run_id", "status", "reason"]]
    assert (table.runs["threads"] == 1).all()  # each 1-CPU job sized torch's pool from its pinned CPU
    assert (store / "table.csv").is_file()

    # One SLURM array, one task per planned run, all completed according to SLURM's accounting.
    (array_id,) = array_ids(store)
    states = accounting_states(array_id, len(planned))
    assert states == {f"{array_id}_{i}": f"COMPLETED|{PARTITION}" for i in range(len(planned))}
