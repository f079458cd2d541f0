"""Whether approach 3's fit keeps its law's form: L = E + A/N^α + B/D^β falls with N and D only
when α, β > 0 (and A, B are positive numbers).

An exponent <= 0 at the best fit means the runs contradict the form (the loss does not fall with N,
or with D, over them) or do not identify it. Example: 12 sizes at each of 3 D, the loss x1.1 at each
larger D (with only 2 distinct D, any β < 0 fits such runs equally well: β = -5.5 on one seed, -19.6
on another; the design rule below now names that case first). Approach 3 puts no
bounds on its parameters (A, B and E are fitted through their logs, α and β are free), so the only
bound a term can reach is the edge of floating point: a coefficient that overflows to inf or
underflows to 0. That term is contradicted too (`contradicted`).

Best fit (`withhold`): the contradicted term's exponent and coefficient, E (the loss as N, D → ∞,
which a law rising with D does not have), and the allocation a, b, G (and so N_opt, D_opt) are
unidentified and have no value (NaN; null in FIT.json). Their bootstrap samples are dropped.
`analysis.cli.optimal.resolve_law` refuses the law, and the figures draw no approach-3 curves.

Bootstrap (`resample_reasons`): a resample whose term is contradicted stays in the intervals
(dropping it would narrow them around the full-sample fit), and the notes count it. When more than
the interval's tail, (1 − level)/2, of the refitted resamples contradict a term, the data do not
show at that level that the loss falls with N (or D). Then the exponent, its coefficient, a, b and
G are unidentified (values kept, intervals withheld), and so is every allocation made from them.

Design (`design_reasons`, `distinct_counts`): the runs at one D learn only E + B/D^β (plus the N
term they share), so D taking two values gives two equations for the three unknowns E, B, β: a flat
valley, and the optimizer stops anywhere on it (β = 1.55 [1.51, 1.62] for a true 0.28 with 12 sizes
at one D and one run at a 10x larger D). Likewise for N with A, α. A term whose variable takes fewer
than `MIN_DISTINCT` = 3 distinct values among the fitted runs (values whose logs differ by at most
`DISTINCT_RTOL`, about that relative difference, count as one) is unidentified with E: at the best
fit as `withhold` says (the exponent, its coefficient, E, a, b, G). A resample that draws fewer than
3 distinct values of a term's variable (one that drops the lone D run) counts as a resample
contradicting that term (the bootstrap rule above), so it cannot narrow intervals; when such
resamples alone are more than the tail, E is unidentified too (it is not identified in them).

One line (`collinear_reason`): runs whose ln D is a linear function of ln N (one tokens-per-parameter
ratio, D = 20·N, or D ∝ N^k) see the law only along that line, E + A/N^α + B'/N^(kβ): two terms in N,
either of which may be the D term (or one term, α = β), when k > 0 (on one budget's IsoFLOP sweep,
D ∝ 1/N, the D term rises with N where the N term falls: their signs tell them apart). A Kaplan-style ladder with D = 20·N exactly
printed α = β = 0.2327 and a = 0.5 [0.4999986, 0.5000007] as numbers (truth a ≈ 0.45), and `optimal`
0.43 tokens per parameter (truth ~50). The terms are told apart only by the runs' departures r_i from
the line (residuals of ln D regressed on ln N), through the D term's elasticity ε_D = β·(B/D^β)/L,
which lies between 0 and 1 for any law of this form with β < 1. Least squares on the departures
determines ε_D to ±z·σ/‖r‖ (σ the loss scatter, `robust_sigma` of the best fit's log-loss residuals,
floored at `RESIDUALS_AT_ZERO`): when that 95% interval is wider than ε_D's whole range, 1, the runs
cannot tell a D term that does nothing from one that does everything. Then α, β, A, B, a, b and G are
unidentified with the design as the reason (values kept), and a term contradicted at the best fit is
withheld with that reason (not "the loss does not fall with N": the split between the terms is
arbitrary). Exactly collinear runs (‖r‖ = 0, or 1.4e-7 from rounding) always fire. D/N scattered by 1%
(12 sizes, ‖r‖ 0.02 to 0.05) fires at a loss scatter of 0.01, but approach 3's near-least-absolute fit
leaves σ = 0.003 to 0.005 on 1% noise, and there it does not: the width and sign rules flag a instead
(2 of 2 seeds), and a term withheld at the best fit leaves the other unidentified too (`flag_absorbed`). D/N scattered by 30%, Kaplan's table read with total parameters (‖r‖ = 1.27, its fit
unchanged) and IsoFLOP grids (‖r‖ of several) do not fire.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from analysis.fits.bootstrap import (
    OUTSIDE,
    RESIDUALS_AT_ZERO,
    flag_unresponsive,
    flag_wide_terms,
    follows_exponent,
    lower_at_bound,
)
from analysis.fits.results import PARAMETRIC_NAMES, Estimate
from analysis.fits.robust import robust_sigma
from analysis.sources.budgets import BUDGET_TOLERANCE

TERMS = {"alpha": ("A", "N"), "beta": ("B", "D")}  # exponent: coefficient, variable (also the data-constrained law's)
ALLOCATION = ("a", "b", "G")  # a = β/(α+β), b = α/(α+β), G: each needs both terms
MIN_DISTINCT = 3  # distinct values of N (or D) that identify A, α (or B, β) together with E
DISTINCT_RTOL = 1e-6  # N (or D) values whose logs differ by at most this (relative ~1e-6) are one value


def distinct_counts(log_values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Per row of ``drawn`` (resamples × runs, bool), how many distinct values (`DISTINCT_RTOL`) of
    ``log_values`` (ln N or ln D, one per run) the drawn runs hold."""
    ordered = np.sort(np.where(drawn, np.asarray(log_values)[None, :], np.nan), axis=1)
    return 1 + (np.diff(ordered, axis=1) > DISTINCT_RTOL).sum(axis=1)  # NaNs sort last and never count


def design_reasons(log_n: np.ndarray, log_d: np.ndarray) -> dict[str, str]:
    """Why each term is unidentified by the fitted runs' design ({} when none is): its variable takes
    fewer than `MIN_DISTINCT` distinct values (module docstring)."""
    out = {}
    for exponent, (coefficient, variable) in TERMS.items():
        count = int(distinct_counts(log_n if variable == "N" else log_d, np.ones((1, len(log_n)), bool))[0])
        if count < MIN_DISTINCT:
            out[exponent] = (
                f"{exponent}, {coefficient}: only {count} distinct {variable} value{'s' * (count > 1)} "
                f"(need {MIN_DISTINCT} with E)"
            )
    return out


COLLINEAR_LEVEL = 0.95  # the D term's elasticity interval (module docstring) at this level
ELASTICITY_RANGE = 1.0  # the range of a term's elasticity β·(B/D^β)/L: between 0 and 1
COLLINEAR_NAMES = ("alpha", "beta", "A", "B", *ALLOCATION)  # what one line of runs leaves unidentified


def collinear_reason(log_n: np.ndarray, log_d: np.ndarray, residuals: np.ndarray) -> str:
    """Why the runs at ln N, ln D cannot tell the N term from the D term ("" when they can): ln D is (nearly) a
    linear function of ln N, its departures too small for the loss scatter (``residuals``: the best fit's log-loss
    residuals) to measure the D term's elasticity (module docstring). Fewer than `MIN_DISTINCT` values of N or D:
    `design_reasons` speaks."""
    x, y = np.asarray(log_n, float), np.asarray(log_d, float)  # not centred: D/N is named
    counts = [int(distinct_counts(v, np.ones((1, len(v)), bool))[0]) for v in (x, y)]
    if min(counts) < MIN_DISTINCT:
        return ""
    xc, yc = x - x.mean(), y - y.mean()
    slope = float(xc @ yc / (xc @ xc))
    lever = float(np.sqrt(np.sum(np.square(yc - slope * xc))))
    sigma = max(robust_sigma(residuals), RESIDUALS_AT_ZERO) if np.all(np.isfinite(residuals)) else np.inf
    width = 2 * float(norm.ppf(0.5 + COLLINEAR_LEVEL / 2)) * sigma / lever if lever > 0 else np.inf
    if not (width > ELASTICITY_RANGE and slope > 0):  # k <= 0 (one budget: D ∝ 1/N): the D term rises with N
        return ""
    ratio = np.exp(y - x)
    if ratio.max() <= ratio.min() * (1 + 1e-3):
        line = f"every run has the same tokens per parameter (D/N = {np.median(ratio):.3g})"
    elif ratio.max() <= 1.5 * ratio.min():
        line = f"every run has nearly the same tokens per parameter (D/N {ratio.min():.3g} to {ratio.max():.3g})"
    else:
        line = f"every run has D ∝ N^{slope:.3g} (ln D a linear function of ln N)"
    return (
        f"{line}: the N and D terms cannot be told apart (the runs depart from that line by {lever:.2g} in ln D, "
        f"too little for a loss scatter of {sigma:.2g}); train some sizes at other token counts (an IsoFLOP grid)"
    )


def flag_collinear(estimates: dict[str, Estimate], why: str) -> None:
    """`collinear_reason`'s ``why`` on α, β, A, B, a, b and G (values kept), before any other reason: the design
    is the cause (the intervals' widths or signs are its symptoms). Withheld ones (NaN) already carry it."""
    for name in COLLINEAR_NAMES if why else ():
        if name in estimates and np.isfinite(estimates[name].value):
            estimates[name].unidentified = why


def contradicted(values: dict) -> dict[str, np.ndarray]:
    """Per exponent, elementwise over ``values`` (one fit, or bootstrap samples): whether its term
    contradicts the form (exponent not > 0, or coefficient not a positive finite number)."""
    out = {}
    for exponent, (coefficient, _) in TERMS.items():
        e, c = np.asarray(values[exponent], dtype=float), np.asarray(values[coefficient], dtype=float)
        with np.errstate(invalid="ignore"):
            out[exponent] = ~(e > 0) | ~(c > 0) | ~np.isfinite(c)
    return out


ONE_BUDGET_SPREAD = float(np.log1p(BUDGET_TOLERANCE))  # ln(N·D) spanning less: C within the clustering's gap


def at_one_budget(log_n: np.ndarray, log_d: np.ndarray) -> bool:
    """Whether every run is at one compute budget: ln(N·D) spans less than the budget clustering's gap."""
    return len(log_n) > 0 and float(np.ptp(np.asarray(log_n) + np.asarray(log_d))) < ONE_BUDGET_SPREAD


def best_fit_reasons(
    point: dict[str, float], log_n: np.ndarray, log_d: np.ndarray, collinear: str = ""
) -> dict[str, str]:
    """Why each term of the best fit ``point`` to runs at ln N, ln D is unidentified ({} when none is):
    too few distinct values (`design_reasons`), then a contradicted term; on runs along one line
    (``collinear``, `collinear_reason`) that line is the reason a term is contradicted."""
    out = design_reasons(log_n, log_d)
    # user30: one IsoFLOP budget's U-shaped profile was refused as "the loss does not fall with N ... with D"
    for exponent, bad in contradicted(point).items():
        if bad and (collinear or at_one_budget(log_n, log_d)):
            out[exponent] = collinear or (
                "every run is at one compute budget (N·D the same): along one IsoFLOP profile the N and D terms trade "
                "off, and the best fit gives up one of them; runs at 2 or more budgets identify both"
            )
        elif bad:
            coefficient, variable = TERMS[exponent]
            value = point[coefficient]
            why = (
                f"{exponent} <= 0 at the best fit: the loss does not fall with {variable} over these runs"
                if not point[exponent] > 0
                else f"{coefficient} {'overflows' if value > 0 else 'underflows'} at the best fit: the runs do "
                f"not identify the {variable} term"
            )
            out[exponent] = f"{out[exponent]}; {why}" if exponent in out else why
    return out


def withhold(estimates: dict[str, Estimate], boot, reasons: dict[str, str]) -> list[str]:
    """Best-fit case (module docstring): the affected estimates become NaN with the reason, their
    samples are dropped from ``boot``; returns the names withheld."""
    if not reasons:
        return []
    why = "; ".join(dict.fromkeys(reasons.values()))  # one line of runs is the reason for both terms once
    names = [k for k in estimates if k in {"E", *ALLOCATION, *reasons, *(TERMS[e][0] for e in reasons)}]
    for name in names:
        estimates[name] = Estimate(np.nan, unidentified=why)
    if boot is not None:
        boot.samples = {k: v for k, v in boot.samples.items() if k not in names}
    return names


def resample_reasons(
    samples: dict[str, np.ndarray], level: float, distinct: dict[str, np.ndarray]
) -> tuple[dict[str, str], list[str]]:
    """Bootstrap case (module docstring): why each estimate is unidentified by the resamples (by name),
    and notes counting the resamples that contradict each term or draw too few distinct values of its
    variable (``distinct``: per refitted resample, in the samples' order, the counts of N and of D)."""
    flags, notes = {}, []
    if not samples:
        return flags, notes
    tail = (1.0 - level) / 2.0
    for exponent, bad in contradicted(samples).items():
        coefficient, variable = TERMS[exponent]
        few = np.asarray(distinct[variable]) < MIN_DISTINCT
        count, size = int((bad | few).sum()), bad.size
        clauses = [
            f"gave {exponent} <= 0 or {coefficient} beyond floating point (a loss not falling with {variable})"
        ] * bool(bad.any()) + [f"drew fewer than {MIN_DISTINCT} distinct {variable} values"] * bool(few.any())
        if not count:
            continue
        what = f"{count} of {size} refitted resamples {' or '.join(clauses)}"
        if count > tail * size:
            why = f"{what}: more than the intervals' {tail:.3g} tail"
            names = [exponent, coefficient, *("E",) * bool(few.sum() > tail * size), *ALLOCATION]
            for name in names:
                flags[name] = f"{flags[name]}; {why}" if name in flags else why
            notes.append(f"{why}, so {', '.join(names[:-1])} and {names[-1]} are unidentified")
        else:
            notes.append(f"{what}: kept in the intervals, inside their {tail:.3g} tail")
    return flags, notes


def flag_resampled(estimates: dict[str, Estimate], flags: dict[str, str]) -> None:
    """Mark each estimate named in ``flags`` (`resample_reasons`) unidentified (values kept), with this
    reason before any other (an interval's width: the sign is what the data do not show)."""
    for name, why in flags.items():
        if name in estimates:
            estimates[name].unidentified = why


FLOOR_REASON = "the best fit puts E at 0, these runs show no floor: an interval from that bound does not bound E"


def flag_floor(estimates: dict[str, Estimate], at_floor: bool, log_floor: float) -> None:
    """E is unidentified when the best fit puts it at 0 (below `E_FLOOR_FRACTION` of the lowest loss; ``log_floor``
    is the log of that): a percentile interval around an estimate on its bound says nothing about where the loss
    levels off (one budget of 9 runs drawn with E = 1.69 gave E = 6e-10 [8e-116, 0.42], printed as identified
    before); that is the reason given, before any its interval gave (`outside`: samples all above a bound). Otherwise
    an interval reaching below it reaches the bound 0 and says so (`lower_at_bound`)."""
    if (
        at_floor
        and "E" in estimates
        and (not estimates["E"].unidentified or estimates["E"].unidentified.startswith(OUTSIDE))
    ):
        estimates["E"].unidentified = FLOOR_REASON
    lower_at_bound(estimates.get("E"), float(np.exp(log_floor)))


LOG_SCALED = ("E", "A", "B")  # fitted through their logs: the Jacobian's columns measure log-widths
DERIVED = {"a": ("alpha", "beta"), "b": ("alpha", "beta"), "G": ("A", "B", "alpha", "beta")}  # each from these


def flag_interval_widths(estimates: dict[str, Estimate], objective, theta: np.ndarray, level: float) -> None:
    """The narrowness rule (`analysis.fits.bootstrap.flag_unresponsive`) on the law parameters, the columns of
    ``objective.jacobian`` (log E, log A, log B, α, β) at the best fit ``theta``: the fit does not depend on one far
    narrower than the runs' scatter allows. Before: β = 1.564 [1.564, 1.564] from losses that fell toward 0 with D.
    a, b and G computed from one that did not respond are unidentified as it is (a = 0.90 [0.78, 0.96] printed
    beside that β, left at its start). Then α, β, A and B whose intervals are too wide for the runs' sizes and token
    counts to pin (`flag_wide_terms`). A value derived from an unidentified parameter is unidentified as it is,
    and G (N_opt = G·(C/6)^a) as a is too (`follows_exponent`): G printed 0.00266 [4.8e-09, 5.0e+07] beside an
    unidentified a, A and B."""
    jacobian, residuals = objective.jacobian(theta), objective.residuals(theta)
    flag_unresponsive(estimates, PARAMETRIC_NAMES, jacobian, residuals, level, LOG_SCALED)
    largest = {"N": objective.x_mean + objective.xc.max(), "D": objective.y_mean + objective.yc.max()}  # logs
    flag_wide_terms(estimates, TERMS, {k: float(np.exp(v)) for k, v in largest.items()})
    for name, inputs in DERIVED.items():
        source = next((k for k in inputs if k in estimates and estimates[k].unidentified), "")
        if source and name in estimates and not estimates[name].unidentified:
            why = estimates[source].unidentified  # B's "as beta's: ..." is G's too, not "as B's: as beta's: ..."
            estimates[name].unidentified = why if why.startswith("as ") else f"as {source}'s: {why}"
    if "G" in estimates:
        follows_exponent(estimates, ("G",))


def judge(estimates: dict, boot, point: dict, objective, theta, table, level: float) -> list[str]:
    """The best fit's rules (`best_fit_reasons`, `withhold`) and the design's (`collinear_reason` of the runs' ln N,
    ln D, `flag_collinear`; `ONE_BUDGET` when they have fewer than 2 budgets) on approach 3's ``estimates`` of
    ``table``'s runs, then, with E at 0, the floors the runs do not reject (`floor_profile`); returns the names
    withheld (no value)."""
    from analysis.fits.floor_profile import flag_held_floors

    logs = (np.log(table.runs["N"].to_numpy()), np.log(table.runs["D"].to_numpy()))
    collinear = collinear_reason(*logs, objective.residuals(theta))
    withheld = withhold(estimates, boot, best_fit_reasons(point, objective.xc, objective.yc, collinear))
    flag_collinear(estimates, collinear)
    flag_absorbed(estimates, withheld, *logs)
    if len(table.budgets) < 2 and np.isfinite(estimates["E"].value) and not estimates["E"].unidentified:
        estimates["E"].unidentified = ONE_BUDGET
    if not withheld:
        flag_held_floors(estimates, objective, theta, level, FLOOR_REASON)
    return withheld


# user21: 9 sizes at one budget printed E = 2.612 [2.598, 2.645] for a true 1.69 (alpha and beta unidentified),
# and `optimal` that loss at 10x the budget; 1 seed in 9 gave such an interval, the others flagged or bounded it
ONE_BUDGET = (
    "every run is at one budget: along it D falls as N grows, so the loss as both grow, E, is not seen; "
    "train runs at 2 or more budgets"
)


ABSORBED_R2 = 0.99  # ln D on ln N with this R² (rising): a term left alone absorbs the other's fall along the runs


def flag_absorbed(estimates: dict[str, Estimate], withheld: list[str], log_n: np.ndarray, log_d: np.ndarray) -> None:
    """A term kept beside one withheld (`withhold`) on runs whose ln D rises with ln N (R² >= `ABSORBED_R2`) is
    unidentified too (values kept): the loss along the runs falls with both, and the term left alone takes the
    other's share, so its exponent is neither α nor β. D/N scattered by 1% (16 sizes; `collinear_reason` does not
    fire) printed alpha = 0.3007 [0.1987, 0.3367] for a true 0.34 beside a withheld D term."""
    x, y = np.asarray(log_n, float), np.asarray(log_d, float)
    if x.std() == 0 or y.std() == 0:
        return
    r = float(np.corrcoef(x, y)[0, 1])
    for gone, kept in (("beta", "alpha"), ("alpha", "beta")):
        if gone not in withheld or kept in withheld or not (r > 0 and r * r >= ABSORBED_R2):
            continue
        why = (
            f"the {TERMS[gone][1]} term is unidentified and ln D rises with ln N over these runs (R² {r * r:.4f}): "
            f"{kept} takes its share of the loss's fall, so it is not the {TERMS[kept][1]} term's exponent"
        )
        for name in (kept, TERMS[kept][0]):
            if name in estimates and not estimates[name].unidentified:
                estimates[name].unidentified = why


def flag_design(estimates: dict[str, Estimate], log_n: np.ndarray, log_d: np.ndarray, one_budget: bool) -> None:
    """Approach 3's design rules on another law's estimates (the data-constrained fit's): a term of too few distinct
    values (`design_reasons`; user33: 2 sizes gave alpha = 0.582 [0.580, 0.586] for 0.353) leaves it and E
    unidentified, and runs at one budget E (user36: E = 2.597 [2.52, 2.662] for 1.87)."""
    for exponent, why in design_reasons(log_n, log_d).items():
        for name in {exponent, TERMS[exponent][0], "E"} & estimates.keys():
            estimates[name].unidentified = estimates[name].unidentified or why
    if one_budget:
        estimates["E"].unidentified = estimates["E"].unidentified or ONE_BUDGET
