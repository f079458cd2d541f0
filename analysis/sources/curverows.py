"""A table whose rows are training curves: a run id repeated at growing token counts (a wandb export,
a log scraped per evaluation). Read as runs, each evaluation would be a run of its own, trained on
that many tokens with a schedule made for more: 35 runs with 10 evaluations each became 350 "runs" in
47 budgets, and approach 2 put a parabola through mid-training points. Here each run's last row (the
most tokens) is its final point and every row is a point of its curve, as a store's curves.csv is.

Rows are read as curves only when they look like one: every run id holds one N, its token counts
differ, its budget column (if any) holds one value, and in most runs the loss at the most tokens is
below the loss at the fewest (rows may come in any order). A table keyed by model name at several budgets (``model-50M`` at 4 budgets)
repeats a run id at growing token counts too, but each row is a run: it stays rows, and a note says why.
Without a budget column such a table looks exactly like curves (one N, growing D, falling loss) and
is read as curves: name the budgets in a column (or give each row its own run id).

Without a ``run_id`` column, a table with a step column (``step``, ``iteration``, ``checkpoint``: a suite's
checkpoints as rows, as Pythia publishes them) names its runs by its ``run``/``name``/``model`` column
(`run_key`); read as runs, 8 models x 8 checkpoints were 64 "runs" in 19 budgets spanning up to 2x in C.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sources.rows import numeric
from scaling.flops import tokens_6nd

RUN_ID = "run_id"
# Without a run_id, a table with a step column is checkpoints (Pythia's: model, step, tokens, loss): the first
# of these columns names each row's run. Without a step column a model name may repeat over separate runs
# (one per token count: approach 3's grid), so it names none.
STEP_COLUMNS = ("step", "Step", "global_step", "iteration", "iter", "checkpoint")  # not steps, _step: a run's total
NAME_COLUMNS = ("run", "run_name", "name", "Name", "model", "model_name")


def run_key(frame: pd.DataFrame) -> str | None:
    """The column naming each row's run: ``run_id``, else (rows with a `STEP_COLUMNS` column) the first of
    `NAME_COLUMNS`; None when rows name no run."""
    if RUN_ID in frame.columns:
        return RUN_ID
    if not any(c in frame.columns for c in STEP_COLUMNS):
        return None
    return next((c for c in NAME_COLUMNS if c in frame.columns), None)


def split_curve_rows(
    frame: pd.DataFrame,
    run_ids: pd.Series,
    picked: tuple,
    curves: pd.DataFrame | None,
    notes: list[str],
    budget_col: str | None = None,
) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame | None]:
    """``frame`` (and its ``run_ids``) cut to each run's last row, and the curves (run_id, tokens and
    the loss column) of every row, when a run id repeats at more than one token count, the source has
    no curves of its own and the rows look like curves (the module docstring); else everything as given.
    ``picked``: the N, D, C and loss columns (D None: tokens = C/(6N)); ``budget_col``: the budget column."""
    n_col, d_col, c_col, loss_col = picked
    key = run_key(frame)
    if curves is not None or key is None or not run_ids.duplicated().any():
        return frame, run_ids, curves
    n = pd.Series(numeric(frame, n_col)[0], index=frame.index)
    if d_col is not None:
        tokens = pd.Series(numeric(frame, d_col)[0], index=frame.index)
    else:
        tokens = pd.Series(tokens_6nd(numeric(frame, c_col)[0], n.to_numpy()), index=frame.index)
    counts = tokens.groupby(run_ids).nunique()
    if not (counts > 1).any() or (n.groupby(run_ids).nunique() > 1).any():  # seeds, or several N: not one run
        return frame, run_ids, curves
    why = _not_curves(frame, run_ids, tokens, loss_col, budget_col)
    if why:
        notes.append(f"rows are runs, not training curves, though column {key!r} repeats: {why}")
        return frame, run_ids, curves
    last = tokens.fillna(-np.inf).groupby(run_ids).idxmax()  # the row with the most tokens: the final point
    keep = frame.index.isin(last.to_numpy())
    curve = pd.DataFrame({"run_id": run_ids.to_numpy(), "tokens": tokens.to_numpy(), loss_col: frame[loss_col]})
    notes.append(
        f"rows are training curves: {len(frame)} rows of {len(last)} runs (column {key!r} repeats at "
        f"{int(counts.max())} token counts at most); each run's last row (most tokens) is its final point, "
        "every row a point of its curve"
    )
    return frame[keep], run_ids[keep], curve.reset_index(drop=True)


def _not_curves(frame: pd.DataFrame, run_ids: pd.Series, tokens: pd.Series, loss_col: str, budget_col) -> str:
    """Why rows sharing a run id are not one run's curve ("" when they may be)."""
    if budget_col is not None and budget_col in frame.columns:
        budgets = pd.Series(numeric(frame, budget_col)[0], index=frame.index).groupby(run_ids).nunique()
        if (budgets > 1).any():
            run = budgets.index[int(np.argmax(budgets.to_numpy() > 1))]
            return f"run {run!r} has {int(budgets[run])} values of budget column {budget_col!r} (a curve has one)"
    order = pd.DataFrame({"run": run_ids, "tokens": tokens, "loss": numeric(frame, loss_col, count=False)[0]})
    order = order[run_ids.duplicated(keep=False)].sort_values(["run", "tokens"], kind="stable")
    ends = order.groupby("run")["loss"].agg(["first", "last"])  # at the fewest and the most tokens
    if (ends["last"] >= ends["first"]).mean() > 0.5:
        return "in most runs the loss at the most tokens is not below the loss at the fewest (a curve's falls)"
    return ""
