"""The unique tokens of each run (the data it could draw from; D beyond it repeats data), for the
data-constrained law (`analysis.fits.muennighoff`): a column of the source, by default the store's
``unique_tokens``, else ``U``, else one of them named with a unit (``unique_tokens_B``). Absent or
unusable values are NaN: only that law needs them.

The column is read as D's is: text counts ("25B", "1,300,000") are numbers, and a unit in its name is
applied with D's (`analysis.sources.colunits`, role "u"; not to a column named with ``--as-given``). Read as given,
``unique_tokens_B`` beside ``tokens_B`` gave 5e8 to 1.3e11 epochs, and "25B" no unique tokens at all.
A median D/U outside `EPOCHS` is warned about: U and D in different units. Runs that repeat their data
beyond `COSTLY_EPOCHS` are warned about for the fits that count every token as fresh (`repeats_warning`)."""

from __future__ import annotations

import shlex

import numpy as np
import pandas as pd

from scaling.errors import DataError

UNIQUE_COLUMNS = ("unique_tokens", "U", "unique")  # tried in order when --unique-column names none
# and then, in any case, spaces as underscores (user27: Unique_Tokens, "unique tokens", n_unique_tokens unfound)
UNIQUE_NAMES = ("unique_tokens", "n_unique_tokens", "num_unique_tokens", "unique_data", "unique_token_count")
EPOCHS_COLUMN = "epochs"  # D/U, as a store's table writes it: U = D/epochs where no U column is given
EPOCHS_NAMES = (EPOCHS_COLUMN, "num_epochs", "n_epochs", "epoch_count")  # any case, spaces as _ (user30: Epochs)
EPOCHS = (1e-6, 1e5)  # a median D/U outside this is a unit mix-up (U in billions beside D in tokens)
# Muennighoff et al. 2023 (abstract, Fig. 3): up to 4 epochs of repeated data change the loss negligibly against
# fresh data; by their law 4 epochs are worth 3.7 fresh ones (R*_D = 15.4), 32 epochs worth 14
COSTLY_EPOCHS = 4.0


def unique_column_of(frame: pd.DataFrame, column: str | None, source: str) -> str | None:
    """The unique-tokens column: ``column`` (must exist), else the first of `UNIQUE_COLUMNS`, else one of
    them named with a unit (unique_tokens_B), else None."""
    from analysis.sources.colunits import split_unit

    if column is not None and column not in frame.columns:
        raise DataError(
            f"--unique-column {column!r} is not a column of {source!r}; columns present: "
            f"{', '.join(map(str, frame.columns))}"
        )
    found = column or next((c for c in UNIQUE_COLUMNS if c in frame.columns), None)
    found = found or next((c for c in frame.columns if str(c).strip().lower().replace(" ", "_") in UNIQUE_NAMES), None)
    return found or next((c for c in frame.columns if (u := split_unit(str(c), "d")) and u[0] in UNIQUE_COLUMNS), None)


def unique_tokens_of(frame: pd.DataFrame, column: str | None, tokens, warnings: list[str]) -> np.ndarray:
    """Float array of each row's unique tokens in ``column`` (`unique_column_of`; its name's unit already
    applied by `analysis.sources.colunits`), NaN where there is no column or the value is not a finite
    number > 0. ``tokens``: each row's D, for the epochs check, said in ``warnings``."""
    from analysis.sources.rows import numeric

    named = next((c for c in frame.columns if str(c).strip().lower().replace(" ", "_") in EPOCHS_NAMES), None)
    if column is None and named is not None:  # user27: epochs beside D, no U: the repeats went unseen
        epochs = numeric(frame, named, False)[0]
        if np.isfinite(epochs).any():
            warnings.append(
                f"no unique-tokens column: each run's U read as D / {named!r} (the data it repeated); name one "
                "with --unique-column to read U instead"
            )
            return np.asarray(tokens, dtype=float) / np.where(epochs > 0, epochs, np.nan)
    if column is None:
        return np.full(len(frame), np.nan)
    values, bad = numeric(frame, column, "d")
    values = np.where(bad, np.nan, values)
    cells = frame[column]
    given = bad & cells.notna().to_numpy() & (cells.astype(object).astype(str).str.strip() != "").to_numpy()
    if given.any():  # user17: U = -5 or "lots" left its run out of the data-constrained fit with no row named
        listed = ", ".join(f"row {i + 1}: {v!r}" for i, v in zip(frame.index[given][:5], cells[given][:5]))
        warnings.append(
            f"column {column!r}: {int(given.sum())} value{'s are' if given.sum() > 1 else ' is'} not a count of unique "
            f"tokens > 0 ({listed}"
            f"{', ...' if given.sum() > 5 else ''}): those runs have none, and the data-constrained fit leaves them out"
        )
    epochs = np.asarray(tokens, dtype=float) / values
    median = float(np.nanmedian(epochs)) if np.isfinite(epochs).any() else None
    if median is not None and not EPOCHS[0] <= median <= EPOCHS[1]:
        warnings.append(
            f"the median run repeats its unique tokens {median:.3g} times (D/U, column {column!r}): are U and D in "
            "different units (one in billions?)? The data-constrained fit uses them as read"
        )
    return values


def repeats_warning(tokens, unique, refit: tuple) -> list[str]:
    """The warning for approaches 1-3 (which count every token as fresh) on runs that repeat their unique tokens
    more than `COSTLY_EPOCHS` times, as a list of that line ([] when none does, or U is unknown): how many runs
    repeat (D > U), how many beyond that, and the command that fits the data-constrained law instead, runnable as
    printed: ``refit`` (`ColumnMap.refit`: the source, then the options that read it as this command did), quoted."""
    epochs = np.asarray(tokens, dtype=float) / np.asarray(unique, dtype=float)  # NaN where U is unknown
    costly = int(np.sum(epochs > COSTLY_EPOCHS))
    if not costly:
        return []
    command = shlex.join(["scaling", "fit", refit[0], "--approach", "muennighoff", *refit[1:]])
    return [
        f"{int(np.sum(epochs > 1.0))} of {len(epochs)} runs repeat their unique tokens (D > U), {costly} of them for "
        f"more than {COSTLY_EPOCHS:g} epochs (up to {np.nanmax(epochs):.3g}), where repetition costs loss "
        "measurably (Muennighoff et al. 2023): approaches 1-3 count every token as fresh, so their law and N_opt "
        f"are biased; `{command}` fits the "
        "data-constrained law L(N, D, U) "
        '(README "Repeated data")'
    ]
