"""A Hydra multirun through a real SLURM: the local single-node cluster of scripts/slurm-up.sh.

Runs tests/slurm_app (two jobs) with `hydra/launcher=slurm`, the project's preset over
hydra-submitit-launcher's `submitit_slurm` (conf/hydra/launcher/slurm.yaml), and checks that both
results arrived, that each job ran inside SLURM (its environment, submitit's job folders, sacct),
and that the two 1-CPU jobs ran at the same time. About 5 s once SLURM is up.

Without SLURM the test is skipped, except when the environment variable CI is set: there a missing
or silent SLURM fails the test (CI starts it with scripts/slurm-up.sh before the suite).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "slurm_app" / "app.py"
PARTITION = os.environ.get("SCALING_SLURM_PARTITION", "debug")
JOBS = 2
MULTIRUN_TIMEOUT_S = 180  # the multirun takes ~5 s; a stuck job must not hold the suite longer

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
        answer = lines[0] if lines else f"exit {ping.returncode}"
        return f"slurmctld does not answer: `scontrol ping` -> {answer}"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    problem = slurm_problem()
    if problem is None:
        return
    if in_ci():
        pytest.fail(f"{problem}; CI is set, so SLURM must be up (scripts/slurm-up.sh starts it)")
    pytest.skip(f"{problem}; start a local SLURM with `sudo bash scripts/slurm-up.sh` (make slurm)")


def submitit_job_folders(sweep_dir: Path) -> list[Path]:
    """submitit's per-job folders: <sweep>/.submitit/<array id>_<task index>."""
    return sorted(p for p in (sweep_dir / ".submitit").glob("*_*") if p.is_dir())


def logs_of(sweep_dir: Path) -> str:
    return "\n".join(
        f"--- {log}\n{log.read_text()[-2000:]}"
        for folder in submitit_job_folders(sweep_dir)
        for log in sorted(folder.glob("*_log.*"))
    )


def accounting_states(array_id: str, timeout_s: float = 30) -> dict[str, str]:
    """{job id: state} of an array's tasks from sacct, waiting until none is still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", array_id, "-o", "JobID,State,Partition"],
            capture_output=True, text=True, timeout=15, check=True,
        ).stdout
        rows = [line.split("|") for line in out.splitlines() if line]
        states = {job_id: state for job_id, state, _ in rows}
        settled = len(states) == JOBS and all(s not in ("PENDING", "RUNNING", "COMPLETING") for s in states.values())
        if settled or time.monotonic() > deadline:
            return {job_id: f"{state}|{partition}" for job_id, state, partition in rows}
        time.sleep(0.5)


def test_hydra_multirun_runs_through_slurm(slurm, tmp_path):
    sweep_dir, results_dir = tmp_path / "sweep", tmp_path / "results"
    command = [
        sys.executable, str(APP), "--multirun",
        "hydra/launcher=slurm",
        f"hydra.searchpath=[file://{ROOT / 'conf'}]",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.launcher.timeout_min=5",
        "hydra.launcher.mem_gb=1",
        f"out_dir={results_dir}",
        f"index={','.join(str(i) for i in range(JOBS))}",
        f"peers={JOBS}",
    ]
    try:
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=MULTIRUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        array_ids = {folder.name.split("_")[0] for folder in submitit_job_folders(sweep_dir)}
        if array_ids:
            subprocess.run(["scancel", *sorted(array_ids)], timeout=15)
        pytest.fail(f"multirun still running after {MULTIRUN_TIMEOUT_S} s (cancelled jobs {sorted(array_ids)})\n{logs_of(sweep_dir)}")
    assert run.returncode == 0, f"multirun failed (exit {run.returncode}):\n{run.stdout}\n{run.stderr}\n{logs_of(sweep_dir)}"

    results = [json.loads((results_dir / f"result_{i}.json").read_text()) for i in range(JOBS)]
    assert [r["index"] for r in results] == list(range(JOBS))

    # Each job ran inside SLURM, in one array, in the partition asked for, with the preset's sizing.
    environments = [r["environment"] for r in results]
    array_id = environments[0]["SLURM_ARRAY_JOB_ID"]
    assert array_id and array_id.isdigit(), environments
    assert [e["SLURM_ARRAY_JOB_ID"] for e in environments] == [array_id] * JOBS
    assert sorted(e["SLURM_ARRAY_TASK_ID"] for e in environments) == [str(i) for i in range(JOBS)]
    assert len({e["SLURM_JOB_ID"] for e in environments}) == JOBS
    for env in environments:
        assert env["SUBMITIT_EXECUTOR"] == "slurm"
        assert env["SLURM_JOB_PARTITION"] == PARTITION
        assert env["SLURM_CPUS_PER_TASK"] == "1"
        assert env["OMP_NUM_THREADS"] == "1"  # the preset's `setup` lines reached the job
    # SLURM pinned each 1-CPU job to one CPU (task/affinity): what the trainer sizes its threads by.
    assert [r["cpus_visible"] for r in results] == [1] * JOBS

    # The two 1-CPU jobs ran side by side: each saw both jobs started before it finished.
    assert [r["peers_started"] for r in results] == [JOBS] * JOBS

    # submitit kept each job's folder under the sweep dir, named by its SLURM id, with its result.
    task_ids = [f"{array_id}_{i}" for i in range(JOBS)]
    assert [p.name for p in submitit_job_folders(sweep_dir)] == task_ids
    for task_id in task_ids:
        assert (sweep_dir / ".submitit" / task_id / f"{task_id}_0_result.pkl").is_file()

    # SLURM's accounting recorded both tasks as completed in that partition.
    assert accounting_states(array_id) == {task_id: f"COMPLETED|{PARTITION}" for task_id in task_ids}
