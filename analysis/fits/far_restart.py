"""A second search for approach 3's optimum where runs lie far off the first: from the grid again, those runs left
out of each start's score, then refined and polished on all runs; kept only where its objective is lower.

Why: the grid of starts (Besiroglu et al.) is coarse, and a diverged run (loss 5x) pulls its best points into a basin
that bends the law to the run. User40's table (18 runs, one at 5x at a 3-size budget's smallest N): every one of the
16 best grid points led to E = 2.455, A = 3.7e34, alpha = 4.26 at objective 0.0020042, while the true law scores
0.0019679 there (its nearest grid point ranked 685th); the outlier rule, scoring runs against that law, then flagged
a clean run at z -26.8 and missed another 30% high. The run far off that law was a clean one (the law went through
the diverged run, its neighbour in N): leaving out the far runs does not help, but scoring each grid point without its
own farthest runs (as many as lay far off the first optimum, by the outlier rule's cut) ranks the points near the
loss's own basin among the best; refined and polished on all runs they give the lower optimum (0.0019290 there,
E = 1.42, alpha 0.262, beta 0.247 for 1.69, 0.34, 0.28), a Huber fit of all the runs as before. On clean runs
the cut finds a run now and then (13 of 40 clean 30-run ladders), a few percent off: only a run more than `FAR_LOSS`
off is searched again for.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from analysis.fits.outliers import residual_outliers

# a run this far off in log-loss (10%) can lead the grid astray; a chance flag of clean runs (3.5 robust σ̂ at 1-2%
# noise) cannot, and searching again for it cost 10-13% of a point fit on clean ladders (13 of 40 searched again)
FAR_LOSS = float(np.log(1.1))
MAX_SHARE = 0.25  # left out of the second search at most this share of the runs: else the first fit is no guide


def restart_without_far_runs(
    objective, theta_c: np.ndarray, value: float, grid: np.ndarray, starts: int, refine: Callable, polish: Callable
):
    """The optimum of ``objective`` searched again where ``theta_c`` leaves runs far off it (`residual_outliers`:
    the outlier rule's cut, on the residuals themselves, one of them more than `FAR_LOSS` off): from the ``starts``
    points of ``grid`` best when each point's own farthest runs, as many, are left out of its score, refined
    (``refine``: the batched BFGS) and the best
    polished (``polish``: θc → (θc, F, result, max |gradient|)) on all runs. None where no run lies that far, too
    many do (`MAX_SHARE`), or the polish does not beat ``value``; else the polish's tuple, the refined starts'
    objectives (for how many agree) and the count of far runs."""
    residuals = objective.residuals(objective.from_centered(theta_c))
    flagged = [i for i, _ in residual_outliers(residuals)]
    if not flagged or np.abs(residuals[flagged]).max() <= FAR_LOSS:
        return None  # noise: a chance flag of a few percent does not lead the grid astray
    far = len(flagged)
    if far > MAX_SHARE * len(residuals):
        return None
    kept = len(residuals) - far  # each grid point scored by its best-fitted runs: a trimmed sum
    scores = np.concatenate([np.sort(terms, axis=1)[:, :kept].sum(axis=1) for terms in objective.grid_terms(grid)])
    refined, values, _ = refine(objective, objective.to_centered(grid[np.argsort(scores)[:starts]]))
    if not np.isfinite(values).any():
        return None
    polished = polish(objective, refined[int(np.nanargmin(values))])
    return (*polished, values, far) if polished[1] < value * (1 - 1e-9) else None
