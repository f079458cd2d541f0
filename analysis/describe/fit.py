"""One description of a fit: what each approach found, as items the CLI text, the report and the
figures lay out (they format no estimate themselves).

    for d in describe_fit(report):        # one ApproachDescription per fitted approach
        d.heading                         # "approach 3: parametric L(N, D) = E + A/N^α + B/D^β"
        d.rows                            # EstimateRow(key, text "0.443 [0.3956, 0.4771]", meaning)
        d.lines                           # Line("optimizer", "..."), Line("bootstrap", ...), Line("validation", ...)
        d.warnings                        # flagged lines (not converged, E indistinguishable from 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.describe.numbers import count_label, flops_label, interval_text, num, times, two
from analysis.fits.bent_profiles import bent, is_bent
from analysis.fits.envelope import envelope_law
from analysis.fits.identified import EXTRAPOLATION_FACTOR
from analysis.fits.isoflop import in_law, left_out_of_law
from analysis.fits.percentiles import level_text
from analysis.fits.results import UNBOUNDED, Estimate, FitReport, no_law
from analysis.fits.vertex_intervals import LAW_LEVEL, VERTEX_DRAWS
from analysis.sources.schema import DEFAULT_LOSS_UNIT

NAMES = {
    1: "envelope of the training curves",
    2: "IsoFLOP profiles",
    3: "parametric L(N, D) = E + A/N^α + B/D^β",
}
REFERENCES = {1: "Hoffmann et al. 2022, §3.1", 2: "Hoffmann et al. 2022, §3.2", 3: "Hoffmann et al. 2022, §3.3"}
# What each estimate is; {unit}: the loss's unit (`FitReport.loss_unit`, from `analysis.sources.schema`).
MEANINGS = {
    "E": "irreducible loss ({unit})",
    "A": "model-size term coefficient",
    "alpha": "model-size exponent α",
    "B": "data term coefficient",
    "beta": "data exponent β",
    "a": "N_opt ∝ C^a",
    "b": "D_opt ∝ C^b",
    "G": "N_opt = G·(C/6)^a",
    "N_coefficient": "k_N in N_opt = k_N·C^a",
    "D_coefficient": "k_D in D_opt = k_D·C^b",
    "loss_A": "L = A·C^(−α): A",
    "loss_alpha": "L = A·C^(−α): α",
    "floor_E": "L = E + A·C^(−α): E ({unit})",
    "floor_A": "L = E + A·C^(−α): A",
    "floor_alpha": "L = E + A·C^(−α): α",
}


@dataclass
class EstimateRow:
    key: str
    text: str  # "value [lower, upper]"
    meaning: str


@dataclass
class Line:
    """One labelled statement: ``label`` ("bootstrap", "validation", "optimizer", ...) and its text."""

    label: str
    text: str


@dataclass
class Minimum:
    """One budget's parabola minimum (approach 2), every field as text."""

    budget: str
    sizes: str
    n_opt: str
    d_opt: str
    loss: str
    inside: bool
    where: str
    law_note: str = ""  # where the printed N_opt interval and the law's own test disagree (`law_test_text`)


@dataclass
class ApproachDescription:
    approach: int
    heading: str  # "approach k: name"
    reference: str
    rows: list[EstimateRow]
    lines: list[Line]
    warnings: list[str] = field(default_factory=list)
    minima: list[Minimum] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def describe_fit(report: FitReport, compact: bool = True) -> list[ApproachDescription]:
    """Each fitted approach described; ``compact`` counts read 67.2k, else 6.721e+04 (4 digits, for the CLI)."""
    flagged = frozenset(o.run_id for o in report.outliers)
    return [describe_approach(f, compact, report.loss_unit, flagged) for f in report.fits]


def describe_approach(
    fit, compact: bool = True, unit: str = DEFAULT_LOSS_UNIT, flagged=frozenset()
) -> ApproachDescription:
    """One approach described; ``unit``: the loss's unit, for the meanings of E; ``flagged``: the outlier rule's runs."""
    count = count_label if compact else num
    d = ApproachDescription(
        approach=fit.approach,
        heading=f"approach {fit.approach}: {NAMES[fit.approach]}",
        reference=REFERENCES[fit.approach],
        rows=[
            EstimateRow(k, interval_text(e), MEANINGS.get(k, "").format(unit=unit)) for k, e in fit.estimates.items()
        ],
        lines=[],
    )
    if fit.approach == 3:
        d.lines.append(Line("optimizer", optimizer_text(fit)))
        d.warnings += [
            fit.convergence[key] for key in ("warning", "note", "misfit", "bent") if fit.convergence.get(key)
        ]
    elif fit.approach == 2:
        d.lines.append(Line("profiles", profiles_text(fit)))
        d.minima = [describe_minimum(p, count) for p in fit.profiles]
        d.warnings += bent(fit.profiles, flagged) + fit.diagnostics.get("flagged_kept", [])
        d.dropped = [f"budget without a parabola: {why}" for why in fit.dropped]
        d.dropped += [
            f"budget left out of the law N_opt ∝ C^a: C = {flops_label(x['budget'])}: {x['why']}"
            for x in left_out_of_law(fit.profiles)
        ]
    else:
        d.lines.append(Line("envelope", envelope_text(fit)))
        if not fit.diagnostics.get("from_curves", True):
            d.lines.append(
                Line("final points only", "the envelope reduces to the per-budget minimum run (not headlined)")
            )
    d.lines.append(Line("bootstrap", bootstrap_text(fit)))
    d.lines.append(Line("validation", validation_text(fit, count)))
    return d


def optimizer_text(fit) -> str:
    c = fit.convergence
    return (
        f"{'converged' if c['converged'] else 'NOT converged'} ({c['optimizer']}; {c['starts_agreeing']} of "
        f"{c['refined_starts']} best grid starts reach the optimum; max |gradient| {c['gradient_max_abs']:.2g}; "
        f"Huber δ = {fit.huber_delta:g} on log-loss, objective {fit.objective:.6g}; {len(fit.n)} runs)"
    )


def profiles_text(fit) -> str:
    """Approach 2's parabolas and which of them the law N_opt ∝ C^a went through."""
    inside = sum(in_law(p) for p in fit.profiles)
    unidentified = any(p.inside_range and not in_law(p) for p in fit.profiles)
    law = (
        "N_opt ∝ C^a through all of their minima"
        if inside == len(fit.profiles)
        else f"N_opt ∝ C^a through the {inside} whose minimum lies inside their trained sizes"
        + (f" and whose N_opt interval is bounded at the law's {LAW_LEVEL:.0%}" if unidentified else "")
        + (", not bent by a run off the profile" if any(map(is_bent, fit.profiles)) else "")
    )
    return f"{len(fit.profiles)} budgets; a parabola of loss in ln N per budget; {law}"


def envelope_text(fit) -> str:
    d = fit.diagnostics
    return (
        f"{d['envelope_points']} envelope points from {d['points_used']} ({d['bins_per_decade']} bins per "
        f"decade, compute {flops_label(d['compute_range'][0])} to {flops_label(d['compute_range'][1])} "
        f"FLOPs); the law with a floor: {d['loss_law_with_floor']}"
        + (f"; N_opt bracketed by a smaller and a larger size at {d['bracketed']} of them" if "bracketed" in d else "")
    )


def budget_text(p) -> str:
    """A budget's label, and its runs' 6·N·D where the law places it when that is not the label (`budget_compute`): a
    nominal column's 1e18 at 6·N·D 1.4e18 showed a D_opt that 6·D_opt·N_opt did not make 1e18."""
    return flops_label(p.budget) + (f" (6·N·D {flops_label(p.compute)})" if p.compute != p.budget else "")


def describe_minimum(p, count=count_label) -> Minimum:
    n = list(p.n)
    n_opt = Estimate(p.n_opt, *(p.n_opt_interval or (None, None)), unidentified=p.n_opt_unidentified)
    return Minimum(
        budget=budget_text(p),
        sizes=f"{len(set(n))} ({count_label(min(n))} to {count_label(max(n))})",
        n_opt=interval_text(n_opt, count),
        d_opt="unidentified (as N_opt)" if p.n_opt_unidentified else count(p.d_opt),  # D_opt = C/(6·N_opt)
        loss=num(p.loss_opt),
        inside=p.inside_range,
        where="inside the trained sizes" + (f"; {law_test_text(p)}" if law_test_text(p) else "")
        if p.inside_range
        else "outside the trained sizes: the parabola is extrapolated to its minimum",
        law_note=law_test_text(p),
    )


def law_test_text(p) -> str:
    """Where a budget's printed N_opt interval (at --level, --seed, --bootstrap) and the law's own test
    (`in_law`: `LAW_LEVEL`, `VERTEX_DRAWS` fixed draws) disagree on whether it is bounded, which one the law took."""
    printed = p.n_opt_unidentified.startswith(UNBOUNDED)
    if not p.inside_range or printed != in_law(p) or is_bent(p):  # a bent profile says so itself
        return ""
    test = (
        f"the law's own test ({VERTEX_DRAWS} fixed draws at {LAW_LEVEL:.0%}, whatever --level, --seed and --bootstrap)"
    )
    return f"bounded in {test}, so in the law" if printed else f"unbounded in {test}, so out of the law"


def has_intervals(fit) -> bool:
    """Whether ``fit``'s bootstrap gave intervals: samples of its law, or (approach 2 without a law) of N_opt per budget."""
    boot = fit.bootstrap
    return boot is not None and bool(boot.samples or any(p.n_opt_interval for p in getattr(fit, "profiles", [])))


def bootstrap_text(fit) -> str:
    boot = fit.bootstrap
    if boot is None:  # approach 2's N_opt per budget has its intervals still (`vertex_intervals.VERTEX_DRAWS`)
        per_budget = getattr(fit, "diagnostics", {}).get("n_opt_per_budget")
        return "none (0 resamples): no intervals" + (f" of the law; {per_budget}" if per_budget else "")
    notes = "".join(f"; {n}" for n in boot.notes)
    intervals = f"{level_text(boot.level)} percentile intervals" if has_intervals(fit) else "no intervals"
    return f"{boot.resamples} resamples (seed {boot.seed}), {boot.failed} failed; {intervals}{notes}"


def intervals_preface(report: FitReport) -> str:
    """What the brackets after each estimate are."""
    level = next((f.bootstrap.level for f in [*report.fits, report.muennighoff] if f and f.bootstrap), None)
    if level:
        return f"Estimates with {level_text(level)} bootstrap percentile intervals [lower, upper]."
    return "Estimates with no intervals (no bootstrap)."


def _beyond(factor: float, extrapolation: bool) -> str:
    """The factor the held-out budget lies beyond; "more than 10×" where it rounds to the 10× it is flagged beyond
    (user31: a hair over 10 read "10×, an EXTRAPOLATION", and 10 "10×" without it)."""
    text = times(factor)
    return f"more than {text}" if extrapolation and text == times(EXTRAPOLATION_FACTOR) else text


def validation_text(fit, count=count_label) -> str:
    """The held-out check of one approach in one line (see `analysis.fits.validation`)."""
    v = fit.validation
    if not v:
        return "not run (it needs at least two budgets)"
    if "skipped" in v:
        return f"skipped ({v['skipped']})"
    where = (
        f"refit without the largest budget ({flops_label(v['held_out_budget'])} FLOPs, "
        f"{_beyond(v['extrapolation_factor'], v['extrapolation'])} beyond the budgets fitted"
        + (", an EXTRAPOLATION" if v["extrapolation"] else "")
        + ")"
    )
    if fit.approach == 1:
        return (
            f"{where}: the lowest loss there predicted {num(v['loss_predicted'])} against "
            f"{num(v['loss_observed'])} ({v['loss_relative_error']:+.2%}), the size that reaches it "
            f"{count(v['n_opt_predicted'])} against {count(v['n_opt_observed'])} "
            f"({v['n_opt_relative_error']:+.1%}); observed: that budget's best run, {v['best_run_id']}"
        )
    if fit.approach == 3:
        return (
            f"{where}: the loss of its {v['held_out_runs']} runs predicted within "
            f"{v['loss_relative_error_mean_abs']:.2%} on average, {v['loss_relative_error_max_abs']:.2%} at worst"
        )
    return (
        f"{where}: N_opt predicted {count(v['n_opt_predicted'])} against "
        f"{count(v['n_opt_observed'])} from that budget's own parabola ({v['n_opt_relative_error']:+.1%})"
    )


def exponents_text(fit) -> str:
    """The allocation exponents a and b with their intervals, for a summary."""
    return (
        f"N_opt ∝ C^a with a = {interval_text(fit.estimates['a'], two)}, "
        f"D_opt ∝ C^b with b = {interval_text(fit.estimates['b'], two)}"
    )


# ---------------------------------------------------------------- short forms for figure legends and titles
def exponent_legend(fit) -> str:
    """``approach k: N_opt ∝ C^0.44 [0.38, 0.52]``; ``approach 2: no law N_opt ∝ C^a (a unidentified)``
    when the fit has none (`no_law`); ``approach 1: N_opt ∝ C^a, a unidentified (why)`` when its a is."""
    if no_law(fit):
        return f"approach {fit.approach}: no law N_opt ∝ C^a (a unidentified)"
    a = fit.estimates["a"]
    if a.unidentified:
        return f"approach {fit.approach}: N_opt ∝ C^a, a {interval_text(a, two)}"
    return f"approach {fit.approach}: N_opt ∝ C^{interval_text(a, two)}"


def envelope_law_legend(env) -> str:
    """Approach 1's loss law as drawn (`envelope_law`): ``L = E + A·C^-α`` (without E when it is indistinguishable
    from 0), saying when it is unidentified, or drawn without a floor because the law with one is."""
    drawn = envelope_law(env)
    formula = f"L = {drawn.law.coefficient:.3g}·C^{drawn.law.exponent:.3g}"
    if drawn.law.floor > 1e-3 * min(env.loss):
        formula = f"L = {drawn.law.floor:.3g} + {formula[4:]}"
    if drawn.unidentified:
        return f"approach 1: {formula}, unidentified (dotted: not a finding)"
    return f"approach 1: {formula}" + (" (the law with a floor: unidentified)" if drawn.floor_unidentified else "")


def parametric_law_text(fit) -> str:
    """The fitted law as drawn, naming its unidentified terms (the values drawn are not findings: user34, a title
    "L(N, D) = 1.5 + 244/N^0.262 + 4.79e+07/D^0.961" over a fit that called A, B, α and β unidentified)."""
    p = fit.params
    text = f"L(N, D) = {p['E']:.3g} + {p['A']:.3g}/N^{p['alpha']:.3g} + {p['B']:.3g}/D^{p['beta']:.3g}"
    names = [k for k in ("E", "A", "B", "alpha", "beta") if k in fit.estimates and fit.estimates[k].unidentified]
    return text + (
        f" ({', '.join({'alpha': 'α', 'beta': 'β'}.get(k, k) for k in names)} unidentified)" if names else ""
    )


def floor_unidentified(fit) -> str:
    """Why approach 3's E is unidentified ("" when it is not, or ``fit`` is None): every loss it draws rests on E,
    so a figure says so beside the curve (its shape in N and D, and a, do not rest on E)."""
    floor = fit.estimates.get("E") if fit is not None else None
    return floor.unidentified if floor is not None else ""


def floor_phrase(report: FitReport | None) -> str:
    """For a caption of approach 3's losses (drawn when it has a law): `` (the level rests on E, unidentified: why)``
    when its E is unidentified, else empty."""
    why = floor_unidentified(drawable(report.parametric) if report is not None else None)
    return f" (the level rests on E, unidentified: {why})" if why else ""


def minimum_legend(p) -> str:
    """``C = 1e12: N_opt = 67.2k``; ``N_opt unidentified`` where the fit says so (why: in the text),
    with where the minimum lies when outside the trained sizes."""
    n_opt = "N_opt unidentified" if p.n_opt_unidentified else f"N_opt = {count_label(p.n_opt)}"
    return f"C = {budget_text(p)}: {n_opt}" + ("" if p.inside_range else " (outside the trained sizes)")


def interval_legend(report: FitReport, approach: int) -> str:
    """``95% bootstrap interval`` for an approach with a bootstrap, else empty."""
    fit = {f.approach: f for f in report.fits}[approach]
    return f"{level_text(fit.bootstrap.level)} bootstrap interval" if fit.bootstrap else ""


def loss_floor_text(floor: float, fit) -> str:
    """The records' loss_floor (in the store's unit) beside the fitted E, for a fit of losses in that unit."""
    return (
        f"The corpus' lowest reachable loss (loss_floor of the records) is {floor:.4g} {DEFAULT_LOSS_UNIT}; "
        f"compare E = {fit.estimates['E'].value:.4g}."
    )


def band_phrase(report: FitReport | None, approach: int) -> str:
    """What an approach's shaded band is, for a caption: ``its 95% bootstrap band (200 resamples)``."""
    fit = {f.approach: f for f in report.fits}.get(approach) if report is not None else None
    if fit is None or not has_intervals(fit):
        return "no band (no bootstrap intervals)"
    return f"its {level_text(fit.bootstrap.level)} bootstrap band ({fit.bootstrap.resamples} resamples)"


def drawn_phrase(report: FitReport | None, approach: int, of: str = "") -> str:
    """`fitted_phrase`, with ``(not drawn: no law, a unidentified)`` when the fit has no law (`no_law`)."""
    fit = {f.approach: f for f in report.fits}.get(approach) if report is not None else None
    return fitted_phrase(report, approach, of) + (" (not drawn: no law, a unidentified)" if fit and no_law(fit) else "")


def drawable(fit):
    """``fit`` when it has a law to draw, else None (not fitted, or `no_law`)."""
    return fit if fit is not None and not no_law(fit) else None


def fitted_phrase(report: FitReport | None, approach: int, of: str = "") -> str:
    """``approach 2`` (with ``of``: ``approach 2's OF``) when fitted, else with `` (not fitted: why)`` after it,
    for a caption: "approach 3 (not fitted: ...)'s loss" read as a garble."""
    name = f"approach {approach}" + (f"'s {of}" if of else "")
    if report is not None and any(f.approach == approach for f in report.fits):
        return name
    why = "no fit" if report is None else report.skipped.get(str(approach), "not asked for")
    return f"{name} (not fitted: {why})"
