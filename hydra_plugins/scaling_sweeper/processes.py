"""The sweep's local worker processes (joblib's loky workers, submitit_local's jobs): signals from the
sweep reach them, they end when the sweep's process dies, and a relaunch names the ones still running.

- `forward_sigterm_to_workers`: a SIGTERM or Ctrl-C to the sweep reaches its workers as SIGTERM (each
  running run checkpoints and exits), and the sweep exits 143 or 130.
- `watch_sweep` (called by each job, scaling/train_app.py): a worker whose sweep process dies (``kill
  -9``, an OOM kill) checkpoints its run and exits instead of living on re-parented to PID 1. loky
  workers are the sweep process's own children (it spawns them; checked with ``ps``), so the watch
  is on the worker's parent pid: a thread polls ``os.getppid()`` and, when the parent is gone, sends
  the worker SIGTERM (the trainer's preemption path: checkpoint, exit 143; an idle worker just ends).
  A thread, not prctl(PR_SET_PDEATHSIG): the latter fires when the *thread* that spawned the worker
  exits (loky respawns workers from its manager thread), is Linux-only, and needs ctypes.
- `park_worker`: a loky worker that has checkpointed its run (or, idle, got the signal) waits, alive, until
  its sweep has gone. joblib's executor treats any worker's exit as a broken pool and SIGKILLs every
  other worker at once (loky's ``kill_workers``), which killed runs still saving their checkpoint, and
  idle workers died at the signal itself; so workers exit only after the sweep process, whose wait
  ends when each of its workers has exited or is parked (its name, ``/proc/PID/comm``, reads
  `PARKED`). A worker parks only while its sweep is stopping (named `STOPPING`, which the worker
  waits `STOP_NOTICE_S` to see): a worker signalled alone (``kill WORKER``) exits, and loky's kill of
  the other workers follows as it always did (their runs keep their last periodic checkpoints). A worker that
  has not yet had a job (one still being spawned, or one that another worker's quick jobs left
  unused) has no handler: a signal kills it, loky is set off, and the runs keep their last periodic
  checkpoints; a launch starts no more workers than runs at once (`layout.plan_layout`) to keep that
  rare.
- `orphaned_holders`: pids of live processes that hold run locks but whose sweep has died.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

SWEEP_PARENT_ENV = "SCALING_SWEEP_PARENT"  # host:pid of the sweep process, inherited by its local workers
POLL_S = 0.5  # how often a worker checks that its sweep process is alive
GRACE_S = 60.0  # after the SIGTERM, how long a worker may take to checkpoint before it is ended
STOP_WAIT_S = 120.0  # how long a signalled sweep waits for its workers' checkpoints (and they for it)
STOP_NOTICE_S = 5.0  # how long a signalled worker waits to see its sweep stopping too, else it exits
PARKED = "scaling-parked"  # a worker's process name once it is done and waits for its sweep to end
STOPPING = "scaling-stop"  # the sweep's process name once a signal has told it to stop (15 characters at most)
_stopping: list[int] = []  # in the sweep's process: the signal that stops it
_parked: list[int] = []  # in a worker: parked (its watch thread then has nothing to say)


def _child_pids() -> list[int]:
    pids = []
    for children in Path("/proc/self/task").glob("*/children"):
        try:
            pids += [int(p) for p in children.read_text().split()]
        except OSError:
            pass
    return pids


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _is_resource_tracker(pid: int) -> bool:
    """joblib's resource tracker outlives SIGTERM by design; it is not a run to wait for."""
    return b"resource_tracker" in _cmdline(pid)


def _is_scaling_command(pid: int) -> bool:
    """True for a `scaling ...` process (its program, or the script its interpreter runs, is `scaling`)."""
    parts = _cmdline(pid).split(b"\0")[:3]
    return any(os.path.basename(part) == b"scaling" or part == b"scaling.cli" for part in parts)


def _stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name: [state, ppid, ...]; [] if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def alive(pid: int) -> bool:
    """True unless the process has exited (a zombie awaiting its parent's wait counts as exited)."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _named(pid: int, name: str) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == name
    except OSError:
        return False


def _name_this_process(name: str) -> bool:
    """Name this process (its main thread: ``ps``, /proc/PID/comm); False where that cannot be done."""
    try:
        Path("/proc/self/comm").write_text(name)
        return True
    except OSError:
        return False


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # no one reads it any more (or it is closed)
            pass


def parked(pid: int) -> bool:
    """True for a worker that has stopped its work and waits for its sweep to end (`park_worker`)."""
    return _named(pid, PARKED)


def busy(pid: int) -> bool:
    """True for a worker the signalled sweep still waits for: alive, and not parked."""
    return alive(pid) and not parked(pid)


def forward_sigterm_to_workers() -> None:
    """A SIGTERM to the sweep's own process (``kill PID``, a scheduler) or a Ctrl-C (SIGINT) reaches
    its local workers as SIGTERM (joblib, submitit_local): each running run checkpoints and exits
    instead of being orphaned, and the sweep exits (143, or 130 for Ctrl-C). joblib itself would go
    on launching runs after a Ctrl-C. In-process runs (basic launcher) install their own handlers
    while they train. The sweep names itself `STOPPING` first (its workers park only then, below);
    a second signal while it waits changes nothing."""

    def handler(signum, frame):
        if _stopping:  # a second signal, or a parked worker's own SIGTERM (`park_worker`)
            return
        children = [pid for pid in _child_pids() if not _is_resource_tracker(pid)]
        if signum == signal.SIGINT and not children:  # nothing to forward to: Ctrl-C as usual
            raise KeyboardInterrupt
        _stopping.append(signum)
        _name_this_process(STOPPING)
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        print(
            f"sweep: {signal.Signals(signum).name}; running runs checkpoint and stop; relaunch to resume",
            file=sys.stderr,
            flush=True,
        )
        # Wait (bounded) for the workers to save their checkpoints, then leave without the launcher's
        # exit handlers: joblib's would kill the workers in the middle of that.
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline and any(busy(pid) for pid in children):
            time.sleep(0.05)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    if Path("/proc/self/task").is_dir():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


# When a sweep is interrupted (its process leaves with os._exit once its workers have checkpointed, or
# is killed), loky's resource tracker process removes the semaphores and memmapping folders the
# executor had registered, and warns "resource_tracker: There appear to be N leaked semlock objects
# to clean up at shutdown" for each kind: cleanup it is designed to do, reported as a problem the user
# cannot act on. The filter goes to the sweep's child processes (the tracker among them) through
# PYTHONWARNINGS, Python's documented way to set warning filters for a process it does not run.
TRACKER_WARNINGS = "ignore:resource_tracker:UserWarning"


def mark_sweep_parent() -> None:
    """Called by the sweep before it launches local workers (joblib, submitit_local; not SLURM, whose
    jobs outlive their submitter by design): the workers inherit its host and pid, and the filter
    of loky's resource tracker's cleanup warnings."""
    os.environ[SWEEP_PARENT_ENV] = f"{socket.gethostname()}:{os.getpid()}"
    filters = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    if TRACKER_WARNINGS not in filters:
        os.environ["PYTHONWARNINGS"] = ",".join([*filters, TRACKER_WARNINGS])


def _sweep_parent() -> int | None:
    """The pid of this process's sweep, when this process is one of its local workers (its direct
    child on the same host); None in the sweep's own process, for a single run, and on a SLURM node."""
    host, _, pid = os.environ.get(SWEEP_PARENT_ENV, "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return None
    return int(pid)


_watching: list[int] = []  # the sweep pid this worker watches (a worker runs many jobs: one thread)


def watch_sweep() -> None:
    """In a local worker of a sweep: end this process, as a preemption, once the sweep process is gone.
    A worker that finds its sweep already gone exits at once, before starting the run. A loky worker
    parks on SIGTERM or SIGINT outside training (the trainer's guard holds them while it trains)."""
    parent = _sweep_parent()
    if parent is None or _watching:
        return
    if os.getppid() != parent:
        if not alive(parent):  # re-parented: the sweep died before this job started
            _exit_orphaned(parent, signal_first=False)
        return  # not the sweep's child: nothing to watch
    _watching.append(parent)
    threading.Thread(target=_watch, args=(parent,), name="scaling-sweep-watch", daemon=True).start()
    if _is_loky_worker() and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, _park_then_exit)


def _is_loky_worker() -> bool:
    """True in a multiprocessing-style worker (joblib's loky), not in a submitit_local job's process."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def _park_then_exit(signum, frame) -> None:
    from scaling.preemption import exit_preempted  # which parks this worker first

    exit_preempted(signum)


def park_worker(signum: int) -> None:
    """In a loky worker of a sweep that is still its parent: ignore further signals, flush, name this
    process `PARKED`, and, once the sweep is stopping too, wait (at most `STOP_WAIT_S`) until it has
    gone; the caller then exits. Returns at once elsewhere. Why a worker must outlive its sweep's
    wait: the module's docstring."""
    parent = _sweep_parent()
    if parent is None or os.getppid() != parent or not _is_loky_worker():
        return
    for held in (signal.SIGTERM, signal.SIGINT):  # its work is done: a second Ctrl-C must not start a run
        signal.signal(held, signal.SIG_IGN)
    _flush()
    if not _name_this_process(PARKED):  # not Linux: the sweep waits for this process's exit instead
        return
    _parked.append(parent)
    notice = time.monotonic() + STOP_NOTICE_S  # the sweep, signalled with it, names itself within it
    while not _named(parent, STOPPING) and os.getppid() == parent:
        if time.monotonic() > notice:  # this worker alone was signalled (or its sweep runs a run itself)
            return
        time.sleep(0.05)
    deadline = time.monotonic() + STOP_WAIT_S
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    if not _parked:  # a parked worker exits by itself, its stop already said
        _exit_orphaned(parent, signal_first=True)


def _exit_orphaned(parent: int, signal_first: bool) -> None:
    # The sweep's death often takes the reader of this worker's stderr with it (a closed terminal, a
    # killed pipeline): a write then raises (EPIPE, EIO). The message is best-effort; the exit is not.
    _say(
        f"worker {os.getpid()}: its sweep (pid {parent}) is gone; the run checkpoints and this worker "
        "exits; relaunch the sweep to resume"
    )
    if signal_first:  # the trainer's SIGTERM handler checkpoints the run and exits 143
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(GRACE_S)
    _flush()
    os._exit(128 + signal.SIGTERM)


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no one reads stderr any more (or it is closed)
        pass


def _lock_holders(paths: list[Path]) -> set[int]:
    """Pids holding a flock on any of ``paths`` (Linux's /proc/locks; empty elsewhere)."""
    inodes = set()
    for p in paths:
        try:
            inodes.add(os.stat(p).st_ino)
        except OSError:
            pass
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return set()
    holders = set()
    for line in lines:
        fields = line.split()  # 1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END
        if (
            len(fields) >= 6
            and fields[1] == "FLOCK"
            and fields[4].isdigit()
            and int(fields[5].rsplit(":", 1)[-1]) in inodes
        ):
            holders.add(int(fields[4]))
    return holders


def orphaned_holders(lock_paths: list[Path]) -> list[int]:
    """Live worker processes (not a `scaling` command themselves) holding these run locks whose parent
    is not a running `scaling` process: the workers of a sweep that was killed, still finishing (or
    checkpointing) their runs."""
    orphans = []
    for pid in sorted(_lock_holders(lock_paths)):
        fields = _stat(pid)
        if fields and fields[0] != "Z" and not any(map(_is_scaling_command, (pid, int(fields[1])))):
            orphans.append(pid)
    return orphans
