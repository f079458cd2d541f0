"""The one reader of a source of runs: a results store directory (docs/CONTRACTS.md), a CSV or
Parquet file, or ``wandb:ENTITY/PROJECT``; checked into a `RunTable` by `analysis.sources.check`.

    source = read_source("results/quick")     # Source: table + every row + store problems + plan
    table = load_runs("results/quick")        # the checked RunTable alone
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.sources.check import table_from_frame
from analysis.sources.files import read_table_file
from analysis.sources.schema import ColumnMap, RunTable, Source
from scaling.errors import DataError


def read_source(source: str, columns: ColumnMap = ColumnMap(), allow_mixed_corpora: bool = False) -> Source:
    """Read ``source`` once and check it (the rules of `analysis.sources.check`); DataError (one
    line naming the file, column, row and value) when nothing usable is there."""
    source = str(source)
    path = Path(source)
    problems, manifest, manifest_problem, curves = [], {}, "", None
    if source.startswith("wandb:"):
        from analysis.sources.wandb import read_wandb_runs

        frame = read_wandb_runs(source[len("wandb:") :])
    elif path.is_dir():
        frame, curves, problems = _read_store(path)
        manifest, manifest_problem = _read_manifest(path)
    else:
        frame = read_table_file(path)
    table = table_from_frame(
        frame,
        source,
        columns,
        curves=curves,
        warnings=[f"skipped {p}" for p in problems],
        allow_mixed_corpora=allow_mixed_corpora,
    )
    return Source(
        table=table,
        frame=frame.reset_index(drop=True),
        problems=problems,
        manifest=manifest,
        manifest_problem=manifest_problem,
    )


def load_runs(source: str, columns: ColumnMap = ColumnMap(), allow_mixed_corpora: bool = False) -> RunTable:
    """The checked `RunTable` of ``source`` (`read_source` without the facts around it)."""
    return read_source(source, columns, allow_mixed_corpora).table


def _read_store(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    from scaling.store import read_store

    store = read_store(path)
    if store.runs.empty:
        problems = store.problems
        raise DataError(
            f"results store {str(path)!r} holds no readable run records under {str(path / 'runs')!r}"
            + (f" ({len(problems)} skipped: {problems[0]})" if problems else "")
        )
    return store.runs, store.curves, list(store.problems)


def _read_manifest(store: Path) -> tuple[dict, str]:
    """The sweep plan (sweep.json) of a store, and why it is missing or unreadable ("" when read)."""
    from scaling.progress import MANIFEST

    path = store / MANIFEST
    if not path.exists():
        return (
            {},
            f"{path} does not exist (runs not launched by `scaling sweep`): the plan and dropped runs are unknown",
        )
    try:
        return json.loads(path.read_text()), ""
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        return {}, f"{path} cannot be read ({err}): the plan and dropped runs are unknown"
