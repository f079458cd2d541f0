"""Outliers: one documented rule that flags runs. `scaling fit` always lists the flagged runs;
``--exclude-outliers`` refits every approach without them.

Two tests, each naming the run it flags:
  * residual: r = ln L − ln L̂, the observed minus predicted log-loss of approach 3
    (L̂ = E + A/N^α + B/D^β fitted to all runs; its Huber loss keeps that fit robust to a few
    outliers). A run is flagged when |r − median r| > `K` · 1.4826 · MAD(r), K = 3.5: the modified
    z-score of Iglewicz & Hoaglin (1993). 1.4826·MAD estimates σ under normal noise, so a clean run
    is flagged with probability ~5e-4; the scale is never taken below `MIN_SCALE` (0.1% of the
    loss, approach 3's Huber δ), so noise-free data flag nothing. Not applied when approach 3 cannot
    be fitted (said in the notes).
  * near-duplicate size: within one budget, a run whose N is within `NEAR` (1%) of an earlier run's
    N while not the same (N, D) point (repeated seeds of a point are kept). The later run in the table is flagged; the earlier one is kept.
    Two sizes 1% apart give a parabola no extra reach, only double weight at one place (often the
    same point digitised twice).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from analysis.fits.results import Outlier, ParametricFit
from scaling.errors import DataError

if TYPE_CHECKING:  # not imported at run time: `scaling fit --help` reads RULE without loading pandas
    from analysis.sources.schema import RunTable

K = 3.5  # modified z-score beyond which a residual is an outlier (Iglewicz & Hoaglin 1993)
MAD_TO_SIGMA = 1.4826  # σ ≈ 1.4826·MAD for normal noise
MIN_SCALE = 1e-3  # the residual scale never goes below this (log-loss): approach 3's Huber δ
NEAR = 0.01  # sizes within 1% of each other in one budget are near-duplicates
RULE = (
    f"residual: observed minus approach-3 log-loss beyond {K:g}·1.4826·MAD of all residuals (modified z-score "
    f"> {K:g}); near-duplicate size: a later run of a budget with N within {NEAR:.0%} of another's (not the same "
    "(N, D) point)"
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
    if parametric is not None:
        for i, z in residual_outliers(-np.asarray(parametric.residuals)):
            flagged[i] = ("residual", f"modified z-score {z:+.1f} (loss {'above' if z > 0 else 'below'} approach 3)")
    for i, j in near_duplicate_sizes(table):
        flagged.setdefault(i, ("near_duplicate_size", f"N within {NEAR:.0%} of run {table.runs['run_id'].iloc[j]}"))
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


def residual_outliers(residuals: np.ndarray) -> list[tuple[int, float]]:
    """(index, modified z-score) of each residual beyond `K` (the residual test)."""
    r = np.asarray(residuals, dtype=float)
    centre = np.median(r)
    scale = max(MAD_TO_SIGMA * float(np.median(np.abs(r - centre))), MIN_SCALE)
    z = (r - centre) / scale
    return [(int(i), float(z[i])) for i in np.flatnonzero(np.abs(z) > K)]


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
