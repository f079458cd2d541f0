"""Rows a fit cannot use, rows it must not count twice, and runs that are one point.

* a row whose N, D (or C when D is absent) or loss is not a finite number > 0 is excluded, and a
  warning lists them with a count; under ``--strict`` the first one is an error instead;
* exact duplicate rows (the same N, D and loss as an earlier row, e.g. a table listed twice) are
  counted once, and a warning says how many and which; so is a row repeating an earlier row's run id and
  every column, numbers to the digits the shorter shows (the same run exported twice, once rounded);
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


def first_of_duplicates(runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, warnings: list[str]) -> np.ndarray:
    """Mask keeping the first of each set of exact duplicate rows (same N, D and loss); a warning
    counts and names the others. A row repeating an earlier row's run id, with N, D and loss equal to the
    digits the shorter of the two shows (3.8332 and 3.833226) and every other column of ``frame`` (row-aligned
    with ``runs``) agreeing, is that run again (an export appended to another, rounded): counted once too, in
    a warning of its own. Seeds under one run id (a seed, or any column, differs; or a loss at full precision
    0.2% apart) are kept. An exact duplicate agrees in every other column too (the run id aside): rows of an LR or
    batch sweep whose losses happen to match are different runs (user17: batch 128 and 256 were counted once)."""
    keys = _exact_keys(runs, frame)
    repeated = keys.duplicated(keep="first").to_numpy().copy()
    again = _same_run_again(runs, frame, run_ids, repeated)
    if again:
        listed = [f"{row_label(i, run_ids)} = {row_label(j, run_ids)}" for i, j in again.items()]
        warnings.append(
            f"counted once {len(again)} rows that repeat an earlier row's run id and every column, N, D and loss "
            f"equal to the digits the shorter shows (one rounded): the same run listed twice: {listing(listed)}"
        )
        repeated[list(again)] = True
    if repeated.any() and len(again) < repeated.sum():
        rows = list(keys.itertuples(index=False, name=None))
        first_pos = {}
        for i, key in enumerate(rows):
            first_pos.setdefault(key, i)
        keys = rows
        exact = [i for i in np.flatnonzero(repeated) if i not in again]
        listed = [f"{row_label(i, run_ids)} = {row_label(first_pos[keys[i]], run_ids)}" for i in exact]
        warnings.append(
            f"counted once {len(listed)} exact duplicate rows (the same N, D, loss and other columns as an earlier "
            "row, its run id and times aside), "
            f"{int((~repeated).sum())} runs remain: {listing(listed)}"
        )
    _warn_one_id_two_losses(runs, frame, run_ids, ~repeated, warnings)
    _warn_reruns(runs, frame, run_ids, ~repeated, warnings)
    return ~repeated


def _warn_reruns(
    runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, kept: np.ndarray, warnings: list[str]
) -> None:
    """A warning naming kept rows of several run ids that agree in every column, their seed included, but their losses
    (review18: a rerun on a GPU whose bf16 steps do not repeat bit for bit is no exact duplicate, and was pooled as a
    seed of its own run). Only in a table with a ``seed`` column: without one, such rows are how seeds are written."""
    from analysis.sources.schema import LOSS_NAME

    if "seed" not in frame.columns:
        return
    keys = _exact_keys(runs, frame, settings=True).drop(columns="loss")
    keys = keys[[c for c in keys.columns if not LOSS_NAME.search(c)]][kept]
    ids = pd.Series(run_ids.to_numpy()).astype(str)[kept]
    listed = [
        " = ".join(dict.fromkeys(ids.iloc[positions]))
        for positions in keys.groupby(list(keys.columns), sort=False, dropna=False).indices.values()
        if ids.iloc[positions].nunique() > 1
    ]
    if listed:
        warnings.append(
            f"{len(listed)} set(s) of runs under different run ids agree in every column, their seed included, but the "
            f"loss: {listing(listed)}; read as seeds of one point, but reruns of one run (a GPU's steps need not repeat "
            "bit for bit) would narrow its interval: keep one of each if they are"
        )


def _warn_one_id_two_losses(
    runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, kept: np.ndarray, warnings: list[str]
) -> None:
    """A warning naming the run ids that several kept rows share at one N and D with only the loss differing (no
    seed, hyperparameter or other column): read as seeds of one point (`unit_ids` draws them together), they may be
    one run listed twice (a rerun, a stale export), which would widen and shift that point (user16: r12 twice, its
    loss 5% apart, passed silently). The loss column is the one holding each row's loss."""
    ids = pd.Series(run_ids.to_numpy()).astype(str)
    keys = pd.DataFrame({"id": ids, "N": runs["N"].to_numpy(), "D": runs["D"].to_numpy()})[kept]
    listed = []
    for (run_id, _, _), positions in keys.groupby(["id", "N", "D"], sort=False).indices.items():
        rows = np.flatnonzero(kept)[positions]
        if len(rows) > 1 and _only_the_loss_differs(frame.iloc[rows], runs["loss"].to_numpy()[rows]):
            listed.append(f"{run_id} ({', '.join(f'{x:.4g}' for x in runs['loss'].to_numpy()[rows])})")
    if listed:
        many = len(listed) > 1
        warnings.append(
            f"{len(listed)} run id{'s are' if many else ' is'} on several rows at one N and D with only the loss "
            f"differing, read as repeated seeds of one point (the bootstrap draws them together): {listing(listed)}; "
            "if a run was listed twice (a rerun, a stale export), keep its one row; if these are seeds, give them a "
            "'seed' column"
        )


def _only_the_loss_differs(rows: pd.DataFrame, loss: np.ndarray) -> bool:
    from analysis.sources.groups import is_run_metadata

    kept = (c for c in rows.columns if not is_run_metadata(c))
    differing = [c for c in kept if rows[c].astype(str).str.strip().nunique() > 1]
    as_loss = [np.allclose(pd.to_numeric(rows[c], errors="coerce").to_numpy(float), loss) for c in differing]
    return bool(differing) and all(as_loss)


def text_cells(column: pd.Series) -> np.ndarray:
    """Each cell as its text, stripped, a blank one as "" (pandas 3's astype(str) keeps a missing cell NaN)."""
    return column.astype(object).where(column.notna(), "").astype(str).str.strip().to_numpy()


def _exact_keys(runs: pd.DataFrame, frame: pd.DataFrame, settings: bool = False) -> pd.DataFrame:
    """Per row: N, D, loss and the text of every other column of ``frame`` (blank: "") but a run's bookkeeping: its
    id, times and device (`groups.is_run_metadata`), which differ between two copies of one run (review15c: a run
    recorded twice at two times was counted twice; a wandb export appended to another, its Created and Runtime)."""
    from analysis.sources.groups import is_run_metadata
    from analysis.sources.settings import SECTIONS

    # nor a store run's settings (`analysis.sources.settings`): rows of one N, D and loss to the last digit are one
    # run trained twice, a setting that changed nothing between (train.precision=fp32 where auto is fp32)
    others = [c for c in frame.columns if not is_run_metadata(c) and (settings or not str(c).startswith(SECTIONS))]
    text = {f"column {c}": text_cells(frame[c]) for c in others}
    return pd.DataFrame({"N": runs["N"].to_numpy(), "D": runs["D"].to_numpy(), "loss": runs["loss"].to_numpy(), **text})


# the most a run listed twice, once rounded, can differ by: N and D rounded to 2 significant digits, a loss to 4
SAME_RUN_TOLERANCE = {"N": 0.05, "D": 0.05, "loss": 0.002}


def _same_run_again(runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, exact: np.ndarray) -> dict[int, int]:
    """{position: earlier position} of rows (not ``exact`` duplicates) that repeat an earlier row's run id with
    N, D, loss and every column of ``frame`` equal as shown (`same_as_shown`)."""
    again: dict[int, int] = {}
    ids = pd.Series(run_ids.to_numpy()).astype(str)
    values = {c: pd.to_numeric(runs[c], errors="coerce").to_numpy(float) for c in ("N", "D", "loss")}
    cells = [(_as_number(frame[c]), frame[c].astype(str).str.strip().to_numpy()) for c in frame.columns]
    for positions in ids.groupby(ids, sort=False).indices.values():
        for k, i in enumerate(positions[1:], start=1):
            if exact[i]:
                continue
            earlier = positions[:k]
            # cheap bounds first (rounding moves none of them further; a loss's lost trailing zero, 3.10 read
            # as 3.1, would make 3.06 "equal as shown"), then the cell-by-cell comparison
            close = np.ones(len(earlier), bool)
            with np.errstate(all="ignore"):
                for c, tolerance in SAME_RUN_TOLERANCE.items():
                    close &= np.abs(values[c][earlier] / values[c][i] - 1.0) <= tolerance
                for number, text in cells:  # every other column: the same text, or numbers within 5%
                    close &= (text[earlier] == text[i]) | (np.abs(number[earlier] / number[i] - 1.0) <= 0.05)
            j = next((j for j in earlier[close] if j not in again and _same_row(runs, frame, i, j)), None)
            if j is not None:
                again[int(i)] = int(j)
    return again


def _as_number(column: pd.Series) -> np.ndarray:
    """The column's cells as numbers, as `same_as_shown` reads them (NaN where a cell is not one)."""
    return np.array([_cell_number(v) for v in column], dtype=float)


def _cell_number(value) -> float:
    """One cell as a number (counts as `numeric` reads them, "1.3B"); NaN for text, a boolean, a gap or a list
    (a wandb config's, as `analysis.sources.wandb` keeps it)."""
    if isinstance(value, bool) or not pd.api.types.is_scalar(value):
        return np.nan
    return float(pd.to_numeric(_count(value), errors="coerce"))


def _same_row(runs: pd.DataFrame, frame: pd.DataFrame, i: int, j: int) -> bool:
    """N, D and loss first (most pairs differ there), then every column of ``frame``."""
    return all(same_as_shown(runs[c].iloc[i], runs[c].iloc[j]) for c in ("N", "D", "loss")) and all(
        same_as_shown(frame[c].iloc[i], frame[c].iloc[j]) for c in frame.columns
    )


def same_as_shown(a, b) -> bool:
    """Whether two cells agree: both missing, the same text, or numbers (counts as `numeric` reads them,
    "1.3B") equal to the significant digits the shorter one shows (3.8332 and 3.833226; 1.3e9 and 1312345678)."""
    x, y = _cell_number(a), _cell_number(b)
    if np.isfinite(x) and np.isfinite(y):
        digits = min(_digits(x), _digits(y))
        return bool(np.isclose(float(f"{x:.{digits - 1}e}"), float(f"{y:.{digits - 1}e}"), rtol=1e-12, atol=0.0))
    if all(pd.api.types.is_scalar(v) and pd.isna(v) for v in (a, b)):
        return True
    return str(a).strip() == str(b).strip()


def _digits(value: float) -> int:
    """Significant digits ``value`` shows (its shortest repr; an integer's trailing zeros are not shown)."""
    mantissa = repr(abs(float(value))).split("e")[0].replace(".", "").strip("0")
    return max(len(mantissa), 1)


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
