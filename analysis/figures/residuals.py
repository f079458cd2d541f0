"""Residuals: observed against fitted loss, per approach."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.numbers import count_label, flops_label
from analysis.figures.axes import (
    APPROACH_COLOUR,
    DPI,
    LABEL_COMPUTE,
    MAX_LEGEND_BUDGETS,
    FigureUnavailable,
    budget_colorbar,
    budget_colours,
    log_axes,
    many_budgets,
    ring_outliers,
    run_budgets,
    style,
)
from analysis.fits.envelope import envelope_law
from analysis.fits.results import FitReport
from analysis.sources.schema import RunTable
from scaling.flops import flops_6nd


def caption(report: FitReport | None) -> str:
    """What `residuals` shows."""
    fitted = ", ".join(f"approach {f.approach}" for f in report.fits) if report is not None else "none"
    rings = (
        "Runs the outlier rule flagged were left out of the fits (--exclude-outliers), so they are not here (the "
        "IsoFLOP profiles ring them). "
        if report is not None and report.outliers_excluded
        else "Runs the outlier rule flagged are ringed in red. "
    )
    return (
        f"Observed minus fitted loss, in % of the fitted value, one panel per approach fitted ({fitted}); "
        f"colour of the runs (approaches 2 and 3): the compute budget (named in the legend, or on a colour bar when "
        f"there are more than {MAX_LEGEND_BUDGETS}); approach 1's envelope points, at their compute, are green. "
        f"{rings}Residuals scattered evenly around zero mean the law's shape fits; a trend means it does not."
    )


def residuals(report: FitReport, table: RunTable | None = None) -> Figure:
    """Observed against fitted loss, in % of the fitted value, one panel per approach:
    approach 1 the envelope points against L(C); approach 2 each run against its budget's parabola;
    approach 3 each run against L(N, D). Points scattered evenly around 0 mean the law's shape fits.
    The budgets share one colour scale across panels (a colour bar when there are many)."""
    if not report.fits:
        raise FigureUnavailable("no approach was fitted")
    fig = Figure(figsize=(4.0 * len(report.fits) + 1.0, 4.2), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(report.fits), sharey=True))
    runs = {f.approach: _run_residuals(f, table) for f in report.fits if f.approach != 1}
    colours = budget_colours(np.concatenate([budget for _n, _p, budget, _ids in runs.values()] or [[]]))
    for ax, fit in zip(axes, report.fits):
        if fit.approach == 1:
            key = "loss_law_with_floor" if envelope_law(fit).with_floor else "loss_law"  # the law drawn
            percent = 100.0 * (np.exp(np.asarray(fit.residuals[key])) - 1.0)  # log(obs) − log(fit)
            ax.scatter(fit.compute, percent, color=APPROACH_COLOUR[1], s=26, edgecolors="black", linewidths=0.5)
            ax.set_xlabel(LABEL_COMPUTE)
            ax.set_xscale("log")
            label = flops_label
            title = "approach 1: envelope against L(C)"
        else:
            n, percent, budget, ids = runs[fit.approach]
            _budget_points(ax, n, percent, budget, colours)
            ring_outliers(ax, report, dict(zip(ids, zip(n, percent))))
            ax.set_xlabel("parameters N")
            ax.set_xscale("log")
            label = count_label
            title = "approach 2: runs against parabolas" if fit.approach == 2 else "approach 3: runs against L(N, D)"
        ax.axhline(0.0, color="0.3", linewidth=0.8)
        style(ax, title)
        log_axes(ax, label)
    axes[0].set_ylabel("observed − fitted loss (% of fitted)")
    if many_budgets(colours):
        budget_colorbar(fig, list(axes), list(colours))
    handles, labels = axes[-1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
    return fig


def _budget_points(ax, n, percent, budget, colours: dict) -> None:
    """Each run's residual, coloured by its budget (a legend entry per budget unless there are many)."""
    for b in sorted(set(budget)):
        pick = budget == b
        ax.scatter(
            n[pick],
            percent[pick],
            color=colours[b],
            s=26,
            edgecolors="black",
            linewidths=0.5,
            label=None if many_budgets(colours) else f"C = {flops_label(b)}",
        )


def _run_residuals(fit, table: RunTable | None):
    """(N, residual in % of the fitted loss, budget, run id) per run for approach 2 or 3."""
    if fit.approach == 2:
        n = np.concatenate([p.n for p in fit.profiles])
        observed = np.concatenate([p.loss for p in fit.profiles])
        fitted = np.concatenate([p(p.n) for p in fit.profiles])
        budget = np.concatenate([[p.budget] * len(p.n) for p in fit.profiles])
        return n, 100.0 * (observed / fitted - 1.0), budget, [r for p in fit.profiles for r in p.run_id]
    n, d = np.asarray(fit.n), np.asarray(fit.d)
    percent = 100.0 * (np.exp(-np.asarray(fit.residuals)) - 1.0)  # residuals are log(predicted) − log(observed)
    return n, percent, run_budgets(fit.run_id, flops_6nd(n, d), table), list(fit.run_id)
