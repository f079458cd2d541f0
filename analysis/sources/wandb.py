"""Read a wandb project's runs into a DataFrame (one row per run: config and summary, flattened).

Online only: wandb has no reader for offline runs (see docs/NOTES.md), and the project's own results
store stays the source of truth. The network is probed with a short timeout first, so a machine
without access fails at once with one line instead of hanging in wandb's retry loop.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pandas as pd

from scaling.errors import DataError

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
    row["status"] = "completed" if run.state == "finished" else run.state
    row.setdefault("reason", f"wandb state {run.state}" if run.state != "finished" else "")
    return row


def _flatten(d: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat
