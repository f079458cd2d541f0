"""Fitting y = k·x^p (a line in log-log space) and y = E + A·x^(−α) (with an irreducible term).

`log_linear_fit` works on stacks of data sets at once (one per bootstrap resample), so the
bootstraps of approaches 1 and 2 cost a few array operations instead of a loop of fits.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import least_squares

from analysis.fits.results import PowerLaw

MAX_EVALUATIONS = 2000  # Levenberg-Marquardt evaluations from a cold start
MAX_EVALUATIONS_WARM = 200  # from a warm start (a bootstrap refit): a fit that needs more has failed


def log_linear_fit(
    log_x: np.ndarray, log_y: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Ordinary least squares of log y on log x along the last axis: (intercepts, slopes).

    ``mask`` (same shape, bool) keeps only some points of each row; a row with fewer than two
    distinct kept x gets NaN.
    """
    log_x, log_y = np.broadcast_arrays(np.asarray(log_x, float), np.asarray(log_y, float))
    keep = np.ones(log_x.shape, bool) if mask is None else np.asarray(mask, bool)
    count = keep.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = np.where(keep, log_x, 0).sum(axis=-1) / count
        mean_y = np.where(keep, log_y, 0).sum(axis=-1) / count
        dx = np.where(keep, log_x - mean_x[..., None], 0)
        dy = np.where(keep, log_y - mean_y[..., None], 0)
        sxx = (dx * dx).sum(axis=-1)
        slope = np.where(sxx > 1e-12, (dx * dy).sum(axis=-1) / sxx, np.nan)
    return mean_y - slope * mean_x, slope


def fit_power_law_with_floor(x, y, start: PowerLaw | None = None) -> PowerLaw | None:
    """y = E + A·x^(−α), E > 0, by least squares on log y (relative errors), or None if no fit
    converges. Levenberg-Marquardt in (ln E, ln A, α) with the analytic Jacobian
    ∂r/∂(ln E, ln A, α) = (E, A·x^(−α), −ln x·A·x^(−α)) / (E + A·x^(−α)).
    Starts: ``start`` when given (a warm start for bootstrap refits), else E at 10%, 50% and 90%
    of min y with (A, α) from the line through log(y − E)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    log_x, log_y = np.log(x), np.log(y)

    def terms(p):
        floor, power = np.exp(p[0]), np.exp(p[1] - p[2] * log_x)
        return floor, power, floor + power

    def residuals(p):
        return np.log(terms(p)[2]) - log_y

    def jacobian(p):
        floor, power, total = terms(p)
        return np.column_stack([np.full_like(total, floor) / total, power / total, -log_x * power / total])

    if start is not None:
        starts = [[np.log(start.floor), np.log(start.coefficient), -start.exponent]]
    else:
        starts = []
        for fraction in (0.1, 0.5, 0.9):
            floor = fraction * float(y.min())
            intercept, slope = log_linear_fit(log_x, np.log(y - floor))
            starts.append([np.log(floor), float(intercept), float(-slope)])
    best = None
    for p0 in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = least_squares(
                residuals,
                p0,
                jac=jacobian,
                method="lm",
                xtol=1e-12,
                ftol=1e-12,
                gtol=1e-12,
                max_nfev=MAX_EVALUATIONS_WARM if start is not None else MAX_EVALUATIONS,
            )
        if res.success and np.all(np.abs(res.x[:2]) < 700) and (best is None or res.cost < best.cost):
            best = res  # (|ln E|, |ln A| < 700: finite in float64)
    if best is None:
        return None
    log_floor, log_a, alpha = best.x
    return PowerLaw(coefficient=float(np.exp(log_a)), exponent=float(-alpha), floor=float(np.exp(log_floor)))
