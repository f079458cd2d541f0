"""Fit the data-constrained law (Muennighoff et al. 2023, `analysis.fits.muennighoff`) to runs that
carry their unique tokens U (records' ``unique_tokens``; a table's column via --unique-column).

The objective is approach 3's (`analysis.fits.parametric`): the Huber loss (δ = 1e-3) of predicted
minus observed log-loss, summed over runs, over θ = (ln E, ln A, ln B, α, β, ln R*_D[, ln R*_N]).
The law has no closed-form gradient worth keeping (U_N moves with A, B, α, β), so the gradient is a
central difference, evaluated for many θ at once. As for approach 3: a grid of starts, the best
refined together by the vectorised BFGS (`analysis.fits.bfgs_batch`), scipy's L-BFGS-B polishes
the best; bootstrap resamples (`analysis.fits.bootstrap`) all refit together from the optimum in
coordinates whitened by the inverse Hessian there, a resample that does not converge again from its
own best grid point; one that still does not is counted failed.

Identification: R*_D needs runs that repeat their data (epochs D/U > 1, at least 2 distinct values);
without them the fit is refused. R*_N needs runs larger than twice the compute-optimal size N_opt(U) of their U
(`RN_MIN_RUNS` of them, 2 distinct N); otherwise it is held at the published value (`analysis.published.MUENNIGHOFF`)
and the fit says so. E, A and α need 3 distinct N, as in approach 3, and E 2 budgets (`_flag_design`).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
from scipy.optimize import minimize

from analysis.fits import muennighoff as mf
from analysis.fits import parametric_form as form
from analysis.fits.bfgs_batch import minimize_batch
from analysis.fits.bootstrap import (
    estimates_from_samples,
    flag_unresponsive,
    flag_wide_terms,
    one_blas_thread,
    scale_identification,
    summarize,
    unit_draws,
)
from analysis.fits.huber_objective import HUBER_DELTA
from analysis.fits.results import Estimate, MuennighoffFit
from analysis.sources.schema import RunTable
from scaling.errors import DataError

GRID = {
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    **dict.fromkeys(("a", "b"), (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)),
    **dict.fromkeys(("alpha", "beta"), (0.1, 0.3, 0.6, 1.0)),
    "log_R_D": tuple(np.log([1.0, 4.0, 16.0, 64.0])),
    "log_R_N": tuple(np.log([1.0, 5.0, 25.0])),
}
REFINED_STARTS = 16
FD_STEP = 1e-6  # central differences in θ
GRAD_TOL = 1e-6  # converged when max |∂F/∂θ| <= GRAD_TOL · δ · runs (approach 3's rule)
RN_MIN_RUNS = 3  # runs with N > RN_REACH·N_opt(U) needed to fit R*_N
RN_REACH = 2.0  # N beyond this many N_opt(U) (excess parameters) is where R*_N shows in the loss
BATCH_MAX_ITER = 3000
LOGS = ("E", "A", "B", "R_D", "R_N")  # θ holds their logs (`RepeatObjective.params`)
BOUNDS = [(-10.0, 10.0), (-10.0, 60.0), (-10.0, 60.0), (1e-3, 5.0), (1e-3, 5.0), (-8.0, 12.0), (-8.0, 12.0)]


class RepeatObjective:
    """F(θ) = Σ_i w_i·Huber_δ(ln L(N_i, D_i, U_i; θ) − ln L_i) for rows θ (K, 6 or 7); with
    ``fixed_rn`` set, θ has 6 columns and R*_N is that value."""

    def __init__(self, n, d, u, loss, delta: float = HUBER_DELTA, fixed_rn: float | None = None):
        self.n, self.d, self.u, self.log_loss = n, d, u, np.log(loss)
        self.delta, self.fixed_rn = delta, fixed_rn
        self.dim = 6 if fixed_rn is not None else 7

    def params(self, thetas: np.ndarray) -> dict[str, np.ndarray]:
        t = np.atleast_2d(thetas)
        out = {
            "E": np.exp(t[:, 0]),
            "A": np.exp(t[:, 1]),
            "B": np.exp(t[:, 2]),
            "alpha": t[:, 3],
            "beta": t[:, 4],
            "R_D": np.exp(t[:, 5]),
            "R_N": np.full(len(t), self.fixed_rn) if self.fixed_rn is not None else np.exp(t[:, 6]),
        }
        return out

    def residuals(self, thetas: np.ndarray) -> np.ndarray:
        """(K, runs): predicted − observed log-loss."""
        p = {k: v[:, None] for k, v in self.params(thetas).items()}
        with np.errstate(all="ignore"):
            return np.log(mf.loss(self.n, self.d, self.u, **p)) - self.log_loss

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """∂(predicted log-loss)/∂θ per run at one θ, (runs, dim): central differences, as the gradient's."""
        steps = FD_STEP * np.eye(self.dim)
        return ((self.residuals(theta + steps) - self.residuals(theta - steps)) / (2 * FD_STEP)).T

    def values(self, thetas: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        r = self.residuals(thetas)
        size = np.abs(r)
        clipped = np.minimum(size, self.delta)
        huber = clipped * (size - 0.5 * clipped)
        total = (huber * weights).sum(axis=1) if weights is not None else huber.sum(axis=1)
        bad = ~np.isfinite(total) | (np.atleast_2d(thetas)[:, 3:5] <= 0).any(axis=1)
        return np.where(bad, np.inf, total)

    def values_and_grads(self, thetas: np.ndarray, weights: np.ndarray | None = None):
        """F (K,) and its central-difference gradient (K, dim), all in one vectorised evaluation."""
        k, dim = thetas.shape
        steps = FD_STEP * np.eye(dim)
        points = np.concatenate([thetas[None], thetas[None] + steps[:, None], thetas[None] - steps[:, None]])
        w = None if weights is None else np.tile(weights, (2 * dim + 1, 1))
        f = self.values(points.reshape(-1, dim), w).reshape(2 * dim + 1, k)
        grads = (f[1 : dim + 1] - f[dim + 1 :]).T / (2 * FD_STEP)
        return f[0], np.where(np.isfinite(grads), grads, 0.0)

    def grad_tol(self) -> float:
        return GRAD_TOL * self.delta * len(self.log_loss)


def _grid(dim: int) -> np.ndarray:
    return np.array(list(itertools.product(*list(GRID.values())[:dim])))


def _refine(objective: RepeatObjective, starts: np.ndarray, weights=None, basis=None):
    """Vectorised BFGS from each row of ``starts`` (in z, θ = start + L·z with ``basis`` L):
    θ (K, dim), F (K,), converged (K,)."""
    basis = np.eye(starts.shape[1]) if basis is None else basis

    def fg(z, rows):
        f, g = objective.values_and_grads(starts[rows] + z @ basis.T, None if weights is None else weights[rows])
        return f, g @ basis

    tol = objective.grad_tol()
    z_tol = tol / np.abs(np.linalg.inv(basis).T).sum(axis=1).max()
    z, values, _, _ = minimize_batch(fg, np.zeros_like(starts), gtol=z_tol, max_iter=BATCH_MAX_ITER)
    thetas = starts + z @ basis.T
    grads = objective.values_and_grads(thetas, weights)[1]
    return thetas, values, np.isfinite(values) & (np.max(np.abs(grads), axis=1) <= tol)


def _polish(objective: RepeatObjective, theta: np.ndarray):
    """scipy's L-BFGS-B from ``theta`` (bounded: α, β > 0): θ, F, scipy's message, max |gradient|."""

    def fg(x):
        f, g = objective.values_and_grads(x[None])
        return float(f[0]), g[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = minimize(
            fg,
            theta,
            jac=True,
            method="L-BFGS-B",
            bounds=BOUNDS[: objective.dim],
            options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000},
        )
    grad = np.max(np.abs(objective.values_and_grads(res.x[None])[1]))
    return res.x, float(res.fun), str(res.message), float(grad)


def _best_fit(objective: RepeatObjective, extra_starts: np.ndarray | None = None, grid: np.ndarray | None = None):
    grid = _grid(objective.dim) if grid is None else grid
    values = np.concatenate([objective.values(grid[i : i + 2048]) for i in range(0, len(grid), 2048)])
    starts = grid[np.argsort(values)[:REFINED_STARTS]]
    if extra_starts is not None:
        starts = np.concatenate([starts, extra_starts])
    refined, refined_values, _ = _refine(objective, starts)
    return _polish(objective, refined[int(np.nanargmin(refined_values))]), grid, values


def fit_muennighoff(table: RunTable, *, resamples=1000, seed=0, level=0.95, delta=HUBER_DELTA, stages="auto"):
    """Fit L(N, D, U) to the runs of ``table`` that carry U, and bootstrap it (``resamples`` = 0: no
    intervals). ``stages``: "1" fits all seven parameters at once, "2" the paper's two stages
    (`analysis.fits.muennighoff_stages`), "auto" two when the runs that repeat nothing support them and pin the base
    law, else one where that pins more of it (`muennighoff_stages.base_unpinned`)."""
    from analysis.fits import muennighoff_stages

    fit = _fit(table, resamples, seed, level, delta, stages)
    if stages == "auto" and (why := muennighoff_stages.base_unpinned(fit)):
        one = _fit(table, resamples, seed, level, delta, "1", instead=why)
        pins_more = len(muennighoff_stages.loose_base(one)) < len(muennighoff_stages.loose_base(fit))
        fit = one if pins_more else fit  # else two stages stand, said as they are (a non-converged one says so)
    return fit


def _fit(table: RunTable, resamples: int, seed: int, level: float, delta: float, stages: str, instead: str = ""):
    """`fit_muennighoff` with ``stages`` as given; ``instead``: why one stage was fitted in place of two."""
    from analysis.fits import muennighoff_stages

    runs, notes = _repeat_runs(table)
    n, d, u, loss = (runs[k].to_numpy(dtype=float) for k in ("N", "D", "U", "loss"))
    two, why_not = muennighoff_stages.choose(stages, d, u, n)
    why_not = instead or why_not
    with one_blas_thread(), np.errstate(all="ignore"):
        fitted = (muennighoff_stages.fit_two_stages if two else _one_stage)(n, d, u, loss, delta)
        objective, theta, (value, message, grad), why, optimizer = fitted
        published_rn = mf.published_params()["R_N"]
        if why:
            notes.append(f"R_N held at the published {published_rn:.4g}: {why}")
        converged = bool(np.isfinite(value)) and grad <= objective.grad_tol()
        point = {k: float(v[0]) for k, v in objective.params(theta).items()}
        convergence = {
            "converged": converged,
            "message": message,
            "gradient_max_abs": grad,
            "optimizer": optimizer,
            "stages": 2 if two else 1,
            "method": muennighoff_stages.stages_note(two, why_not, d, u),
            "fixed": {} if not why else {"R_N": published_rn},
            "notes": notes,
        }
        if not converged:
            convergence["warning"] = "the optimizer did not converge: treat the estimates with suspicion"
        boot, estimates = None, {k: Estimate(v) for k, v in point.items()}
        if resamples > 0:
            draw = (_units(runs), resamples, seed, level)
            two_stages = muennighoff_stages.bootstrap_two_stages
            samples, boot = two_stages(objective, theta, d, u, *draw) if two else _bootstrap(objective, theta, *draw)
            estimates = _with_intervals(point, samples, level, convergence["fixed"], objective, theta, boot.failed)
        _flag_bounds(estimates, convergence)  # after the narrowness rule: the bound is the reason to give
        form.flag_design(estimates, np.log(n), np.log(d), one_budget=len(table.budgets) < 2)  # approach 3's rules
    return MuennighoffFit(
        source=table.source,
        n=n.tolist(),
        d=d.tolist(),
        unique=u.tolist(),
        loss=loss.tolist(),
        run_id=runs["run_id"].tolist(),
        estimates=estimates,
        residuals=objective.residuals(theta[None])[0].tolist(),
        objective=value,
        huber_delta=delta,
        convergence=convergence,
        fitted_compute_max=float(runs["C"].max()),
        bootstrap=boot,
    )


def _with_intervals(
    point: dict, samples: dict, level: float, fixed: dict, objective: RepeatObjective, theta: np.ndarray, failed: int
) -> dict[str, Estimate]:
    """The estimates with bootstrap intervals; R_D and R_N flagged unidentified when their interval spans too many
    decades, a held R_N without an interval; then any far narrower than the runs' scatter allows (at the best fit
    ``theta`` of ``objective``), and A, B too wide for the runs' N, D to pin (`flag_unresponsive`, `flag_wide_terms`)."""
    estimates = estimates_from_samples(point, samples, level, failed)
    for name in ("R_D", "R_N"):
        e = estimates[name]
        e.unidentified = "" if name in fixed else e.unidentified or scale_identification(e.lower, e.upper)
    if "R_N" in fixed:
        estimates["R_N"] = Estimate(fixed["R_N"])
    residuals = objective.residuals(theta[None])[0]
    flag_unresponsive(estimates, mf.NAMES[: objective.dim], objective.jacobian(theta), residuals, level, LOGS)
    flag_wide_terms(estimates, form.TERMS, {"N": float(objective.n.max()), "D": float(objective.d.max())})
    return estimates


# each parameter's search bounds in its own units (BOUNDS is in θ's: logs of E, A, B, R_D, R_N)
NATURAL_BOUNDS = {
    name: (np.exp(lo), np.exp(hi)) if name not in ("alpha", "beta") else (lo, hi)
    for name, (lo, hi) in zip(("E", "A", "B", "alpha", "beta", "R_D", "R_N"), BOUNDS)
}


def _flag_bounds(estimates: dict[str, Estimate], convergence: dict) -> None:
    """A parameter whose estimate sits on its search bound is not determined by the runs: it prints as
    unidentified, not as a value with a (degenerate) interval; R_D fitted with such a base law is
    conditional on it, and the fit says so."""
    at_bound = []
    for name, e in estimates.items():
        if name in convergence["fixed"]:
            continue
        for bound in NATURAL_BOUNDS[name]:
            if np.isclose(e.value, bound, rtol=1e-3, atol=0.0):
                e.unidentified = f"at its search bound {bound:.3g}: the runs do not determine it"
                at_bound.append(name)
    if at_bound:
        caution = (
            f"{', '.join(at_bound)} at a search bound (e.g. no loss floor in these runs): the other estimates "
            "are conditional on that value"
        )
        convergence["warning"] = "; ".join(filter(None, [convergence.get("warning"), caution]))


def _one_stage(n, d, u, loss, delta: float):
    """All parameters at once: (objective, θ, (F, message, max |gradient|), why R_N is held, optimizer)."""
    fixed = RepeatObjective(n, d, u, loss, delta, fixed_rn=mf.published_params()["R_N"])
    (theta, value, message, grad), grid, _ = _best_fit(fixed)
    objective, why = fixed, _rn_unidentified(fixed, theta)
    if not why:
        free = RepeatObjective(n, d, u, loss, delta)
        starts = np.array([[*theta, r] for r in GRID["log_R_N"]])
        (theta, value, message, grad), grid, _ = _best_fit(free, starts)
        objective = free
    optimizer = (
        f"BFGS from the {REFINED_STARTS} best of {len(grid)} grid points, then scipy L-BFGS-B "
        "(central-difference gradient)"
    )
    return objective, theta, (value, message, grad), why, optimizer


def _units(runs) -> np.ndarray:
    """The bootstrap's units: the table's unit (seeds of one (N, D); a WSD trunk and its branches) at one U."""
    keys = ["unit", "U"] if "unit" in runs.columns else ["N", "D", "U"]
    return runs.groupby(keys, sort=False).ngroup().to_numpy()


def _repeat_runs(table: RunTable):
    """The runs with a known U, and notes; DataError when too few, or none repeats its data."""
    runs = table.runs
    known = runs["U"].notna() if "U" in runs else np.zeros(len(runs), bool)
    notes = []
    if not known.any():
        raise DataError(
            f"the data-constrained fit needs each run's unique tokens; no run of {table.source!r} has them (a store's "
            "records carry unique_tokens; a table names its column with --unique-column, default unique_tokens, else U, "
            "or gives each run's epochs, read as U = D/epochs)"
        )
    if not known.all():
        notes.append(  # user27: a blank U is how a table writes a fresh run; the fit then lost its fresh runs
            f"left out {int((~known).sum())} runs without unique tokens (a blank U is not read as fresh data: a fresh "
            "run's U is any U >= D, and U also sets the law's excess-parameter term): give their U, or U >= D if fresh"
        )
    runs = runs[known].reset_index(drop=True)
    epochs = runs["D"] / runs["U"]
    repeating = epochs[mf.repeats(runs["D"], runs["U"])]
    if repeating.nunique() < 2:
        raise DataError(
            f"the data-constrained fit needs runs that repeat their data (epochs D/U > 1) at 2 or more distinct epochs "
            f"to determine R_D; {table.source!r} has {repeating.nunique()} (largest epochs {epochs.max():.3g})"
        )
    if len(runs) < 8 or runs["N"].nunique() < 2:
        raise DataError(
            f"the data-constrained fit has 6-7 parameters and needs at least 8 runs with unique tokens and 2 distinct "
            f"sizes N; {table.source!r} has {len(runs)} runs and {runs['N'].nunique()} sizes"
        )
    return runs, notes


def _rn_unidentified(objective: RepeatObjective, theta: np.ndarray) -> str:
    """Why R*_N cannot be fitted here ("" when it can): too few runs beyond 2·N_opt(U)."""
    p = {k: float(v[0]) for k, v in objective.params(theta).items()}
    u_n = mf.unique_params(objective.u, p["A"], p["B"], p["alpha"], p["beta"])
    beyond = objective.n > RN_REACH * u_n
    if beyond.sum() >= RN_MIN_RUNS and np.unique(objective.n[beyond]).size >= 2:
        return ""
    return (
        f"only {int(beyond.sum())} runs have N above twice the compute-optimal size N_opt(U) of their unique tokens "
        f"({RN_MIN_RUNS} at 2 or more sizes are needed to determine it)"
    )


def _hessian_basis(objective: RepeatObjective, theta: np.ndarray) -> np.ndarray | None:
    """L with L·Lᵀ = H⁻¹ at θ (central differences of the gradient), None when H is not positive definite."""
    step, dim = 1e-4, objective.dim
    plus = objective.values_and_grads(theta[None] + step * np.eye(dim))[1]
    minus = objective.values_and_grads(theta[None] - step * np.eye(dim))[1]
    hessian = (plus - minus) / (2 * step)
    hessian = 0.5 * (hessian + hessian.T)
    held = ~getattr(objective, "free", np.ones(dim, bool))  # coordinates a stage holds: the identity there
    hessian[held], hessian[:, held] = 0.0, 0.0
    hessian[held, held] = 1.0
    try:
        return np.linalg.cholesky(np.linalg.inv(hessian))
    except np.linalg.LinAlgError:
        return None


def _bootstrap(objective: RepeatObjective, theta, units: np.ndarray, resamples: int, seed: int, level: float):
    """Refit every resample (drawing ``units``) together from θ, whitened; those not converged go on
    from where they stopped."""
    rng = np.random.default_rng(seed)
    weights, notes = unit_draws(rng, units, resamples)
    thetas, ok, retried = refit(objective, np.tile(theta, (resamples, 1)), weights, _hessian_basis(objective, theta))
    params = objective.params(thetas[ok])
    samples = {k: np.asarray(v, float) for k, v in params.items()}
    notes += [f"{retried} resamples were refined again from where they stopped"] if retried else []
    return summarize(samples, resamples, resamples - int(ok.sum()), level, seed, notes)


def refit(objective: RepeatObjective, starts: np.ndarray, weights: np.ndarray, basis):
    """Each row of ``starts`` refined under its row of ``weights``, once more from where it stopped
    when it did not converge: θ (K, dim), converged (K,), how many were refined again."""
    thetas, _, ok = _refine(objective, starts, weights, basis)
    retry = np.flatnonzero(~ok)
    if retry.size:
        again, _, again_ok = _refine(objective, thetas[retry], weights[retry], basis)
        thetas[retry[again_ok]], ok[retry[again_ok]] = again[again_ok], True
    return thetas, ok, int(retry.size)


def fit_if_repeating(table: RunTable, resamples: int, seed: int, level: float) -> MuennighoffFit | None:
    """The data-constrained fit when ``table``'s runs repeat their data and support it, else None."""
    if not mf.any_repeats(table.runs):
        return None
    try:
        return fit_muennighoff(table, resamples=resamples, seed=seed, level=level)
    except DataError:
        return None
