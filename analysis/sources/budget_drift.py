"""A budget column whose runs' 6·N·D moves with N inside each budget: it fixes another compute.

DeepSeek (2024) counts C = M·D, M = 72·n_layer·d² + 12·n_layer·d·l_seq non-embedding FLOPs per token: at one budget
its small models have M ≫ 6·N, so 6·N·D/C rises with N along every IsoFLOP profile (user38: 0.45x at the smallest size
to 0.75x at the largest). A sweep planned with non-embedding N and fitted with N total drifts the other way. Approach 2
then finds each profile's minimum at fixed column compute, not at fixed 6·N·D, while approach 3 and `scaling optimal`
allocate C = 6·N·D: the two disagree (user38: N_opt 6.66e8 [6.24e8, 7.94e8] against 5.52e8 [5.30e8, 5.86e8]; the truth
under 6·N·D 5.45e8) and nothing said why. Rounded labels scatter 6·N·D/budget without a direction; a drift has one,
the same at every budget.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

DRIFT = 0.10  # 6·N·D/budget changing by more than this across a budget's sizes (median over budgets) is a drift
MIN_SIZES = 3  # budgets with this many distinct sizes or more are read


def drift_warning(runs: pd.DataFrame, budgets: np.ndarray) -> str:
    """The warning ("" when none) when, in every budget of `MIN_SIZES`+ sizes (2 or more such budgets), 6·N·D/budget
    moves with N in one direction, by more than `DRIFT` across the budget's sizes (median over budgets)."""
    ln_r, ln_n = np.log(runs["C"].to_numpy() / budgets), np.log(runs["N"].to_numpy())
    changes, ends = [], []
    for budget in np.unique(budgets):
        at = budgets == budget
        if len(np.unique(ln_n[at])) < MIN_SIZES:
            continue
        slope, intercept = np.polyfit(ln_n[at], ln_r[at], 1)
        lo, hi = ln_n[at].min(), ln_n[at].max()
        changes.append(slope * (hi - lo))
        ends.append((intercept + slope * lo, intercept + slope * hi))
    if len(changes) < 2 or len({np.sign(c) for c in changes}) > 1 or abs(np.median(changes)) <= np.log1p(DRIFT):
        return ""
    lo, hi = np.exp(np.median(ends, axis=0))
    return (
        f"inside each budget, 6·N·D moves with N against the budget column (from {lo:.2g}x the budget at its smallest "
        f"size to {hi:.2g}x at its largest, median over {len(changes)} budgets): the column fixes another compute (C = "
        "M·D with M FLOPs per token other than 6·N, as DeepSeek's, or N of another kind), so approach 2's profiles are "
        "at fixed column compute and their minima are not the N_opt of 6·N·D that approach 3 and `scaling optimal` "
        "allocate (approach 3 reads each run's own N and D: its N_opt is the one at 6·N·D)"
    )
