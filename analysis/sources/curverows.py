"""A table whose rows are training curves: a run id repeated at growing token counts (a wandb export,
a log scraped per evaluation). Read as runs, each evaluation would be a run of its own, trained on
that many tokens with a schedule made for more: 35 runs with 10 evaluations each became 350 "runs" in
47 budgets, and approach 2 put a parabola through mid-training points. Here each run's last row (the
most tokens) is its final point and every row is a point of its curve, as a store's curves.csv is.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from scaling.flops import tokens_6nd


def split_curve_rows(
    frame: pd.DataFrame, run_ids: pd.Series, picked: tuple, curves: pd.DataFrame | None, notes: list[str]
) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame | None]:
    """``frame`` (and its ``run_ids``) cut to each run's last row, and the curves (run_id, tokens and
    the loss column) of every row, when a run id repeats at more than one token count and the source
    has no curves of its own and every run id holds one N; else everything as given. ``picked``: the N, D, C and loss columns
    (D None: tokens = C/(6N))."""
    n_col, d_col, c_col, loss_col = picked
    if curves is not None or "run_id" not in frame.columns or not run_ids.duplicated().any():
        return frame, run_ids, curves
    if d_col is not None:
        tokens = pd.to_numeric(frame[d_col], errors="coerce")
    else:
        n = pd.to_numeric(frame[n_col], errors="coerce")
        tokens = pd.Series(tokens_6nd(pd.to_numeric(frame[c_col], errors="coerce").to_numpy(), n.to_numpy()))
        tokens.index = frame.index
    counts = tokens.groupby(run_ids).nunique()
    sizes = pd.to_numeric(frame[n_col], errors="coerce").groupby(run_ids).nunique()
    if not (counts > 1).any() or (sizes > 1).any():  # one token count: duplicates or seeds; several N: not one run
        return frame, run_ids, curves
    order = tokens.fillna(-np.inf)
    last = order.groupby(run_ids).idxmax()  # the row with the most tokens: the run's final point
    keep = frame.index.isin(last.to_numpy())
    curve = pd.DataFrame({"run_id": run_ids.to_numpy(), "tokens": tokens.to_numpy(), loss_col: frame[loss_col]})
    notes.append(
        f"rows are training curves: {len(frame)} rows of {len(last)} runs (column 'run_id' repeats at "
        f"{int(counts.max())} token counts at most); each run's last row (most tokens) is its final point, "
        "every row a point of its curve"
    )
    return frame[keep], run_ids[keep], curve.reset_index(drop=True)
