"""Facts about the machine a process runs on, shared by the trainer, the sweeper and the benchmarks."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPUs this process may run on: its affinity mask, capped by SLURM_CPUS_PER_TASK where set
    (clusters that do not pin CPUs, task/none, still give a job only that many)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        cores = min(cores, int(os.environ["SLURM_CPUS_PER_TASK"]))
    return max(1, cores)
