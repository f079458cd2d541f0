"""The unique tokens of each run (the data it could draw from; D beyond it repeats data), for the
data-constrained law (`analysis.fits.muennighoff`): a column of the source, by default the store's
``unique_tokens``, else ``U``. Absent or unusable values are NaN: only that law needs them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scaling.errors import DataError

UNIQUE_COLUMNS = ("unique_tokens", "U", "unique")  # tried in order when --unique-column names none


def unique_tokens_of(frame: pd.DataFrame, column: str | None, source: str) -> np.ndarray:
    """Float array of each row's unique tokens (NaN where the column is absent or the value is not
    a finite number > 0). A named ``column`` the source lacks is a DataError naming it."""
    if column is not None and column not in frame.columns:
        raise DataError(
            f"--unique-column {column!r} is not a column of {source!r}; columns present: "
            f"{', '.join(map(str, frame.columns))}"
        )
    picked = column or next((c for c in UNIQUE_COLUMNS if c in frame.columns), None)
    if picked is None:
        return np.full(len(frame), np.nan)
    values = pd.to_numeric(frame[picked], errors="coerce").to_numpy(dtype=float)
    return np.where(np.isfinite(values) & (values > 0), values, np.nan)
