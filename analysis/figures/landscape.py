"""The fitted L(N, D) of approach 3 as contours, with the runs, the iso-FLOP lines and the optimal path."""

from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import BoundaryNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.describe.fit import fitted_phrase, parametric_law_text
from analysis.describe.numbers import count_label, flops_label, plain_label
from analysis.figures.axes import (
    DPI,
    LABEL_TOKENS,
    MAX_LEGEND_BUDGETS,
    OKABE_ITO,
    UNIDENTIFIED_LINE,
    FigureUnavailable,
    legend,
    log_axes,
    loss_label,
    run_budgets,
    style,
)
from analysis.fits import laws
from analysis.fits.results import FitReport, no_law
from analysis.sources.schema import RunTable
from scaling.flops import flops_6nd, tokens_6nd


def caption(report: FitReport | None) -> str:
    """What `loss_landscape` shows."""
    fit = report.parametric if report is not None else None
    law = parametric_law_text(fit) if fit is not None and not no_law(fit) else "L(N, D)"
    shown = fitted_phrase(report, 3, f"{law} (filled contours)")
    why = fit.estimates["a"].unidentified if fit is not None and not no_law(fit) else ""
    path = f"; dotted: a unidentified ({why})" if why else ""
    return (
        f"{shown[0].upper() + shown[1:]}, the runs coloured by their observed "
        "loss on the same scale (fill colour, thin black edge: a run whose colour matches its background is fitted "
        "well), a line of constant compute C = 6·N·D at each of the table's budgets (dotted white; with more than "
        f"{MAX_LEGEND_BUDGETS} budgets only some are labelled), the compute-optimal path (orange{path}), "
        "and Chinchilla's 20 tokens per parameter (dashed black)."
    )


def loss_landscape(report: FitReport, table: RunTable | None = None) -> Figure:
    """Contours of approach 3's L(N, D) = E + A/N^α + B/D^β over the trained N and D (×/÷ 3), the
    runs coloured by their observed loss on the same scale (a run that matches its background is
    fitted well), the iso-FLOP lines D = C/(6N) of the budgets, the compute-optimal path
    (N_opt(C), D_opt(C)) and, for reference, Chinchilla's 20 tokens per parameter."""
    fit = report.parametric
    if fit is None:
        raise FigureUnavailable(
            "approach 3 (parametric L(N, D)) was not fitted: " + report.skipped.get("3", "not asked for")
        )
    if no_law(fit):
        raise FigureUnavailable(f"approach 3's law is unidentified: {fit.estimates['a'].unidentified}")
    n_runs, d_runs, loss_runs = np.asarray(fit.n), np.asarray(fit.d), np.asarray(fit.loss)
    n_grid = np.geomspace(n_runs.min() / 3, n_runs.max() * 3, 160)
    d_grid = np.geomspace(d_runs.min() / 3, d_runs.max() * 3, 160)
    surface = fit.predict(n_grid[None, :], d_grid[:, None])
    lo, hi = np.percentile(surface, [1, 99])
    levels = MaxNLocator(nbins=12, steps=[1, 2, 2.5, 5, 10]).tick_values(
        min(lo, loss_runs.min()), max(hi, loss_runs.max())
    )
    cmap = colormaps["cividis"]
    norm = BoundaryNorm(levels, cmap.N, extend="both")  # one colour per band, shared by the runs
    fig = Figure(figsize=(7.5, 5.6), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    filled = ax.contourf(n_grid, d_grid, surface, levels=levels, cmap=cmap, norm=norm, extend="both")
    lines = ax.contour(n_grid, d_grid, surface, levels=levels[1::2], colors="white", linewidths=0.6, alpha=0.8)
    ax.clabel(lines, fmt=plain_label, fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(n_grid[0], n_grid[-1])
    ax.set_ylim(d_grid[0], d_grid[-1])
    _budget_lines(ax, fit, table, n_grid)
    _optimal_path(ax, fit, n_grid, d_grid)
    _runs(ax, fit, cmap, norm)
    ax.set_xlabel("parameters N")
    ax.set_ylabel(LABEL_TOKENS)
    style(ax, f"Fitted {parametric_law_text(fit)}")
    ax.grid(False)
    legend(ax, loc="upper right")
    bar = fig.colorbar(filled, ax=ax, pad=0.02)
    bar.set_label(loss_label(report.loss_unit))
    log_axes(ax, count_label, count_label)
    return fig


def _budget_lines(ax, fit, table: RunTable | None, n_grid) -> None:
    """The iso-FLOP line D = C/(6N) of each budget (`run_budgets`: the table's, by the one rule of
    `analysis.sources.budgets`), dotted, labelled just before its first run; with many budgets
    only every k-th line is labelled, so at most `MAX_LEGEND_BUDGETS` labels."""
    n_runs, d_runs = np.asarray(fit.n), np.asarray(fit.d)
    c_runs = flops_6nd(n_runs, d_runs)
    budget = run_budgets(fit.run_id, c_runs, table)
    budgets = np.unique(budget)
    every = math.ceil(len(budgets) / MAX_LEGEND_BUDGETS)
    for k, c in enumerate(budgets):
        ax.plot(n_grid, tokens_6nd(c, n_grid), color="white", linestyle=":", linewidth=1.0, gid=f"iso-C:{c:g}")
        if k % every == 0:
            smallest = n_runs[budget == c].min()  # label the line just before its first run
            _label_along(ax, n_grid, tokens_6nd(c, n_grid), f"C = {flops_label(c)}", near_x=smallest / 1.8)


def _optimal_path(ax, fit, n_grid, d_grid) -> None:
    """The compute-optimal (N_opt(C), D_opt(C)) of approach 3, and Chinchilla's 20 tokens per parameter."""
    c_path = np.geomspace(flops_6nd(n_grid[0], d_grid[0]), flops_6nd(n_grid[-1], d_grid[-1]), 200)
    n_opt, d_opt = laws.chinchilla_allocation(c_path, *(fit.params[k] for k in ("A", "B", "alpha", "beta")))
    why = fit.estimates["a"].unidentified  # as `optimal_allocation` draws it (user34: solid here, dotted there)
    label = "compute-optimal N, D (approach 3" + ("; a unidentified: not a finding)" if why else ")")
    drawn = UNIDENTIFIED_LINE if why else {"linewidth": 2.4}
    ax.plot(n_opt, d_opt, color=OKABE_ITO["orange"], label=label, gid="optimal-path", **drawn)
    ax.plot(
        n_grid, 20.0 * n_grid, color="black", linestyle="--", linewidth=1.2, label="20 tokens/parameter (Chinchilla)"
    )


def _runs(ax, fit, cmap, norm) -> None:
    """The runs, coloured by their observed loss on the contours' scale."""
    n_runs, d_runs, loss_runs = np.asarray(fit.n), np.asarray(fit.d), np.asarray(fit.loss)
    ax.scatter(
        n_runs,
        d_runs,
        c=loss_runs,
        cmap=cmap,
        norm=norm,
        s=48,
        edgecolors="black",
        linewidths=0.5,
        zorder=5,
        gid="runs",
    )
    ax.scatter(
        [], [], color=cmap(0.5), s=48, edgecolors="black", linewidths=0.5, label="runs (fill colour: observed loss)"
    )


def _label_along(ax, x, y, text: str, near_x: float) -> None:
    """Write ``text`` on the line (x, y) at the point inside the axes nearest ``near_x``, rotated to
    the line's slope on screen."""
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    inside = np.flatnonzero((x > x_lo) & (x < x_hi) & (y > y_lo) & (y < y_hi))
    if inside.size < 3:
        return
    i = int(np.clip(inside[np.argmin(np.abs(np.log(x[inside] / near_x)))], inside[1], inside[-2]))
    (x0, y0), (x1, y1) = ax.transData.transform([(x[i - 1], y[i - 1]), (x[i + 1], y[i + 1])])
    ax.annotate(
        text,
        (x[i], y[i]),
        color="white",
        fontsize=7,
        ha="center",
        va="bottom",
        rotation=math.degrees(math.atan2(y1 - y0, x1 - x0)),
        rotation_mode="anchor",
    )
