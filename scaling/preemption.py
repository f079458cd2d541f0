"""The preemption guard: SIGTERM (a cluster's preemption), SIGINT (Ctrl-C) or a scheduler's
time-limit warning (SIGUSR2, under submitit) while a run trains.

The first signal only raises a flag: the step loop finishes its step, saves a checkpoint and exits
with 128 + the signal (143 for SIGTERM, 130 for SIGINT), and a relaunch resumes the run. A second
Ctrl-C stops at once (KeyboardInterrupt; the last periodic checkpoint stays).

SIGUSR2 is held only when a handler for it is already installed: submitit's, in a SLURM job of a
sweep (hydra/launcher=slurm), which SLURM signals ``signal_delay_s`` before the job's time limit.
After the checkpoint, instead of exiting, the guard calls that handler, which requeues the job and
exits (the requeued job resumes from the checkpoint), or, with no requeue left
(``max_num_timeout``), raises submitit's UncompletedJobError: the run is then not recorded and its
checkpoint is kept, so that a relaunch resumes it. Without the guard, that handler ran in the middle
of a step: the run was recorded as errored and its checkpoint deleted, or the work since the last
periodic checkpoint was lost.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

HELD = (signal.SIGTERM, signal.SIGINT)
TIME_LIMIT = signal.SIGUSR2  # submitit's warning signal (its default; SLURM's --signal=USR2@delay)


class Preempted(Exception):
    """Raised by the step loop after it saved a checkpoint on a signal."""


def _is_python_handler(handler: object) -> bool:
    """True for a handler installed by Python code (not SIG_DFL, SIG_IGN, or one set outside Python)."""
    return callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN)


class PreemptionGuard:
    """A context manager that holds the SIGTERM and SIGINT handlers while a run trains (only in the
    main thread, where Python allows handlers), and SIGUSR2 when another handler (submitit's) is
    installed for it; it restores the previous ones on exit."""

    def __init__(self) -> None:
        self.requested = False
        self.signum = signal.SIGTERM
        self._previous: dict[int, object] = {}

    def _on_signal(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.requested and self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum

    def __enter__(self) -> PreemptionGuard:
        if threading.current_thread() is threading.main_thread():
            held = HELD + ((TIME_LIMIT,) if _is_python_handler(signal.getsignal(TIME_LIMIT)) else ())
            self._previous = {s: signal.signal(s, self._on_signal) for s in held}
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def time_limit(self) -> bool:
        """The signal was the time-limit warning (SIGUSR2) that the previous handler acts on."""
        return self.signum == TIME_LIMIT

    def exit(self) -> None:
        """After the checkpoint: exit with 128 + the signal; for the time-limit warning, call the
        previous handler (submitit's: it requeues and exits, or raises UncompletedJobError, which
        reaches the caller: the run is not recorded), and exit 128 + SIGUSR2 only if it returns."""
        if self.time_limit:
            self._previous[TIME_LIMIT](self.signum, None)
        exit_preempted(self.signum)


def exit_preempted(signum: int = signal.SIGTERM):
    """Exit with status 128 + the signal (143 for SIGTERM, 130 for SIGINT) after a preemption or a
    Ctrl-C. In a launcher's worker process (joblib's loky workers) SystemExit would only end the
    task, and the worker would start the sweep's next run and outlive the sweep; so a worker process
    ends itself."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        from hydra_plugins.scaling_sweeper.processes import park_worker

        park_worker(signum)  # in a sweep's worker: wait until the sweep has gone (why: there)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)
    raise SystemExit(128 + signum)
