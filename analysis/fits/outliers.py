"""Outliers: one documented rule that flags runs. `scaling fit` always lists the flagged runs;
``--exclude-outliers`` refits every approach without them.

Two tests, each naming the run it flags:
  * residual: approach 3's own fit (Huber δ = 1e-3 on log-loss) is nearly a least-absolute-deviations
    fit when the noise is well above δ: it passes through about as many runs as it has parameters, so
    its residuals understate the noise and a z-score on them flags clean runs (README, Fits: measured
    rates). So approach 3's law L̂ = E + A/N^α + B/D^β is refitted, from approach 3's optimum, by
    Huber M-estimation with δ = `HUBER_K`·σ̂, and each residual r = ln L − ln L̂ is divided by √(1 − h),
    h its leverage ∂(fitted)/∂(observed) in the tangent-plane linearisation (St. Laurent & Cook 1992;
    the generalised leverage of Wei, Hu & Fung 1998): a run beyond δ pulls the fit with a fixed force,
    so its own noise does not move the fit (h = 0); for the others h is the diagonal of J(JᵀJ)⁻¹Jᵀ
    over them, J the Jacobian of ln L̂. σ̂ = 1.4826·MAD of these standardised residuals s, re-estimated
    until δ moves by less than `STEP_RTOL`, starting from least squares (δ = ∞, the start of Huber's
    IRLS in MASS::rlm) so that δ comes down to its largest fixed point. A run is flagged when
    |s − median s| > `K`·σ̂, K = 3.5: the modified z-score of Iglewicz & Hoaglin (1993). σ̂ is never
    taken below `MIN_SCALE` (0.1% of the loss), so noise-free data flag nothing. Nominal rate: on n
    independent normal residuals the rule flags 0.14 runs at n = 16 and 0.11 at n = 45 (the MAD of
    few values is noisy; 5e-4 per run as n → ∞); clean ladders of those sizes match it
    (tests/test_outliers.py). A run at an edge of the design (h near 1) can hide an outlier: the law
    bends to it. Not applied when approach 3 cannot be fitted (said in the notes).
  * near-duplicate size: within one budget, a run whose N is within `NEAR` (1%) of an earlier run's
    N while not the same (N, D) point (repeated seeds of a point are kept). The later run in the table is flagged; the earlier one is kept.
    Two sizes 1% apart give a parabola no extra reach, only double weight at one place (often the
    same point digitised twice).
  * off budget: a run whose C = 6·N·D is more than `OFF_BUDGET` times off the median C of its budget's
    runs, with no other run of that budget within the default clustering tolerance of its C, while
    the budget's other runs lie within `OFF_BUDGET` of each other (so not where C drifts with size: a
    budget clustered from C at any --budget-tolerance, or N of another kind than the one that set D,
    e.g. a sweep of `param_count=non_embedding` fitted with N total). A budget column said 1e19 of a run stopped at 3e18 (or copied from the
    wrong row): its loss is right for its N and D, so the residual test passes it, but it is no point
    of the budget's IsoFLOP profile and bends the parabola (approach 2 dropped the budget, unnamed).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from analysis.fits.results import Outlier, ParametricFit, no_law
from analysis.sources.budgets import BUDGET_TOLERANCE
from scaling.errors import DataError

if TYPE_CHECKING:  # not imported at run time: `scaling fit --help` reads RULE without loading pandas
    from analysis.sources.schema import RunTable

K = 3.5  # modified z-score beyond which a residual is an outlier (Iglewicz & Hoaglin 1993)
HUBER_K = 1.345  # the refit's δ = HUBER_K·σ̂: Huber's 95%-efficiency tuning under normal noise (Holland & Welsch 1977)
MAX_STEPS, STEP_RTOL = 10, 1e-3  # the refit's δ is re-estimated until it moves by < 0.1% (a few steps)
MAD_TO_SIGMA = 1.4826  # σ ≈ 1.4826·MAD for normal noise
MIN_SCALE = 1e-3  # the residual scale never goes below this (log-loss): approach 3's Huber δ
NEAR = 0.01  # sizes within 1% of each other in one budget are near-duplicates
OFF_BUDGET = 1.5  # a run's C this many times off its budget's median C is not on the budget's profile
RULE = (
    f"residual: observed minus predicted log-loss of approach 3's law refitted with Huber δ = {HUBER_K:g}·σ̂, "
    "each divided by √(1 − leverage); σ̂ = 1.4826·MAD of these (iterated from least squares); flagged beyond "
    f"{K:g}·1.4826·MAD of them (modified z-score > {K:g}); near-duplicate size: a later run of a budget with N "
    f"within {NEAR:.0%} of another's (not the same (N, D) point)"
)
OFF_BUDGET_RULE = (  # apart from RULE, which a fit's JSON carries: said there only when it flags a run
    f"off budget: 6·N·D over {OFF_BUDGET:g}x off the median of its budget's runs, none of which lies within the "
    "clustering tolerance of it, the budget's other runs within that factor of each other"
)


def flag_outliers(table: RunTable, parametric: ParametricFit | None = None) -> tuple[list[Outlier], list[str]]:
    """The runs of ``table`` the rule of the module docstring flags, and notes on how it ran.
    ``parametric``: an approach-3 fit of this same table to reuse (else one is fitted, without
    bootstrap)."""
    notes = []
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
        standardized = standardized_residuals(parametric, notes)
        for i, z in residual_outliers(standardized):
            flagged[i] = ("residual", f"modified z-score {z:+.1f} (loss {'above' if z > 0 else 'below'} approach 3)")
    for i, j in near_duplicate_sizes(table):
        flagged.setdefault(i, ("near_duplicate_size", f"N within {NEAR:.0%} of run {table.runs['run_id'].iloc[j]}"))
    for i, factor in off_budget_runs(table):
        flagged.setdefault(
            i,
            ("off_budget", f"6·N·D is {factor:.2g}x its budget's median run (stopped early, or in another budget?)"),
        )
    runs = table.runs
    return [
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
    ], notes


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
    """σ̂ = 1.4826·MAD of ``r`` (NaNs left out), never below `MIN_SCALE`."""
    return max(MAD_TO_SIGMA * float(np.nanmedian(np.abs(r - np.nanmedian(r)))), MIN_SCALE)


def near_duplicate_sizes(table: RunTable) -> list[tuple[int, int]]:
    """(later, earlier) row pairs of one budget with N within `NEAR` that are not one (N, D) point."""
    runs = table.runs
    log_n, d, budget = np.log(runs["N"].to_numpy()), runs["D"].to_numpy(), runs["budget"].to_numpy()
    pairs = []
    for i in range(len(runs)):
        for j in range(i):
            same_point = log_n[i] == log_n[j] and d[i] == d[j]
            if budget[i] == budget[j] and abs(log_n[i] - log_n[j]) < np.log1p(NEAR) and not same_point:
                pairs.append((i, j))
                break
    return pairs


def off_budget_runs(table: RunTable) -> list[tuple[int, float]]:
    """(row, C over its budget's median C) of each run off its budget (module docstring)."""
    runs = table.runs
    c, budget = runs["C"].to_numpy(dtype=float), runs["budget"].to_numpy()
    found = []
    for b in np.unique(budget):
        rows = np.flatnonzero(budget == b)
        if len(rows) < 2:
            continue
        factor = c[rows] / np.median(c[rows])
        for k, i in enumerate(rows):
            rest = c[np.delete(rows, k)]
            nearest = np.min(np.abs(np.log(rest / c[i])))
            # the others must agree among themselves: C's that drift with size (N of another kind than the one
            # that set D; budgets clustered at a wider --budget-tolerance) are no run stopped early
            tight = rest.max() / rest.min() < OFF_BUDGET
            if abs(np.log(factor[k])) > np.log(OFF_BUDGET) and nearest > np.log1p(BUDGET_TOLERANCE) and tight:
                found.append((int(i), float(factor[k])))
    return found


def without_outliers(table: RunTable, outliers: list[Outlier]) -> RunTable:
    """``table`` less the flagged runs (and their curves), with a note saying so."""
    if not outliers:
        return table
    drop = {o.run_id for o in outliers}
    keep = ~table.runs["run_id"].astype(str).isin(drop)
    runs = table.runs[keep].reset_index(drop=True)
    curves = (
        None
        if table.curves is None
        else table.curves[table.curves["run_id"].astype(str).isin(set(runs["run_id"].astype(str)))]
    )
    note = f"--exclude-outliers: fitted without the {len(drop)} flagged run(s): {', '.join(sorted(drop))}"
    return replace(table, runs=runs, curves=curves, notes=[*table.notes, note])
