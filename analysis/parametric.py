"""Approach 3: fit L(N, D) = E + A/N^α + B/D^β to every run (Hoffmann et al. 2022, §3.3, App. D.2).

Objective (the published one, with the corrections of Besiroglu et al. 2024):

    F(θ) = Σ_i  Huber_δ( LSE(a − α·ln N_i, b − β·ln D_i, e) − ln L_i ),   δ = 1e-3,
    θ = (e, a, b, α, β),  E = exp(e), A = exp(a), B = exp(b),
    Huber_δ(r) = r²/2 if |r| ≤ δ else δ·(|r| − δ/2).

Summed, not averaged, with an analytic gradient and tight tolerances: Besiroglu et al. show that a
mean-reduced objective with default tolerances stops far from the optimum.

How the optimum is found fast and reliably:
  1. the objective is evaluated, vectorised, on the 4,500-point grid of starts of Besiroglu et al.
     (their code: α, β ∈ {0, .5, …, 2}, e ∈ {−1, −.5, …, 1}, a, b ∈ {0, 5, …, 25});
  2. L-BFGS-B with the analytic gradient runs from the `REFINED_STARTS` best grid points;
  3. ln N and ln D are centred (a' = a − α·mean ln N), an exact linear change of variables that
     removes most of the ill-conditioning between A and α, and between B and β.
Bootstrap refits (`_bootstrap`) run all resamples together from the full-sample optimum, in
coordinates whitened by the inverse Hessian there, with a vectorised L-BFGS (`analysis.lbfgs_batch`);
any refit whose gradient did not vanish, or that a point of the grid beats, is redone by scipy's
L-BFGS-B from several starts.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
from scipy.optimize import minimize

from analysis.bootstrap import estimates_from_samples, one_blas_thread, resample_weights
from analysis.lbfgs_batch import minimize_batch
from analysis.results import PARAMETRIC_NAMES, Bootstrap, Estimate, ParametricFit
from analysis.table import RunTable
from scaling.errors import DataError

HUBER_DELTA = 1e-3  # Hoffmann et al. 2022, App. D.2
# Starts of Besiroglu et al. 2024 (code of "Chinchilla scaling: a replication attempt"), in θ order.
START_GRID = {
    "e": np.arange(-1.0, 1.5, 0.5),
    "a": np.arange(0.0, 30.0, 5.0),
    "b": np.arange(0.0, 30.0, 5.0),
    "alpha": np.arange(0.0, 2.5, 0.5),
    "beta": np.arange(0.0, 2.5, 0.5),
}
REFINED_STARTS = 16  # L-BFGS-B runs from this many of the best grid points
LBFGS_OPTIONS = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000, "maxfun": 20_000}
AGREE_RTOL = 1e-6  # starts whose optimum is within this relative distance of the best "agree"
GRID_RESTARTS = 3  # a bootstrap refit the grid beats is retried from this many best grid points
MIN_RUNS = len(PARAMETRIC_NAMES) + 1
GRAD_TOL = 1e-6  # converged when max |gradient| <= GRAD_TOL · δ · runs (see _converged)


def start_grid() -> np.ndarray:
    """The 4,500 starting points as rows θ = (e, a, b, α, β)."""
    return np.array(list(itertools.product(*START_GRID.values())))


class HuberLogLoss:
    """F(θ) = Σ_i w_i·Huber_δ(LSE(a − α·ln N_i, b − β·ln D_i, e) − ln L_i), for fixed data.

    ``value_and_grad`` works in centred coordinates θc = (e, a − α·x̄, b − β·ȳ, α, β) with
    x̄ = mean ln N, ȳ = mean ln D; `to_centered` / `from_centered` convert. ``weights`` are
    per-run multiplicities (bootstrap draws); None means each run once.
    """

    def __init__(self, n, d, loss, delta: float = HUBER_DELTA):
        self.delta = delta
        x, y = np.log(n), np.log(d)
        self.log_loss = np.log(loss)
        self.x_mean, self.y_mean = float(x.mean()), float(y.mean())
        self.xc, self.yc = x - self.x_mean, y - self.y_mean

    def to_centered(self, theta: np.ndarray) -> np.ndarray:
        theta = np.array(theta, dtype=float)
        theta[..., 1] = theta[..., 1] - theta[..., 3] * self.x_mean
        theta[..., 2] = theta[..., 2] - theta[..., 4] * self.y_mean
        return theta

    def from_centered(self, theta_c: np.ndarray) -> np.ndarray:
        theta = np.array(theta_c, dtype=float)
        theta[..., 1] = theta[..., 1] + theta[..., 3] * self.x_mean
        theta[..., 2] = theta[..., 2] + theta[..., 4] * self.y_mean
        return theta

    def _predicted(self, thetas_c: np.ndarray):
        """For rows θc (K, 5): the softmax weights p1, p2, p3 of the three LSE terms, their
        normaliser and the predicted log-loss, each (K, runs)."""
        e, a, b, alpha, beta = (col[:, None] for col in thetas_c.T)
        u1 = a - alpha * self.xc
        u2 = b - beta * self.yc
        top = np.maximum(np.maximum(u1, u2), e)
        p1, p2, p3 = np.exp(u1 - top), np.exp(u2 - top), np.exp(e - top)
        total = p1 + p2 + p3
        return p1, p2, p3, total, top + np.log(total)

    def _huber(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Huber_δ(r) and its derivative clip(r, −δ, δ)."""
        size = np.abs(r)
        clipped = np.minimum(size, self.delta)
        return clipped * (size - 0.5 * clipped), np.copysign(clipped, r)

    def values_and_grads(self, thetas_c: np.ndarray, weights: np.ndarray | None = None):
        """F and ∂F/∂θc for rows θc (K, 5), with per-row weights (K, runs) or None: (K,), (K, 5).

        With p_k the softmax weights of the three LSE terms and h' = clip(r, −δ, δ):
        ∂F/∂(e, a', b', α, β) = Σ_i w_i·h'(r_i)·(p3, p1, p2, −p1·xc, −p2·yc)_i / (p1 + p2 + p3)_i.
        """
        p1, p2, p3, total, predicted = self._predicted(thetas_c)
        h, dh = self._huber(predicted - self.log_loss)
        slope = dh / total
        if weights is not None:
            h, slope = h * weights, slope * weights
        g1, g2 = slope * p1, slope * p2
        grad = np.stack([(slope * p3).sum(axis=1), g1.sum(axis=1), g2.sum(axis=1), -(g1 @ self.xc), -(g2 @ self.yc)],
                        axis=1)
        return h.sum(axis=1), grad

    def value_and_grad(self, theta_c: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """F and ∂F/∂θc at one θc (the form scipy's minimize takes)."""
        f, g = self.values_and_grads(np.asarray(theta_c, float)[None], None if weights is None else weights[None])
        return float(f[0]), g[0]

    def grid_values(self, thetas: np.ndarray, weights: np.ndarray | None = None, chunk: int = 256) -> np.ndarray:
        """F at many θ (rows, original coordinates), vectorised in chunks of rows: shape (len(thetas),),
        or (len(thetas), len(weights)) for a stack of weight vectors (one per bootstrap resample)."""
        thetas_c = self.to_centered(np.atleast_2d(thetas))
        parts = []
        for lo in range(0, len(thetas_c), chunk):
            huber = self._huber(self._predicted(thetas_c[lo:lo + chunk])[4] - self.log_loss)[0]
            parts.append(huber.sum(axis=1) if weights is None else huber @ weights.T)
        return np.concatenate(parts)

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        """Predicted minus observed log-loss per run, at θ (original coordinates)."""
        return self._predicted(self.to_centered(np.asarray(theta, float)[None]))[4][0] - self.log_loss


def _minimize(objective: HuberLogLoss, theta_c: np.ndarray, weights: np.ndarray | None = None):
    """scipy's L-BFGS-B with the analytic gradient from θc: (θc, F, scipy's result, max |gradient|)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in far-off line-search trials
        res = minimize(objective.value_and_grad, theta_c, args=(weights,), jac=True, method="L-BFGS-B",
                       options=LBFGS_OPTIONS)
    grad = objective.value_and_grad(res.x, weights)[1]
    return res.x, float(res.fun), res, float(np.max(np.abs(grad)))


def _converged(objective: HuberLogLoss, grad_norm: float, value: float) -> bool:
    """The gradient vanishes: max |∂F/∂θc| <= `GRAD_TOL` · δ · runs. (The gradient sums one term of
    size <= δ·|ln N − mean| per run; at this tolerance the estimates sit within ~1e-5 relative
    of the exact optimum, far inside any interval.)"""
    return bool(np.isfinite(value)) and grad_norm <= GRAD_TOL * objective.delta * len(objective.log_loss)


def _whitening_basis(objective: HuberLogLoss, theta_c: np.ndarray) -> np.ndarray | None:
    """L with L·Lᵀ = H⁻¹ (H the Hessian at the optimum, by central differences of the analytic
    gradient), or None when H is not positive definite there."""
    step = 1e-5
    hessian = np.empty((5, 5))
    for j in range(5):
        dz = np.zeros(5)
        dz[j] = step
        hessian[:, j] = (objective.value_and_grad(theta_c + dz)[1] - objective.value_and_grad(theta_c - dz)[1]) / (2 * step)
    hessian = 0.5 * (hessian + hessian.T)
    try:
        return np.linalg.cholesky(np.linalg.inv(hessian))
    except np.linalg.LinAlgError:
        return None


def _check_runs(table: RunTable) -> None:
    runs = table.runs
    if len(runs) < MIN_RUNS:
        raise DataError(f"approach 3 fits {len(PARAMETRIC_NAMES)} parameters (E, A, B, alpha, beta) and needs at least "
                        f"{MIN_RUNS} runs; {table.source!r} has {len(runs)}")
    for column, what in (("N", "model sizes"), ("D", "token counts")):
        if runs[column].nunique() < 2:
            raise DataError(f"approach 3 needs at least 2 distinct {what} ({column}); all runs of {table.source!r} have "
                            f"{column} = {runs[column].iloc[0]:.4g}")


def _named(theta: np.ndarray) -> dict[str, float]:
    """(e, a, b, α, β) → E, A, B, alpha, beta and the allocation a, b, G they imply."""
    e, a, b, alpha, beta = theta
    out = {"E": np.exp(e), "A": np.exp(a), "B": np.exp(b), "alpha": alpha, "beta": beta}
    out["a"] = beta / (alpha + beta)
    out["b"] = alpha / (alpha + beta)
    out["G"] = np.power(alpha * out["A"] / (beta * out["B"]), 1.0 / (alpha + beta))
    return {k: float(v) for k, v in out.items()}


def fit_parametric(table: RunTable, *, resamples: int = 1000, seed: int = 0, level: float = 0.95,
                   delta: float = HUBER_DELTA, refined_starts: int = REFINED_STARTS) -> ParametricFit:
    """Fit approach 3 to ``table`` and bootstrap it (``resamples`` = 0: no intervals)."""
    _check_runs(table)
    with one_blas_thread():
        return _fit(table, resamples, seed, level, delta, refined_starts)


def _fit(table: RunTable, resamples: int, seed: int, level: float, delta: float, refined_starts: int) -> ParametricFit:
    runs = table.runs
    objective = HuberLogLoss(runs["N"].to_numpy(), runs["D"].to_numpy(), runs["loss"].to_numpy(), delta)
    grid = start_grid()
    grid_values = objective.grid_values(grid)
    starts = grid[np.argsort(grid_values)[:refined_starts]]

    outcomes = [_minimize(objective, objective.to_centered(s)) for s in starts]
    values = np.array([o[1] for o in outcomes])
    best = int(np.nanargmin(values))
    theta_c, value, res, grad_norm = outcomes[best]
    converged = _converged(objective, grad_norm, value)
    agreeing = int(np.sum(np.abs(values - value) <= AGREE_RTOL * max(value, delta ** 2)))
    theta = objective.from_centered(theta_c)
    convergence = {
        "converged": converged, "optimizer": "L-BFGS-B (analytic gradient)", "message": str(res.message),
        "iterations": int(res.nit), "gradient_max_abs": grad_norm, "grid_starts": len(grid),
        "refined_starts": len(starts), "starts_agreeing": agreeing,
        "best_grid_objective": float(grid_values.min()),
    }
    if not converged:
        convergence["warning"] = "the optimizer did not converge: treat the estimates with suspicion"

    point = _named(theta)
    boot = None
    if resamples > 0:
        samples, boot = _bootstrap(objective, theta_c, grid, resamples, seed, level)
        estimates = estimates_from_samples(point, samples, level)
    else:
        estimates = {k: Estimate(v) for k, v in point.items()}
    return ParametricFit(
        n=runs["N"].tolist(), d=runs["D"].tolist(), loss=runs["loss"].tolist(), run_id=runs["run_id"].tolist(),
        estimates=estimates, residuals=objective.residuals(theta).tolist(), objective=value, huber_delta=delta,
        convergence=convergence, fitted_compute_max=float(runs["C"].max()), bootstrap=boot)


def _bootstrap(objective: HuberLogLoss, theta_c: np.ndarray, grid: np.ndarray, resamples: int, seed: int,
               level: float) -> tuple[dict[str, np.ndarray], Bootstrap]:
    """Refit ``resamples`` resamples of the runs; return the samples by name and the summary.

    All resamples are refitted together (`analysis.lbfgs_batch`) from the full-sample optimum, in
    coordinates whitened by the inverse Hessian there. A resample is refitted again with scipy's
    L-BFGS-B — from the optimum and from its own `GRID_RESTARTS` best grid points — when its
    gradient did not vanish or when some grid point has a lower objective than the refit reached
    (the grid's objective for every resample is one matrix product). Failed = still not converged.
    """
    rng = np.random.default_rng(seed)
    weights = resample_weights(rng, len(objective.log_loss), resamples)
    basis = _whitening_basis(objective, theta_c)
    basis = np.eye(len(theta_c)) if basis is None else basis
    tol = GRAD_TOL * objective.delta * len(objective.log_loss)

    def whitened(z, rows):
        f, g = objective.values_and_grads(theta_c + z @ basis.T, weights[rows])
        return f, g @ basis

    z, values, _, _ = minimize_batch(whitened, np.zeros((resamples, len(theta_c))), gtol=0.01 * tol)
    thetas = theta_c + z @ basis.T
    ok = np.max(np.abs(objective.values_and_grads(thetas, weights)[1]), axis=1) <= tol
    grid_values = objective.grid_values(grid, weights)  # (grid, resamples)
    retry = np.flatnonzero(~ok | (grid_values.min(axis=0) < values))
    for k in retry:
        starts = [theta_c] + [objective.to_centered(s) for s in grid[np.argsort(grid_values[:, k])[:GRID_RESTARTS]]]
        for start in starts:
            theta_k, value_k, _, grad_k = _minimize(objective, start, weights[k])
            if _converged(objective, grad_k, value_k) and (not ok[k] or value_k < values[k]):
                thetas[k], values[k], ok[k] = theta_k, value_k, True
    named = [_named(objective.from_centered(t)) for t in thetas[ok]]
    samples = {name: np.array([s[name] for s in named]) for name in (named[0] if named else {})}
    notes = [f"{len(retry)} resamples were refitted again by L-BFGS-B from {1 + GRID_RESTARTS} starts"] if len(retry) else []
    return samples, Bootstrap(resamples=resamples, failed=int((~ok).sum()), level=level, seed=seed,
                              samples={k: v.tolist() for k, v in samples.items()}, notes=notes)
