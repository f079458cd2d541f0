"""Outliers: one documented rule that flags runs. `scaling fit` and `scaling compare` always list the
flagged runs; ``--exclude-outliers`` fits without them (`fit_flagged`, the sequence both run).

Two tests, each naming the run it flags:
  * residual: approach 3's own fit (Huber δ = 1e-3 on log-loss) is nearly a least-absolute-deviations
    fit when the noise is well above δ: it passes through about as many runs as it has parameters, so
    its residuals understate the noise and a z-score on them flags clean runs (README, Fits: measured
    rates). So approach 3's law L̂ = E + A/N^α + B/D^β is refitted, from approach 3's optimum, by
    Huber M-estimation with δ = `HUBER_K`·σ̂, and each residual r = ln L − ln L̂ is divided by √(1 − h),
    h its leverage ∂(fitted)/∂(observed) in the tangent-plane linearisation (St. Laurent & Cook 1992;
    the generalised leverage of Wei, Hu & Fung 1998): a run beyond δ pulls the fit with a fixed force,
    so its own noise does not move the fit (h = 0); for the others h is the diagonal of J(JᵀJ)⁻¹Jᵀ
    over them, J the Jacobian of ln L̂. σ̂ = 1.4826·MAD of these standardised residuals s (`analysis.fits.robust`),
    re-estimated until δ moves by less than `STEP_RTOL`, starting from least squares (δ = ∞, the start of Huber's
    IRLS in MASS::rlm) so that δ comes down to its largest fixed point. A run is flagged when
    |s − median s| > `K`·σ̂, K = 3.5: the modified z-score of Iglewicz & Hoaglin (1993). σ̂ is never
    taken below `MIN_SCALE` (0.1% of the loss), so noise-free data flag nothing. Nominal rate: on n
    independent normal residuals the rule flags 0.14 runs at n = 16 and 0.11 at n = 45 (the MAD of
    few values is noisy; 5e-4 per run as n → ∞); clean ladders of those sizes match it
    (tests/test_outliers.py). A run at an edge of the design (h near 1) could hide an outlier: the law
    bends to it (user38: a diverged loss 2.4x its truth passed at a budget's largest N). So a run of
    least-squares leverage above `HIGH_LEVERAGE`·p/n is scored by its deletion residual, against approach 3
    fitted without it (`deletion_residuals`); where that flags one, the others are tested again without it
    (`residual_test`). Not applied when approach 3 cannot be fitted (said in the notes).
  * near-duplicate size: within one budget, a run whose N is within `NEAR` (1%) of an earlier run's
    N while not the same (N, D) point (repeated seeds of a point are kept), nor at other unique tokens U where data repeat. The later run in the table is flagged; the earlier one is kept.
    Two sizes 1% apart give a parabola no extra reach, only double weight at one place (often the
    same point digitised twice).
  * off budget: a run whose C = 6·N·D is off its budget by a factor r = C/budget that its size does not
    share: |ln r − ln r̂| > ln `OFF_BUDGET`, r̂ the median r of the runs of its N in other budgets when there
    are 2 or more (a majority outvotes one run stopped early), else Theil–Sen's line of each size's median
    ln r against ln N over the `TREND_SIZES` sizes nearest its N (its own included), at its N. C/budget
    that drifts with N is no run stopped early: N of another kind than the one that set D (a sweep of
    `param_count=non_embedding` fitted with N total: r = 2.9 at d16, 1.1 at d80) gives every budget the
    same r at one N, smooth in N, which both references follow; a line over nearby sizes follows its bend
    (one over all sizes missed runs stopped at half their budget at the ends). The limit: where r bends
    most, at a ladder's smallest size (d16, d24 fitted with N total), half a budget can pass. Not applied
    when the budgets were clustered from C (`RunTable.budgets_clustered`): each run is then in the budget
    of its own C. A budget column said 1e19 of a run stopped at 3e18 (or copied from the wrong row): its
    loss is right for its N and D, so the residual test passes it, but it is no point of the budget's
    IsoFLOP profile and bends the parabola (approach 2 dropped the budget, unnamed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from analysis.fits.muennighoff import repeats as repeating_data
from analysis.fits.results import Outlier, ParametricFit, no_law
from analysis.fits.robust import SIGMA_TEXT, robust_sigma
from scaling.errors import DataError

if TYPE_CHECKING:  # not imported at run time: `scaling fit --help` reads RULE without loading pandas
    from analysis.sources.schema import RunTable

K = 3.5  # modified z-score beyond which a residual is an outlier (Iglewicz & Hoaglin 1993)
HUBER_K = 1.345  # the refit's δ = HUBER_K·σ̂: Huber's 95%-efficiency tuning under normal noise (Holland & Welsch 1977)
MAX_STEPS, STEP_RTOL = 10, 1e-3  # the refit's δ is re-estimated until it moves by < 0.1% (a few steps)
MIN_SCALE = 1e-3  # the residual scale never goes below this (log-loss): approach 3's Huber δ
NEAR = 0.01  # sizes within 1% of each other in one budget are near-duplicates
OFF_BUDGET = 1.5  # a run's C/budget this many times off that of its size is not on the budget's profile
TREND_SIZES = 4  # the trend of C/budget against N is a line over this many nearest sizes (it follows a bend)
HIGH_LEVERAGE = 2.0  # a run of least-squares leverage above this x p/n is tested by deletion (Hoaglin & Welsch 1978)
MAX_DELETIONS = 8  # at most this many runs, the highest leverage first, are refitted without (one fit each)
RULE = (
    f"residual: observed minus predicted log-loss of approach 3's law refitted with Huber δ = {HUBER_K:g}·σ̂, "
    f"each divided by √(1 − leverage); σ̂ = {SIGMA_TEXT} of these (iterated from least squares); flagged beyond "
    f"{K:g}·{SIGMA_TEXT} of them (modified z-score > {K:g}), a run of high leverage (the {MAX_DELETIONS} highest above "
    f"{HIGH_LEVERAGE:g}·p/n) by its residual against the law fitted without it (then the others again without the "
    "farthest); near-duplicate size: a later run of a budget with N "
    f"within {NEAR:.0%} of another's (not the same (N, D) point); off budget: C/budget over {OFF_BUDGET:g}x off "
    "the median of its size's runs in other budgets (2 or more), else off the line of C/budget against N over "
    f"the {TREND_SIZES} nearest sizes (log-log, Theil-Sen); not where budgets were clustered from C"
)


def flag_outliers(table: RunTable, parametric: ParametricFit | None = None) -> tuple[list[Outlier], list[str]]:
    """The runs of ``table`` the rule of the module docstring flags, and notes on how it ran.
    ``parametric``: an approach-3 fit of this same table to reuse (else one is fitted, without
    bootstrap)."""
    return _flag(table, parametric)[:2]


def _flag(table: RunTable, parametric: ParametricFit | None) -> tuple[list[Outlier], list[str], float | None]:
    """`flag_outliers`, and σ̂ of its residual test (the noise of the runs in log-loss; None where the test
    did not run)."""
    notes, sigma = [], None
    flagged: dict[int, tuple[str, str]] = {}
    if parametric is None:
        from analysis.fits.parametric import fit_parametric

        try:
            parametric = fit_parametric(table, resamples=0)
        except DataError as err:
            notes.append(f"outlier residual test not applied: approach 3 cannot be fitted ({err})")
    if parametric is not None and no_law(parametric):  # no law to refit (`analysis.fits.parametric_form`)
        notes.append(f"outlier residual test not applied: approach 3's law is unidentified ({no_law(parametric)})")
    elif parametric is not None:
        hits, sigma = residual_test(table, parametric, notes)
        for i, z in hits.items():
            flagged[i] = ("residual", f"modified z-score {z:+.1f} (loss {'above' if z > 0 else 'below'} approach 3)")
    for i, j in near_duplicate_sizes(table):
        flagged.setdefault(i, ("near_duplicate_size", f"N within {NEAR:.0%} of run {table.runs['run_id'].iloc[j]}"))
    for i, factor in off_budget_runs(table):
        flagged.setdefault(
            i,
            ("off_budget", f"C/budget is {factor:.2g}x that of its size (stopped early, or in another budget?)"),
        )
    runs = table.runs
    outliers = [
        Outlier(
            run_id=str(runs["run_id"].iloc[i]),
            n=float(runs["N"].iloc[i]),
            d=float(runs["D"].iloc[i]),
            loss=float(runs["loss"].iloc[i]),
            budget=float(runs["budget"].iloc[i]),
            rule=rule,
            detail=detail,
        )
        for i, (rule, detail) in sorted(flagged.items())
    ]
    return outliers, notes, sigma


def standardized_residuals(parametric: ParametricFit, notes: list[str]) -> np.ndarray:
    """Observed minus predicted log-loss of the Huber refit (module docstring), each over √(1 − h);
    NaN for a run of leverage 1 (the refit passes through it whatever its loss: it cannot be tested)."""
    from analysis.fits.parametric import refit_huber

    delta = np.inf  # the first refit is least squares; δ then comes down to its fixed point from above
    for _ in range(MAX_STEPS):
        predicted_minus_observed, jacobian = refit_huber(parametric, delta)
        r = -predicted_minus_observed
        h = leverages(jacobian, np.abs(r) <= delta)
        with np.errstate(divide="ignore", invalid="ignore"):
            standardized = np.where(h < 1 - 1e-9, r / np.sqrt(1 - h), np.nan)
        delta, previous = HUBER_K * _scale(standardized), delta
        if abs(delta / previous - 1) < STEP_RTOL:
            break
    untested = [str(parametric.run_id[i]) for i in np.flatnonzero(np.isnan(standardized))]
    if untested:
        notes.append(
            f"outlier residual test: run(s) {', '.join(untested)} alone fix the refitted law (leverage 1): not tested"
        )
    return standardized


def residual_test(table: RunTable, parametric: ParametricFit, notes: list[str]) -> tuple[dict[int, float], float]:
    """The residual test: {run index: modified z-score} of the runs it flags, and σ̂. A run flagged by its
    deletion residual (`deletion_residuals`) had bent the law, which then misses other runs, or was missed by a law
    another run bent: the others are tested again on the table without the farthest flagged run (user38: a clean run at
    -3.8 beside a diverged one; user40: a clean run of leverage 0.48 flagged at -52 by its deletion residual, the law
    fitted without it bent to a diverged run of 0.37 at +77, which the test had flagged by its plain residual)."""
    from analysis.fits.parametric import fit_parametric

    standardized = standardized_residuals(parametric, notes)
    tested = deletion_residuals(table, parametric, standardized)
    hits = dict(residual_outliers(tested))
    if not any(tested[i] != standardized[i] for i in hits):
        return hits, _scale(tested)
    bent = [max(hits, key=lambda i: abs(hits[i]))]  # the farthest first, by either score: the others may be its bend
    rest = replace(table, runs=table.runs.drop(index=table.runs.index[bent]).reset_index(drop=True))
    try:
        refit = fit_parametric(rest, resamples=0)
    except DataError:
        return hits, _scale(tested)
    if no_law(refit):
        return hits, _scale(tested)
    kept = [i for i in range(len(table.runs)) if i not in bent]
    again, sigma = residual_test(rest, refit, [])
    return {**{i: hits[i] for i in bent}, **{kept[j]: z for j, z in again.items()}}, sigma


def deletion_residuals(table: RunTable, parametric: ParametricFit, standardized: np.ndarray) -> np.ndarray:
    """``standardized`` with each high-leverage run's residual (`HIGH_LEVERAGE`, `MAX_DELETIONS`) replaced by its
    deletion residual: observed minus predicted log-loss of approach 3 fitted without it (grid and all), over
    √(1 + h̃), h̃ = jᵀ(JᵀJ)⁺j its leverage against the other runs' Jacobian J there (the variance of a prediction
    at a run left out: σ²(1 + h̃); in a linear model this equals r/√(1 − h)). User38: a diverged run (loss 7.5 for
    3.08) at a budget's largest N bent the law to it (β -> 4.9, leverage 1) and passed the test at 5x its loss,
    flagged at 3.5 and 4.5 only; fitted without it, the law misses it by 0.89 in log-loss."""
    from analysis.fits.huber_objective import HuberLogLoss
    from analysis.fits.parametric import fit_parametric, point_theta

    objective = HuberLogLoss(np.asarray(parametric.n), np.asarray(parametric.d), np.asarray(parametric.loss), np.inf)
    n, p = len(standardized), 5
    h = leverages(objective.jacobian(point_theta(parametric, objective)), np.ones(n, bool))
    out = np.array(standardized, dtype=float)
    for i in np.argsort(-h)[:MAX_DELETIONS]:
        if h[i] <= HIGH_LEVERAGE * p / n or n - 1 < p + 1:
            break
        try:
            without = fit_parametric(replace(table, runs=table.runs.drop(index=table.runs.index[i])), resamples=0)
        except DataError:
            continue
        if no_law(without):
            continue
        theta = point_theta(without, objective)
        jacobian = objective.jacobian(theta)
        _, singular, vt = np.linalg.svd(jacobian[np.arange(n) != i], full_matrices=False)
        rank = singular > singular[0] * 1e-10
        along = vt[rank] @ jacobian[i]  # a direction the others leave free moves its prediction: untestable
        if np.linalg.norm(jacobian[i] - vt[rank].T @ along) > 1e-6 * np.linalg.norm(jacobian[i]):
            continue
        out[i] = -objective.residuals(theta)[i] / np.sqrt(1.0 + np.sum((along / singular[rank]) ** 2))
    return out


def leverages(jacobian: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """h_i = ∂(fitted_i)/∂(observed_i) of a Huber fit with Jacobian ``jacobian`` (runs, parameters):
    the diagonal of J_I (J_Iᵀ J_I)⁺ J_Iᵀ over the runs ``inside`` δ, 0 for the others."""
    h = np.zeros(len(jacobian))
    if inside.any():
        u, singular, _ = np.linalg.svd(jacobian[inside], full_matrices=False)
        rank = singular > singular[0] * 1e-10
        h[inside] = (u[:, rank] ** 2).sum(axis=1)
    return h


def residual_outliers(residuals: np.ndarray) -> list[tuple[int, float]]:
    """(index, modified z-score) of each residual beyond `K` (the residual test); NaNs are left out."""
    r = np.asarray(residuals, dtype=float)
    z = (r - np.nanmedian(r)) / _scale(r)
    return [(int(i), float(z[i])) for i in np.flatnonzero(np.abs(z) > K)]


def _scale(r: np.ndarray) -> float:
    """σ̂ = `robust_sigma` of ``r`` (NaNs left out), never below `MIN_SCALE`."""
    return max(robust_sigma(r[~np.isnan(r)]), MIN_SCALE)


def near_duplicate_sizes(table: RunTable) -> list[tuple[int, int]]:
    """(later, earlier) row pairs of one budget with N within `NEAR` that are not one (N, D) point, nor runs on
    unique tokens U more than `NEAR` apart, one repeating its data (user36: a repetition table's sizes at 4 U each,
    73 runs flagged)."""
    runs = table.runs
    log_n, d, budget = np.log(runs["N"].to_numpy()), runs["D"].to_numpy(), runs["budget"].to_numpy()
    log_u = np.log(runs["U"].to_numpy(dtype=float)) if "U" in runs else np.full(len(runs), np.nan)
    repeats = repeating_data(d, np.exp(log_u))  # False where U is unknown; U = D (epochs 1) repeats nothing
    pairs = []
    for i in range(len(runs)):
        for j in range(i):
            other_u = (repeats[i] or repeats[j]) and abs(log_u[i] - log_u[j]) > np.log1p(NEAR)  # review23: not U = D
            same_point = (log_n[i] == log_n[j] and d[i] == d[j]) or other_u
            if budget[i] == budget[j] and abs(log_n[i] - log_n[j]) < np.log1p(NEAR) and not same_point:
                pairs.append((i, j))
                break
    return pairs


def off_budget_runs(table: RunTable) -> list[tuple[int, float]]:
    """(row, its C/budget over the reference's) of each run off its budget (module docstring)."""
    if table.budgets_clustered:
        return []
    runs = table.runs
    n, budget = runs["N"].to_numpy(dtype=float), runs["budget"].to_numpy(dtype=float)
    log_r = np.log(runs["C"].to_numpy(dtype=float) / budget)
    sizes = np.unique(n)
    size_log_r = np.array([np.median(log_r[n == size]) for size in sizes])
    found = []
    for i in range(len(runs)):
        others = log_r[(n == n[i]) & (budget != budget[i])]
        reference = np.median(others) if len(others) >= 2 else _trend(np.log(sizes), size_log_r, np.log(n[i]))
        if reference is not None and abs(log_r[i] - reference) > np.log(OFF_BUDGET):
            found.append((i, float(np.exp(log_r[i] - reference))))
    return found


def _trend(log_sizes: np.ndarray, log_r: np.ndarray, at: float) -> float | None:
    """Theil–Sen's line of ``log_r`` against ``log_sizes`` over the `TREND_SIZES` sizes nearest ``at``, at ``at``
    (None with fewer than 3 sizes: a line through 2 passes through both)."""
    if len(log_sizes) < 3:
        return None
    from scipy.stats import theilslopes

    near = np.argsort(np.abs(log_sizes - at), kind="stable")[:TREND_SIZES]
    slope, intercept = theilslopes(log_r[near], log_sizes[near])[:2]
    return float(intercept + slope * at)


T = TypeVar("T")  # what the fit given to `fit_flagged` returns


@dataclass
class Flagged(Generic[T]):
    """`fit_flagged`'s answer: what its ``fit`` returned, the table fitted (the input, or the input less
    ``outliers`` when they were excluded), the runs the rule flagged, and the notes on them that
    `scaling fit` prints: which runs the fit left out, and where the rule could not run."""

    fit: T
    table: RunTable
    outliers: list[Outlier]
    notes: list[str]
    # σ̂ of the residual test (module docstring): the noise of the runs in log-loss, as the rule measured it on the
    # input table (the fit's own table unless runs were excluded: its MAD is robust to them; where a run that bent
    # the law was flagged, on the table without it, `residual_test`); approach 3's own
    # residuals understate it (its fit passes through about as many runs as it has parameters). None where the
    # test did not run (approach 3 could not be fitted, or has no law).
    noise_scale: float | None = None


def fit_flagged(
    table: RunTable,
    fit: Callable[[RunTable], T],
    exclude: bool,
    parametric: Callable[[T], ParametricFit | None] = lambda fitted: fitted,
) -> Flagged[T]:
    """``fit(table)`` with the runs of ``table`` the rule flags: `scaling fit`'s and `scaling compare`'s
    one sequence. With ``exclude`` (--exclude-outliers) the runs are flagged first (approach 3 fitted
    here, without bootstrap) and ``fit`` is given ``table`` less them; else they are flagged after,
    on the approach-3 fit ``parametric(fit(table))`` (None: one is fitted here). A DataError of
    ``fit`` propagates."""
    if not exclude:
        fitted = fit(table)
        return Flagged(fitted, table, *_flag(table, parametric(fitted)))
    outliers, notes, sigma = _flag(table, None)
    if not outliers:
        return Flagged(fit(table), table, outliers, notes, sigma)
    drop = {o.run_id for o in outliers}
    kept = table.without_runs(drop)
    left_out = f"--exclude-outliers: fitted without the {len(drop)} flagged run(s): {', '.join(sorted(drop))}"
    return Flagged(fit(kept), kept, outliers, [left_out, *notes], sigma)
