"""The noise variance approach 2's N_opt intervals draw from (`analysis.fits.vertex_intervals.n_opt_intervals`):
each parabola's residual sum of squares pooled over the budgets, σ̂² = Σ r² / Σ (runs − 3), without
the budgets one wild run makes noisy. A run 6% high at one budget of a 5×5 ladder made σ̂ many times
the noise, widening every other budget's interval ([2.15e8, 2.55e8] at 1e19 became [1.27e8, 4.66e8])
and unbounding two. So each residual is standardized by its leverage (r / sqrt(1 − h): each is then
N(0, σ²) under normal noise) and the pooled ones tested by the outlier rule's residual test
(`analysis.fits.outliers.residual_outliers`, modified z-score beyond K); a budget holding one is left
out of the others' pool, and its own interval keeps the pool with it in (its parabola bends to that run,
so its noise is its own). Clean ladders flag nothing and pool as before.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.outliers import leverages, residual_outliers
from analysis.fits.results import Parabola


def design_matrix(profile: Parabola) -> np.ndarray:
    """The parabola's least-squares design, columns 1, u, u² with u = ln N − its centre (runs × 3)."""
    u = np.log(profile.n) - profile.center
    return np.stack([np.ones_like(u), u, u * u], axis=1)


def _standardized(profile: Parabola) -> np.ndarray:
    """r / sqrt(1 − h) of the parabola's runs (h: the leverages of its least-squares fit); NaN when it
    has no more runs than 3 coefficients (it passes through them: nothing to measure)."""
    r = np.asarray(profile.residuals, dtype=float)
    if len(r) <= 3:
        return np.full(len(r), np.nan)
    h = leverages(design_matrix(profile), np.ones(len(r), dtype=bool))
    return r / np.sqrt(np.clip(1.0 - h, 1e-12, None))


def noisy_runs(profiles: list[Parabola]) -> dict[int, tuple[str, int]]:
    """The profiles holding a residual the residual test flags (module docstring): index → (the run farthest
    off its parabola, how many of its runs are flagged; the parabola bends to a wild run, so its neighbours
    can be flagged with it)."""
    standardized = [_standardized(p) for p in profiles]
    owner = np.concatenate([np.full(len(s), k) for k, s in enumerate(standardized)])
    place = np.concatenate([np.arange(len(s)) for s in standardized])
    flagged: dict[int, list[tuple[float, int]]] = {}
    for i, z in residual_outliers(np.concatenate(standardized)):
        flagged.setdefault(int(owner[i]), []).append((abs(z), int(place[i])))
    return {k: (str(profiles[k].run_id[max(runs)[1]]), len(runs)) for k, runs in sorted(flagged.items())}


def pool(profiles: list[Parabola], members: list[int]) -> tuple[float, int]:
    """(σ̂², degrees of freedom) of the residuals of ``profiles[k]`` for k in ``members``."""
    dof = sum(len(profiles[k].n) - 3 for k in members)
    rss = sum(float(np.sum(np.square(profiles[k].residuals))) for k in members)
    return (rss / dof if dof > 0 else float("nan")), dof
