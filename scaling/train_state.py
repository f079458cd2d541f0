"""The state of a run in training: everything a checkpoint holds, and nothing else.

`TrainState` saves itself (`save`, atomically, to ``runs/<id>/ckpt.pt``) and restores itself
(`restore`), so that a killed or preempted run resumes bit for bit: the model and optimizer, the
step, the loss curve so far, the training time, and the divergence monitor's running values. A run
whose ``ckpt.pt`` is a packed job's (`scaling.packed_ckpt`: the job was relaunched unpacked) resumes
from its own row of it.
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from scaling import packed_ckpt
from scaling.store import RunPaths, atomic_write_bytes, set_aside

CHECKPOINT_KEYS = ("run_id", "step", "model", "optimizer", "curve", "train_time", "loss_start")


class Diverged(Exception):
    """The run's loss is not finite, or has risen far above where it started (recorded, final)."""


@dataclass
class TrainState:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: int = 0  # the next step to train
    curve: list[dict[str, float]] = field(default_factory=list)
    train_time: float = 0.0  # seconds spent in optimizer steps (not evaluation)
    loss_start: float | None = None  # the first step's training loss
    window_sum: float = 0.0  # training loss summed since the last curve point
    window_n: int = 0
    ema: float | None = None  # moving average of the training loss
    saved_step: int | None = None  # the step of the run's checkpoint on disk (not saved in it)
    pending: list[tuple[int, torch.Tensor]] = field(default_factory=list)  # (step, loss) not yet read
    divergence_factor: float = math.inf
    extra: dict[str, Any] = field(default_factory=dict)  # saved with it: a WSD trunk's branches' curves so far

    def observe(self, loss: torch.Tensor, step: int, divergence_factor: float) -> None:
        """Take one step's training loss, a tensor left on its device: the step loop never waits
        for the device. The losses are read and checked at the next `settle` (the loop's log points
        and checkpoints), so a diverged run is detected there, at the next log point at the latest."""
        self.pending.append((step, loss))
        self.divergence_factor = divergence_factor

    def settle(self) -> None:
        """Read the losses taken since the last call from the device, in one transfer (the wait for
        the device's queued steps counts as training time), and check each in order (`_check`)."""
        if not self.pending:
            return
        t0 = time.perf_counter()
        steps, losses = zip(*self.pending)
        values = torch.stack(losses).tolist()  # the one host sync per log point
        self.train_time += time.perf_counter() - t0
        self.pending = []
        for step, loss in zip(steps, values):
            self._check(loss, step)

    def _check(self, loss: float, step: int) -> None:
        """Take one step's training loss; raise Diverged on a non-finite loss, or when the smoothed
        loss exceeds ``divergence_factor`` times its start (checked from step 10)."""
        divergence_factor = self.divergence_factor
        if not math.isfinite(loss):
            raise Diverged(f"diverged: training loss {loss} at step {step}")
        self.loss_start = loss if self.loss_start is None else self.loss_start
        self.ema = loss if self.ema is None else 0.9 * self.ema + 0.1 * loss
        if step >= 10 and self.ema > divergence_factor * self.loss_start:
            raise Diverged(
                f"diverged: smoothed training loss {self.ema:.3f} at step {step} exceeds "
                f"{divergence_factor}x its start ({self.loss_start:.3f})"
            )
        self.window_sum, self.window_n = self.window_sum + loss, self.window_n + 1

    def add_point(self, point: dict[str, float]) -> None:
        """A point of the loss curve; the training-loss window starts again."""
        self.curve.append(point)
        self.window_sum, self.window_n = 0.0, 0

    def window_loss(self) -> float:
        self.settle()
        return self.window_sum / self.window_n

    def val_loss(self) -> float:
        """The latest held-out loss on the curve (NaN before the first evaluation)."""
        return next((p["val_loss"] for p in reversed(self.curve) if math.isfinite(p["val_loss"])), math.nan)

    def save(self, paths: RunPaths, run_id: str, step: int) -> None:
        """Checkpoint the run as it stands before ``step`` (atomically); the pending losses are
        read (and checked) first, so the checkpoint holds the monitor's values at ``step``."""
        self.settle()
        buf = io.BytesIO()
        torch.save(
            {
                "run_id": run_id,
                "step": step,
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "curve": self.curve,
                "train_time": self.train_time,
                "loss_start": self.loss_start,
                "window_sum": self.window_sum,
                "window_n": self.window_n,
                "ema": self.ema,
                "extra": self.extra,
            },
            buf,
        )
        atomic_write_bytes(paths.checkpoint, buf.getvalue())
        self.saved_step = step

    def restore(self, paths: RunPaths, run_id: str, device: torch.device, log) -> bool:
        """Load the run's last checkpoint, if it has a usable one; True when it did."""
        ckpt = read_checkpoint(paths, run_id, device, log)
        if ckpt is None:
            return False
        if packed_ckpt.is_packed(ckpt):
            log(
                f"[{run_id}] {paths.checkpoint} is packed job {ckpt['job']}'s checkpoint (step {ckpt['step']}); "
                "relaunched unpacked, the run resumes from its row there and trains on alone"
            )
            ckpt = packed_ckpt.member_checkpoint(ckpt, run_id, self.model, self.optimizer)
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.step, self.curve, self.train_time = ckpt["step"], ckpt["curve"], ckpt["train_time"]
        self.loss_start, self.ema = ckpt["loss_start"], ckpt.get("ema")
        self.window_sum, self.window_n = ckpt.get("window_sum", 0.0), ckpt.get("window_n", 0)
        self.extra = ckpt.get("extra", {})
        self.saved_step = self.step
        return True


def read_checkpoint(paths: RunPaths, run_id: str, device: torch.device, log) -> dict[str, Any] | None:
    """The run's last checkpoint, or None to train from step 0. A checkpoint that cannot be read
    (truncated, garbled, written by an incompatible torch) is set aside as ``ckpt.pt.corrupt-<time>``
    and named in the log, so that a relaunch trains the run again instead of failing every time.
    A packed job's checkpoint that holds the run is returned as it is (`TrainState.restore` takes its row)."""
    if not paths.checkpoint.exists():
        return None
    try:
        ckpt = torch.load(paths.checkpoint, map_location=device, weights_only=False)
        missing = set(packed_ckpt.KEYS if packed_ckpt.is_packed(ckpt) else CHECKPOINT_KEYS) - set(ckpt)
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
    except Exception as err:  # torch.load raises many types for a damaged file
        kept = set_aside(paths.checkpoint, "corrupt")
        why = (str(err).strip().splitlines() or [""])[0]
        log(
            f"[{run_id}] checkpoint {paths.checkpoint} cannot be read ({type(err).__name__}: {why}); "
            f"kept as {kept.name}, training from step 0"
        )
        return None
    owners = ckpt["run_ids"] if packed_ckpt.is_packed(ckpt) else [ckpt["run_id"]]
    if run_id not in owners:
        log(f"[{run_id}] ignoring a checkpoint of another run ({', '.join(map(repr, owners))})")
        return None
    return ckpt
