"""The one rule that groups runs into compute budgets, used by the fits, the figures and the report.

A run's budget is the requested budget of the source's budget column (``budget_flops`` in a
results store) when that column is present and complete; otherwise runs are clustered by their
compute C = 6·N·D in log space: sorted ascending, a run opens a new budget when its ln C exceeds
the smallest ln C of the current budget by more than ln(1 + ``tolerance``); each run gets its
budget's geometric mean, so runs planned for one budget that differ by rounding share it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BUDGET_COLUMN = "budget_flops"  # the requested budget, as the trainer records it
BUDGET_TOLERANCE = 0.05  # C values within 5% of a budget's smallest belong to it (clustering only)


def assign_budgets(compute, given=None, tolerance: float = BUDGET_TOLERANCE) -> np.ndarray:
    """Each run's budget (FLOPs): ``given`` (requested budgets, one per run) when not None, else
    `cluster_budgets` of ``compute`` at ``tolerance``."""
    if given is not None:
        return np.asarray(given, dtype=float)
    return cluster_budgets(np.asarray(compute, dtype=float), tolerance)


def budgets_of_frame(
    frame: pd.DataFrame,
    compute,
    notes: list[str],
    column: str | None = BUDGET_COLUMN,
    tolerance: float = BUDGET_TOLERANCE,
) -> np.ndarray:
    """`assign_budgets` for a source's rows: the ``column`` of requested budgets wins when every
    value is a finite number > 0; one with gaps is noted and the budgets are clustered instead."""
    given = None
    if column is not None and column in frame.columns:
        requested = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
        if np.all(np.isfinite(requested) & (requested > 0)):
            given = requested
        else:
            notes.append(f"column {column!r} has missing values: budgets are clustered from C instead")
    return assign_budgets(compute, given, tolerance)


def cluster_budgets(compute: np.ndarray, tolerance: float = BUDGET_TOLERANCE) -> np.ndarray:
    """Each C value's budget under the clustering rule of the module docstring."""
    compute = np.asarray(compute, dtype=float)
    order = np.argsort(compute)
    labels = np.empty(len(compute))
    start = 0
    sorted_c = compute[order]
    for i in range(1, len(sorted_c) + 1):
        if i == len(sorted_c) or sorted_c[i] > sorted_c[start] * (1.0 + tolerance):
            labels[order[start:i]] = np.exp(np.mean(np.log(sorted_c[start:i])))
            start = i
    return labels
