"""Bootstrap resampling shared by the fits: which runs each resample draws, and the summaries.

A resample draws as many runs as the data holds, with replacement (Efron 1979). Fits that sum
over runs take the draw as integer weights (a run drawn twice counts twice), which is the same
objective as refitting the duplicated table, without copying it.

Identification (`identification`): an interval so wide that the data do not pin the value down is
reported as unidentified, not as numbers: a positive scale (N_opt at a budget) whose interval spans
more than `MAX_DECADES` orders of magnitude (upper/lower > 10), or an allocation exponent (a, b:
N_opt ∝ C^a, D_opt ∝ C^b, which lie in (0, 1)) whose interval is wider than `MAX_EXPONENT_WIDTH`,
or any estimate whose interval has no width at all (every resample gave the same value: the fit
does not respond to the data, as when two experiments' runs at the same points are pooled and the
robust objective is flat between them: E, A, B, alpha and beta too, not only a and b), or a loss term's
coefficient (A, B) whose interval spans more decades than log10 of its variable's largest fitted value: an
exponent uncertain by more than `MAX_TERM_EXPONENT` (`coefficient_identification`), or such an exponent (α, β)
whose own interval is wider than that (`exponent_identification`). Every estimate is
unidentified when too few resamples could be refitted to give intervals (`summarize`).

Too narrow for the scatter (`flag_unresponsive`; approach 3's law parameters, the data-constrained fit's):
a parameter's interval narrower than `TOO_NARROW` of the narrowest the runs' scatter allows. For least
squares, Var(θ_j) = σ²·[(JᵀJ)⁻¹]_jj >= σ²/‖J_j‖² (J: ∂ predicted log-loss/∂θ per run), so a 95%
interval is at least 2·1.96·σ/‖J_j‖ wide; clean synthetic ladders (35 runs, noise 0.1% or 1%) give
5 to 110 times that, whatever the noise, since both scale as σ/√runs. Far below it the optimiser did
not move that parameter: its term is negligible at every run (B/D^β of 1e-14 against a loss of 0.06),
so each resample leaves it at its start, 35 distinct β within 0.03% ([1.564, 1.564], 1e-15 of that
floor); runs that repeat their data by at most 0.1% left the data-constrained R*_D at its start, 1 [1, 1]
(truth 15.4): D' = D whatever it is. A value computed from such a parameter (approach 3's a, b, G) is
unidentified with it. σ = 1.4826·MAD of the residuals (`analysis.fits.robust`); when σ <= `RESIDUALS_AT_ZERO`
(a noise-free table: the law passes through the runs) a tiny interval is what the data give, and the rule
says nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from analysis.fits.percentiles import level_text
from analysis.fits.results import Bootstrap, Estimate, IsoFLOPFit
from analysis.fits.robust import robust_sigma

MIN_SUCCESS = 0.5  # with fewer resamples than this fraction refitted, intervals are withheld
MAX_DECADES = 1.0  # a scale's interval spanning more orders of magnitude than this is unidentified


def too_few(resamples: int, level: float) -> str:
    """Why ``resamples`` are too few for percentile intervals at ``level`` ("" when they are not): each tail
    needs one resample, so at least 2 / (1 − level) (40 at 95%; user20: --bootstrap 2 printed E 1.645 [1.747,
    1.754], an interval leaving out its estimate, under the label "95% percentile intervals")."""
    need = int(np.ceil(2.0 / (1.0 - level) - 1e-9))
    if not 0 < resamples < need:
        return ""
    return (
        f"--bootstrap {resamples} is too few resamples for {level_text(level)} intervals (each tail needs one: {need} or "
        "more); the intervals printed are rough and may leave out their own estimate"
    )


MAX_EXPONENT_WIDTH = 0.5  # an allocation exponent's interval wider than this is unidentified
ZERO_WIDTH = 1e-6  # an exponent's interval narrower than this, relative, has no width: unidentified
TOO_NARROW = 0.1  # an interval narrower than this fraction of the residuals' least width is unidentified
RESIDUALS_AT_ZERO = 1e-6  # residual scale (log-loss) at or below which the runs lie on the law: no narrowness rule
EXPONENTS = ("a", "b")  # the allocation exponents, checked by width
MAX_TERM_EXPONENT = 1.0  # a loss term exponent whose interval (or its coefficient's) is wider: unidentified
ZERO_WIDTH_REASON = "every resample gave"  # how the reason for an interval without width starts (`identification`)


def one_blas_thread():
    """Context: BLAS on one thread. The fits run thousands of tiny optimizer steps; OpenBLAS
    threads synchronising on 5-element vectors made each step ~40x slower on this 2-core machine."""
    return threadpool_limits(limits=1, user_api="blas")


def resample_weights(rng: np.random.Generator, n_runs: int, resamples: int) -> np.ndarray:
    """(resamples, n_runs) integer weights: how many times each run is drawn in each resample."""
    return rng.multinomial(n_runs, np.full(n_runs, 1.0 / n_runs), size=resamples).astype(float)


def resample_within_groups(rng: np.random.Generator, groups: list[np.ndarray], resamples: int) -> list[np.ndarray]:
    """For each group of run indices (e.g. one compute budget), a (resamples, group size) array of
    indices drawn with replacement inside the group: the group sizes never change (stratified)."""
    return [group[rng.integers(0, len(group), size=(resamples, len(group)))] for group in groups]


def unit_weights(rng: np.random.Generator, groups: list[np.ndarray], resamples: int) -> list[np.ndarray]:
    """For each group (e.g. one compute budget) of unit labels, one per run, a (resamples, group
    size) array of integer weights: the group's units are drawn with replacement, as many as it
    holds, and every run of a unit drawn k times weighs k (repeated seeds of one (N, D) point are
    one unit and are resampled together). With one unit per run this is `resample_within_groups`
    as weights; group sizes in units never change (stratified)."""
    out = []
    for labels in groups:
        codes, uniques = pd.factorize(np.asarray(labels))
        k = len(uniques)
        counts = rng.multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(float)
        out.append(counts[:, codes])
    return out


def unit_draws(rng: np.random.Generator, units: np.ndarray, resamples: int) -> tuple[np.ndarray, list[str]]:
    """(resamples, runs) integer weights drawing the units (one label per run) with replacement, as
    many as there are, unstratified; and the note saying so when units are fewer than runs. With one
    unit per run, in order, the draws are `resample_weights`' exactly."""
    weights = unit_weights(rng, [units], resamples)[0]
    n_units = len(pd.unique(np.asarray(units)))
    if n_units == len(units):
        return weights, []
    return weights, [
        f"resamples draw {n_units} units of runs, not {len(units)} runs: repeated seeds of one point and a WSD "
        "trunk with its cooldown branches are drawn together"
    ]


def identification(name: str, lower: float | None, upper: float | None) -> str:
    """Why the interval [lower, upper] of ``name`` does not identify it ("" when it does): the
    rules of the module docstring (no width: any name; `EXPONENTS` by width; anything else as a
    positive scale only when asked through `scale_identification`)."""
    if lower is None or upper is None:
        return ""
    if no_width(lower, upper):
        return (
            f"{ZERO_WIDTH_REASON} {lower:.4g}: the resamples do not move the fit (one run per budget, resampled "
            "within its budget; or a flat objective from pooling two experiments' runs at the same (N, D))"
        )
    if name in EXPONENTS and upper - lower > MAX_EXPONENT_WIDTH:
        return f"interval {lower:.2g} to {upper:.2g} is wider than {MAX_EXPONENT_WIDTH:g}"
    return ""


OUTSIDE = "its interval"  # how `outside`'s reason begins (`parametric_form.flag_floor` gives E at 0 before it)


def outside(estimate: Estimate, failed: int) -> str:
    """Why an interval drawn from the resamples left after ``failed`` ones were dropped, and leaving out its own
    estimate, identifies nothing ("" when none failed or it holds the estimate): the resamples that could be
    refitted are not spread around the fit (`--bootstrap 20 --level 0.8` printed a = 0.3761 [0.2174, 0.3657], 9 of
    20 failed). Without failures a percentile interval may leave out a skewed estimate at a narrow --level."""
    value, interval = estimate.value, estimate.interval
    if not failed or interval is None or not np.isfinite(value) or interval[0] <= value <= interval[1]:
        return ""
    return (
        f"{OUTSIDE} {interval[0]:.4g} to {interval[1]:.4g} leaves out the estimate {value:.4g}: the resamples "
        f"left after {failed} failed are not spread around the fit; refit with more runs or --bootstrap"
    )


def no_width(lower: float, upper: float) -> bool:
    """Whether [lower, upper] has no width (`ZERO_WIDTH`, relative): every resample gave one value."""
    return upper - lower <= ZERO_WIDTH * max(abs(lower), abs(upper))


AS_A = "as the fit's a"  # a coefficient k of a law k·C^a whose exponent a is unidentified (`follows_exponent`)
AS_E = "as the fit's E"  # a loss beyond the fitted budgets of a fit whose irreducible loss E is unidentified
AS_LOSS_LAW = "as the fit's loss law"  # a loss from approach 1's loss law when that law is unidentified


def follows_exponent(estimates: dict[str, Estimate], names: tuple[str, ...], exponent: str = "a") -> None:
    """A power law's coefficients are unidentified with its exponent (`AS_A`): k of N_opt = k·C^a is the
    value at C = 1, decades away from the budgets fitted, so it moves with a (t06's approach 1 printed
    k_N = 11.01 [7.927, 44.2] beside an unidentified a; t01's approach 2 k_N 7.163 [0.001371, 6.084e+09])."""
    if estimates[exponent].unidentified:
        for name in names:
            estimates[name].unidentified = estimates[name].unidentified or AS_A


def residual_widths(jacobian: np.ndarray, residuals: np.ndarray, level: float) -> np.ndarray | None:
    """The least width at ``level`` of each parameter's interval that the runs' scatter allows (module
    docstring): 2·z·σ/‖J_j‖ per column j of ``jacobian`` (runs × parameters), in the units of the
    parameter the column differentiates; None when the residuals are ~0 (`RESIDUALS_AT_ZERO`)."""
    sigma = robust_sigma(residuals)
    if not sigma > RESIDUALS_AT_ZERO:
        return None
    with np.errstate(divide="ignore"):
        return 2 * float(norm.ppf(0.5 + level / 2)) * sigma / np.sqrt(np.sum(np.square(jacobian), axis=0))


def narrower_than_residuals(width: float, least: float) -> str:
    """Why an interval ``width`` wide is too narrow for the scatter (`TOO_NARROW` of ``least``, from
    `residual_widths`), "" when it is not."""
    if not width < TOO_NARROW * least:
        return ""
    return (
        f"interval {width:.2g} wide, the runs' scatter allows no less than {least:.2g}: the fit does not "
        "respond to it, resamples leave it at its start"
    )


def flag_unresponsive(
    estimates: dict[str, Estimate], names, jacobian: np.ndarray, residuals, level: float, log_scaled
) -> None:
    """The narrowness rule (module docstring) on the parameters ``names``, ``jacobian``'s columns (∂ predicted
    log-loss/∂θ_j per run, θ_j the log of a name in ``log_scaled``, else the value): each identified one whose
    interval is far narrower than the runs' scatter allows is marked unidentified; nothing when the runs lie on
    the law (`residual_widths` is None)."""
    least = residual_widths(jacobian, residuals, level)
    for j, name in enumerate(names if least is not None else ()):
        e = estimates[name]
        if e.unidentified or e.lower is None or (name in log_scaled and not e.lower > 0):
            continue
        width = float(np.log(e.upper / e.lower)) if name in log_scaled else e.upper - e.lower
        e.unidentified = narrower_than_residuals(width, float(least[j]))


def coefficient_identification(lower: float | None, upper: float | None, largest: float, variable: str) -> str:
    """Why the interval of a loss term's coefficient (A of A/N^α; ``variable`` N, its ``largest`` fitted value) does
    not identify it ("" when it does). A is the term at N = 1, carried there from the runs' sizes by the exponent:
    ln A = ln(A/N^α) + α·ln N, and the runs pin the term at their sizes. So an interval k decades wide is an exponent
    uncertain by k/log10 N at least (at the largest N, the longest lever): beyond `MAX_TERM_EXPONENT` (a term falling
    as N^-0.3 or as N^-1.3) it is no coefficient to use (A [0.32, 3e242]: an exponent uncertain by ~27)."""
    if lower is None or upper is None or not lower > 0 or not largest > 1:
        return ""
    decades, lever = float(np.log10(upper / lower)), float(np.log10(largest))
    if not decades > MAX_TERM_EXPONENT * lever:
        return ""
    return (
        f"interval spans {decades:.3g} orders of magnitude, an exponent uncertain by {decades / lever:.3g} over the "
        f"{lever:.3g} decades from {variable} = 1 to the largest fitted {variable}"
    )


def exponent_identification(lower: float | None, upper: float | None, variable: str) -> str:
    """Why the interval of a loss term's exponent (α of A/N^α) does not identify it ("" when it does): it is wider
    than `MAX_TERM_EXPONENT`, the uncertainty that `coefficient_identification` reads off a coefficient's decades,
    here read off the exponent itself (2 budgets 3x apart printed α = 0.51 [0.062, 1.8] beside an unidentified A:
    a term falling as N^-0.06 or as N^-1.8)."""
    if lower is None or upper is None or not upper - lower > MAX_TERM_EXPONENT:
        return ""
    return (
        f"interval {lower:.2g} to {upper:.2g} is wider than {MAX_TERM_EXPONENT:g}: a term ∝ {variable}^{-lower:.2g} "
        f"or ∝ {variable}^{-upper:.2g}"
    )


def flag_wide_terms(estimates: dict[str, Estimate], terms: dict[str, tuple[str, str]], largest: dict[str, float]):
    """Each loss term's (``terms``: exponent → coefficient, variable) identified exponent whose interval is too wide
    (`exponent_identification`) and coefficient whose interval spans too many decades for ``largest``, the largest
    fitted value of each variable (`coefficient_identification`); a coefficient is unidentified with its exponent
    otherwise ("as alpha's": A is the term at N = 1, carried there by α, as k_N follows a: `follows_exponent`)."""
    for exponent, (coefficient, variable) in terms.items():
        power, scale = estimates.get(exponent), estimates.get(coefficient)
        if power is not None and not power.unidentified:
            power.unidentified = exponent_identification(power.lower, power.upper, variable)
        if scale is not None and not scale.unidentified:
            scale.unidentified = coefficient_identification(scale.lower, scale.upper, largest[variable], variable)
            if not scale.unidentified and power is not None and power.unidentified:
                scale.unidentified = f"as {exponent}'s: {power.unidentified}"


def lower_at_bound(e: Estimate | None, bound: float) -> None:
    """A positive parameter fitted through its log (E, approach 1's floor_E) whose interval's lower end lies below
    ``bound``, where the fit cannot tell it from 0 (`E_FLOOR_FRACTION` of the lowest loss): that end is the
    parameter's bound 0, and is set to 0 (printed "0 (bound)": `analysis.describe.numbers.interval_text`). It was a
    number where the optimizer stopped on a flat ln E (E = 2.7 [1.3e-13, 3.3])."""
    if e is not None and e.lower is not None and e.lower < bound <= e.upper:  # [1e-14, 1e-14]: no width, kept
        e.lower = 0.0


def reaches_zero(lower: float | None, upper: float | None) -> str:
    """Why the interval of a positive scale (N_opt) is no interval at all ("" when it is not): it
    reaches 0 or below (e.g. resamples whose B overflowed give N_opt = 0). `scale_identification`'s
    first rule; `scaling optimal` and `scaling next` apply it alone to N_opt."""
    return "interval reaches 0 or below" if lower is not None and upper is not None and not lower > 0 else ""


def scale_identification(lower: float | None, upper: float | None) -> str:
    """Why the interval of a positive scale (N_opt) does not identify it ("" when it does)."""
    if lower is None or upper is None:
        return ""
    if reaches_zero(lower, upper):
        return reaches_zero(lower, upper)
    decades = float(np.log10(upper / lower))
    return f"interval spans {decades:.3g} orders of magnitude" if decades > MAX_DECADES else ""


WITHHELD = "no interval: too few resamples could be refitted"  # every estimate's, when `summarize` withheld samples


def estimates_from_samples(
    values: dict[str, float], samples: dict[str, np.ndarray], level: float, failed: int = 0
) -> dict[str, Estimate]:
    """An `Estimate` per name: the full-sample value with the percentile interval of its samples,
    flagged unidentified by `identification` (or `Estimate.from_samples`: an interval unbounded by
    overflowed resamples), or by `outside` when ``failed`` resamples were left out."""
    out = {}
    for name, value in values.items():
        e = Estimate.from_samples(value, samples[name], level) if name in samples else Estimate(value)
        e.unidentified = e.unidentified or identification(name, e.lower, e.upper) or outside(e, failed)
        if not samples:  # `summarize` withheld them: the data cannot say how far off any estimate is
            e.unidentified = WITHHELD
        out[name] = e
    return out


def summarize(
    samples: dict[str, np.ndarray], resamples: int, failed: int, level: float, seed: int, notes: list[str]
) -> tuple[dict[str, np.ndarray], Bootstrap]:
    """The `Bootstrap` record and the samples to make intervals from. When more than half the
    resamples failed the samples are dropped, so no interval is reported: the few resamples that
    could be refitted are the ones most like the data, not a sample of the estimates' spread."""
    if failed > resamples * (1 - MIN_SUCCESS):
        notes = [*notes, f"{failed} of {resamples} resamples failed, so no intervals are given: fit more runs"]
        samples = {}
    return samples, Bootstrap(
        resamples=resamples,
        failed=failed,
        level=level,
        seed=seed,
        samples={k: np.asarray(v).tolist() for k, v in samples.items()},
        notes=notes,
    )


# What a fit without a bootstrap (--bootstrap 0) says once, in every output that shows its numbers: the rules above
# (width, zero width, narrowness) all read resamples, so without them nothing was checked (t16 printed alpha 2.8
# for a true 0.34, bare, that the default bootstrap calls unidentified).
UNCHECKED = (
    "identification not checked: fitted without a bootstrap (--bootstrap 0), so nothing tested whether the runs pin "
    "the laws' numbers down (a poorly constrained fit prints confident wrong ones); refit with --bootstrap 200 or more"
)
# What it adds when approach 2 is among the fits: its N_opt per budget was tested (`vertex_intervals.n_opt_intervals`).
PER_BUDGET_CHECKED = "approach 2's per-budget N_opt intervals need no bootstrap and were tested"


def unchecked(fits) -> list[str]:
    """[`UNCHECKED`] when any of ``fits`` (approaches 1-3) has no bootstrap, with `PER_BUDGET_CHECKED` when
    approach 2 is among them and tested some budget's N_opt; else []."""
    if not any(fit.bootstrap is None for fit in fits):
        return []
    tested = any(
        isinstance(fit, IsoFLOPFit) and any(p.n_opt_interval is not None or p.law_unbounded for p in fit.profiles)
        for fit in fits
    )  # budgets of 3 runs each leave no scatter to draw from (`n_opt_intervals`): nothing was tested there either
    return [UNCHECKED + ("; " + PER_BUDGET_CHECKED if tested else "")]
