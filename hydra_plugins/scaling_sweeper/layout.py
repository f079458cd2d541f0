"""How a sweep's runs are laid out on this machine: how many run at once under each Hydra launcher, how
many jobs each ``launcher.launch`` call gets, whether they train on a GPU, and the launcher settings
that cannot work (checked before anything is written)."""

from __future__ import annotations

import os

from omegaconf import DictConfig

from scaling.machine import usable_cores


def _is_joblib(launcher_cfg: DictConfig) -> bool:
    return "Joblib" in str(launcher_cfg.get("_target_", ""))


def is_local_launcher(launcher_cfg: DictConfig) -> bool:
    """Launchers whose jobs are child processes of the sweep's process (its workers)."""
    return _is_joblib(launcher_cfg) or _is_submitit_local(launcher_cfg)


def check_launcher(launcher_cfg: DictConfig) -> None:
    """ConfigError naming a launcher setting that cannot work, before the sweep writes anything."""
    from scaling.errors import ConfigError

    if _is_joblib(launcher_cfg):
        n = launcher_cfg.get("n_jobs", -1)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n == 0):
            raise ConfigError(
                f"hydra.launcher.n_jobs: {n!r} is not a number of workers; give a positive count, "
                "or -1 for one per core (-2 all but one, ...)"
            )


def _is_submitit_local(launcher_cfg: DictConfig) -> bool:
    return str(launcher_cfg.get("_target_", "")).endswith("submitit_launcher.LocalLauncher")


def trains_on_gpu(train_cfg: DictConfig) -> bool:
    """Whether the sweep's runs will train on a GPU: ``train.device`` names CUDA, or is ``auto`` on
    a machine whose torch sees one (asked only where an NVIDIA device node exists, so CPU-only
    machines never import torch here)."""
    device = str(train_cfg.get("device", "auto"))
    if device.startswith("cuda"):
        return True
    if device != "auto" or not os.path.exists("/dev/nvidiactl"):
        return False
    import torch

    return torch.cuda.is_available()


def concurrency(launcher_cfg: DictConfig, n_jobs: int, gpu: bool = False) -> int:
    """How many jobs the configured launcher runs at once on this machine; each job then trains
    with cores // concurrency torch threads (train.concurrent_runs), so workers × threads <= cores.

    The layout rule, measured (bench/bench_trainer.py's layout table, README): on a CPU, one
    single-threaded run per core beats one run on every core's thread for every ladder width
    (1.10-1.62x on 2 cores), so the local sweep files use joblib, whose default is one worker per
    core; fewer runs than cores get more threads each. On a GPU, runs go one at a time (``gpu``).

    joblib runs ``n_jobs`` workers (joblib's convention: -1 all cores, -2 all but one, ...);
    submitit_local would start every job it is given at once, so the sweeper hands it at most one
    job per core at a time (`launch_chunk_size`); basic runs one job after another; SLURM gives
    each job its own CPUs (cpus_per_task), so each job may use every core it sees."""
    if gpu and (_is_joblib(launcher_cfg) or _is_submitit_local(launcher_cfg)):
        return 1  # one local GPU: runs sharing it would each run slower, and could run out of its memory
    if _is_joblib(launcher_cfg):
        n = int(launcher_cfg.get("n_jobs", -1) or -1)
        workers = usable_cores() + 1 + n if n < 0 else n
        return max(1, min(n_jobs, workers))
    if _is_submitit_local(launcher_cfg):
        return max(1, min(n_jobs, usable_cores()))
    return 1


def launch_chunk_size(launcher_cfg: DictConfig, n_parallel: int, max_batch_size: int | None) -> int:
    """Jobs per ``launcher.launch`` call. submitit_local starts all the jobs of one call at once and
    has no ``array_parallelism`` (docs/NOTES.md), so it gets ``n_parallel`` jobs per call (largest
    first, so the jobs of a call are of similar length); the other launchers pace themselves and get
    ``max_batch_size`` jobs per call (None: all)."""
    if _is_submitit_local(launcher_cfg) or (_is_joblib(launcher_cfg) and n_parallel == 1):
        return min(n_parallel, max_batch_size or n_parallel)  # joblib at 1: one job per call, one at a time
    return max_batch_size or 1 << 62
