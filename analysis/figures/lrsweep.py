"""Learning-rate sweep: loss against peak LR per model size, one panel per compute budget, with
each size's optimum (the parabola in log LR) and the fitted LR law's η*(N, D)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from analysis.describe.numbers import count_label, flops_label
from analysis.figures.axes import DPI, SIZE_CMAP, FigureUnavailable, loss_label, size_colorbar, size_norm, style
from analysis.fits.results import FitReport
from analysis.sources.hparams import LR
from analysis.sources.schema import RunTable
from scaling import hplaws
from scaling.hplaws import unidentified_in

MAX_PANEL_COLUMNS = 3


def caption(report: FitReport | None) -> str:
    """What `lr_sweep` shows."""
    law = (report.hyperparameter_laws or {}).get("lr") if report is not None else None
    unidentified = _unidentified(law)
    ticks = (
        f"Dotted vertical ticks ({unidentified} unidentified: no finding)" if unidentified else "Dashed vertical ticks"
    )
    fitted = (
        f"{ticks}: the fitted LR law's η*(N, D) for each size (`scaling fit`, Step Law form)."
        if law
        else "No LR law was fitted."
    )
    return (
        "Validation loss against the peak learning rate, one panel per compute budget, one line per model size "
        "(colour: N) through the mean loss at each LR (at the best setting of any other swept hyperparameter; "
        "grey dots: the other settings). Star: each size's optimum, the vertex of the parabola in log LR "
        "through the best LR and its neighbours; hollow circle: the best LR lies at the edge of the grid, "
        f"so no optimum is interpolated. {fitted}"
    )


def _unidentified(law: dict | None) -> str:
    """The LR law's estimates its fit calls unidentified ("n_exponent, d_exponent"), or "": its ticks are then
    dotted (`scaling.hplaws.unidentified_in`)."""
    return ", ".join(unidentified_in(law))


def lr_sweep(table: RunTable, report: FitReport | None = None) -> Figure:
    """Loss against LR per size and budget (see `caption`)."""
    sweep = table.hparams
    if sweep is None or not sweep.lr_swept:
        raise FigureUnavailable(f"{table.source!r} holds no learning-rate sweep")
    rows, optima = sweep.rows, sweep.optima
    budgets = sorted(optima["budget"].unique())
    columns = min(MAX_PANEL_COLUMNS, len(budgets))
    panels = math.ceil(len(budgets) / columns)
    fig = Figure(figsize=(3.8 * columns + 1.2, 3.3 * panels + 0.4), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(panels, columns, sharey=True, squeeze=False)).ravel()
    norm = size_norm(optima["N"])
    law = (report.hyperparameter_laws or {}).get("lr") if report is not None else None
    for ax, budget in zip(axes, budgets):
        for point in optima[optima["budget"] == budget].itertuples():
            _size(ax, rows, point, SIZE_CMAP(norm(point.N)), sweep.swept, law)
        ax.set_xscale("log")
        ax.set_xlabel("peak learning rate η")
        style(ax, f"C = {flops_label(budget)} FLOPs")
        ax.xaxis.set_major_locator(LogLocator(10, numticks=6))  # powers of ten: 1-2-5 ticks crowd a panel
    for ax in axes[len(budgets) :]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel(loss_label(table.loss_unit))
    size_colorbar(fig, axes[: len(budgets)].tolist(), norm, tick_label=count_label)
    fig.suptitle("Loss against learning rate, per model size", fontsize=11)
    return fig


def _size(ax, rows, point, colour, swept: list[str], law: dict | None) -> None:
    """One size at one budget: its LR curve, the other settings, the optimum and the law's η*."""
    mine = rows[(rows["N"] == point.N) & (rows["budget"] == point.budget)]
    best = mine[mine["chosen"]].iloc[0]
    same = np.ones(len(mine), dtype=bool)
    for column in swept:
        if column != LR:
            same &= (mine[column] == best[column]).to_numpy()
    others = mine[~same]
    if len(others):
        ax.scatter(others[LR], others["loss"], color="0.7", s=8, zorder=1)
    curve = mine[same].groupby(LR)["loss"].mean().sort_index()
    ax.plot(curve.index, curve.to_numpy(), color=colour, marker="o", markersize=3, linewidth=1.2, zorder=2)
    if point.edge:
        ax.scatter([point.lr_best], [point.loss_best], s=70, facecolors="none", edgecolors=colour, zorder=3)
    else:
        ax.scatter([point.lr_interp], [point.loss_interp], marker="*", s=110, color=colour, edgecolors="black",
                   linewidths=0.5, zorder=3)  # fmt: skip
    if law:
        eta = hplaws.evaluate(law, n_non_embedding=point.N_hp, tokens=point.D, flops=point.C)
        if np.isfinite(eta) and eta > 0:
            style = ":" if _unidentified(law) else "--"
            ax.axvline(eta, color=colour, linestyle=style, linewidth=0.9, alpha=0.8, zorder=0, gid="lr-law")
