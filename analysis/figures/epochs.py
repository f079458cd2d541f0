"""Loss against epochs: what repeating data costs. One line per (model size N, tokens D) at fixed D,
the unique tokens U shrinking so that the run sees its data D/U times; the data-constrained law
(Muennighoff et al. 2023) fitted to the runs, dashed (dotted when an estimate is unidentified). Drawn only for sources whose runs repeat data."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.numbers import count_label, num, plain_label
from analysis.figures.axes import (
    DPI,
    SIZE_CMAP,
    UNIDENTIFIED_LINE,
    WIDE,
    FigureUnavailable,
    legend,
    log_axes,
    loss_label,
    size_colorbar,
    size_norm,
    style,
)
from analysis.fits.muennighoff import any_repeats
from analysis.fits.results import FitReport, MuennighoffFit
from analysis.sources.schema import RunTable

LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def caption(report: FitReport | None) -> str:
    law = ""
    fit = None if report is None else report.muennighoff
    if fit is not None:
        e = fit.estimates
        unidentified = _unidentified(fit)
        shown = f"Grey dots, {unidentified} unidentified (no finding)" if unidentified else "Grey dashes"
        law = (
            f" {shown}: the data-constrained law of Muennighoff et al. 2023 fitted to these runs (R*_D = "
            f"{_value(e['R_D'])}, R*_N = {_value(e['R_N'])}"
            + (", R*_N held at the published value" if fit.convergence.get("fixed") else "")
            + ")."
        )
    return (
        "Validation loss against epochs D/U (tokens trained over the unique tokens they were drawn from): each "
        "line one model size N (colour) at a fixed token count D or unique tokens U (marker, named in the legend), "
        "through the mean of the runs (seeds) at each epoch count, which are the small dots; left of 1 nothing "
        "repeats." + law
    )


def _value(estimate) -> str:
    return "unidentified" if estimate.unidentified else num(estimate.value)


def loss_vs_epochs(table: RunTable, report: FitReport | None) -> Figure:
    runs = table.runs
    if not any_repeats(runs):
        raise FigureUnavailable(f"no run of {table.source!r} repeats its data (epochs D/U > 1)")
    runs = runs[runs["U"].notna()].assign(epochs=lambda f: f["D"] / f["U"])
    fig = Figure(figsize=WIDE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    norm = size_norm(runs["N"])
    held = _held_fixed(runs)  # "D": U shrinks along a line (a repetition sweep); "U": D grows
    values = sorted(runs[held].round(-3).unique())
    fit = None if report is None else report.muennighoff
    for (n, value), group in runs.groupby([runs["N"], runs[held].round(-3)]):
        k = values.index(value) % len(MARKERS)
        colour = SIZE_CMAP(norm(n))
        # several runs (seeds) at one epoch count: each a dot, the line through their mean
        mean = group.groupby(group["epochs"].round(6))["loss"].mean()
        ax.plot(mean.index, mean.to_numpy(), color=colour, linestyle=LINE_STYLES[k], marker=MARKERS[k], ms=5)
        if len(mean) < len(group):
            ax.scatter(group["epochs"], group["loss"], color=colour, marker=MARKERS[k], s=9, alpha=0.45, linewidths=0)
        if fit is not None:
            _law_line(ax, fit, n, held, group[held].mean(), group["epochs"])
    for k, value in enumerate(values[: len(MARKERS)]):
        ax.plot(
            [], [], color="0.3", linestyle=LINE_STYLES[k], marker=MARKERS[k], label=f"{held} = {count_label(value)}"
        )
    if fit is not None:
        unidentified = _unidentified(fit)
        label = "fitted law" + (f", {unidentified} unidentified (dotted: not a finding)" if unidentified else "")
        ax.plot([], [], color="0.45", label=label, **_law_style(fit))
    ax.axvline(1.0, color="0.6", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("epochs D/U")
    ax.set_ylabel(loss_label(table.loss_unit))
    style(ax, f"Loss against epochs ({len(runs)} runs of {table.source})")
    log_axes(ax, plain_label, plain_label)
    legend(ax)
    size_colorbar(fig, [ax], norm)
    return fig


def _held_fixed(runs) -> str:
    """Which of D and U stays fixed along a line: the one that gives fewer, longer lines."""
    by_d = runs.groupby([runs["N"], runs["D"].round(-3)]).ngroups
    by_u = runs.groupby([runs["N"], runs["U"].round(-3)]).ngroups
    return "D" if by_d <= by_u else "U"


def _unidentified(fit: MuennighoffFit) -> str:
    """The law's unidentified estimates, named ("R_D, R_N"), or ""."""
    return ", ".join(name for name, e in fit.estimates.items() if e.unidentified)


def _law_style(fit: MuennighoffFit) -> dict:
    """Grey dashes; dotted (`UNIDENTIFIED_LINE`) when an estimate of the law is unidentified."""
    return UNIDENTIFIED_LINE if _unidentified(fit) else {"linestyle": (0, (4, 2)), "linewidth": 1.0}


def _law_line(ax, fit: MuennighoffFit, n: float, held: str, value: float, epochs) -> None:
    grid = np.geomspace(float(epochs.min()), float(epochs.max()), 60)
    d, u = (value, value / grid) if held == "D" else (value * grid, value)
    ax.plot(grid, fit.predict(n, d, u), color="0.45", zorder=1, gid="law", **_law_style(fit))
