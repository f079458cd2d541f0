"""Rows a fit cannot use, rows it must not count twice, and runs that are one point.

* a row whose N, D (or C when D is absent) or loss is not a finite number > 0 is excluded, and a
  warning lists them with a count; under ``--strict`` the first one is an error instead;
* exact duplicate rows, and the same run listed twice, are counted once (`analysis.sources.duplicates`);
* repeated seeds of one (N, D) are kept: they share a ``unit`` id, which the bootstrap resamples
  as one unit; so do a WSD trunk and its cooldown branches (a ``branch_of`` column names a
  branch's trunk).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from scaling.errors import DataError

MAX_LISTED = 5  # how many rows a warning names before "and k more"
LOSS = "loss"  # the role of the loss column: not a count
# What each role's column holds, as messages name it, and the unit words its counts may end in ("14.29B tokens",
# "70M params", "1.0e19 FLOPs"): a count followed by another role's word ("70M tokens" for N) is not read.
HOLDS = {"n": "parameter counts N", "d": "token counts D", "c": "compute values C (FLOPs)", LOSS: "losses"}
UNIT_WORDS = {"n": ("params", "parameters"), "d": ("tokens",), "c": ("flops",)}
_ANY_WORD = tuple(word for words in UNIT_WORDS.values() for word in words)  # a count of no role named
_EXAMPLES = {"n": "7e7, 70000000, 70,000,000, 70M, 70M params", "d": "1.4e10, 14,000,000,000, 14B, 14B tokens"}
FORMS = {
    **{
        role: f"finite numbers > 0 (e.g. {examples}; k M B T for thousand to trillion)"
        for role, examples in _EXAMPLES.items()
    },
    "c": "finite numbers > 0 (e.g. 6e18, 6e18 FLOPs, 6,000,000,000,000,000,000)",
    LOSS: "finite numbers > 0 (e.g. 2.31)",
}  # what each role's values may be, for the message that refuses one


def row_label(position: int, run_ids: pd.Series) -> str:
    """'row k' (k counts data rows of the source from 1) and the run id when the source has one."""
    row = int(run_ids.index[position]) + 1
    run = str(run_ids.iloc[position])
    return f"row {row}" if run == f"row{row}" else f"row {row} (run {run})"


def listing(items: list[str], limit: int = MAX_LISTED, sep: str = ", ") -> str:
    """The first ``limit`` of ``items`` joined by ``sep``, then "and k more" for the rest."""
    more = f"{sep}and {len(items) - limit} more" if len(items) > limit else ""
    return sep.join(items[:limit]) + more


def numeric(frame: pd.DataFrame, column: str, count: bool | str = True) -> tuple[np.ndarray, np.ndarray]:
    """The column as float64 and a mask of values that are not finite numbers > 0. In a ``count`` column
    (N, D, C; not a loss, where "3,723" is a comma-decimal 3.723, never 3723) text counts as published
    tables write them ("70M", "1.3B", "300B", "1.4T", "125k") and thousands grouped by commas
    ("1,300,000") are read as numbers; ``count`` naming a role ("n", "d", "c": `UNIT_WORDS`) also reads
    them followed by that role's unit word ("14.29B tokens"), True by any role's."""
    raw = frame[column]
    if count and not pd.api.types.is_numeric_dtype(raw):
        words = UNIT_WORDS.get(count, _ANY_WORD)
        raw = _each_distinct(raw, lambda value: _count(value, words))
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    return values, ~np.isfinite(values) | (values <= 0)


def blank_cells(column: pd.Series) -> np.ndarray:
    """Mask of the cells left empty: missing, or text of spaces only (a spreadsheet's " ")."""
    blank = column.isna().to_numpy()
    if pd.api.types.is_numeric_dtype(column):
        return blank
    return blank | _each_distinct(column, lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)


def _each_distinct(column: pd.Series, read) -> pd.Series:
    """``read`` of each cell, called once per distinct value (a 100k-row export repeats its words and counts);
    per cell where a value is unhashable (a list from a wandb config)."""
    try:
        values = column.dropna().unique()
    except TypeError:
        return column.map(read)
    return column.map(dict(zip(values, map(read, values), strict=True)))


_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}  # thousand, million, billion, trillion
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([kmbt])\s*$", re.IGNORECASE)


_GROUPED = re.compile(r"^\s*[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?\s*$")  # 1,300,000,000: a spreadsheet's thousands


def count_value(value):
    """``value`` read as a count as the N, D and C columns read theirs ('50M' -> 5e7, '1.3B tokens'); anything
    else unchanged (`--where params>=50M`)."""
    return _count(value)


def _count(value, words: tuple[str, ...] = _ANY_WORD):
    """'1.3B' -> 1.3e9, '1,300,000' -> 1.3e6, '14.29B tokens' -> 1.429e10 (a unit word of ``words`` after the
    number, singular or plural, dropped); anything else unchanged."""
    if isinstance(value, str):
        value = _without_unit_word(value, words)
    if isinstance(value, str) and _GROUPED.match(value):
        return float(value.replace(",", ""))
    match = _COUNT.match(value) if isinstance(value, str) else None
    return float(match.group(1)) * _SUFFIXES[match.group(2).lower()] if match else value


def _without_unit_word(text: str, words: tuple[str, ...]) -> str:
    """``text`` less a unit word of ``words`` (any case, singular or plural) after its number: '1e19 FLOPs' -> '1e19'."""
    # the suffix may stand apart, as `_COUNT` reads it ('1.3 B tokens'), but is then no word's first letter
    match = re.fullmatch(r"(.*?[0-9.](?:[kmbt]|\s+[kmbt](?![a-z]))?)\s*([a-z]+)\s*", text, re.IGNORECASE)
    if match and match.group(2).lower().rstrip("s") in {w.rstrip("s") for w in words}:
        return match.group(1)
    return text


def usable_rows(
    frame: pd.DataFrame, run_ids: pd.Series, columns: dict[str, str], strict: bool, warnings: list[str], counted="rows"
) -> np.ndarray:
    """Mask of rows whose ``columns`` ({column: its role, "n", "d", "c" or `LOSS`}) are all finite
    numbers > 0. Others are listed in a warning, which counts ``counted`` ("runs" where each row is a run's final
    row of a curve table); with ``strict`` the first is a DataError. Each says what forms are read (`FORMS`)."""
    summary = _summary_rows(frame, run_ids, warnings)
    bad = summary.copy()
    reasons: dict[int, list[str]] = {}
    refused: dict[str, str] = {}  # column -> the forms its values may take, for those with a value refused
    for column, role in columns.items():
        wrong = numeric(frame, column, count=role != LOSS and role)[1] & ~summary
        if strict and wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            more = f" ({int(wrong.sum()) - 1} more bad values)" if wrong.sum() > 1 else ""
            raise DataError(
                f"column {column!r}, {row_label(i, run_ids)}: value {_shown(frame[column].iloc[i])} is not usable; "
                f"{HOLDS[role]} must be {FORMS[role]}{more}"
            )
        for i in np.flatnonzero(wrong):
            reasons.setdefault(int(i), []).append(f"{column} {_shown(frame[column].iloc[i])}")
        bad |= wrong
        refused.update({column: FORMS[role]} if wrong.any() else {})
    valid = "; ".join(f"{column}: {forms}" for column, forms in refused.items())
    if bad.all():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"no usable rows: all {len(frame)} have a value that is not a finite number > 0 in "
            f"{', '.join(columns)} (e.g. {row_label(first, run_ids)}: {', '.join(reasons[first])}); valid: {valid}"
        )
    if reasons:
        listed = [f"{row_label(i, run_ids)}: {', '.join(reasons[i])}" for i in sorted(reasons)]
        warnings.append(
            f"excluded {len(listed)} of {len(frame)} {counted} whose {'/'.join(columns)} is not a finite number > 0: "
            f"{listing(listed)} (--strict refuses such a table; valid: {valid})"
        )
    return ~bad


SUMMARY_WORDS = ("total", "totals", "mean", "average", "avg", "sum", "median", "std", "stdev")


def _summary_rows(frame: pd.DataFrame, run_ids: pd.Series, warnings: list[str]) -> np.ndarray:
    """Mask of a spreadsheet's summary rows: a text cell that is a summary's label (`SUMMARY_WORDS`: "Mean",
    "Total") in a column where fewer than half the rows hold one; excluded with a warning naming them (user21: a
    row "Mean" of the runs' mean N, D and loss stayed a run, moving approach 1's a from 0.45 to 0.36)."""
    found, listed = np.zeros(len(frame), dtype=bool), []
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]):
            continue
        cells = text_cells(frame[column])
        hit = np.isin(np.char.lower(cells.astype(str)), SUMMARY_WORDS)
        if hit.sum() < len(frame) / 2:
            listed += [
                f"{row_label(i, run_ids)} ({cells[i]!r} in column {column!r})" for i in np.flatnonzero(hit & ~found)
            ]
            found |= hit
    if listed:
        warnings.append(f"excluded {len(listed)} summary row{'s' * (len(listed) > 1)}, not runs: {listing(listed)}")
    return found


def _shown(value) -> str:
    return repr(value) if isinstance(value, str) else str(value.item() if hasattr(value, "item") else value)


def text_cells(column: pd.Series) -> np.ndarray:
    """Each cell as its text, stripped, a blank one as "" (pandas 3's astype(str) keeps a missing cell NaN)."""
    return column.astype(object).where(column.notna(), "").astype(str).str.strip().to_numpy()


def unit_ids(runs: pd.DataFrame, families: pd.Series | None = None) -> np.ndarray:
    """One integer id per unit of runs a bootstrap draws together, numbered in order of first
    appearance: repeated seeds of one (N, D) point share it, and so do the runs of one ``families``
    label (a WSD trunk and its cooldown branches, which share the trunk's weights up to each fork,
    so their errors are not independent). Runs linked through either relation, directly or through
    other runs, are one unit."""
    point = runs.groupby(["N", "D"], sort=False).ngroup().to_numpy()
    if families is None or families.nunique() == len(runs):
        return point
    family = pd.factorize(families.to_numpy())[0]
    n = len(runs)
    links = sparse.coo_matrix((np.ones(2 * n), (np.r_[np.arange(n), np.arange(n)], np.r_[point, n + family])))
    _, component = connected_components(links @ links.T, directed=False)
    return pd.factorize(component)[0]
