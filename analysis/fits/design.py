"""How wide would the N_opt interval be with more runs? Approach 3 refitted on simulated results.

For a design (the runs already done plus candidate runs), `DesignSimulator.spread` estimates the
spread that a refit of approach 3 would leave in ln N_opt at a target budget C*:

  1. draw M parameter samples θ_m from the current fit's bootstrap (the plausible truths);
  2. simulate every run of the design at θ_m: L_i = L(N_i, D_i; θ_m)·exp(σ·ε_im), with σ the
     noise scale of the outlier rule's residual test (`analysis.fits.outliers.Flagged.noise_scale`: the
     robust scale of the leverage-standardised residuals of a Huber refit). Not the robust scale of
     approach 3's own residuals: its near-least-absolute-deviations fit passes through about as many
     runs as it has parameters, and that σ (0.003 on a table of 0.005 noise) made the simulated
     spread of the runs done 0.57x the fit's own bootstrap spread;
  3. refit approach 3 to each simulated set (the same Huber objective, all M at once, from θ_m),
     then refit it again on a bootstrap resample of its runs (Poisson weights, from that optimum);
  4. the bootstrap deviation e_m = ln N_opt(C*; resample refit) − ln N_opt(C*; full refit), and
     its spread s (a winsorized standard deviation, `_spread`): the bootstrap interval that a fit
     of the design would report has a width proportional to s.

The ratio s(design)/s(runs done) ranks designs in the search; it is not the narrowing a refit will
show (it was x0.79-x0.88 where refits of runs drawn from the truth gave x0.82-x1.10: the search's pick
is scored by its own noise, today's runs are redrawn, and σ̂ is taken as exact), which `scaling next`
takes from refits of the table itself (`analysis.fits.refits`). On seeded synthetic
ladders s(runs done) agrees with the spread of the fit's own bootstrap within a factor 1.5
(`tests/test_next.py`); where N_opt is unidentified the fit's bootstrap reaches optima that refits
from θ_m never visit, and the simulation cannot stand for it (`scaling next` then gives no ratio).
Two designs' spreads differ by simulation noise too: `gain_noise` is the standard error of that
difference, by a bootstrap over the draws (the same draws for both designs). Measuring the bootstrap
deviation, not the distance to θ_m, matters: a design that leans on one run (say a single run at
the target budget) looks precise to a parametric simulation but not to the bootstrap interval the
user will see, which drops that run from a third of the resamples. Every design is scored with the
same draws θ_m, the same noise ε and the same bootstrap weight for the same run (common random
numbers), so differences between designs are not drowned by simulation noise. The refits know θ_m
only as a starting point (the optimum of a simulated set lies near its truth; the multi-start of
`fit_parametric` is there for data whose truth is unknown).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import numpy as np

from analysis.fits import laws
from analysis.fits.bfgs_batch import minimize_batch
from analysis.fits.bootstrap import one_blas_thread
from analysis.fits.huber_objective import HUBER_DELTA, HuberLogLoss
from analysis.fits.parametric import BATCH_MAX_ITER, GRAD_TOL
from analysis.fits.robust import robust_sigmas
from scaling.errors import DataError

WINSOR = 3.0  # errors beyond this many robust deviations from the median count as that far
NOISE_RESAMPLES = 200  # bootstrap resamples of the draws behind `DesignSimulator.gain_noise`
POISSON_ONE_CDF = np.cumsum([np.exp(-1.0) / np.prod(np.arange(1, k + 1)) for k in range(12)])


def poisson_one(normal: np.ndarray) -> np.ndarray:
    """Poisson(1) counts from standard normal draws (by inverting the CDF at Φ(z)), so one stored
    normal per run and draw gives both its noise stream and its bootstrap weight."""
    from scipy.special import ndtr

    return np.searchsorted(POISSON_ONE_CDF, ndtr(normal)).astype(float)


class SimulatedSets(HuberLogLoss):
    """The approach-3 objective over the runs of one design, with one simulated loss vector per
    problem: ``log_loss`` is (problems, runs) and row k of θ is fitted to row k of the losses."""

    def rows(self, rows: np.ndarray) -> SimulatedSets:
        view = copy.copy(self)
        view.log_loss = self.log_loss[rows]
        return view


def theta_of(params: dict) -> np.ndarray:
    """(E, A, B, alpha, beta) by name (floats or arrays) → rows θ = (ln E, ln A, ln B, α, β)."""
    return np.stack(
        [np.log(params["E"]), np.log(params["A"]), np.log(params["B"]), params["alpha"], params["beta"]], axis=-1
    )


def ln_n_opt(theta: np.ndarray, compute: float) -> np.ndarray:
    """ln N_opt(C) for rows θ (`laws.chinchilla_allocation`)."""
    a, b = np.exp(theta[..., 1]), np.exp(theta[..., 2])
    return np.log(laws.chinchilla_allocation(compute, a, b, theta[..., 3], theta[..., 4])[0])


def refit(n, d, losses: np.ndarray, starts: np.ndarray, weights: np.ndarray | None = None):
    """Approach 3 refitted to each row of ``losses`` (problems, runs) at the runs (``n``, ``d``),
    row k from ``starts[k]`` (θ) with run weights ``weights[k]`` (or 1): the fitted θ rows and
    whether each converged."""
    objective = SimulatedSets(n, d, losses)
    starts_c = objective.to_centered(starts)

    def fg(z, rows):
        return objective.rows(rows).values_and_grads(starts_c[rows] + z, None if weights is None else weights[rows])

    tol = GRAD_TOL * HUBER_DELTA * len(n)
    with one_blas_thread(), np.errstate(all="ignore"):
        z, values, _, done = minimize_batch(fg, np.zeros_like(starts_c), gtol=tol, max_iter=BATCH_MAX_ITER)
    return objective.from_centered(starts_c + z), done & np.isfinite(values)


@dataclass
class DesignSimulator:
    """Scores designs (runs done + extra runs) by the simulated spread of ln N_opt(``target``)."""

    n_done: np.ndarray
    d_done: np.ndarray
    truths: np.ndarray  # (M, 5) θ rows drawn from the bootstrap
    sigma: float
    target: float
    seed: int = 0

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        self.noise_done = rng.standard_normal((2, len(self.truths), len(self.n_done)))
        self._rng, self._noise = rng, {}  # noise per extra run, keyed by (N, D): common random numbers
        self._errors: dict[tuple, np.ndarray] = {}  # by design: a design is simulated once
        self.truth_ln_n_opt = ln_n_opt(self.truths, self.target)

    @classmethod
    def from_fit(cls, fit, target: float, sigma: float, draws: int = 64, seed: int = 0) -> DesignSimulator:
        """From a `ParametricFit` with bootstrap samples: ``draws`` of them (without replacement
        when there are enough), and ``sigma`` the noise of its runs: the outlier rule's σ̂, as
        `outliers.fit_flagged` measured it (`Flagged.noise_scale`)."""
        thetas = bootstrap_thetas(fit)
        thetas = thetas[np.all(np.isfinite(thetas), axis=1)]
        if len(thetas) < 2:
            raise DataError("the fit has fewer than 2 usable bootstrap samples to simulate from; fit more runs first")
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(thetas), size=draws, replace=len(thetas) < draws)
        return cls(np.asarray(fit.n, float), np.asarray(fit.d, float), thetas[pick], sigma, target, seed)

    def _extra_noise(self, points: list[tuple[float, float]]) -> np.ndarray:
        """(2, draws, runs): per extra run its loss noise and its bootstrap uniforms, drawn once."""
        for point in points:
            if point not in self._noise:
                self._noise[point] = self._rng.standard_normal((2, len(self.truths)))
        return np.stack([self._noise[p] for p in points], axis=2) if points else np.zeros((2, len(self.truths), 0))

    def errors(self, extra: list[tuple[float, float]] = ()) -> np.ndarray:
        """Per draw: ln N_opt of a bootstrap refit minus ln N_opt of the full refit of the same
        simulated results (the runs done plus ``extra`` (N, D) runs); NaN where a refit failed.

        The bootstrap is Poisson's (each run weighs k ~ Poisson(1) times; Hanley & MacGibbon 2006),
        so a run's weight in draw m is the same in every design that holds it."""
        extra = list(extra)
        n = np.concatenate([self.n_done, [p[0] for p in extra]])
        d = np.concatenate([self.d_done, [p[1] for p in extra]])
        noise, uniform = np.concatenate([self.noise_done, self._extra_noise(extra)], axis=2)
        e, a, b, alpha, beta = (self.truths[:, j : j + 1] for j in range(5))
        clean = laws.chinchilla_loss(n[None, :], d[None, :], np.exp(e), np.exp(a), np.exp(b), alpha, beta)
        losses = clean * np.exp(self.sigma * noise)
        full, ok_full = refit(n, d, losses, self.truths)
        weights = poisson_one(uniform)
        boot, ok_boot = refit(n, d, losses, full, weights)
        with np.errstate(all="ignore"):
            error = ln_n_opt(boot, self.target) - ln_n_opt(full, self.target)
        return np.where(ok_full & ok_boot, error, np.nan)

    def design_errors(self, extra: list[tuple[float, float]] = ()) -> np.ndarray:
        """`errors` of a design, simulated once (the order of ``extra`` does not matter)."""
        key = tuple(sorted(extra))
        if key not in self._errors:
            self._errors[key] = self.errors(key)
        return self._errors[key]

    def spread(self, extra: list[tuple[float, float]] = ()) -> float:
        """The spread of `errors` (`spread_of`): of ln N_opt at the target budget."""
        return float(spread_of(self.design_errors(extra)))

    def gain_noise(self, before: list[tuple[float, float]], after: list[tuple[float, float]]) -> float:
        """The standard error of spread(before) − spread(after) from simulation noise: its standard
        deviation over `NOISE_RESAMPLES` bootstrap resamples of the draws, the same draws for both."""
        rows = np.random.default_rng(self.seed).integers(0, len(self.truths), (NOISE_RESAMPLES, len(self.truths)))
        a, b = self.design_errors(before)[rows], self.design_errors(after)[rows]
        return float(np.nanstd(spread_of(a) - spread_of(b), ddof=1))


def bootstrap_spread(fit, target: float) -> float:
    """The spread (`spread_of`) of ln N_opt(``target``) over the bootstrap samples of a `ParametricFit`:
    what the simulated spread of the runs done stands for."""
    with np.errstate(all="ignore"):
        return float(spread_of(ln_n_opt(bootstrap_thetas(fit), target)))


def bootstrap_thetas(fit) -> np.ndarray:
    """The bootstrap samples of a `ParametricFit` as θ rows (`theta_of`; none without a bootstrap)."""
    samples = fit.bootstrap.samples if fit.bootstrap is not None else {}
    with np.errstate(all="ignore"):
        return theta_of({k: np.asarray(samples.get(k, []), float) for k in ("E", "A", "B", "alpha", "beta")})


def spread_of(errors: np.ndarray) -> np.ndarray:
    """Along the last axis: the standard deviation of the finite errors winsorized at `WINSOR` robust
    deviations (`robust_sigmas`) from their median (inf with fewer than 2): as efficient as a standard
    deviation for normal errors (percentiles of a few dozen draws are noisier), and a wild refit
    moves it by a bounded amount."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row of NaNs (every refit failed) is inf below
        errors = np.where(np.isfinite(errors), errors, np.nan)
        center = np.nanmedian(errors, axis=-1, keepdims=True)
        scale = robust_sigmas(errors)
        clipped = np.clip(errors, center - WINSOR * scale, center + WINSOR * scale)
        spread = np.nanstd(clipped, axis=-1, ddof=1)
    return np.where(np.sum(np.isfinite(errors), axis=-1) >= 2, spread, np.inf)
