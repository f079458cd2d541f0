"""The shape error of approach 2's parabolas, added to their N_opt intervals (`analysis.fits.vertex_intervals`).

The loss at a fixed budget is not a parabola in ln N: under L = E + A/N^α + B/D^β, with D = C/(6N)
and v = ln(N/N_opt), it is E + K(C)·(e^(−α·v)/α + e^(β·v)/β) (K = α·A/N_opt^α = β·B/D_opt^β): one
skewed curve in v, scaled by K(C), at every budget. A parabola fitted over sizes spread wide around the
optimum puts its vertex off the minimum, by a fraction that grows with the spread and is the same at
every budget whose sizes sit alike around its optimum (so the law's a is unbiased, its coefficient is not). The vertex's noise interval does
not show it: 9 sizes over N_opt·10^(±1) at 0.1% noise put every vertex 4.0% high with an interval
of ±1.5% (1 of 48 intervals covered the truth).

So the skew is measured and each interval widened by the error it makes: a cubic in u = ln N − centre
per budget with >= `MIN_SHAPE_SIZES` distinct sizes gives ρ = d3/d2 (the skew relative to the
curvature, one number for the one curve, measured around each budget's centre), pooled over those budgets (less any left out of the noise pool for a wild run, which bends a cubic
as it does a parabola: `analysis.fits.pooled_noise`) weighted by their precision, ρ̄ = Σ d2·d3/q / Σ d2²/q
(q: the cubic's (XᵀX)⁻¹ entry of d3; the noise variance cancels); each budget's loss is refitted
as d0 + d1·u + d2·(u² + ρ̄·u³) (linear in d: as many coefficients as its parabola), and the
interval's end on the side of that fit's minimum is moved out by the minimum's shift from the
vertex (`shape_shift`). Coverage of the truth by 95% intervals and their median width (upper/lower),
parabola alone → with this term, over 12 ladders × 4 budgets each (Chinchilla's law, budgets 6e18 to
2e20, `analysis.synthetic.isoflop_runs` seeds 100-111, 200 draws; tests/test_isoflop_coverage.py):
    0.1% noise, N_opt·10^(±1), 9 sizes:    1/48 → 48/48, width 1.041 → 1.086
    0.1% noise, ±0.78 decades, 5 sizes:   27/48 → 42/48, width 1.064 → 1.100
    0.3% noise, ±1 decade, 9 sizes:       25/48 → 45/48, width 1.085 → 1.141
    1% noise, ±1 decade, 9 sizes:         39/48 → 45/48, width 1.275 → 1.392
    1% noise, ±0.78 decades, 7 sizes:     45/47 → 47/47, width 1.503 → 1.662
    1% noise, ±0.78 decades, 5 sizes:     45/47 → 47/47, width 1.574 → 1.807
    2% noise, ±0.78 decades, 5 sizes:     27/29 → 29/29, width 2.560 → 3.169 (18 unidentified, both)
    2% noise, ±1 decade, 9 sizes:         42/46 → 43/45, width 1.642 → 1.919
Candidates measured and not taken: one cubic per budget, its own minimum's shift (as honest, but
its noise widened the 1%-noise 5-size intervals to 2.108 and the 2% ones to 3.871; 41/48 at 0.3%);
the same shift only where a lack-of-fit F test (cubic against parabola, all budgets together)
rejects the parabola (28 of 48 at 0.1% noise with 5 sizes: one spare degree of freedom a budget
leaves the test no power); pooling the residuals' lack of fit into the noise (the pooled residuals
already hold it, and the interval stayed ±1.5%: the vertex's bias is not noise). A ladder without a budget of 5+
sizes has no cubic to measure the skew by: its intervals are the parabola's alone, as before.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.results import Parabola

MIN_SHAPE_SIZES = 5  # a cubic's 4 coefficients and one degree of freedom to tell it from the noise


def _cubic_design(profile: Parabola) -> np.ndarray:
    u = np.log(profile.n) - profile.center
    return np.stack([np.ones_like(u), u, u * u, u**3], axis=1)


def pooled_skew(profiles: list[Parabola]) -> tuple[float, int] | None:
    """(ρ̄, how many budgets measured it): the cubic-to-quadratic ratio d3/d2 of the loss in ln N,
    pooled over the budgets with >= `MIN_SHAPE_SIZES` distinct sizes (module docstring); None without one."""
    numerator = denominator = 0.0
    measured = 0
    for profile in profiles:
        if len(set(profile.n)) < MIN_SHAPE_SIZES:
            continue
        design = _cubic_design(profile)
        _, _, d2, d3 = np.linalg.lstsq(design, np.asarray(profile.loss, dtype=float), rcond=None)[0]
        q = np.linalg.inv(design.T @ design)[3, 3]
        numerator, denominator, measured = numerator + d2 * d3 / q, denominator + d2 * d2 / q, measured + 1
    return (numerator / denominator, measured) if denominator > 0 else None


def shape_shift(profile: Parabola, skew: float, reach: float) -> float:
    """ln N of the minimum of d0 + d1·u + d2·(u² + skew·u³) fitted to the budget's runs, minus ln N of
    its parabola's vertex; NaN when that fit has no minimum within ``reach`` (in ln N) of the sizes.
    The minimum is the root of d1 + 2·d2·u + 3·d3·u² = 0 where the curve rises, u = −d1/(d2 + √disc)
    (disc = d2² − 3·d1·d3; this form holds at d3 = 0, where it is the parabola's −d1/(2·d2))."""
    design = _cubic_design(profile)
    shaped = np.stack([design[:, 0], design[:, 1], design[:, 2] + skew * design[:, 3]], axis=1)
    _, d1, d2 = np.linalg.lstsq(shaped, np.asarray(profile.loss, dtype=float), rcond=None)[0]
    disc = d2 * d2 - 3.0 * d1 * d2 * skew
    if disc < 0 or d2 + np.sqrt(disc) <= 0:
        return float("nan")
    u_min = -d1 / (d2 + np.sqrt(disc))
    if not design[:, 1].min() - reach <= u_min <= design[:, 1].max() + reach:
        return float("nan")
    return float(profile.center + u_min - np.log(profile.n_opt))
