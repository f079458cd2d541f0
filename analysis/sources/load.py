"""The one reader of a source of runs: a results store directory (docs/CONTRACTS.md), a CSV or
Parquet file, or ``wandb:ENTITY/PROJECT``; checked into a `RunTable` by `analysis.sources.check`.

    source = read_source("results/quick")     # Source: table + every row + store problems + plan
    table = load_runs("results/quick")        # the checked RunTable alone
    groups = read_groups("ladder.csv", ColumnMap(), "dataset")   # [(value, Source)] per dataset
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from analysis.sources.check import table_from_frame
from analysis.sources.files import read_table_file, without_repeated_headers
from analysis.sources.groups import apply_where, split_groups
from analysis.sources.rows import listing
from analysis.sources.schema import ColumnMap, RunTable, Source
from scaling.errors import DataError, UserError


def read_source(source: str, columns: ColumnMap = ColumnMap(), allow_mixed_corpora: bool | str = False) -> Source:
    """Read ``source`` once and check it (the rules of `analysis.sources.check`); DataError (one
    line naming the file, column, row and value) when nothing usable is there. ``Source.frame``
    holds the rows that pass ``columns.where`` (failed runs included)."""
    source = str(source)
    raw = _read_raw(source)
    notes, warnings = [], []
    frame = apply_where(raw["frame"], columns.where, source, notes, warnings)
    # the rows kept are named with the source, as a group's are (user17: a report of --where recipe==better said
    # only "recipes.csv" in its title, table and figures)
    label = f"{source} [{' and '.join(map(str, columns.where))}]" if columns.where else source
    checked = _checked(
        raw, label, frame, replace(columns, where=(), refit=(source, *columns.refit)), allow_mixed_corpora
    )
    checked.table.notes[:0] = notes
    checked.table.warnings[:0] = warnings
    return checked


def read_groups(
    source: str, columns: ColumnMap, group_by: str, allow_mixed_corpora: bool = False, distinct_case: bool = False
) -> list[tuple[str, Source]]:
    """``source`` read once, filtered by ``columns.where``, and split by the values of column
    ``group_by``: (value, checked Source) per group, in order of first appearance (`split_groups`:
    values that differ only in case are refused unless ``distinct_case``). Each group is checked on
    its own (a group with nothing usable is a DataError naming it)."""
    source = str(source)
    raw = _read_raw(source)
    notes, warnings = [], []
    frame = apply_where(raw["frame"], columns.where, source, notes, warnings)
    no_where = replace(columns, where=())
    groups = []
    for value, rows in split_groups(frame, group_by, source, distinct_case):
        refit = (source, *columns.refit, "--where", f"{group_by}=={value}")  # the group, as one table
        label = f"{source} [{' and '.join([*map(str, columns.where), f'{group_by}={value}'])}]"  # as `read_source`'s
        checked = _checked(raw, label, rows, replace(no_where, refit=refit), allow_mixed_corpora)
        checked.table.notes[:0] = notes
        checked.table.warnings[:0] = warnings
        groups.append((value, checked))
    return groups


def load_runs(source: str, columns: ColumnMap = ColumnMap(), allow_mixed_corpora: bool = False) -> RunTable:
    """The checked `RunTable` of ``source`` (`read_source` without the facts around it)."""
    return read_source(source, columns, allow_mixed_corpora).table


WANDB_PREFIX = "wandb:"


def is_wandb(source: str) -> bool:
    """``source`` names a wandb project (wandb:ENTITY/PROJECT)."""
    return str(source).startswith(WANDB_PREFIX)


def is_store(source: str) -> bool:
    """``source`` is a results store (a directory, docs/CONTRACTS.md): this project's runs and shapes."""
    return not is_wandb(source) and Path(source).is_dir()


def _read_raw(source: str) -> dict:
    """Every row of ``source`` as read (index: row position), its curves, skipped files and plan."""
    path = Path(source)
    raw = {"problems": [], "manifest": {}, "manifest_problem": "", "curves": None}
    if is_wandb(source):
        from analysis.sources.wandb import read_wandb_runs

        raw["frame"] = read_wandb_runs(source[len(WANDB_PREFIX) :])
    elif is_store(source):
        raw["frame"], raw["curves"], raw["problems"] = _read_store(path)
        raw["manifest"], raw["manifest_problem"] = _read_manifest(path)
    else:  # rows keep their place in the file (row 58 stays "row 58" after a repeated header above it is skipped)
        raw["frame"], repeated = read_table_file(path).reset_index(drop=True), []
        if path.suffix.lower() in (".csv", ".tsv", ".txt", ""):  # a CSV's header may come again (files joined)
            raw["frame"], repeated = without_repeated_headers(raw["frame"])
        if repeated:
            raw["problems"].append(f"{listing([f'row {i}' for i in repeated])}: the header again (files joined?)")
        return raw
    raw["frame"] = raw["frame"].reset_index(drop=True)
    return raw


def _checked(raw: dict, source: str, frame: pd.DataFrame, columns: ColumnMap, allow_mixed: bool | str) -> Source:
    table = table_from_frame(
        frame,
        source,
        columns,
        curves=raw["curves"],
        warnings=[f"skipped {p}" for p in raw["problems"]],
        allow_mixed_corpora=allow_mixed,
    )
    return Source(
        table=table,
        frame=frame,
        problems=raw["problems"],
        manifest=raw["manifest"],
        manifest_problem=raw["manifest_problem"],
        origin=columns.refit[0] if columns.refit else source,
    )


def _read_store(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    from analysis.sources.settings import differing
    from scaling.store import read_store

    store = read_store(path)
    if store.runs.empty:
        problems = store.problems
        raise DataError(
            f"results store {str(path)!r} holds no readable run records under {str(path / 'runs')!r}"
            + (f" ({len(problems)} skipped: {problems[0]})" if problems else "")
        )
    runs = store.runs
    runs = runs.join(differing(str(path), runs["run_id"]))  # user29: two recipes' runs looked alike in the table
    if "train.precision" in runs.columns:  # as each ran: auto is fp32 on a CPU (review19: auto beside fp32 "split")
        from scaling.devices import resolved_precision

        kinds = runs["device"].fillna("").astype(str).str.split(":").str[0]
        runs["train.precision"] = [resolved_precision(p, k) if p else p for p, k in zip(runs["train.precision"], kinds)]
    if "schedule" in runs.columns:  # records before WSD name none: they ran cosine, as cosine runs since (their
        runs["schedule"] = runs["schedule"].replace("", "cosine")  # ids kept), so a store that grew is one schedule
    return runs, store.curves, list(store.problems)


def _read_manifest(store: Path) -> tuple[dict, str]:
    """The sweep plan (sweep.json) of a store as `scaling status` reads it (`scaling.progress.read_manifest`:
    an old plan's merged duplicates apart from its dropped combinations), and why it is missing,
    unreadable or not a plan ("" when read)."""
    from scaling.progress import MANIFEST, read_manifest

    try:
        manifest = read_manifest(store)
    except UserError as err:
        return {}, f"{err} (the plan and dropped runs are unknown)"
    if manifest is None:
        return (
            {},
            f"{store / MANIFEST} does not exist (runs not launched by `scaling sweep`): the plan and dropped runs are unknown",
        )
    return manifest, ""
