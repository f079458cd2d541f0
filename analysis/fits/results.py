"""Result objects of the fits: estimates with intervals, the points used, residuals, diagnostics.

Every object here is a plain dataclass that saves to JSON and loads back unchanged
(``FitReport.save`` / ``FitReport.load``). They carry what a plot or a report needs: the points
each fit used, callable fitted curves (`PowerLaw`, `Parabola`, `ParametricFit.predict`), the
intervals and the bootstrap samples (so predictions can carry intervals too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.fits import laws
from analysis.fits import muennighoff as data_constrained
from analysis.fits.codec import KEEPS_OVERFLOW, from_jsonable, to_jsonable
from analysis.fits.percentiles import percentile_bounds
from analysis.sources.schema import DEFAULT_LOSS_UNIT, parse_loss_unit
from scaling.errors import DataError

SCHEMA = 1


# ---------------------------------------------------------------- building blocks
UNBOUNDED = "interval unbounded"  # how an unidentified reason starts when a bound is ±inf (`Estimate.unbounded`)


@dataclass
class Estimate:
    """A fitted value and, when a bootstrap ran, its percentile interval [lower, upper].

    ``unidentified`` is empty, or says why the data do not pin the value down (e.g. "interval spans
    12 orders of magnitude", `analysis.fits.bootstrap.identification`; "interval unbounded above",
    `from_samples`): the interval is then reported as unidentified, never printed as numbers."""

    value: float
    lower: float | None = None
    upper: float | None = None
    unidentified: str = ""

    @classmethod
    def from_samples(cls, value: float, samples, level: float) -> Estimate:
        """Percentile interval at ``level`` (e.g. 0.95 → 2.5th and 97.5th percentiles, `percentile_bounds`).

        NaN samples have no value (a resample that could not be refitted, counted as failed by its fit)
        and are left out. ±inf samples (a resample whose value overflowed) take part as the extreme
        order statistics they are: leaving them out would narrow the interval towards the finite side.
        When a bound lands on one, the interval is unbounded on that side: the estimate keeps no
        interval and is unidentified, saying so (never a printed inf)."""
        samples = np.asarray(samples, dtype=float)
        samples = samples[~np.isnan(samples)]
        if samples.size < 2:
            return cls(float(value))
        lower, upper = percentile_bounds(samples, level)
        if np.isfinite(lower) and np.isfinite(upper):
            return cls(float(value), float(lower), float(upper))
        infinite = sorted({b for b in (lower, upper) if np.isinf(b)})  # -inf first
        why = "; ".join(
            f"{UNBOUNDED} {'above' if b > 0 else 'below'}: {int(np.sum(samples == b))} of {samples.size} "
            f"resamples overflowed to {'+' if b > 0 else '-'}inf"
            for b in infinite
        )
        return cls(float(value), unidentified=why)

    @property
    def unbounded(self) -> bool:
        """Whether it is unidentified because its interval is unbounded (a bound at ±inf), not another reason."""
        return self.unidentified.startswith(UNBOUNDED)

    @property
    def interval(self) -> list[float] | None:
        return None if self.lower is None else [self.lower, self.upper]

    def as_json(self) -> dict:
        out = {"estimate": self.value, "interval": self.interval}
        return {**out, "unidentified": self.unidentified} if self.unidentified else out


@dataclass
class PowerLaw:
    """y = floor + coefficient · x^exponent (`analysis.fits.laws.power_law`), callable on arrays."""

    coefficient: float
    exponent: float
    floor: float = 0.0

    def __call__(self, x):
        return laws.power_law(np.asarray(x, dtype=float), self.coefficient, self.exponent, self.floor)

    def inverse(self, y):
        """x such that law(x) = y: x = ((y − floor)/coefficient)^(1/exponent); NaN where y ≤ floor."""
        excess = np.asarray(y, dtype=float) - self.floor
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(excess > 0, np.power(excess / self.coefficient, 1.0 / self.exponent), np.nan)


@dataclass
class Bootstrap:
    """How the intervals were made: ``resamples`` requested, ``failed`` of them unusable (fit did
    not converge or data degenerate), percentile intervals at ``level``; ``samples`` holds each
    successful resample's parameters by name (for propagating intervals to predictions): a value that
    overflowed stays ±inf (`Estimate.from_samples`), written to JSON as ±`codec.BEYOND_FLOAT`."""

    resamples: int
    failed: int
    level: float
    seed: int
    samples: dict[str, list[float]] = field(default_factory=dict, metadata={KEEPS_OVERFLOW: True})
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- approach 1
@dataclass
class EnvelopeFit:
    """Approach 1 (Hoffmann et al. 2022, §3.1): the lowest loss reached at each compute.

    Envelope points (``compute``, ``loss``, with the ``n``/``d``/``run_id`` of the run that reached
    each) come from binning all curve points on a log-compute grid and keeping each bin's minimum.
    Fitted through them: ``loss_law`` L = A·C^(−α), ``loss_law_with_floor`` L = E + A·C^(−α),
    ``n_opt_law`` N_opt = k_N·C^a and ``d_opt_law`` D_opt = k_D·C^b.
    ``residuals[name]`` are log(observed) − log(fitted) per envelope point. ``validation``
    (`analysis.fits.validation.validate_envelope`): held_out_budget, fitted_runs, extrapolation_factor,
    extrapolation (bool), compute, loss_observed/predicted/relative_error, n_opt_observed/predicted/
    relative_error, best_run_id; or {skipped: why}.
    """

    compute: list[float]
    loss: list[float]
    n: list[float]
    d: list[float]
    run_id: list[str]
    loss_law: PowerLaw
    loss_law_with_floor: PowerLaw | None
    n_opt_law: PowerLaw
    d_opt_law: PowerLaw
    estimates: dict[str, Estimate]
    residuals: dict[str, list[float]]
    diagnostics: dict[str, Any]
    fitted_compute_max: float
    bootstrap: Bootstrap | None = None
    validation: dict[str, Any] | None = None
    approach: int = 1


# ---------------------------------------------------------------- approach 2
@dataclass
class Parabola:
    """One IsoFLOP profile: loss ≈ c0 + c1·u + c2·u², u = ln N − center, over one budget's runs.

    Its minimum is N_opt = exp(center − c1/(2·c2)) with D_opt = compute/(6·N_opt); ``budget`` names it (the
    source's label, or its cluster's), ``compute`` is where the law places it (`RunTable.budget_compute`: its runs' 6·N·D, or the label within 2%);
    ``inside_range``: N_opt lies within the sizes trained at this budget (else left out of the law; `bracketed`).
    ``resamples_failed``: bootstrap resamples in which this budget's parabola had no usable minimum;
    the budget was left out of those resamples only.
    """

    budget: float
    compute: float
    center: float
    coefficients: list[float]
    n: list[float]
    loss: list[float]
    run_id: list[str]
    n_opt: float
    d_opt: float
    loss_opt: float
    inside_range: bool
    residuals: list[float]
    n_opt_interval: list[float] | None = None
    n_opt_unidentified: str = ""  # why the N_opt interval is not given as numbers ("" when it is)
    law_unbounded: str | None = None  # why N_opt fails the law's test ("" if not; None: saved before it): `in_law`
    resamples_failed: int = 0  # bootstrap resamples in which this budget gave no minimum (left out of those)

    def __call__(self, n):
        u = np.log(np.asarray(n, dtype=float)) - self.center
        c0, c1, c2 = self.coefficients
        return c0 + c1 * u + c2 * u * u


@dataclass
class IsoFLOPFit:
    """Approach 2 (Hoffmann et al. 2022, §3.2): per budget a parabola of loss against ln N,
    its minimum N_opt(C), then N_opt = k_N·C^a and D_opt = k_D·C^b through the minima.
    ``dropped`` lists budgets that could not give a minimum, and why. ``validation``
    (`analysis.fits.validation.validate_isoflop`): held_out_budget, fitted_budgets, extrapolation_factor,
    extrapolation (bool), n_opt_observed, n_opt_predicted, n_opt_relative_error; or {skipped: why}."""

    profiles: list[Parabola]
    dropped: list[str]
    n_opt_law: PowerLaw
    d_opt_law: PowerLaw
    estimates: dict[str, Estimate]
    residuals: dict[str, list[float]]
    diagnostics: dict[str, Any]
    fitted_compute_max: float
    bootstrap: Bootstrap | None = None
    validation: dict[str, Any] | None = None
    approach: int = 2
    # the law's fitted range from below (`isoflop.law_budgets`, as fitted_compute_max); NaN in a fit saved
    # before 2026-11-27 (`isoflop.fitted_min` reads it)
    fitted_compute_min: float = float("nan")


# ---------------------------------------------------------------- approach 3
PARAMETRIC_NAMES = ("E", "A", "B", "alpha", "beta")


@dataclass
class ParametricFit:
    """Approach 3 (Hoffmann et al. 2022, §3.3): L(N, D) = E + A/N^α + B/D^β fitted by a Huber
    loss (δ = ``huber_delta``) on log-loss, summed over runs (``objective`` at the optimum).

    ``estimates`` holds E, A, B, alpha, beta and the allocation exponents a = β/(α+β),
    b = α/(α+β) and prefactor G (see `analysis.fits.laws.chinchilla_allocation`).
    ``residuals`` are predicted − observed log-loss per run. ``convergence`` reports the optimizer:
    converged (bool: max |gradient| small at the scale of the objective), optimizer (str), message
    (scipy's), gradient_max_abs, grid_starts, refined_starts, starts_agreeing (refined starts that
    reached the optimum), best_grid_objective, and when present warning (not converged) or note
    (E indistinguishable from 0). ``validation`` (`analysis.fits.validation.validate_parametric`):
    held_out_budget, held_out_runs, fitted_runs, extrapolation_factor, extrapolation (bool),
    loss_relative_error_mean_abs, loss_relative_error_max_abs, runs [{run_id, observed, predicted}];
    or {skipped: why}.
    """

    n: list[float]
    d: list[float]
    loss: list[float]
    run_id: list[str]
    estimates: dict[str, Estimate]
    residuals: list[float]
    objective: float
    huber_delta: float
    convergence: dict[str, Any]
    fitted_compute_max: float
    bootstrap: Bootstrap | None = None
    validation: dict[str, Any] | None = None
    approach: int = 3

    @property
    def params(self) -> dict[str, float]:
        return {name: self.estimates[name].value for name in PARAMETRIC_NAMES}

    def predict(self, n, d):
        """Predicted loss L(N, D) at the fitted parameters."""
        return laws.chinchilla_loss(np.asarray(n, dtype=float), np.asarray(d, dtype=float), **self.params)


# ---------------------------------------------------------------- data-constrained law
@dataclass
class MuennighoffFit:
    """The data-constrained law (`analysis.fits.muennighoff`, fitted by `analysis.fits.muennighoff_fit`):
    ``estimates`` E, A, B, alpha, beta, R_D, R_N (``convergence["fixed"]``: held at the published value)."""

    source: str
    n: list[float]
    d: list[float]
    unique: list[float]
    loss: list[float]
    run_id: list[str]
    estimates: dict[str, Estimate]
    residuals: list[float]
    objective: float
    huber_delta: float
    convergence: dict[str, Any]
    fitted_compute_max: float
    bootstrap: Bootstrap | None = None

    @property
    def params(self) -> dict[str, float]:
        return {name: self.estimates[name].value for name in data_constrained.NAMES}

    @property
    def epochs(self) -> list[float]:
        return [d / u for d, u in zip(self.d, self.unique)]

    def predict(self, n, d, unique):  # L(N, D, U) at the fitted parameters
        return data_constrained.loss(n, d, unique, **self.params)


# ---------------------------------------------------------------- outliers
@dataclass
class Outlier:
    """A run flagged by `analysis.fits.outliers`: which rule (``residual``, ``near_duplicate_size`` or ``off_budget``)
    and the detail (its robust z-score, or the run it nearly duplicates)."""

    run_id: str
    n: float
    d: float
    loss: float
    budget: float
    rule: str
    detail: str


# ---------------------------------------------------------------- a whole `scaling fit`
@dataclass
class FitReport:
    """Everything one `scaling fit` produced: the approaches that ran, those skipped and why,
    and how the input was read (``warnings``: exclusions, skipped files; ``notes``: column use).
    ``outliers``: runs flagged by `analysis.fits.outliers` (always computed; refitted without them
    when ``outliers_excluded``). `headline_left_out` says which approaches a summary should not lead with."""

    source: str
    n_kind: str
    runs: int
    warnings: list[str]
    notes: list[str]
    envelope: EnvelopeFit | None = None
    isoflop: IsoFLOPFit | None = None
    parametric: ParametricFit | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    outliers: list[Outlier] = field(default_factory=list)
    outlier_rule: str = ""  # the rule that flagged ``outliers`` (analysis.fits.outliers.RULE)
    outliers_excluded: bool = False  # True: the fits above ran without the flagged runs
    hyperparameter_laws: dict[str, Any] = field(default_factory=dict)  # `scaling.hplaws`' schema; {}: no HP sweep
    hyperparameter_fit: dict[str, Any] = field(default_factory=dict)
    muennighoff: MuennighoffFit | None = None  # `scaling fit --approach muennighoff`
    schema: int = SCHEMA
    loss_unit: str = DEFAULT_LOSS_UNIT  # the fitted table's (`RunTable.loss_unit`): E's and every loss's label

    @property
    def fits(self) -> list:
        return [f for f in (self.envelope, self.isoflop, self.parametric) if f is not None]

    def headline_left_out(self) -> dict[int, str]:
        """Approaches fitted but not to be headlined (a summary leads with none; `optimal` and the report allocate
        with none), and why: one without a law (`no_law`), and approach 1 on final points only (no training curves):
        its envelope is just each budget's lowest-loss run, so N_opt(C) moves in steps of the sizes trained."""
        out = {f.approach: f"approach {f.approach} has no law ({no_law(f)})" for f in self.fits if no_law(f)}
        if self.envelope is not None and not self.envelope.diagnostics.get("from_curves", True):
            out[1] = (
                "approach 1 had final points only (no training curves), so it reduces to the per-budget "
                "minimum run: N_opt(C) only takes the sizes trained; approaches 2 and 3 interpolate between them"
            )
        return dict(sorted(out.items()))

    @property
    def headline(self) -> list:
        """The fits a summary leads with: those fitted less `headline_left_out`."""
        left_out = self.headline_left_out()
        return [f for f in self.fits if f.approach not in left_out]

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(to_jsonable(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> FitReport:
        """Read a saved report; an unreadable or foreign file raises one DataError line."""
        try:
            data = json.loads(Path(path).read_text())
        except OSError as err:
            raise DataError(f"cannot read fit file {str(path)!r}: {err.strerror or err}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DataError(f"fit file {str(path)!r} is not valid JSON ({err})") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or "source" not in data:
            raise DataError(f"{str(path)!r} is not a fit file written by `scaling fit --out` (schema {SCHEMA})")
        try:
            report = from_jsonable(cls, data)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise DataError(f"fit file {str(path)!r} is incomplete or damaged ({type(err).__name__}: {err})") from None
        from analysis.fits.fit_file import check_numbers  # it reads this module's classes

        check_numbers(report, str(path))
        report.loss_unit = parse_loss_unit(report.loss_unit, f"fit file {str(path)!r}: key 'loss_unit' =")
        return report


def no_law(fit) -> str:
    """Why ``fit`` has no law N_opt ∝ C^a ("" when it has one): approach 2 with too few bracketed
    budgets (`analysis.fits.isoflop`), or approach 3 whose runs contradict or do not identify its form
    (`analysis.fits.parametric_form`), leaves a without a value (NaN) and says why."""
    a = fit.estimates["a"]
    return (a.unidentified or "no value") if a.value != a.value else ""
