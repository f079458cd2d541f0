"""The preemption guard: SIGTERM (a cluster's preemption) or SIGINT (Ctrl-C) while a run trains.

The first signal only raises a flag: the step loop finishes its step, saves a checkpoint and exits
with 128 + the signal (143 for SIGTERM, 130 for SIGINT), and a relaunch resumes the run. A second
Ctrl-C stops at once (KeyboardInterrupt; the last periodic checkpoint stays).
"""

from __future__ import annotations

import os
import signal
import sys
import threading


class Preempted(Exception):
    """Raised by the step loop after it saved a checkpoint on a signal."""


class PreemptionGuard:
    """A context manager that holds the SIGTERM and SIGINT handlers while a run trains (only in the
    main thread, where Python allows handlers) and restores the previous ones on exit."""

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
            self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    def exit(self) -> None:
        exit_preempted(self.signum)


def exit_preempted(signum: int = signal.SIGTERM):
    """Exit with status 128 + the signal (143 for SIGTERM, 130 for SIGINT) after a preemption or a
    Ctrl-C. In a launcher's worker process (joblib's loky workers) SystemExit would only end the
    task, and the worker would start the sweep's next run and outlive the sweep; so a worker process
    ends itself."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)
    raise SystemExit(128 + signum)
