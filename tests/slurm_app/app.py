"""A tiny Hydra app that tests/test_slurm.py runs through `hydra/launcher=submitit_slurm`.

Each job writes `<out_dir>/result_<index>.json` atomically (tmp + fsync + os.replace, as the
results store does) with what proves where it ran: the SLURM variables of its environment, its
thread settings, the CPUs it may run on, its host, and whether `peers` jobs ran at the same time.

    python tests/slurm_app/app.py --multirun hydra/launcher=submitit_slurm out_dir=/tmp/r index=0,1
"""

import json
import os
import socket
import time
from pathlib import Path

import hydra
from omegaconf import DictConfig

# Variables SLURM (and the launcher preset's `setup` lines) set in a job's environment.
JOB_ENVIRONMENT_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_JOB_PARTITION",
    "SLURM_CPUS_PER_TASK",
    "SUBMITIT_EXECUTOR",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",  # set by SLURM in a job given GPUs (hydra/launcher=slurm_gpu)
    "SLURM_STEP_GPUS",
)


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write `payload` as JSON so that readers see either nothing or the whole file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def wait_for_peers(out_dir: Path, index: int, peers: int, wait_s: float) -> int:
    """Mark this job as started, wait until `peers` jobs have; return how many had (bounded wait)."""
    (out_dir / f".started_{index}").touch()
    deadline = time.monotonic() + wait_s
    while True:
        started = len(list(out_dir.glob(".started_*")))
        if started >= peers or time.monotonic() > deadline:
            return started
        time.sleep(0.2)


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    peers_started = wait_for_peers(out_dir, cfg.index, cfg.peers, cfg.peer_wait_s)
    result = {
        "index": cfg.index,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "peers_started": peers_started,
        "cpus_visible": len(os.sched_getaffinity(0)),
        "environment": {key: os.environ.get(key) for key in JOB_ENVIRONMENT_KEYS},
    }
    write_json_atomic(out_dir / f"result_{cfg.index}.json", result)
    return result


if __name__ == "__main__":
    main()
