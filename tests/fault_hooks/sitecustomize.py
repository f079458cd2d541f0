"""Fault injection for the fault tests, active only in a subprocess started with this directory on
PYTHONPATH and one of these variables set:

  SCALING_FAULT_WANDB=log           `wandb.Run.log` works for its first call, then raises
                                    `wandb.errors.CommError` on every call, as when wandb's service
                                    or connection is lost mid-run (tests/test_faults_tracking.py).
  SCALING_FAULT_SIGTERM_AT_STEP=S   the process sends itself SIGTERM when the trainer logs step S
                                    to its tracker (`scaling.tracking.Tracker.log`, used when
                                    tracking=none): a preemption at an exact step
                                    (tests/test_faults_kill.py).
  SCALING_FAULT_SIGKILL_AT_STEP=S   the same hook sends the process SIGKILL at step S: a kill at an
                                    exact step, e.g. inside a WSD cooldown branch (tests/test_wsd.py).
  SCALING_FAULT_ERROR_AT_STEP=S     the same hook raises MemoryError at step S: a run failing with
                                    an error, not a divergence (tests/test_faults_store.py).
  SCALING_FAULT_INTERRUPT_AT_STEP=S the same hook raises KeyboardInterrupt at step S, as a second
                                    Ctrl-C does (tests/test_faults_kill.py).
  SCALING_FAULT_USR2_AT_STEP=S      the same hook sends the process SIGUSR2 at step S, as SLURM does
                                    before a job's time limit (tests/test_faults_kill.py).
  SCALING_FAULT_USR2_HANDLER=HOW    a SIGUSR2 handler installed at start-up, standing in for
                                    submitit's (`checkpoint_and_try_requeue`, which a SLURM job of a
                                    sweep has): HOW=requeue writes SCALING_FAULT_USR2_MARKER (a
                                    path) with the checkpoints (ckpt.pt) under its directory at that
                                    moment, as JSON, then calls sys.exit(-1), as submitit does after
                                    requeueing; HOW=give_up raises UncompletedJobError, as submitit
                                    does when no requeue is left (tests/test_faults_kill.py).
  SCALING_FAULT_ENOSPC=TEXT         a full disk for every file whose path contains TEXT: writing it
                                    (`open` for writing, or the store's atomic writes) raises
                                    OSError ENOSPC, as on a disk with no space left
                                    (tests/test_faults_store.py).
  SCALING_FAULT_SIGKILL_PREPARE_AT_WRITE=W  `scaling prepare` SIGKILLs itself right after its W-th
                                    shard write (scaling.prepare.staging.Staging.write): a prepare
                                    killed mid-way (tests/test_prepare.py).
"""

import builtins
import errno
import io
import os
import signal

if os.environ.get("SCALING_FAULT_WANDB") == "log":
    import wandb
    from wandb.sdk import wandb_run

    _real_log = wandb_run.Run.log
    _calls = {"n": 0}

    def _failing_log(self, *args, **kwargs):
        _calls["n"] += 1
        if _calls["n"] > 1:
            raise wandb.errors.CommError("simulated by tests/fault_hooks: connection to wandb lost mid-run")
        return _real_log(self, *args, **kwargs)

    wandb_run.Run.log = _failing_log

_STEP_FAULTS = (
    "SCALING_FAULT_SIGTERM_AT_STEP",
    "SCALING_FAULT_ERROR_AT_STEP",
    "SCALING_FAULT_INTERRUPT_AT_STEP",
    "SCALING_FAULT_USR2_AT_STEP",
    "SCALING_FAULT_SIGKILL_AT_STEP",
)
if any(os.environ.get(name) for name in _STEP_FAULTS):
    from scaling import tracking

    _sigterm_step = int(os.environ.get("SCALING_FAULT_SIGTERM_AT_STEP") or -1)
    _usr2_step = int(os.environ.get("SCALING_FAULT_USR2_AT_STEP") or -1)
    _error_step = int(os.environ.get("SCALING_FAULT_ERROR_AT_STEP") or -1)
    _interrupt_step = int(os.environ.get("SCALING_FAULT_INTERRUPT_AT_STEP") or -1)
    _kill_step = int(os.environ.get("SCALING_FAULT_SIGKILL_AT_STEP") or -1)

    def _log_with_faults(self, metrics, step):
        if step == _sigterm_step:
            os.kill(os.getpid(), signal.SIGTERM)
        if step == _usr2_step:
            os.kill(os.getpid(), signal.SIGUSR2)
        if step == _error_step:
            raise MemoryError(f"simulated by tests/fault_hooks: out of memory at step {step}")
        if step == _interrupt_step:
            raise KeyboardInterrupt
        if step == _kill_step:
            os.kill(os.getpid(), signal.SIGKILL)

    tracking.Tracker.log = _log_with_faults

if os.environ.get("SCALING_FAULT_USR2_HANDLER"):
    import json
    import sys
    from pathlib import Path

    _how = os.environ["SCALING_FAULT_USR2_HANDLER"]

    class UncompletedJobError(Exception):
        """Named as submitit's (submitit.core.utils.UncompletedJobError)."""

    def _time_limit_handler(signum, frame):
        if _how == "give_up":
            raise UncompletedJobError("Job not requeued because: timed-out too many times.")
        marker = Path(os.environ["SCALING_FAULT_USR2_MARKER"])
        marker.write_text(json.dumps(sorted(str(p) for p in marker.parent.rglob("ckpt.pt"))))
        sys.exit(-1)

    signal.signal(signal.SIGUSR2, _time_limit_handler)

if os.environ.get("SCALING_FAULT_ENOSPC"):
    _full = os.environ["SCALING_FAULT_ENOSPC"]

    def _no_space(path):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    _real_open = builtins.open

    def _open_on_a_full_disk(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and _full in str(file) and any(c in mode for c in "wax+"):
            raise _no_space(file)
        return _real_open(file, mode, *args, **kwargs)

    builtins.open = io.open = _open_on_a_full_disk

    from scaling import store

    _real_atomic_write = store.atomic_write_bytes

    def _atomic_write_on_a_full_disk(path, data):
        if _full in str(path):
            raise _no_space(path)
        return _real_atomic_write(path, data)

    store.atomic_write_bytes = _atomic_write_on_a_full_disk

if os.environ.get("SCALING_FAULT_SIGKILL_PREPARE_AT_WRITE"):
    from scaling.prepare import staging

    _kill_at = int(os.environ["SCALING_FAULT_SIGKILL_PREPARE_AT_WRITE"])
    _real_write = staging.Staging.write
    _writes = {"n": 0}

    def _write_then_die(self, split, ids):
        _real_write(self, split, ids)
        _writes["n"] += 1
        if _writes["n"] == _kill_at:
            self.files[split].flush()  # some shard bytes really reach the disk, as in a kill mid-way
            os.kill(os.getpid(), signal.SIGKILL)

    staging.Staging.write = _write_then_die
