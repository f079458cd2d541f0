"""A comparison of a candidate's fitted law with a baseline's: a row per budget, the exponent
differences and the one-sentence answer.

Budgets: the union of both sources' budgets, each at its runs' C = 6·N·D as approach 3 fits them
(`RunTable.budget_compute`; a nominal label 1.3x below 6·N·D made the range end below runs it fitted; merged by
`analysis.sources.budgets.cluster_budgets`),
and `EXTRAPOLATE` × the largest. A budget is "beyond the fitted range" when it lies outside
either source's budgets (above the smaller of the two largest, or below the larger of the two
smallest): there one of the laws is extrapolated.

The answer: m(C) is summarised as one number (its value at the middle of the shared fitted range,
log scale) only when it does not change with scale: the interval of its drift across the shared
range, m(C_hi)/m(C_lo), contains 1 and the interval of the frontier-exponent difference Δγ
contains 0. It changes with scale when the drift's interval excludes 1, and is then given at both ends of the range
("goes from ... to ..."). Whether it changes cannot be said (given at both ends, so said) without bootstrap intervals,
when only Δγ's interval excludes 0 (no drift across the range shows it: a constant m = 2 read "changes with scale",
Δγ and ΔE off together on a thin table), or when a side's γ or E is unidentified. When a side's fit does
not respond to the data (`analysis.compare.multiplier.unresponsive`), m(C), the loss differences
and that side's losses are unidentified, and the answer says so instead of giving a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from analysis.compare.answer import summary_text, vague
from analysis.compare.bent import mark_bent
from analysis.compare.multiplier import (
    differences,
    evaluate,
    failed_why,
    frontier_of,
    paired_samples,
    percentile_interval,
    unresponsive_why,
)
from analysis.fits.identified import EXTRAPOLATION_FACTOR, rests_on_floor
from analysis.fits.results import UNBOUNDED, Estimate, Outlier, ParametricFit
from analysis.sources.budgets import BUDGET_TOLERANCE, cluster_budgets
from analysis.sources.schema import DEFAULT_LOSS_UNIT

EXTRAPOLATE = (10.0, 100.0)  # extra rows at these multiples of the largest budget, flagged


@dataclass
class Side:
    """One source of a comparison, as fitted."""

    source: str
    runs: int
    budgets: list[float]
    fit: ParametricFit = field(repr=False)
    seed: int = 0
    loss_unit: str = DEFAULT_LOSS_UNIT  # its table's (`RunTable.loss_unit`): every side of a comparison shares it
    outliers: list[Outlier] = field(default_factory=list, repr=False)  # flagged as `scaling fit` flags them
    outliers_excluded: bool = False  # fitted without ``outliers`` (--exclude-outliers), else kept in the fit
    outlier_notes: list[str] = field(default_factory=list)  # on them, as `scaling fit` prints them (`fit_flagged`)
    warnings: list[str] = field(default_factory=list)  # its table's reading (`RunTable.warnings`): rows excluded
    reading_notes: list[str] = field(default_factory=list)  # `RunTable.notes`: columns used, budgets, --where

    @property
    def notes(self) -> list[str]:
        """Every note on this side, in the order `scaling compare` prints them: the reading's, the outlier rule's."""
        return [*self.reading_notes, *self.outlier_notes]

    @property
    def fitted_range(self) -> tuple[float, float]:
        return min(self.budgets), max(self.budgets)


@dataclass
class Row:
    compute: float
    beyond_fitted_range: bool
    multiplier: Estimate
    loss_difference: Estimate
    baseline_loss: Estimate
    candidate_loss: Estimate


@dataclass
class Comparison:
    baseline: Side
    candidate: Side
    level: float
    rows: list[Row]
    differences: dict[str, dict]
    shared_range: tuple[float, float]  # the range both fitted; when they do not overlap (`overlap`), the gap between
    scale_dependent: bool | None  # None: cannot be said (a side's α or β unidentified, or m vague at both ends)
    summary: str
    pairs: int
    notes: list[str] = field(default_factory=list)
    unidentified: str = ""  # why m(C) and the loss differences are unidentified ("" when they are not)
    overlap: bool = True  # whether the sources' fitted budgets overlap (else every m(C) extrapolates one law)
    # m at the shared range's low end, middle (log scale) and high end, as the summary quotes them: (C, m) each
    ends: list[tuple[float, Estimate]] = field(default_factory=list)


def budget_grid(baseline: Side, candidate: Side) -> tuple[np.ndarray, np.ndarray]:
    """The budgets of the table (ascending) and whether each is beyond the fitted range."""
    union = np.unique(cluster_budgets(np.array(baseline.budgets + candidate.budgets), BUDGET_TOLERANCE))
    top = union.max()
    grid = np.concatenate([union, [top * k for k in EXTRAPOLATE]])
    lo, hi = _shared(baseline, candidate)
    slack = 1.0 + BUDGET_TOLERANCE  # when the ranges do not overlap (lo > hi), every budget is beyond one of them
    return grid, (grid > hi * slack) | (grid < lo / slack)


def _shared(baseline: Side, candidate: Side) -> tuple[float, float]:
    """The compute range both sources fitted: the larger smallest budget to the smaller largest; lo > hi when they
    do not overlap (a user's 1e16-1e18 baseline and 1e20-1e22 candidate: "the shared fitted range 1e18-1e20")."""
    (b_lo, b_hi), (c_lo, c_hi) = baseline.fitted_range, candidate.fitted_range
    return max(b_lo, c_lo), min(b_hi, c_hi)


def compare(baseline: Side, candidate: Side, level: float) -> Comparison:
    grid, beyond = budget_grid(baseline, candidate)
    values = evaluate(baseline.fit, candidate.fit, grid, level)
    sides = ("baseline", baseline.fit), ("candidate", candidate.fit)
    why = {"baseline_loss": _why(sides[0]), "candidate_loss": _why(sides[1])}
    why["multiplier"] = why["loss_difference"] = _why(*sides)
    rows = [
        Row(float(c), bool(out), *(_estimate(values[q], i, why[q], values["pairs"]) for q in ROW_QUANTITIES))
        for i, (c, out) in enumerate(zip(grid, beyond))
    ]
    floors = [_on_floors(baseline, candidate, row.compute, row) for row in rows]
    diffs = differences(baseline.fit, candidate.fit, level)
    lo, hi = _shared(baseline, candidate)
    overlap = lo <= hi * (1.0 + BUDGET_TOLERANCE) ** 2  # as `budget_grid` flags a row: within the tolerance both ways
    lo, hi = (lo, hi) if lo <= hi else (hi, lo)  # no shared range: the gap between them
    ends = evaluate(baseline.fit, candidate.fit, [lo, math.sqrt(lo * hi), hi], level)
    m_at = [_estimate(ends["multiplier"], i, why["multiplier"], int(ends["pairs"])) for i in range(3)]
    end_rows = [
        Row(c, False, m, *(Estimate(0.0) for _ in range(3))) for c, m in zip([lo, math.sqrt(lo * hi), hi], m_at)
    ]
    for row in end_rows:
        _on_floors(baseline, candidate, row.compute, row)
    bent = mark_bent(rows + end_rows, {"baseline": baseline, "candidate": candidate})  # user41: a diverged run
    scale_dependent = _drifts(baseline, candidate, lo, hi, level, diffs["gamma"])
    unknown = diffs["gamma"].get("unidentified") or diffs["E"].get("unidentified")  # user35: E at its bound
    if unknown or (scale_dependent and vague(m_at)):
        scale_dependent = None  # whether m(C) changes with scale cannot be said (review21: "consistent with 0")
    notes = _notes(baseline, candidate, rows, floors, values) + bent
    return Comparison(
        baseline=baseline,
        candidate=candidate,
        level=level,
        rows=rows,
        differences=diffs,
        shared_range=(lo, hi),
        scale_dependent=scale_dependent,
        summary=(
            ""
            if overlap
            else f"the sources' fitted budgets do not overlap ({_span(baseline)} and {_span(candidate)} FLOPs), so "
            "every m(C) extrapolates at least one of the laws; "
        )
        + (
            f"m(C) is unidentified: {why['multiplier']}"
            if why["multiplier"]
            else summary_text(m_at, (lo, hi), scale_dependent, diffs, values["pairs"] > 0, overlap)
        ),
        pairs=values["pairs"],
        notes=notes,
        unidentified=why["multiplier"],
        overlap=overlap,
        ends=list(zip([lo, math.sqrt(lo * hi), hi], m_at)),
    )


def _notes(baseline: Side, candidate: Side, rows: list[Row], floors: list[set[str]], values: dict) -> list[str]:
    """The notes under the table: unbounded m, numbers resting on an unidentified E (`_on_floors`), m read far
    beyond the baseline's budgets, pairs left out."""
    notes = []
    if unbounded := [i for i, r in enumerate(rows) if r.multiplier.unbounded]:
        at = ", ".join(f"{rows[i].compute:.3g}" for i in unbounded)
        counts = ", ".join(str(int(values["multiplier"]["infinite"][i])) for i in unbounded)
        notes.append(
            f"m(C) is unidentified at {at} FLOPs: its interval is unbounded above ({counts} of {values['pairs']} "
            "bootstrap pairs: the baseline never reaches the candidate's loss)"
        )
    for role, side in (("baseline", baseline), ("candidate", candidate)):
        if resting := [row.compute for row, on in zip(rows, floors) if role in on]:
            notes.append(
                f"the {role}'s irreducible loss E is unidentified ({side.fit.estimates['E'].unidentified}): its loss "
                f"outside its fitted budgets ({_span(side)} FLOPs) rests on it, and so do m(C) and the loss "
                f"differences that read it there (unidentified at {', '.join(f'{c:.3g}' for c in resting)} FLOPs)"
            )
    if reach := _baseline_reach(baseline, rows):
        notes.append(reach)
    if values["lost"]:
        notes.append(
            f"{values['lost']} bootstrap pairs left out (a resample of either source failed or gave no frontier)"
        )
    return notes


def floor_sides(baseline: Side, candidate: Side, compute: float, m: float) -> tuple[list[str], list[str]]:
    """The sides whose unidentified E the numbers at ``compute`` rest on (`identified.rests_on_floor`, as `scaling
    optimal` says of a loss): those whose own loss there lies outside their fitted budgets, and those m(C) reads
    there, the candidate at C and the baseline at m·C (user35: m = 79 [30, 540] at 1e17 FLOPs from a candidate
    fitted at 1e22-1e23 with E at 0, for a true 2)."""

    def rests(side: Side, at: float) -> bool:
        E = side.fit.estimates.get("E")
        return E is not None and rests_on_floor(at, E.unidentified, *side.fitted_range)

    losses = [role for role, side in (("baseline", baseline), ("candidate", candidate)) if rests(side, compute)]
    at_baseline = not np.isnan(m) and rests(baseline, m * compute)  # m = inf: the baseline's floor is why (review23)
    return losses, [*(["candidate"] if "candidate" in losses else []), *(["baseline"] if at_baseline else [])]


def _on_floors(baseline: Side, candidate: Side, compute: float, row: Row) -> set[str]:
    """`floor_sides` of a row, its numbers that rest on them marked unidentified; the sides, as a set."""
    losses, reads = floor_sides(baseline, candidate, compute, row.multiplier.value)
    for role in losses:
        why = f"rests on the {role}'s E, unidentified outside its fitted budgets"
        loss = row.baseline_loss if role == "baseline" else row.candidate_loss
        loss.unidentified = loss.unidentified or why
        row.loss_difference.unidentified = row.loss_difference.unidentified or why
    if reads:
        why = f"rests on the {reads[0]}'s E, unidentified outside its fitted budgets"
        row.multiplier.unidentified = row.multiplier.unidentified or why
    return {*losses, *reads}


def _baseline_reach(baseline: Side, rows: list[Row]) -> str:
    """A note ("" when none) on the budgets within the fitted range whose m(C) reads the baseline's law at m·C more
    than `EXTRAPOLATION_FACTOR` beyond its fitted budgets, as `scaling optimal` flags an extrapolation (user25: m ≈ 105
    read a baseline fitted to 3e20 at 5.7e21, the truth at the range's end outside the interval; review18: checked at
    every budget, not only the range's middle)."""
    low, high = baseline.fitted_range
    far = []
    for row in rows:
        m = row.multiplier.value
        if not row.beyond_fitted_range and np.isfinite(m) and m > 0:
            reach = m * row.compute
            if max(reach / high, low / reach) > EXTRAPOLATION_FACTOR:
                far.append((max(reach / high, low / reach), row.compute, m, reach))
    if not far:
        return ""
    _, c, m, reach = max(far)
    side = f"{reach / high:.3g}x its largest" if reach > high else f"{low / reach:.3g}x below its smallest"
    named = ", ".join(f"{row_c:.3g}" for _, row_c, _, _ in sorted(far, key=lambda f: f[1]))  # user32: 2 said, 1 named
    return (
        f"m(C) at {len(far)} budget(s) within the fitted range (C = {named}) reads the baseline's law more than "
        f"{EXTRAPOLATION_FACTOR:g}x beyond its budgets (the farthest, at C = {c:.3g}: m ≈ {m:.3g}, m·C = {reach:.3g} "
        f"FLOPs, {side} fitted budget): there m(C) and its interval rest on that law's extrapolation"
    )


def _span(side: Side) -> str:
    return "{:.3g}–{:.3g}".format(*side.fitted_range)


def _why(*sides) -> str:
    """Why the quantities of these sides are unidentified: unresponsive, else a failed bootstrap ("": neither)."""
    return unresponsive_why(*sides) or failed_why(*sides)


ROW_QUANTITIES = ("multiplier", "loss_difference", "baseline_loss", "candidate_loss")  # a `Row`'s, in order


def _estimate(values: dict, i: int, unidentified: str = "", pairs: int = 0) -> Estimate:
    """The quantity at the ``i``-th compute; an interval with a bound at ±inf (more of the ``pairs`` than its
    tail never reach the loss: m = inf) is none, unidentified as `Estimate.from_samples` says (`UNBOUNDED`):
    a baseline fitted on 2 budgets printed m = 0.161 [0.058, unbounded] for a true 2."""
    value = float(values["value"][i])
    if values["lower"] is None:
        return Estimate(value, unidentified=unidentified)
    lower, upper = float(values["lower"][i]), float(values["upper"][i])
    if math.isinf(lower) or math.isinf(upper):
        side = "above" if math.isinf(upper) else "below"
        count = int(values["infinite"][i]) if "infinite" in values else 0
        unidentified = unidentified or (
            f"{UNBOUNDED} {side}: {count} of {pairs} bootstrap pairs are infinite (m: the baseline never reaches "
            "the candidate's loss)"
        )
        return Estimate(value, unidentified=unidentified)
    return Estimate(value, lower, upper, unidentified)


def _drifts(baseline: Side, candidate: Side, lo: float, hi: float, level: float, gamma: dict) -> bool | None:
    """Whether m(C) changes across the shared range (see the module docstring): True when the interval of its drift
    excludes 0, False when it holds 0 and so does Δγ's, None (cannot be said) without intervals, or when only Δγ's
    excludes 0 (user35: a constant m = 2, "changes with scale: from 2.03 to 2", Δγ and ΔE off together)."""

    def log_drift(b, c):
        m = frontier_of(b).compute_for(frontier_of(c).loss(np.array([lo, hi]))) / np.array([lo, hi])
        with np.errstate(all="ignore"):
            return np.log(m[..., 1] / m[..., 0])

    paired = paired_samples(baseline.fit, candidate.fit)
    if paired is None or paired[2] < 2:  # user35: --bootstrap 0 read a 1% drift of noise as "changes with scale"
        return None
    drift = log_drift(paired[0], paired[1])
    # pairs whose m is infinite at both ends have no drift (NaN); more of them than a tail holds leave its interval
    # unknown, not excluding 0 (user32: 7 of 121 such pairs, dropped, read "changes with scale" at 1,000 resamples)
    low, high = percentile_interval(drift[:, None], level)
    drift_flat = np.isnan(drift).mean() > (1.0 - level) / 2 or bool(low[0] <= 0 <= high[0])
    gamma_flat = gamma["lower"] <= 0 <= gamma["upper"]
    return False if drift_flat and gamma_flat else None if drift_flat else True
