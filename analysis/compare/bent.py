"""A side's loss frontier bent by a run off its law (`analysis.fits.bent_frontier`): at one of its budgets the law's
least loss lies far below every run trained there.

User41: a candidate whose run at its smallest budget's smallest N diverged (loss x5) was fitted with a law that
passes through that run (alpha 5.98, E 2.53): its frontier at 1e18 FLOPs, 2.954, lay 10% below the lowest of the
runs there (3.268), and the loss difference printed -0.5863 [-0.6937, -0.1661] for a true -0.08 (m 11.7 for 2).
The numbers a comparison reads from such a budget are unidentified there; the note names the runs the outlier rule
flagged, which --exclude-outliers drops.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bent_frontier import bent_budgets, bent_text, nearest_budget
from analysis.sources.budgets import BUDGET_TOLERANCE


def bent_at(side, compute) -> np.ndarray:
    """Whether each of ``compute`` lies nearest, in log C, to a budget of ``side`` whose frontier is bent
    (`bent_budgets`): where the figure draws that side's loss and m(C) as unidentified, as the table's rows say."""
    compute = np.asarray(compute, dtype=float)
    bent = bent_budgets(side.fit, side.budgets)
    if not bent:
        return np.zeros(compute.shape, bool)
    nearest = np.asarray(side.budgets, dtype=float)[nearest_budget(compute, side.budgets)]
    return np.isin(nearest, list(bent))


def mark_bent(rows, sides: dict) -> list[str]:
    """Mark unidentified the numbers of ``rows`` (`Row`s, and the ends of the shared range) at a budget where a side
    of ``sides`` (role → `Side`) has its frontier bent (`bent_budgets`): that side's loss, the loss difference and
    m(C). Returns a note per side so."""
    notes = []
    for role, side in sides.items():
        bent = bent_budgets(side.fit, side.budgets)
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
        notes.append(
            bent_text(bent, flagged, f"the {role}'s law")
            + "; its loss, the loss difference and m(C) there are unidentified"
        )
    return notes
