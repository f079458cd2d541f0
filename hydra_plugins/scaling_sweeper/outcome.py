"""How a launched sweep ended, read from its store: the exit status of `scaling sweep` (its table is
in scaling/sweep_app.py's docstring) and, when that is not 0, the one line that says why.

Every planned run (dropped combinations are not planned) is looked up in the store after the launch:
each one completed is exit 0; any one failed (diverged, errored, or a record that cannot be read),
or launched but ended without a record (stopped at a SLURM time limit with its checkpoint kept, a
killed job) is exit 1. A run held by another live process (another sweep training it) is left to
that process, as `scaling train` leaves it, and is not a failure here.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from scaling.run_status import RunState
from scaling.store import RunPaths, run_state

EXIT_COMPLETED, EXIT_FAILED = 0, 1


def states(store: Path, jobs: list[dict]) -> Counter:
    """RunState -> how many of the planned ``jobs`` are in it now."""
    return Counter(run_state(RunPaths(Path(store), j["run_id"])) for j in jobs)


def exit_status(name: str, store: Path, jobs: list[dict]) -> int:
    """0 when every planned run completed (or is another process's), else 1 after one `error:` line
    on stderr naming how many runs did not complete, and how, and where to look."""
    count = states(store, jobs)
    diverged = count[RunState.FAILED]
    errored = count[RunState.ERRORED] + count[RunState.CORRUPT]
    unfinished = count[RunState.NEW] + count[RunState.PARTIAL]
    elsewhere = count[RunState.RUNNING]
    if elsewhere:
        print(
            f"sweep {name}: {elsewhere} planned run{'s' * (elsewhere != 1)} still trained by another process "
            f"(left to it); `scaling status {store}` shows when they finish",
            flush=True,
        )
    failed = diverged + errored + unfinished
    if not failed:
        return EXIT_COMPLETED
    how = [f"{diverged} diverged", f"{errored} errored"]
    if unfinished:
        how.append(f"{unfinished} stopped unrecorded, to resume on relaunch")
    print(
        f"error: sweep {name}: {failed} of {len(jobs)} planned runs did not complete ({', '.join(how)}); "
        f"{count[RunState.COMPLETED]} completed; see `scaling status {store}`",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_FAILED
