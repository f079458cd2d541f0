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


def check_threads(threads: int) -> None:
    """train.threads of a run about to train here: at most the usable cores (0: automatic). More
    oversubscribes the cores: 1000 threads on 2 cores trained 40x slower (2.6k against ~100k tok/s)."""
    from scaling.errors import ConfigError

    cores = usable_cores()
    if threads > cores:
        raise ConfigError(
            f"train.threads: {threads} is more than the {cores} cores this process may use "
            f"(oversubscribed, a run slows down many-fold); use at most {cores}, or 0 (automatic)"
        )
