"""A side's loss frontier bent by a run off its law: at one of its budgets the law's least loss lies more than
`BENT_SHARE` below every run trained there, as approach 2 calls a parabola bent (at 10% there: a parabola through
a budget's own runs; a law through all budgets' runs sits closer to each budget's lowest run).

User41: a candidate whose run at its smallest budget's smallest N diverged (loss x5) was fitted with a law that
passes through that run (alpha 5.98, E 2.53): its frontier at 1e18 FLOPs, 2.954, lay 10% below the lowest of the
runs there (3.268), and the loss difference printed -0.5863 [-0.6937, -0.1661] for a true -0.08 (m 11.7 for 2).
The numbers a comparison reads from such a budget are unidentified there; the note names the runs the outlier rule
flagged, which --exclude-outliers drops.
"""

from __future__ import annotations

import numpy as np

from analysis.compare.multiplier import frontier_of
from analysis.sources.budgets import BUDGET_TOLERANCE

# A law's least loss at a budget lies below that budget's lowest run by the loss's curvature between the optimum and
# the nearest size: on clean ladders (1% noise, 8 seeds each) at most 1.0% with 7 sizes over 0.7 decades, 2.0% with
# 3 over 1 decade, 3.2% with 4 over 1.5 decades (measured 2026-11-28; README, Compare).
BENT_SHARE = 0.05


def bent_budgets(side) -> dict[float, tuple[float, float]]:
    """{budget: (frontier loss, lowest run loss)} of the budgets of ``side`` (a `Side`) where the frontier of its
    fitted law lies more than `BENT_SHARE` below every run of that budget (runs placed at their nearest budget by
    6·N·D, as the side's budgets are)."""
    budgets = np.asarray(side.budgets, dtype=float)
    if not np.isfinite(list(side.fit.params.values())).all():
        return {}
    compute = 6.0 * np.asarray(side.fit.n) * np.asarray(side.fit.d)
    nearest = np.argmin(np.abs(np.log(compute)[:, None] - np.log(budgets)[None, :]), axis=1)
    frontier = frontier_of(side.fit.params).loss(budgets)
    loss = np.asarray(side.fit.loss, dtype=float)
    out = {}
    for k, budget in enumerate(budgets):
        lowest = loss[nearest == k].min(initial=np.inf)
        if np.isfinite(lowest) and frontier[k] < (1.0 - BENT_SHARE) * lowest:
            out[float(budget)] = (float(frontier[k]), float(lowest))
    return out


def bent_at(side, compute) -> np.ndarray:
    """Whether each of ``compute`` lies nearest, in log C, to a budget of ``side`` whose frontier is bent
    (`bent_budgets`): where the figure draws that side's loss and m(C) as unidentified, as the table's rows say."""
    compute = np.asarray(compute, dtype=float)
    bent = bent_budgets(side)
    if not bent:
        return np.zeros(compute.shape, bool)
    budgets = np.asarray(side.budgets, dtype=float)
    nearest = budgets[np.argmin(np.abs(np.log(compute)[:, None] - np.log(budgets)[None, :]), axis=1)]
    return np.isin(nearest, list(bent))


def mark_bent(rows, sides: dict) -> list[str]:
    """Mark unidentified the numbers of ``rows`` (`Row`s, and the ends of the shared range) at a budget where a side
    of ``sides`` (role → `Side`) has its frontier bent (`bent_budgets`): that side's loss, the loss difference and
    m(C). Returns a note per side so."""
    notes = []
    for role, side in sides.items():
        bent = bent_budgets(side)
        if not bent:
            continue
        for row in rows:
            at = [b for b in bent if abs(np.log(row.compute / b)) <= np.log1p(BUDGET_TOLERANCE)]
            if not at:
                continue
            why = (
                f"the {role}'s frontier at {at[0]:.3g} FLOPs lies far below every run there: a run off its law bends it"
            )
            loss = row.baseline_loss if role == "baseline" else row.candidate_loss
            for estimate in (loss, row.loss_difference, row.multiplier):
                estimate.unidentified = estimate.unidentified or why
        flagged = [o.run_id for o in side.outliers] if not side.outliers_excluded else []
        listed = "; ".join(
            f"{b:.3g} FLOPs: {f:.4g}, {1 - f / low:.0%} below its lowest run's {low:.4g}"
            for b, (f, low) in bent.items()
        )
        notes.append(
            f"the {role}'s law gives a least loss far below every run of its budget(s) ({listed}; more than "
            f"{BENT_SHARE:.0%}): a run off the law bends it there, or its sizes lie far from that budget's optimum, so "
            "its loss, the loss difference and m(C) there are unidentified"
            + (
                f" (the outlier rule flagged {', '.join(flagged)}: --exclude-outliers drops "
                f"{'it' if len(flagged) == 1 else 'them'})"
                if flagged
                else " (a diverged run the outlier rule did not flag: --where can leave it out)"
            )
        )
    return notes
