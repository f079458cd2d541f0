"""How a sweep's runs are laid out on this machine: how many run at once under each Hydra launcher, how
many jobs each ``launcher.launch`` call gets, how many GPUs they spread over (`scaling.devices`), and
the launcher settings that cannot work (checked before anything is written)."""

from __future__ import annotations

import sys
from typing import NamedTuple

from omegaconf import DictConfig, OmegaConf

from scaling import devices
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


def check_jobs_here(launcher_cfg: DictConfig, cfgs: list[DictConfig]) -> None:
    """What each run checks before it trains, checked before the sweep writes anything, when its runs train on
    this machine (every launcher but SLURM's, whose jobs run on the cluster's nodes): train.threads within the
    usable cores, train.device present (user18: train.threads=99 trained at 99 threads on 2 cores; train.device=cuda
    wrote the sweep's plan, launched, then failed). Not for a dry run, which may plan on another machine."""
    from scaling.machine import check_threads

    if "Slurm" in str(launcher_cfg.get("_target_", "")):
        return
    for threads in sorted({int(cfg.train.threads or 0) for cfg in cfgs}):
        check_threads(threads)
    for device in sorted({str(cfg.train.device) for cfg in cfgs}):
        devices.check_device_here(device)


def warn_of_laws(cfg: DictConfig) -> None:
    """The warning a run gives on an optim.lr_law with unidentified values (`hparams.law_warnings`), once."""
    from scaling.hparams import law_of, law_warnings

    for line in law_warnings(cfg, law_of(cfg)):
        print(f"warning: {line}", file=sys.stderr, flush=True)


def check_read(cfgs: list[DictConfig]) -> None:
    """A setting that none of the jobs that will train reads (`plan.settings_unused`), refused as a run refuses
    it (a sweep may cross model=d32,nearest with one target: the nearest jobs read it; dropped jobs read nothing)."""
    from scaling.errors import ConfigError
    from scaling.plan import settings_unused

    unread = [settings_unused(cfg) for cfg in cfgs]
    for key, message in (unread[0] if unread else {}).items():
        if all(key in each for each in unread):
            raise ConfigError(f"{message} (no job of this sweep reads it)")


def check_evaluations(cfgs: list[DictConfig]) -> None:
    """Each corpus, evaluation sets and window of the jobs that will train holds their evaluation set, as each run
    checks it (`scaling.evalsets.check_evaluation`), once per distinct setting, before the sweep writes anything."""
    from scaling.evalsets import check_evaluation

    seen = set()
    for cfg in cfgs:
        key = (
            OmegaConf.to_yaml(cfg.data),
            OmegaConf.to_yaml(cfg.get("eval") or {}),
            cfg.train.seq_len,
            cfg.train.eval_tokens,
        )
        if key not in seen:
            seen.add(key)
            check_evaluation(cfg)


def _is_submitit_local(launcher_cfg: DictConfig) -> bool:
    return str(launcher_cfg.get("_target_", "")).endswith("submitit_launcher.LocalLauncher")


def concurrency(launcher_cfg: DictConfig, n_jobs: int, gpus: int = 0, runs_per_gpu: int = 1) -> int:
    """How many jobs the configured launcher runs at once on this machine; each job then trains
    with cores // concurrency torch threads (train.concurrent_runs), so workers × threads <= cores.

    The layout rule, measured (bench/bench_trainer.py's layout table, README): on a CPU, one
    single-threaded run per core beats one run on every core's thread for every ladder width
    (1.10-1.62x on 2 cores), so the local sweep files use joblib, whose default is one worker per
    core; fewer runs than cores get more threads each. With ``gpus`` GPUs (`scaling.devices`), the
    local launchers run ``gpus × runs_per_gpu`` at once, each on its own device slot (a positive
    joblib ``n_jobs`` caps it).

    joblib runs ``n_jobs`` workers (joblib's convention: -1 all cores, -2 all but one, ...);
    submitit_local would start every job it is given at once, so the sweeper hands it at most one
    job per core at a time (`launch_chunk_size`); basic runs one job after another; SLURM gives
    each job its own CPUs (cpus_per_task), so each job may use every core it sees."""
    if gpus and is_local_launcher(launcher_cfg):
        slots = gpus * runs_per_gpu
        cap = int(launcher_cfg.get("n_jobs", -1) or -1) if _is_joblib(launcher_cfg) else -1
        return max(1, min(n_jobs, slots, cap if cap > 0 else slots))
    if _is_joblib(launcher_cfg):
        n = int(launcher_cfg.get("n_jobs", -1) or -1)
        workers = usable_cores() + 1 + n if n < 0 else n
        return max(1, min(n_jobs, workers))
    if _is_submitit_local(launcher_cfg):
        return max(1, min(n_jobs, usable_cores()))
    return 1


class Layout(NamedTuple):  # not a dataclass: Hydra's plugin scan runs this module outside sys.modules
    """How a launch lays its runs out: ``n_parallel`` at once over ``gpus`` GPUs (0: the CPU), each
    job claiming one of ``slots`` device slots (0: none; the basic launcher and SLURM need none)."""

    n_parallel: int
    gpus: int
    slots: int

    def job_overrides(self) -> list[str]:
        slots = [f"train.device_slots={self.slots}"] if self.slots else []
        return [f"train.concurrent_runs={self.n_parallel}", *slots]

    def describe(self) -> str:
        if not self.gpus:
            return ""
        faked = f", faked by {devices.FAKE_GPUS_ENV}" if devices.fake_gpus() is not None else ""
        each = f", {self.slots // self.gpus} run(s) per GPU" if self.slots else ""
        return f" ({self.gpus} GPU{'s' * (self.gpus > 1)}{each}{faked})"


def plan_layout(launcher, launcher_cfg: DictConfig, train_cfg: DictConfig, n_jobs: int, runs_per_gpu: int) -> Layout:
    """The layout of ``n_jobs`` runs under ``launcher`` (the instantiated one, ``launcher_cfg`` its
    config); a joblib launcher's worker count is set to the runs at once (not one per core or slot),
    so that no worker sits unused from the start: one that never had a job dies of a signal and sets
    off loky's kill of the others (processes.py). One run at once runs in the sweep's own process
    (joblib's sequential fallback), as under basic."""
    gpus = devices.sweep_gpus(str(train_cfg.get("device", "auto")))
    n_parallel = concurrency(launcher_cfg, n_jobs, gpus, runs_per_gpu)
    slots = gpus * runs_per_gpu if gpus and is_local_launcher(launcher_cfg) else 0
    if _is_joblib(launcher_cfg):
        launcher.joblib["n_jobs"] = n_parallel
    return Layout(n_parallel, gpus, slots)


def launch_chunk_size(launcher_cfg: DictConfig, n_parallel: int, max_batch_size: int | None) -> int:
    """Jobs per ``launcher.launch`` call. submitit_local starts all the jobs of one call at once and
    has no ``array_parallelism`` (docs/NOTES.md), so it gets ``n_parallel`` jobs per call (largest
    first, so the jobs of a call are of similar length); the other launchers pace themselves and get
    ``max_batch_size`` jobs per call (None: all)."""
    if _is_submitit_local(launcher_cfg) or (_is_joblib(launcher_cfg) and n_parallel == 1):
        return min(n_parallel, max_batch_size or n_parallel)  # joblib at 1: one job per call, one at a time
    return max_batch_size or 1 << 62
