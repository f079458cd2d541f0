"""Approach 3 with E at 0: the exponents a floor the runs cannot rule out would give (a profile over E).

When the best fit puts E at 0 (`parametric_form.FLOOR_REASON`), its α and β, and so a, b and G, hold only if the
loss has no floor: E and the exponents trade off (a lower E, flatter exponents). The bootstrap refits start from the
full-sample optimum and stay in that corner, so their intervals can be narrow and miss the truth (user31: one run
per budget at 11 budgets drawn from Chinchilla's law gave E = 0 and a = 0.854 [0.828, 0.880] for a true 0.452, and
`optimal` 2 tokens per parameter where the truth is ~50; with E held at the true 1.69 the objective rose by 18%).

A best fit at E = 0 whose α, β, A, B, a, b or G lies outside its own interval is unidentified too (the resamples
do not find it). `held_floors` refits with E held at fractions of the lowest loss, each from the best fit and the best grid starts at
that E, and finds by bisection the highest floor the runs do not reject: the likelihood-ratio statistic of the
least-squares form, (n − 5)·ΔF/F, below χ²₁ at the fit's level (F the Huber objective; on residuals beyond δ the
absolute-error form, 2·(n − 5)·ΔF/F, rejects sooner: this one is the cautious of the two). `flag_held_floors` makes
α, β, A, B, a, b and G unidentified when such a floor puts α, β or a outside their intervals (or, without
intervals, a moves by more than `NO_INTERVAL_SHIFT`), naming the floor and the a it gives.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.stats import chi2

from analysis.fits.results import Estimate

TOP_FRACTION = 0.99  # the highest floor tried, as a fraction of the lowest loss
BISECTIONS = 7  # halvings of the fraction's bracket: the highest floor kept to within 0.8% of the lowest loss
GRID_STARTS = 4  # the best grid points at the held E refined, besides the best fit itself
NO_INTERVAL_SHIFT = 0.05  # without intervals: a held floor that moves a by more than this unidentifies it
FOLLOW = ("alpha", "beta", "A", "B", "a", "b", "G")  # what rests on the floor's being 0


def held_floors(objective, theta: np.ndarray, level: float) -> list[tuple[float, np.ndarray, float]]:
    """(E, θ, F) of the refits with E held that the runs do not reject (see the module docstring), by E: the highest
    such floor, found by bisection on its fraction of the lowest loss in (0, `TOP_FRACTION`] (the objective rises as
    E climbs away from the best fit's 0; review21: fixed fractions 0.75 and 0.9 passed over 0.8, a floor that fit as
    well and moved a out of its interval), and those tried below it. θ in original coordinates (e, a, b, α, β)."""
    from analysis.fits.parametric import LBFGS_OPTIONS, start_grid

    dof = len(objective.log_loss) - 5
    best = float(objective.value_and_grad(objective.to_centered(theta))[0])
    if dof < 1 or not best > 0:
        return []

    def held(fraction: float) -> tuple[float, np.ndarray, float] | None:
        e = float(objective.log_loss.min() + np.log(fraction))
        grid = np.array(start_grid(), dtype=float)
        grid[:, 0] = e
        own = np.array(theta, dtype=float)
        own[0] = e
        starts = [own, *grid[np.argsort(objective.grid_values(grid))[:GRID_STARTS]]]
        fits = [_held_at(objective, objective.to_centered(start), e, LBFGS_OPTIONS) for start in starts]
        theta_c, value = min(fits, key=lambda fit: fit[1])
        kept = dof * (value - best) / best < chi2.ppf(level, 1)
        return (float(np.exp(e)), objective.from_centered(theta_c), value) if kept else None

    low, high, kept = 0.0, TOP_FRACTION, []
    if (top := held(high)) is not None:
        return [top]
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        if (found := held(middle)) is not None:
            kept.append(found)
            low = middle
        else:
            high = middle
    return kept


def _held_at(objective, theta_c: np.ndarray, e: float, options: dict) -> tuple[np.ndarray, float]:
    """L-BFGS-B over (a, b, α, β) with e held (equal bounds), from ``theta_c``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in far-off line-search trials
        res = minimize(
            objective.value_and_grad, theta_c, jac=True, method="L-BFGS-B", bounds=[(e, e)] + [(None, None)] * 4,
            options=options,
        )  # fmt: skip
    return res.x, float(res.fun) if np.isfinite(res.fun) else np.inf


def flag_held_floors(estimates: dict[str, Estimate], objective, theta: np.ndarray, level: float, floor_reason: str):
    """With E unidentified at 0 (``floor_reason``), the exponents and what follows from them unidentified where a
    floor the runs do not reject moves them out of their intervals (`held_floors`)."""
    if "E" not in estimates or estimates["E"].unidentified != floor_reason:
        return
    for name in FOLLOW:  # user31: A = 8.994 [9.248, 1063], alpha 0.0699 [0.0751, 0.404]
        e = estimates.get(name)
        if e is not None and not e.unidentified and e.lower is not None and not e.lower <= e.value <= e.upper:
            e.unidentified = f"the best fit, at E = 0, lies outside its own interval [{e.lower:.4g}, {e.upper:.4g}]"
    for floor, held, _ in reversed(held_floors(objective, theta, level)):  # the highest floor first
        alpha, beta = float(held[3]), float(held[4])
        moved = {"alpha": alpha, "beta": beta, "a": beta / (alpha + beta)}
        if not any(_outside(estimates.get(name), v) for name, v in moved.items()):
            continue
        why = (
            f"E = {floor:.3g}, not 0, fits as well (not rejected at {level:.0%}) and gives a = {moved['a']:.3g}, "
            f"alpha = {alpha:.3g}, beta = {beta:.3g}: the exponents hold only if the loss has no floor"
        )
        for name in FOLLOW:
            if name in estimates and not estimates[name].unidentified:
                estimates[name].unidentified = why
        return


def _outside(estimate: Estimate | None, value: float) -> bool:
    if estimate is None or estimate.unidentified or not np.isfinite(value):
        return False
    if estimate.lower is None or estimate.upper is None:
        return abs(value - estimate.value) > NO_INTERVAL_SHIFT if np.isfinite(estimate.value) else False
    return not estimate.lower <= value <= estimate.upper
