"""Training curves: validation loss against tokens, one panel per compute budget."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.numbers import count_label, flops_label, plain_label
from analysis.figures.axes import (
    DPI,
    LABEL_TOKENS,
    SIZE_CMAP,
    FigureUnavailable,
    log_axes,
    loss_label,
    size_colorbar,
    size_norm,
    style,
)
from analysis.fits.results import FitReport
from analysis.sources.schema import RunTable
from scaling.flops import tokens_6nd

MAX_PANEL_COLUMNS = 3
MANY_PANELS = 9  # beyond this many budgets, smaller panels in `MANY_PANEL_COLUMNS` columns
MANY_PANEL_COLUMNS = 6


def caption(report: FitReport | None) -> str:
    """What `training_curves` shows (no fit in it)."""
    return (
        "Validation loss against tokens trained, one panel per compute budget; colour: model size N; "
        "dot: the run's final loss."
    )


def training_curves(table: RunTable) -> Figure:
    """Validation loss against tokens trained D (= C/(6N) along the run), one panel per compute
    budget, each run coloured by N on one shared scale; the run's final point is a dot."""
    if table.curves is None or table.curves.empty:
        raise FigureUnavailable(f"{table.source!r} holds no loss curves (only final losses)")
    runs = table.runs
    budgets = list(table.budgets)
    many = len(budgets) > MANY_PANELS
    columns = min(MANY_PANEL_COLUMNS if many else MAX_PANEL_COLUMNS, len(budgets))
    rows = math.ceil(len(budgets) / columns)
    width, height = (2.6, 2.3) if many else (3.6, 3.2)  # inches per panel
    fig = Figure(figsize=(width * columns + 1.2, height * rows + 0.4), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns, sharey=True, squeeze=False)).ravel()
    norm = size_norm(runs["N"])
    budget_of = dict(zip(runs["run_id"], runs["budget"]))
    curves = table.curves.assign(
        budget=table.curves["run_id"].map(budget_of), tokens=lambda f: tokens_6nd(f["C"], f["N"])
    )
    for ax, budget in zip(axes, budgets):
        for _, curve in curves[curves["budget"] == budget].groupby("run_id", sort=False):
            curve = curve.sort_values("tokens")
            ax.plot(curve["tokens"], curve["loss"], color=SIZE_CMAP(norm(curve["N"].iloc[0])), linewidth=1.2)
        final = runs[runs["budget"] == budget]
        ax.scatter(
            final["D"],
            final["loss"],
            c=final["N"],
            cmap=SIZE_CMAP,
            norm=norm,
            s=22,
            edgecolors="black",
            linewidths=0.5,
            zorder=3,
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(LABEL_TOKENS)
        style(ax, f"C = {flops_label(budget)} FLOPs ({len(final)} runs)")
        if many:
            ax.title.set_fontsize(8)
    for ax in axes[len(budgets) :]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel(loss_label(table.loss_unit))
    for ax in axes[: len(budgets)]:
        log_axes(ax, count_label, plain_label)
    size_colorbar(fig, list(axes[: len(budgets)]), norm)
    return fig
