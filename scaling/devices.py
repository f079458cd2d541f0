"""Which device a run trains on, and how a sweep's local runs share the machine's GPUs.

With G visible CUDA devices, the sweeper runs G × ``hydra.sweeper.runs_per_gpu`` runs at once under
the local launchers (joblib, submitit_local) and hands each job ``train.device_slots`` (that
product; not part of the run id). A job claims one free slot for as long as it trains: an exclusive
``flock`` on ``STORE/.device-slots/slot-K.lock``, released when the run ends or its process dies. Slot
K trains on ``cuda:(K mod G)``, so the first G runs at once land on G different GPUs, and no two runs
at once share a slot. The claim is made per job, in the job: joblib's workers are reused across jobs,
so a worker's device is whatever its current job claimed (not fixed when the worker started).

``SCALING_FAKE_GPUS=N`` (a test and development hook) makes the sweeper and its jobs count N GPUs:
the sweep lays out and assigns slots as on an N-GPU machine, while the runs train on the device
``train.device`` gives (the CPU, on a machine without CUDA). Each run's record says which slot and
GPU it had (``device_slot``, ``gpu``) and whether the count was faked.

torch is imported only where a device is picked, or where a machine has an NVIDIA device node, so
the sweeper never imports torch on a CPU-only machine.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scaling.errors import ConfigError

FAKE_GPUS_ENV = "SCALING_FAKE_GPUS"  # test/dev hook: count this many GPUs (runs still train where train.device says)
SLOTS_DIR = ".device-slots"  # under the store: one lock file per slot
WAIT_S = 0.5  # how often a job that finds every slot taken tries again
SLOT_KEYS = ("device_slot", "gpu", "gpus_faked")  # what a run's record says of its slot


def fake_gpus() -> int | None:
    """The GPU count ``SCALING_FAKE_GPUS`` asks for (None when unset); ConfigError when it is not a count."""
    value = os.environ.get(FAKE_GPUS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise ConfigError(f"{FAKE_GPUS_ENV}: {value!r} is not a number of GPUs; give a count such as 2, or unset it")
    return int(value)


def gpu_count() -> int:
    """CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies), or ``SCALING_FAKE_GPUS``."""
    fake = fake_gpus()
    if fake is not None:
        return fake
    if not os.path.exists("/dev/nvidiactl"):
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def sweep_gpus(device: str) -> int:
    """How many GPUs a sweep's local runs spread over for ``train.device``: none for ``cpu``/``mps``,
    one for a pinned ``cuda:N`` (every run trains there), else every visible one."""
    if device == "auto" or device == "cuda":
        return gpu_count()
    if device.startswith("cuda:"):
        return 1
    return 0


def check_device_here(name: str) -> None:
    """`pick_device`'s refusal, before a sweep whose runs train on this machine writes anything (review: a sweep
    with train.device=cuda on a CPU machine wrote its plan, launched, then failed); torch only where a device is."""
    kind = name.partition(":")[0]
    if kind == "cuda" and not os.path.exists("/dev/nvidiactl"):
        raise ConfigError(f"train.device: {name!r} is not available on this machine (no CUDA); valid: auto, cpu")
    if kind in ("cuda", "mps"):
        pick_device(name)


def pick_device(name: str):
    """The torch device for ``train.device``; ConfigError when this machine has none of that kind."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, _, index = name.partition(":")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device: {name!r} is not available on this machine (no CUDA); valid: auto, cpu")
    if kind == "cuda" and index and int(index) >= torch.cuda.device_count():
        raise ConfigError(
            f"train.device: {name!r} is not available; this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"train.device: {name!r} is not available on this machine (no MPS); valid: auto, cpu")
    return torch.device(name)


@dataclass(frozen=True)
class Slot:
    """The device slot a run holds: slot ``index`` of ``slots``, on GPU ``index mod gpus``."""

    index: int
    slots: int
    gpus: int
    fake: bool

    @property
    def gpu(self) -> int:
        return self.index % max(1, self.gpus)

    def record_keys(self) -> dict:
        return dict(zip(SLOT_KEYS, (self.index, self.gpu, self.fake)))

    def describe(self) -> str:
        faked = f", {FAKE_GPUS_ENV}={self.gpus}: training where train.device says" if self.fake else ""
        return f"device slot {self.index}/{self.slots} (GPU {self.gpu}{faked})"


def resolved_precision(precision: str, device_type: str) -> str:
    """What ``train.precision`` trains in on a device of ``device_type`` ("cpu", "cuda"): bf16 when it is bf16, or
    auto on CUDA; else fp32."""
    return "bf16" if precision == "bf16" or (precision == "auto" and device_type == "cuda") else "fp32"


def autocast_for(precision: str, device):
    """The autocast context (a function of nothing) of a run with ``train.precision`` on ``device``:
    bf16 autocast where `resolved_precision` says bf16; else disabled (fp32)."""
    import torch

    use_bf16 = resolved_precision(precision, device.type) == "bf16"
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)


# torch.compile's documented modes; those with CUDA graphs replay the step from static buffers
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def step_function(model, train):
    """The function a run's steps call: ``model``, or with ``train.compile`` its torch.compile in
    ``train.compile_mode``. Under CUDA graphs each call starts a new step
    (`torch.compiler.cudagraph_mark_step_begin`), and the graph's outputs are overwritten by the next
    replay: the step loop keeps copies of the losses it reads later (`scaling.train.train_step`)."""
    import torch

    if not train.compile:
        return model
    compiled = torch.compile(model, mode=train.compile_mode)
    if train.compile_mode not in CUDA_GRAPH_MODES:
        return compiled

    def step(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)

    return step


def to_device(tensor, device):
    """``tensor`` (on the host) on ``device``; on CUDA from pinned memory, asynchronously: a copy from
    pageable memory waits for the GPU, a host sync in the step loop."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def run_device(name: str, slot: Slot | None):
    """The device a run trains on: ``train.device``, or with a slot on a machine with CUDA (and
    ``train.device`` auto or cuda) the slot's GPU, made the process's current CUDA device."""
    device = pick_device(name)
    if slot is None or slot.fake or device.type != "cuda" or device.index is not None:
        return device
    import torch

    device = torch.device("cuda", slot.gpu)
    torch.cuda.set_device(device)  # kernels (compiled ones too) launch on the run's own GPU
    return device


@contextmanager
def claim_slot(store: str | Path, slots: int, log=print) -> Iterator[Slot | None]:
    """Hold a free one of ``slots`` device slots of ``store`` while the body runs (None for 0 slots:
    no assignment). Waits while every slot is taken (another sweep on the same store)."""
    if slots <= 0:
        yield None
        return
    folder = Path(store) / SLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        for index in range(slots):
            fd = os.open(folder / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield Slot(index, slots, gpu_count(), fake_gpus() is not None)
            finally:
                os.close(fd)  # releases the lock
            return
        if not waited:
            log(f"every one of the {slots} device slots of {folder} is taken; waiting for one")
            waited = True
        time.sleep(WAIT_S)
