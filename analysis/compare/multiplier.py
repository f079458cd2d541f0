"""The effective compute multiplier m(C), the loss difference and the exponent differences of a
candidate's fitted law against a baseline's, each with a bootstrap interval.

    m(C) = C_b / C  where  L*_baseline(C_b) = L*_candidate(C)

is the compute the baseline needs to reach the loss the candidate reaches with C (the frontiers
L* of `analysis.compare.frontier`): m = 2 means the candidate recipe is worth twice the compute.
m = ∞ where the candidate goes below the baseline's irreducible loss E. The loss difference is
L*_candidate(C) − L*_baseline(C) (negative: the candidate is better).

Intervals: the two sources are bootstrapped independently (each fit's own resamples, with its
own seed); resample i of the baseline is paired with resample i of the candidate, every quantity
is computed per pair, and the interval is the percentile interval over the pairs. Pairs where
either resample failed, or gives no usable frontier, are left out and counted.

A side whose resamples all gave the same law (`unresponsive`: its fit does not respond to the data,
as when two experiments' runs at the same (N, D) are pooled and the robust objective is flat between
them, so the optimizer stays at its start) has no measured uncertainty: every quantity that
depends on it is unidentified, never a number with a zero-width (or one-sided) interval.
"""

from __future__ import annotations

import numpy as np

from analysis.compare.frontier import Frontier
from analysis.fits.bootstrap import no_width
from analysis.fits.percentiles import percentile_bounds
from analysis.fits.results import PARAMETRIC_NAMES, Estimate, ParametricFit

QUANTITIES = ("baseline_loss", "candidate_loss", "loss_difference", "multiplier")
# Exponents (and the floor E) whose difference, candidate − baseline, is reported. gamma is the
# frontier's exponent α·β/(α + β): m(C) is constant only when gamma and E agree.
DIFFERENCES = ("alpha", "beta", "a", "gamma", "E")


def law_samples(fit: ParametricFit) -> dict[str, np.ndarray] | None:
    """The fit's bootstrap parameters by name (arrays, one element per successful resample), or None."""
    boot = fit.bootstrap
    if boot is None or not boot.samples or any(name not in boot.samples for name in PARAMETRIC_NAMES):
        return None
    return {name: np.asarray(values, dtype=float) for name, values in boot.samples.items()}


def unresponsive(fit: ParametricFit) -> bool:
    """Whether every bootstrap resample of ``fit`` gave the same law: each parameter's samples
    within `analysis.fits.bootstrap.no_width` of each other (`identification`'s rule)."""
    samples = law_samples(fit)
    if samples is None or len(samples["alpha"]) < 2:
        return False
    return all(no_width(float(np.min(samples[name])), float(np.max(samples[name]))) for name in PARAMETRIC_NAMES)


def unresponsive_why(*sides: tuple[str, ParametricFit]) -> str:
    """Why quantities of these (role, fit) sides are unidentified ("" when none is `unresponsive`)."""
    stuck = [role for role, fit in sides if unresponsive(fit)]
    if not stuck:
        return ""
    whose, it = " and ".join(f"the {role}'s" for role in stuck), "they do" if len(stuck) > 1 else "it does"
    return (
        f"every resample of {whose} fit{'s' * (len(stuck) > 1)} gave the same law: {it} not respond to the data "
        "(e.g. a flat objective from pooling two experiments' runs at the same (N, D)), so no interval measures "
        "the uncertainty"
    )


def failed_why(*sides: tuple[str, ParametricFit]) -> str:
    """Why quantities of these (role, fit) sides have no interval: a bootstrap asked for gave no law ("" when
    none did). A one-budget candidate printed m(C) from 7 to 0.08 for a true 2, bare, beside "no intervals"."""
    failed = [role for role, fit in sides if fit.bootstrap and fit.bootstrap.resamples and not law_samples(fit)]
    return f"no interval: too few of the {' and '.join(failed)}'s resamples could be refitted" if failed else ""


def _with_gamma(params: dict) -> dict:
    alpha, beta = np.asarray(params["alpha"], float), np.asarray(params["beta"], float)
    with np.errstate(all="ignore"):
        return {**params, "gamma": alpha * beta / (alpha + beta)}


def frontier_of(params: dict) -> Frontier:
    return Frontier.of_law(*(params[name] for name in PARAMETRIC_NAMES))


def _quantities(base: Frontier, cand: Frontier, compute: np.ndarray) -> dict[str, np.ndarray]:
    base_loss, cand_loss = base.loss(compute), cand.loss(compute)
    return {
        "baseline_loss": base_loss,
        "candidate_loss": cand_loss,
        "loss_difference": cand_loss - base_loss,
        "multiplier": base.compute_for(cand_loss) / compute,
    }


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval along axis 0, NaNs left out (NaN bounds for a column of NaNs only): each
    column's `analysis.fits.percentiles.percentile_bounds`, the fits' own rule (linear interpolation;
    an infinite sample is an extreme order statistic, a real outcome here: the loss is never reached,
    and a bound that lands on one is that infinity)."""
    samples = np.asarray(samples, dtype=float)
    columns = samples.reshape(samples.shape[0], -1)
    bounds = np.full((2, columns.shape[1]), np.nan)
    for j, column in enumerate(columns.T):
        kept = column[~np.isnan(column)]
        if kept.size:
            bounds[:, j] = percentile_bounds(kept, level)
    return bounds[0].reshape(samples.shape[1:]), bounds[1].reshape(samples.shape[1:])


def paired_samples(baseline: ParametricFit, candidate: ParametricFit) -> tuple[dict, dict, int, int] | None:
    """The paired bootstrap parameters (baseline, candidate), the pairs kept and those left out; None
    when either fit has no bootstrap samples."""
    base, cand = law_samples(baseline), law_samples(candidate)
    if base is None or cand is None:
        return None
    pairs = min(len(base["alpha"]), len(cand["alpha"]))
    base = {k: v[:pairs] for k, v in base.items()}
    cand = {k: v[:pairs] for k, v in cand.items()}
    usable = frontier_of(base).finite & frontier_of(cand).finite
    lost = max(baseline.bootstrap.resamples, candidate.bootstrap.resamples) - int(usable.sum())
    return {k: v[usable] for k, v in base.items()}, {k: v[usable] for k, v in cand.items()}, int(usable.sum()), lost


def evaluate(baseline: ParametricFit, candidate: ParametricFit, compute, level: float) -> dict[str, dict]:
    """For each of `QUANTITIES` at each compute: {"value", "lower", "upper"} arrays (lower/upper
    None without bootstrap samples) and "infinite" (pairs at ±inf), plus "pairs" and "lost" (pairs used / left out).
    A side's loss takes its interval from all its own usable resamples; the differences and m from the pairs."""
    compute = np.asarray(compute, dtype=float)
    point = _quantities(frontier_of(baseline.params), frontier_of(candidate.params), compute)
    out: dict[str, dict] = {name: {"value": value, "lower": None, "upper": None} for name, value in point.items()}
    out["pairs"], out["lost"] = 0, 0
    for name, fit in (("baseline_loss", baseline), ("candidate_loss", candidate)):
        own = law_samples(fit)  # a side's loss needs only its own resamples (user35: lost with the other side's)
        frontier = None if own is None else frontier_of(own)
        if frontier is not None and frontier.finite.sum() >= 2:
            drawn = Frontier(frontier.E[frontier.finite], frontier.K[frontier.finite], frontier.gamma[frontier.finite])
            out[name]["lower"], out[name]["upper"] = percentile_interval(drawn.loss(compute), level)
    paired = paired_samples(baseline, candidate)
    if paired is None or paired[2] < 2:
        return out
    base, cand, out["pairs"], out["lost"] = paired
    drawn = _quantities(frontier_of(base), frontier_of(cand), compute)
    for name in ("loss_difference", "multiplier"):
        out[name]["lower"], out[name]["upper"] = percentile_interval(drawn[name], level)
        out[name]["infinite"] = np.sum(np.isinf(drawn[name]), axis=0)  # pairs at ±inf (m: the loss is never reached)
    return out


def differences(baseline: ParametricFit, candidate: ParametricFit, level: float) -> dict[str, dict]:
    """Candidate − baseline of each of `DIFFERENCES`: {"baseline", "candidate", "value", "lower", "upper"},
    and "unidentified" (why) where a side cannot pin it down: it is `unresponsive` (for all), its own estimate
    of the quantity is unidentified (a, alpha, beta, E), or its bootstrap was asked for and failed (for all).
    A side's unidentified a leaves only the a difference unidentified: m(C) and the loss differences
    (`evaluate`) depend on the loss frontier, which the allocation's uncertainty barely moves, and carry their
    own bootstrap intervals."""
    base_point = _with_gamma({**baseline.params, "a": baseline.estimates["a"].value})
    cand_point = _with_gamma({**candidate.params, "a": candidate.estimates["a"].value})
    paired = paired_samples(baseline, candidate)
    sides = {"baseline": baseline, "candidate": candidate}
    failed = failed_why(*sides.items())
    stuck = unresponsive_why(*sides.items())
    out = {}
    for name in DIFFERENCES:
        entry = {
            "baseline": float(base_point[name]),
            "candidate": float(cand_point[name]),
            "value": float(cand_point[name] - base_point[name]),
            "lower": None,
            "upper": None,
        }
        inputs = ("alpha", "beta") if name == "gamma" else (name,)  # γ = αβ/(α+β) (review21: γ held beside them)
        known = Estimate(0.0)  # a quantity a side's fit does not report is not unidentified by it
        unset = [side for side, fit in sides.items() if any(fit.estimates.get(k, known).unidentified for k in inputs)]
        entry["sides_unidentified"] = unset  # whose own value is no number (the text's "(a -> b)"; not in the JSON)
        if stuck:  # a difference is no better pinned down than either side
            entry["unidentified"] = stuck
        elif unset and (name == "a" or not failed):  # a failed bootstrap is the first reason, but for a
            entry["unidentified"] = f"the {' and '.join(unset)}'s {name} is unidentified"
        elif failed:
            entry["unidentified"] = failed
        if paired is not None and paired[2] >= 2:
            base, cand = _with_gamma(paired[0]), _with_gamma(paired[1])
            lower, upper = percentile_interval((cand[name] - base[name])[:, None], level)
            entry["lower"], entry["upper"] = float(lower[0]), float(upper[0])
        out[name] = entry
    return out
