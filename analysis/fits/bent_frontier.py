"""Budgets where approach 3's law is bent by a run off it: at one of the fitted budgets the law's least loss (its
frontier, at the compute-optimal allocation) lies more than `BENT_SHARE` below every run trained there, as approach
2 calls a parabola bent (`analysis.fits.bent_profiles`, at 10%: a parabola through a budget's own runs; a law
through every budget's runs sits closer to each budget's lowest run).

User41: a run diverged at 5x at the smallest budget's smallest N was fitted by a law through it (alpha 5.98, E 2.53):
its frontier at 1e18 FLOPs, 2.954, lay 10% below the lowest run there (3.268); `compare` printed m = 11.7 for 2 and
`optimal` a loss at 1e21 of 2.583 [2.19, 2.87] for 2.329, neither with a word of it. `scaling fit` warns (and
`optimal` repeats it); `compare` leaves the numbers at such budgets unidentified (`analysis.compare.bent`).
"""

from __future__ import annotations

import numpy as np

from analysis.fits import laws

# A law's least loss at a budget lies below that budget's lowest run by the loss's curvature between the optimum and
# the nearest size: on clean ladders (1% noise, 8 seeds each, measured 2026-11-28) at most 1.0% with 7 sizes over
# 0.7 decades, 2.0% with 3 over 1 decade, 3.2% with 4 over 1.5 decades.
BENT_SHARE = 0.05


def bent_budgets(fit, budgets) -> dict[float, tuple[float, float]]:
    """{budget: (frontier loss, lowest run loss)} of ``budgets`` (the table's, at 6·N·D) where the law of ``fit``
    (a `ParametricFit`) gives a least loss more than `BENT_SHARE` below every run of that budget (runs placed at
    their nearest budget in log 6·N·D); {} where the law has no finite parameters."""
    params = fit.params
    budgets = np.asarray(budgets, dtype=float)
    if not np.isfinite(list(params.values())).all() or not len(budgets):
        return {}
    with np.errstate(all="ignore"):
        n, d = laws.chinchilla_allocation(budgets, params["A"], params["B"], params["alpha"], params["beta"])
        frontier = laws.chinchilla_loss(n, d, **params)
    nearest = nearest_budget(6.0 * np.asarray(fit.n) * np.asarray(fit.d), budgets)
    loss = np.asarray(fit.loss, dtype=float)
    out = {}
    for k, budget in enumerate(budgets):
        lowest = loss[nearest == k].min(initial=np.inf)
        if np.isfinite(lowest) and frontier[k] < (1.0 - BENT_SHARE) * lowest:
            out[float(budget)] = (float(frontier[k]), float(lowest))
    return out


def nearest_budget(compute, budgets) -> np.ndarray:
    """The index into ``budgets`` of each of ``compute``'s nearest budget in log C: where a run, or a point of a
    figure, belongs."""
    compute, budgets = np.asarray(compute, dtype=float), np.asarray(budgets, dtype=float)
    return np.argmin(np.abs(np.log(compute)[:, None] - np.log(budgets)[None, :]), axis=1)


def bent_text(bent: dict, flagged: list[str], whose: str = "approach 3's law") -> str:
    """The sentence naming ``bent`` (`bent_budgets`) and the runs the outlier rule ``flagged`` ("" when none is)."""
    if not bent:
        return ""
    listed = "; ".join(
        f"{b:.3g} FLOPs: {f:.4g}, {1 - f / low:.0%} below its lowest run's {low:.4g}" for b, (f, low) in bent.items()
    )
    them = "it" if len(flagged) == 1 else "them"
    return (
        f"{whose} gives a least loss far below every run of its budget(s) ({listed}; more than {BENT_SHARE:.0%}): "
        "a run off the law bends it there, or the sizes lie far from that budget's optimum"
        + (
            f" (the outlier rule flagged {', '.join(flagged)}: --exclude-outliers drops {them})"
            if flagged
            else " (a diverged run the outlier rule did not flag: --where can leave it out)"
        )
    )
