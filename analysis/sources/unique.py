"""The unique tokens of each run (the data it could draw from; D beyond it repeats data), for the
data-constrained law (`analysis.fits.muennighoff`): a column of the source, by default the store's
``unique_tokens``, else ``U``, else one of them named with a unit (``unique_tokens_B``). Absent or
unusable values are NaN: only that law needs them.

The column is read as D's is: text counts ("25B", "1,300,000") are numbers, and a unit in its name is
applied (`analysis.sources.colunits`; not to a column named with ``--as-given``). Read as given,
``unique_tokens_B`` beside ``tokens_B`` gave 5e8 to 1.3e11 epochs, and "25B" no unique tokens at all.
A median D/U outside `EPOCHS` is warned about: U and D in different units."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scaling.errors import DataError

UNIQUE_COLUMNS = ("unique_tokens", "U", "unique")  # tried in order when --unique-column names none
EPOCHS = (1e-6, 1e5)  # a median D/U outside this is a unit mix-up (U in billions beside D in tokens)


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
    return found or next((c for c in frame.columns if (u := split_unit(str(c), "d")) and u[0] in UNIQUE_COLUMNS), None)


def unique_tokens_of(
    frame: pd.DataFrame,
    column: str | None,
    source: str,
    *,
    tokens=None,
    lines: tuple[list[str], list[str]] | None = None,
    as_given: tuple = (),
) -> np.ndarray:
    """Float array of each row's unique tokens (NaN where the column is absent or the value is not
    a finite number > 0), as the module docstring reads them. A named ``column`` the source lacks is a
    DataError naming it. ``tokens``: each row's D, for the epochs check; ``lines``: (notes, warnings)."""
    from analysis.sources.colunits import AS_GIVEN, split_unit
    from analysis.sources.rows import numeric

    picked = unique_column_of(frame, column, source)
    if picked is None:
        return np.full(len(frame), np.nan)
    notes, warnings = lines if lines is not None else ([], [])
    values, bad = numeric(frame, picked)
    unit = split_unit(str(picked), "d")
    if unit is not None and picked not in as_given:
        values = values * unit[2]
        notes.append(
            f"column {picked!r} is in {unit[1]} (its name says so): read as unique tokens x {unit[2]:g} "
            f"({AS_GIVEN} {picked} if it holds tokens as they are)"
        )
    values = np.where(bad, np.nan, values)
    epochs = np.asarray(tokens, dtype=float) / values if tokens is not None else np.array([np.nan])
    median = float(np.nanmedian(epochs)) if np.isfinite(epochs).any() else None
    if median is not None and not EPOCHS[0] <= median <= EPOCHS[1]:
        warnings.append(
            f"the median run repeats its unique tokens {median:.3g} times (D/U, column {picked!r}): are U and D in "
            "different units (one in billions?)? The data-constrained fit uses them as read"
        )
    return values
