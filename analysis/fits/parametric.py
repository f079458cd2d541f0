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
  2. BFGS with the analytic gradient refines the `REFINED_STARTS` best grid points, all at once
     (`analysis.fits.bfgs_batch`), and scipy's L-BFGS-B polishes the best to tight tolerances; where runs lie
     far off that optimum, the grid is searched again with each point's farthest runs left out of its score,
     and the lower optimum kept (`analysis.fits.far_restart`: a diverged run led every start astray);
  3. ln N and ln D are centred (a' = a − α·mean ln N), an exact linear change of variables that
     removes most of the ill-conditioning between A and α, and between B and β.
Bootstrap refits (`_bootstrap`) run all resamples together from the full-sample optimum, in
coordinates whitened by the inverse Hessian there; a resample that did not converge, or that a
point of the grid beats, is refitted again from its own best grid point.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
from scipy.optimize import minimize

from analysis.fits import parametric_form as form
from analysis.fits.bfgs_batch import minimize_batch
from analysis.fits.bootstrap import estimates_from_samples, one_blas_thread, summarize, unit_draws
from analysis.fits.far_restart import restart_without_far_runs
from analysis.fits.huber_objective import HUBER_DELTA, HuberLogLoss
from analysis.fits.results import PARAMETRIC_NAMES, Bootstrap, Estimate, ParametricFit
from analysis.sources.curverows import curves_hint
from analysis.sources.schema import RunTable
from scaling.errors import DataError

# Starts of Besiroglu et al. 2024 (code of "Chinchilla scaling: a replication attempt"), in θ order.
START_GRID = {
    "e": np.arange(-1.0, 1.5, 0.5),
    "a": np.arange(0.0, 30.0, 5.0),
    "b": np.arange(0.0, 30.0, 5.0),
    "alpha": np.arange(0.0, 2.5, 0.5),
    "beta": np.arange(0.0, 2.5, 0.5),
}
REFINED_STARTS = 16  # the best grid points that BFGS refines (all at once), before scipy polishes the best
LBFGS_OPTIONS = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000, "maxfun": 20_000}  # the final polish
BATCH_MAX_ITER = 3000  # iterations of the vectorised BFGS (flat valleys of small, noisy data need many)
AGREE_RTOL = 1e-6  # starts whose optimum is within this relative distance of the best "agree"
MIN_RUNS = len(PARAMETRIC_NAMES) + 1
GRAD_TOL = 1e-6  # converged when max |gradient| <= GRAD_TOL · δ · runs (see _converged)


@functools.cache
def start_grid() -> np.ndarray:
    """The 4,500 starting points as rows θ = (e, a, b, α, β) (read-only)."""
    grid = np.array(list(itertools.product(*START_GRID.values())))
    grid.flags.writeable = False
    return grid


def _minimize(objective: HuberLogLoss, theta_c: np.ndarray):
    """scipy's L-BFGS-B with the analytic gradient from θc: (θc, F, scipy's result, max |gradient|)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow in far-off line-search trials
        res = minimize(objective.value_and_grad, theta_c, jac=True, method="L-BFGS-B", options=LBFGS_OPTIONS)
    return res.x, float(res.fun), res, float(np.max(np.abs(objective.value_and_grad(res.x)[1])))


def _refine_batch(
    objective: HuberLogLoss, starts_c: np.ndarray, weights: np.ndarray | None = None, basis: np.ndarray | None = None
):
    """Vectorised BFGS from each row of ``starts_c`` (θc), row k weighted by ``weights[k]`` (or
    unweighted); with ``basis`` L the search runs in z, θc = start + L·z. Returns θc (K, 5), F (K,)
    and whether each converged (`_converged`)."""
    basis = np.eye(starts_c.shape[1]) if basis is None else basis

    def fg(z, rows):
        f, g = objective.values_and_grads(starts_c[rows] + z @ basis.T, None if weights is None else weights[rows])
        return f, g @ basis

    tol = _grad_tol(objective)
    # stop on the gradient in z, g_z = Lᵀ·g: max|g| <= ||L⁻ᵀ||_∞ · max|g_z| (max absolute row sum)
    z_tol = tol / np.abs(np.linalg.inv(basis).T).sum(axis=1).max()
    z, values, _, _ = minimize_batch(fg, np.zeros_like(starts_c), gtol=z_tol, max_iter=BATCH_MAX_ITER)
    thetas = starts_c + z @ basis.T
    grads = objective.values_and_grads(thetas, weights)[1]
    return thetas, values, np.isfinite(values) & (np.max(np.abs(grads), axis=1) <= tol)


def _grad_tol(objective: HuberLogLoss) -> float:
    return GRAD_TOL * objective.delta * len(objective.log_loss)


def _converged(objective: HuberLogLoss, grad_norm: float, value: float) -> bool:
    """The gradient vanishes: max |∂F/∂θc| <= `GRAD_TOL` · δ · runs. (The gradient sums one term of
    size <= δ·|ln N − mean| per run; at this tolerance the estimates sit within ~1e-5 relative
    of the exact optimum, far inside any interval.)"""
    return bool(np.isfinite(value)) and grad_norm <= _grad_tol(objective)


def _whitening_basis(objective: HuberLogLoss, theta_c: np.ndarray) -> np.ndarray | None:
    """L with L·Lᵀ = H⁻¹ (H the Hessian at the optimum, by central differences of the analytic
    gradient), or None when H is not positive definite there."""
    step, grad = 1e-5, lambda theta: objective.value_and_grad(theta)[1]
    hessian = np.stack([grad(theta_c + dz) - grad(theta_c - dz) for dz in np.eye(5) * step], axis=1) / (2 * step)
    hessian = 0.5 * (hessian + hessian.T)
    try:
        return np.linalg.cholesky(np.linalg.inv(hessian))
    except np.linalg.LinAlgError:
        return None


def refit_huber(fit: ParametricFit, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Approach 3's law refitted to the runs of ``fit`` with Huber δ = ``delta`` (scipy's L-BFGS-B,
    from ``fit``'s optimum): the predicted minus observed log-loss per run there, and the Jacobian
    of the predicted log-loss (`HuberLogLoss.jacobian`)."""
    objective = HuberLogLoss(np.asarray(fit.n), np.asarray(fit.d), np.asarray(fit.loss), delta)
    start = point_theta(fit, objective)
    with one_blas_thread():
        theta = objective.from_centered(_minimize(objective, objective.to_centered(start))[0])
    return objective.residuals(theta), objective.jacobian(theta)


def point_theta(fit: ParametricFit, objective: HuberLogLoss) -> np.ndarray:
    """``fit``'s optimum as θ = (ln E, ln A, ln B, α, β); an E underflowed to 0 (no floor) at ``objective``'s."""
    point = {k: fit.estimates[k].value for k in PARAMETRIC_NAMES}
    e = np.log(point["E"]) if point["E"] > 0 else objective.e_floor
    return np.array([e, np.log(point["A"]), np.log(point["B"]), point["alpha"], point["beta"]])


def _check_runs(table: RunTable) -> None:
    runs = table.runs
    if len(runs) < MIN_RUNS:
        raise DataError(
            f"approach 3 fits {len(PARAMETRIC_NAMES)} parameters (E, A, B, alpha, beta) and needs at least "
            f"{MIN_RUNS} runs; {table.source!r} has {len(runs)}"
        )
    for column, what in (("N", "model sizes"), ("D", "token counts")):
        if runs[column].nunique() < 2:
            raise DataError(
                f"approach 3 needs at least 2 distinct {what} ({column}); all runs of {table.source!r} have "
                f"{column} = {runs[column].iloc[0]:.4g}{curves_hint(table.reading)}"
            )


def _named(theta: np.ndarray) -> dict[str, float]:
    """(e, a, b, α, β) → E, A, B, alpha, beta and the allocation a, b, G they imply."""
    e, a, b, alpha, beta = theta
    out = {"E": np.exp(e), "A": np.exp(a), "B": np.exp(b), "alpha": alpha, "beta": beta}
    # a, b, G of a contradicted law (α + β = 0, β <= 0, B near overflow): `parametric_form`; no numpy warning (user30)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out["a"] = np.divide(beta, alpha + beta)
        out["b"] = np.divide(alpha, alpha + beta)
        out["G"] = np.power(alpha * out["A"] / (beta * out["B"]), 1.0 / (alpha + beta))
    return {k: float(v) for k, v in out.items()}


def fit_parametric(
    table: RunTable,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    delta: float = HUBER_DELTA,
    refined_starts: int = REFINED_STARTS,
) -> ParametricFit:
    """Fit approach 3 to ``table`` and bootstrap it (``resamples`` = 0: no intervals)."""
    _check_runs(table)
    with one_blas_thread():
        return _fit(table, resamples, seed, level, delta, refined_starts)


def _fit(table: RunTable, resamples: int, seed: int, level: float, delta: float, refined_starts: int) -> ParametricFit:
    runs = table.runs
    objective = HuberLogLoss(runs["N"].to_numpy(), runs["D"].to_numpy(), runs["loss"].to_numpy(), delta)
    grid = start_grid()
    grid_values = objective.grid_values(grid)
    starts = objective.to_centered(grid[np.argsort(grid_values)[:refined_starts]])
    refined, values, _ = _refine_batch(objective, starts)
    theta_c, value, res, grad_norm = _minimize(objective, refined[int(np.nanargmin(values))])  # the polish
    if again := restart_without_far_runs(objective, theta_c, value, grid, refined_starts, _refine_batch, _minimize):
        theta_c, value, res, grad_norm, values, far = again  # user40: a diverged run led every grid start astray
    converged = _converged(objective, grad_norm, value)
    agreeing = int(np.sum(np.abs(values - value) <= AGREE_RTOL * max(value, delta**2)))
    theta = objective.from_centered(theta_c)
    convergence = {
        "converged": converged,
        "message": str(res.message),
        "gradient_max_abs": grad_norm,
        "optimizer": f"BFGS from the {len(starts)} best of {len(grid)} grid points, then scipy L-BFGS-B "
        "(analytic gradient)"
        + (
            f"; its optimum beaten by a second search, each grid point scored without its own {far} farthest "
            "run(s) as many lay far off the first (the starts below are the second search's)"
            if again
            else ""
        ),
        "grid_starts": len(grid),
        "refined_starts": len(starts),
        "starts_agreeing": agreeing,
        "best_grid_objective": float(grid_values.min()),
    }
    if not converged:
        convergence["warning"] = "the optimizer did not converge: treat the estimates with suspicion"
    if theta_c[0] < objective.e_floor:
        convergence["note"] = "E is indistinguishable from 0: these runs show no irreducible loss"

    point = _named(theta)
    units = runs["unit"].to_numpy() if "unit" in runs.columns else np.arange(len(runs))
    estimates, boot = _intervals(objective, theta_c, grid, point, (resamples, seed, level), units)
    withheld = form.judge(estimates, boot, point, objective, theta, table, level)
    if withheld:  # no law: `FitReport.load` keeps the nulls, optimal refuses it, the figures draw none
        convergence.pop("note", None)  # about E, which has no value now
        convergence["warning"] = (
            f"the runs contradict the law's form or do not identify it: {', '.join(withheld)} are unidentified "
            "(no value), so this law cannot allocate compute (optimal refuses it); fit runs over a wider range "
            "of sizes and token counts"
        )
    return ParametricFit(
        n=runs["N"].tolist(),
        d=runs["D"].tolist(),
        loss=runs["loss"].tolist(),
        run_id=runs["run_id"].tolist(),
        estimates=estimates,
        residuals=objective.residuals(theta).tolist(),
        objective=value,
        huber_delta=delta,
        convergence=convergence,
        fitted_compute_max=float(runs["C"].max()),
        bootstrap=boot,
    )


def _intervals(
    objective: HuberLogLoss, theta_c: np.ndarray, grid: np.ndarray, point: dict, how: tuple, units: np.ndarray
) -> tuple[dict[str, Estimate], Bootstrap | None]:
    """``point``'s estimates with bootstrap intervals (``how``: resamples, seed, level) and `form`'s rules."""
    resamples, seed, level = how
    at_floor = bool(theta_c[0] < objective.e_floor)
    if resamples <= 0:
        estimates = {k: Estimate(v) for k, v in point.items()}
        form.flag_floor(estimates, at_floor, objective.e_floor)
        return estimates, None
    samples, boot, distinct = _bootstrap(objective, theta_c, grid, resamples, seed, level, units)
    estimates = estimates_from_samples(point, samples, level, boot.failed)
    resampled, notes = form.resample_reasons(samples, level, distinct)
    form.flag_resampled(estimates, resampled)
    form.flag_floor(estimates, at_floor, objective.e_floor)  # before the narrowness rule: E at 0 is the reason to give
    form.flag_interval_widths(estimates, objective, objective.from_centered(theta_c), level)
    boot.notes += notes
    return estimates, boot


def _bootstrap(
    objective: HuberLogLoss,
    theta_c: np.ndarray,
    grid: np.ndarray,
    resamples: int,
    seed: int,
    level: float,
    units: np.ndarray,
) -> tuple[dict[str, np.ndarray], Bootstrap, dict[str, np.ndarray]]:
    """Refit ``resamples`` resamples of the runs; return the samples by name, the summary and, per
    refitted resample, the distinct N and D it drew (`parametric_form.distinct_counts`). A
    resample draws units (the table's ``unit``: one per run, but repeated seeds of one (N, D) and a
    WSD trunk with its branches are one unit each); with one unit per run, the runs themselves.

    All resamples are refitted together (`_refine_batch`) from the full-sample optimum (e raised
    to the E floor if below it), in coordinates whitened by the inverse Hessian there. The grid's
    objective for every resample is one matrix product: where a grid point beats the refit, or the
    refit did not converge, the resample is refitted again from its own best grid point, and the
    better converged optimum is kept. Failed = no start converged."""
    rng = np.random.default_rng(seed)
    weights, notes = unit_draws(rng, units, resamples)
    fittable = _identifiable(objective, weights)
    start = theta_c.copy()
    start[0] = max(start[0], objective.e_floor)
    thetas, values, ok = _refine_batch(
        objective, np.tile(start, (fittable.size, 1)), weights[fittable], _whitening_basis(objective, start)
    )
    grid_values = objective.grid_values(grid, weights[fittable])  # (grid, fittable resamples)
    retry = np.flatnonzero(~ok | (grid_values.min(axis=0) < values))
    if retry.size:
        starts = objective.to_centered(grid[np.argmin(grid_values[:, retry], axis=0)])
        again, again_values, again_ok = _refine_batch(objective, starts, weights[fittable[retry]])
        better = again_ok & (~ok[retry] | (again_values < values[retry]))
        thetas[retry[better]], values[retry[better]], ok[retry[better]] = again[better], again_values[better], True
    with np.errstate(over="ignore", invalid="ignore"):  # a flat valley may send A or B to overflow: kept as inf
        named = [_named(objective.from_centered(t)) for t in thetas[ok]]
    samples = {name: np.array([s[name] for s in named]) for name in (named[0] if named else {})}
    if fittable.size < resamples:
        notes.append(
            f"{resamples - fittable.size} resamples drew fewer than {MIN_RUNS} distinct runs (or a single N or "
            "D) and cannot determine 5 parameters: counted as failed"
        )
    if retry.size:
        notes.append(f"{retry.size} resamples were refitted again from their best grid point")
    drawn = weights[fittable[ok]] > 0
    distinct = {"N": form.distinct_counts(objective.xc, drawn), "D": form.distinct_counts(objective.yc, drawn)}
    return *summarize(samples, resamples, resamples - int(ok.sum()), level, seed, notes), distinct


def _identifiable(objective: HuberLogLoss, weights: np.ndarray) -> np.ndarray:
    """Indices of the resamples that draw at least `MIN_RUNS` distinct runs with at least two
    distinct N and two distinct D: the others cannot determine the five parameters."""
    drawn = weights > 0
    distinct_runs = drawn.sum(axis=1)
    two = (form.distinct_counts(objective.xc, drawn) >= 2) & (form.distinct_counts(objective.yc, drawn) >= 2)
    return np.flatnonzero((distinct_runs >= MIN_RUNS) & two)
