"""Read a wandb project's runs into a DataFrame (one row per run: config and summary, flattened).

Online only: wandb has no reader for offline runs (see docs/NOTES.md), and the project's own results
store stays the source of truth. The network is probed with a short timeout first, so a machine
without access fails at once with one line instead of hanging in wandb's retry loop.

The one home of wandb's run states (`RUN_STATES`): a run read here gets ``status`` "completed" when
wandb's state is "finished"; a runs-table export's ``State`` column holds them as they are
(`holds_run_states`), and one holding none of them (a US state, a flag) is no run state.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pandas as pd

from scaling.errors import DataError

FINISHED = "finished"  # wandb's state of a run that ended normally (the store's "completed")
RUN_STATES = frozenset({FINISHED, "running", "crashed", "failed", "killed", "preempting", "preempted", "pending"})
STATE_COLUMN = "State"  # a wandb runs-table export's column of RUN_STATES
# A runs-table export's columns of when a run ran (any case): two exports of one run differ in them (a re-export
# appended to the first kept every run twice, as seeds of its own point)
EXPORT_TIMES = frozenset({"created", "runtime", "updated", "heartbeat", "heartbeat at", "end time", "ended"})
CONNECT_TIMEOUT_S = 3.0
API_TIMEOUT_S = 15


def read_wandb_runs(project_path: str) -> pd.DataFrame:
    """Rows for every run of ``ENTITY/PROJECT``: its config and summary keys (nested keys joined
    with '.'), ``run_id``, and ``status`` ("completed" for finished runs, else wandb's state)."""
    if project_path.count("/") != 1 or not all(project_path.split("/")):
        raise DataError(f"wandb source 'wandb:{project_path}' is not of the form wandb:ENTITY/PROJECT")
    base_url = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    _probe(base_url)
    try:
        import wandb
    except ImportError:
        raise DataError("reading wandb:ENTITY/PROJECT needs the wandb package (pip install wandb)") from None
    try:
        runs = wandb.Api(timeout=API_TIMEOUT_S).runs(project_path)
        rows = [_row(run) for run in runs]
    except Exception as err:  # wandb raises its own, requests' and GraphQL errors; one line for the user
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DataError(f"cannot read runs of wandb:{project_path}: {reason}") from None
    if not rows:
        raise DataError(f"wandb:{project_path} has no runs")
    return pd.DataFrame(rows)


def holds_run_states(column: pd.Series, notes: list[str]) -> bool:
    """Whether a `STATE_COLUMN` holds wandb's run states (any value is one of `RUN_STATES`, any case); when
    none is, a note says the column is not read as the runs' states (no row is excluded by it)."""
    values = column.dropna().astype(str).str.strip()
    if values.str.lower().isin(RUN_STATES).any():
        return True
    shown = ", ".join(values.unique()[:5].tolist()) + (", ..." if values.nunique() > 5 else "")
    notes.append(
        f"column {column.name!r} holds no run states ({shown or 'no values'}; wandb's are "
        f"{', '.join(sorted(RUN_STATES))}): not read as whether a run completed"
    )
    return False


def _probe(base_url: str) -> None:
    parsed = urlparse(base_url)
    host = parsed.hostname or base_url
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise DataError(
            f"cannot reach wandb at {base_url} ({err.strerror or err}); reading wandb:ENTITY/PROJECT "
            "needs network access: fit the sweep's results store or an exported CSV instead"
        ) from None


def _row(run) -> dict:
    row = _flatten(dict(run.config))
    row.update(_flatten(dict(run.summary._json_dict)))
    row["run_id"] = run.id
    row["status"] = "completed" if run.state == FINISHED else run.state
    row.setdefault("reason", f"wandb state {run.state}" if run.state != FINISHED else "")
    return row


def _flatten(nested: dict) -> dict:
    """Nested keys joined with '.', as a store's run settings are (`settings.flatten`; pandas' `json_normalize` took
    190x as long: ~9 s for 1,000 runs, review19); an empty dict carries nothing."""
    from analysis.sources.settings import flatten

    return {key: value for key, value in flatten(nested).items() if value != {}} if nested else {}
