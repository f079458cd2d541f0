"""The sources a comparison reads, and the rule that their losses are comparable.

A source is what `scaling fit` takes (a store directory, a CSV/Parquet/JSON table, wandb:ENTITY/PROJECT),
or one group of a table: the rows whose ``group_by`` column holds a value, read exactly as
`scaling fit --group-by` reads them (`analysis.sources.load.read_groups`).

Losses are comparable only on the same evaluation data. A store records each run's corpus
fingerprint (``corpus_fingerprint``), from which its validation split is drawn; a user may name
another column (``--eval-column``). Sources whose values of that column differ are refused
unless allowed; a source without the column cannot be checked, and that is said.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.sources.groups import MISSING
from analysis.sources.load import read_groups as read_source_groups
from analysis.sources.load import read_source
from analysis.sources.schema import ColumnMap, RunTable, Source
from scaling.errors import DataError, UserError

EVAL_COLUMN = "corpus_fingerprint"  # the store's record of the data each run was evaluated on
MAX_SHOWN = 3  # distinct evaluation values shown per source in a refusal


@dataclass
class Input:
    """One side of a comparison: a label, the checked runs and the raw rows they came from."""

    label: str
    table: RunTable
    frame: pd.DataFrame


def read_inputs(sources: list[str], columns: ColumnMap, allow_mixed_corpora: bool = False) -> list[Input]:
    """Each source read and checked on its own."""
    inputs = []
    for source in sources:
        read = read_source(source, columns, allow_mixed_corpora=allow_mixed_corpora)
        inputs.append(Input(source, read.table, read.frame))
    return inputs


def read_groups(
    source: str,
    column: str,
    columns: ColumnMap,
    baseline: str | None = None,
    candidates: list[str] | None = None,
    allow_mixed_corpora: bool = False,
) -> list[Input]:
    """The groups of one table by the values of ``column``, baseline first (`select_groups`), as inputs."""
    chosen = select_groups(source, column, columns, baseline, candidates, allow_mixed_corpora)
    return [Input(group.table.source, group.table, group.frame.reset_index(drop=True)) for group in chosen]


def select_groups(
    source: str,
    column: str,
    columns: ColumnMap,
    baseline: str | None = None,
    candidates: list[str] | None = None,
    allow_mixed_corpora: bool = False,
) -> list[Source]:
    """The groups of one table by the values of ``column``, read as `scaling fit --group-by` reads
    them (`analysis.sources.load.read_groups`: ``columns.where`` filters, each group checked on its
    own): ``baseline`` (default: the first value in the table, not `MISSING`) then ``candidates`` (default: every
    other value, in order of first appearance). Values that differ only in case are refused unless
    ``baseline`` is named (`analysis.sources.groups.split_groups`): the default baseline would be a guess."""
    groups = dict(read_source_groups(source, columns, column, allow_mixed_corpora, distinct_case=baseline is not None))
    present = list(groups)
    # the first value held by rows (user40: the group of rows without one led a report as its baseline)
    first = baseline if baseline is not None else next((g for g in present if g != MISSING), present[0])
    wanted = [first, *(candidates or [g for g in present if g != first])]
    missing = [g for g in wanted if g not in groups]
    if missing:
        raise UserError(
            f"--group-by {column!r}: {source!r} has no group {missing[0]!r}; its groups: {', '.join(present)}"
        )
    if len(wanted) < 2:
        raise UserError(f"--group-by {column!r}: {source!r} has one group ({present[0]!r}); a comparison needs two")
    return [groups[g] for g in wanted]


def check_same_eval(
    inputs: list[Input], column: str | None, allow_different: bool, default: str = EVAL_COLUMN
) -> list[str]:
    """Refuse (DataError) inputs whose evaluation data differ by ``column`` (default ``default``:
    `EVAL_COLUMN`, or --eval NAME's; a named column must be present in every input); return lines
    for the user."""
    named = column is not None
    column = column or default
    values: dict[str, list[str]] = {}
    unchecked = []
    for item in inputs:
        if column not in item.frame.columns:
            if named:
                raise UserError(
                    f"--eval-column {column!r}: {item.label!r} has no such column; columns: "
                    f"{', '.join(map(str, item.frame.columns))}"
                )
            unchecked.append(item.label)
            continue
        present = item.frame[column].dropna().astype(str)
        values[item.label] = sorted(set(present[present != ""]))
    notes = []
    if unchecked:
        notes.append(
            f"cannot check that the losses share evaluation data: no {column!r} column in "
            f"{', '.join(map(repr, unchecked))} (name one with --eval-column)"
        )
    distinct = {tuple(v) for v in values.values()}
    if len(distinct) > 1:
        listing = "; ".join(f"{label}: {_shown(v)}" for label, v in values.items())
        if not allow_different:
            raise DataError(
                f"the sources were evaluated on different data ({column} {listing}): their losses are not "
                "comparable; pass --allow-different-eval to compare them anyway"
            )
        notes.append(f"comparing losses on different evaluation data as asked ({column} {listing})")
    return notes


def _shown(values: list[str]) -> str:
    shown = ", ".join(v[:16] for v in values[:MAX_SHOWN])
    return shown + (f" and {len(values) - MAX_SHOWN} more" if len(values) > MAX_SHOWN else "") if values else "none"
