"""Which runs of a table are results: a store's ``status`` "completed", a wandb export's ``State`` "finished", and
the words other trackers and spreadsheets write for a run that ended normally (`DONE`); every other value (failed,
diverged, running, killed) is a run that did not complete, excluded and named.
"""

from __future__ import annotations

import pandas as pd

from analysis.sources.rows import blank_cells, listing
from analysis.sources.wandb import FINISHED, STATE_COLUMN, holds_run_states
from scaling.errors import DataError

# A run's state: the store's ``status`` ("completed"), else a wandb runs-table export's ``State`` ("finished";
# crashed, failed, killed and running runs are not results; a State holding no run state is no such column).
STATUS_COLUMNS = ("status", STATE_COLUMN)
# user28: "done", "success", "ok" excluded every run marked so ("no completed runs to fit")
DONE = frozenset({"completed", FINISHED, "complete", "done", "success", "succeeded", "successful", "ok", "passed"})


def status_column(frame: pd.DataFrame, notes: list[str] | None = None) -> str | None:
    """The column of ``frame`` holding its runs' states (`STATUS_COLUMNS`, as written, else the one column of such a
    name in any case: user41, a wandb JSON export's ``state`` with its crashed runs was not read), or None. A column
    other than ``status`` counts only where it holds a word of `DONE` or wandb's run states (`holds_run_states`)."""
    folded: dict[str, list] = {}
    for c in frame.columns:
        folded.setdefault(str(c).strip().lower(), []).append(c)
    named = [c for c in STATUS_COLUMNS if c in frame.columns]
    named += [found[0] for c in STATUS_COLUMNS if len(found := folded.get(c.lower(), [])) == 1]
    status = named[0] if named else None
    if status is None or status == "status" or _says_done(frame[status]):
        return status
    return status if holds_run_states(frame[status], [] if notes is None else notes) else None


def _says_done(states: pd.Series) -> bool:
    """Whether any of ``states`` is one of `DONE` (a spreadsheet's ``Status`` of completed and diverged runs)."""
    return bool(states.dropna().astype(str).str.strip().str.lower().isin(DONE).any())


def completed(states: pd.Series) -> pd.Series:
    """Whether each run's state marks it completed: one of `DONE` in any case, or blank (a file joined from exports
    with and without the column)."""
    return states.astype(str).str.strip().str.lower().isin(DONE) | blank_cells(states)


def drop_incomplete(frame: pd.DataFrame, run_ids: pd.Series, warnings: list[str], notes: list[str]) -> pd.DataFrame:
    """``frame`` without the rows whose status is not `completed` (a blank one is kept, and said), each named in
    ``warnings`` with its reason; DataError when none is left."""
    status = status_column(frame, notes)
    if status is None:
        return frame
    unmarked = blank_cells(frame[status])  # a file joined from exports with and without the column
    if unmarked.any():
        ids = listing(list(map(str, run_ids[unmarked])))
        warnings.append(f"{int(unmarked.sum())} of {len(frame)} runs have no {status!r} ({ids}): kept as completed")
    done = completed(frame[status])
    if done.all():
        return frame
    reasons = frame["reason"].fillna("").astype(str) if "reason" in frame.columns else pd.Series("", index=frame.index)
    listed = [f"{run_ids[i]} ({frame[status][i]}{': ' + reasons[i] if reasons[i] else ''})" for i in frame.index[~done]]
    warnings.append(f"excluded {len(listed)} of {len(frame)} runs that did not complete: {listing(listed)}")
    kept = frame[done]
    if kept.empty:  # say why, as the warning would have: the reasons are what the user needs now
        raise DataError(
            f"no completed runs to fit: all {len(frame)} runs are marked failed or incomplete: {listing(listed)} "
            f"(a run's {status!r} counts as completed when it is one of {', '.join(sorted(DONE))}, in any case)"
        )
    return kept
