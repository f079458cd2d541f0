"""A run's status, typed: the record's ``status`` and ``failure``, and the state a run is in in the
store. The values are the strings records, sweep.json and `scaling status` have always carried, so
old stores read as before. No torch, no pandas: the store, the trainer and the sweeper share it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """A record's ``status``: the strings records have always carried."""

    COMPLETED = "completed"  # trained to its budget
    FAILED = "failed"  # ended early; ``failure`` says how


class Failure(StrEnum):
    """A record's ``failure``: how a failed run failed ("" for a completed run)."""

    NONE = ""
    DIVERGED = "diverged"  # the loss blew up: final, never retried
    ERRORED = "errored"  # an error (out of memory, disk full, a bug): retried on relaunch


class RunState(StrEnum):
    """What `run_state` finds for a run in the store (the strings of sweep.json and `scaling status`)."""

    NEW = "new"  # nothing yet
    PARTIAL = "partial"  # a checkpoint, no record: resumed on relaunch
    RUNNING = "running"  # locked by a live process
    COMPLETED = "completed"  # finished: record status "completed"
    FAILED = "failed"  # diverged: final
    ERRORED = "errored"  # failed by an error: set aside and retried on relaunch
    CORRUPT = "corrupt"  # a record that cannot be read: set aside and retried on relaunch


def record_failure(rec: dict[str, Any]) -> Failure:
    """How a record's run failed: its ``failure``. A failed record without one (written before the
    key existed) says it only in its reason ("error: ..." for an error, else a divergence): read there."""
    if rec["status"] == Status.COMPLETED:
        return Failure.NONE
    if rec.get("failure"):
        return Failure(rec["failure"])
    return Failure.ERRORED if str(rec.get("reason", "")).startswith("error:") else Failure.DIVERGED
