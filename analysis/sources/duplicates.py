"""Rows a fit must not count twice, and rows that may be one run counted twice.

* exact duplicate rows (the same N, D, loss and every other column as an earlier row, its run id and bookkeeping
  aside: a table listed twice) are counted once, and a warning says how many and which; so is a row repeating an
  earlier row's run id and every column, numbers to the digits the shorter shows (the same run exported twice,
  once rounded);
* rows that look like one run listed twice but are kept (they may be seeds) are warned about: one run id on rows
  differing in the loss alone; rows under several run ids agreeing in everything, their seed included, but the loss
  (a GPU rerun); rows under several run ids equal to the digits the shorter shows (an export rounded and renamed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sources.rows import count_value, listing, row_label, text_cells


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
    _warn_renamed_copies(runs, frame, run_ids, ~repeated, warnings)
    return ~repeated


# a loss rounded to 4 to 12 significant digits (3.833 beside 3.833226): seeds rarely agree so closely, where a
# trailing zero lost (3.20 read as 3.2) or losses written to 2 decimals make seeds agree often (review19); a float
# at full precision shows 15 to 17, and so differs in length from another without being rounded
ROUNDED_DIGITS = (4, 12)
ROUNDED_APART = 1e-3  # the most two such losses differ by, relatively


def _warn_renamed_copies(
    runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, kept: np.ndarray, warnings: list[str]
) -> None:
    """A warning naming kept rows under two run ids whose N, D and loss are equal to the digits the shorter shows,
    one loss shown to fewer digits (3.8332 beside 3.833226), and whose other columns agree, their bookkeeping
    aside: an export rounded and renamed, appended to the first (user28: 6 such rows were 6 more seeds, and every
    budget's N_opt interval narrowed). Kept, since seeds can agree so; said, since at full precision they rarely do."""
    from analysis.sources.curverows import MODEL_NAMES, NAME_COLUMNS
    from analysis.sources.groups import is_run_metadata

    names = set(NAME_COLUMNS) - set(MODEL_NAMES)  # a run's name differs between the two copies, as its id does
    compared = frame[[c for c in frame.columns if not is_run_metadata(c) and c not in names]]
    positions = np.flatnonzero(kept)
    key = pd.DataFrame({c: runs[c].to_numpy()[positions] for c in ("N", "D")}).map(lambda v: float(f"{v:.2e}"))
    ids, loss = pd.Series(run_ids.to_numpy()).astype(str).to_numpy(), runs["loss"].to_numpy()
    digits = np.array([_digits(v) for v in loss])
    listed = []
    for group in key.groupby(["N", "D"], sort=False).indices.values():
        rows = positions[group]
        with np.errstate(all="ignore"):  # candidates first: pairs of ids, digits shown and losses apart as rounding is
            close = np.abs(loss[rows][:, None] / loss[rows][None, :] - 1.0) <= ROUNDED_APART
        close &= (ids[rows][:, None] != ids[rows][None, :]) & (digits[rows][:, None] != digits[rows][None, :])
        shorter = np.minimum(digits[rows][:, None], digits[rows][None, :])
        close &= (shorter >= ROUNDED_DIGITS[0]) & (shorter <= ROUNDED_DIGITS[1])
        for a, b in zip(*np.nonzero(np.tril(close, -1)), strict=True):
            i, j = rows[a], rows[b]
            if _same_row(runs, compared, i, j):
                listed.append(f"{row_label(j, run_ids)} ~ {row_label(i, run_ids)}")
    if listed:
        warnings.append(
            f"{len(listed)} pair(s) of rows under different run ids agree in N, D, the loss (to the digits the shorter "
            f"shows, one rounded) and every other column: {listing(listed)}; read as seeds of one point, but one run "
            "exported twice (rounded, renamed) would narrow the intervals: keep one of each if so"
        )


def _warn_reruns(
    runs: pd.DataFrame, frame: pd.DataFrame, run_ids: pd.Series, kept: np.ndarray, warnings: list[str]
) -> None:
    """A warning naming kept rows of several run ids that agree in every column, their seed included, but their losses
    (review18: a rerun on a GPU whose bf16 steps do not repeat bit for bit is no exact duplicate, and was pooled as a
    seed of its own run). Only in a table with a ``seed`` column: without one, such rows are how seeds are written."""
    from analysis.sources.schema import LOSS_NAME

    if "seed" not in frame.columns:
        return
    keys = _exact_keys(runs, frame).drop(columns="loss")
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


def _exact_keys(runs: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Per row: N, D, loss and the text of every other column of ``frame`` (blank: "") but a run's bookkeeping: its
    id, times and device (`groups.is_run_metadata`), which differ between two copies of one run (review15c: a run
    recorded twice at two times was counted twice; a wandb export appended to another, its Created and Runtime)."""
    from analysis.sources.groups import is_run_metadata

    others = [c for c in frame.columns if not is_run_metadata(c)]
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
    return float(pd.to_numeric(count_value(value), errors="coerce"))


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
