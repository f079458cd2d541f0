"""Loss against compute: every run's curve and final loss, the envelope and approach 1's law."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.fit import (
    band_phrase,
    drawable,
    drawn_phrase,
    envelope_law_legend,
    fitted_phrase,
    floor_phrase,
    interval_legend,
)
from analysis.describe.numbers import flops_label, plain_label
from analysis.figures.axes import (
    APPROACH_COLOUR,
    DPI,
    LABEL_COMPUTE,
    REFERENCE_COLOUR,
    SIZE_CMAP,
    WIDE,
    law_along,
    law_line,
    legend,
    limits,
    log_axes,
    loss_label,
    size_colorbar,
    size_norm,
    style,
)
from analysis.fits.envelope import envelope_law
from analysis.fits.results import FitReport
from analysis.sources.schema import RunTable


def caption(report: FitReport | None) -> str:
    """What `loss_vs_compute` shows."""
    return (
        "Validation loss against training compute C = 6·N·D for every run (curves: the loss as training "
        "went on; dots: final loss; colour: model size N). Diamonds: the envelope, the lowest loss "
        f"reached in each {_bin(report)}; {_approach_1(report)}; dashed vermillion: "
        f"{drawn_phrase(report, 3, 'loss at the compute-optimal N and D')}{floor_phrase(report)}."
    )


def _approach_1(report: FitReport | None) -> str:
    """Approach 1's law in the caption: which one is drawn (`envelope_law`), and how."""
    drawn = envelope_law(report.envelope) if report is not None and report.envelope is not None else None
    if drawn is not None and drawn.unidentified:
        return f"dotted green: approach 1's law fitted through it, unidentified ({drawn.unidentified}): no band"
    if drawn is not None and drawn.floor_unidentified:
        law = (
            f"law without a floor fitted through it (the law with a floor is unidentified: {drawn.floor_unidentified})"
        )
        return f"green: approach 1's {law}, with {band_phrase(report, 1)}"
    return f"green: {fitted_phrase(report, 1, 'law fitted through it')}, with {band_phrase(report, 1)}"


def loss_vs_compute(table: RunTable, report: FitReport | None = None) -> Figure:
    """Every run's validation-loss curve against compute C = 6·N·(tokens so far), coloured by N,
    its final point as a dot; approach 1's envelope points and its law L(C) (with a floor E when
    fitted) with the bootstrap band over the fitted compute range; approach 3's loss on the
    compute-optimal frontier L(N_opt(C), D_opt(C)) for comparison."""
    runs = table.runs
    fig = Figure(figsize=WIDE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    norm = size_norm(runs["N"])
    _runs(ax, table, norm)
    if report is not None and report.envelope is not None:
        _envelope(ax, report)
    if report is not None and drawable(report.parametric) is not None:
        _frontier(ax, report, runs)
    if table.curves is None and runs["C"].max() <= 1.001 * runs["C"].min():  # one budget, final points: no span
        ax.set_xlim(runs["C"].min() / 3, runs["C"].max() * 3)  # (matplotlib warned of singular limits, user34)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(*limits(np.concatenate([runs["loss"], [] if table.curves is None else table.curves["loss"]]), 1.05))
    ax.set_xlabel(LABEL_COMPUTE)
    ax.set_ylabel(loss_label(table.loss_unit))
    style(ax, f"Loss against compute ({len(runs)} runs)")
    legend(ax, loc="upper right")
    size_colorbar(fig, ax, norm)
    log_axes(ax, flops_label, plain_label)
    return fig


def _runs(ax, table: RunTable, norm) -> None:
    """Each run's loss curve and its final loss, coloured by N."""
    runs = table.runs
    if table.curves is not None:
        for run_id, curve in table.curves.groupby("run_id", sort=False):
            curve = curve.sort_values("C")
            ax.plot(
                curve["C"],
                curve["loss"],
                color=SIZE_CMAP(norm(curve["N"].iloc[0])),
                linewidth=1.0,
                alpha=0.75,
                gid=f"curve:{run_id}",
            )
    ax.scatter(
        runs["C"],
        runs["loss"],
        c=runs["N"],
        cmap=SIZE_CMAP,
        norm=norm,
        s=28,
        edgecolors="black",
        linewidths=0.5,
        zorder=3,
        gid="runs",
    )
    ax.scatter([], [], color="0.6", s=28, edgecolors="black", linewidths=0.5, label="a run's final loss (colour: N)")


def _bin(report: FitReport | None) -> str:
    """What an envelope point is the lowest loss of: a compute bin of the curves, or a budget of final points."""
    env = report.envelope if report is not None else None
    curves = env is None or env.diagnostics.get("points_used") == "training curves"
    return "compute bin" if curves else "budget (final points only)"


def _envelope(ax, report: FitReport) -> None:
    """Approach 1: the envelope points and the law L(C) through them, with its bootstrap band."""
    env = report.envelope
    ax.scatter(
        env.compute,
        env.loss,
        marker="D",
        s=30,
        facecolors="none",
        edgecolors=REFERENCE_COLOUR,
        linewidths=1.0,
        zorder=4,
        label=f"envelope: lowest loss per {_bin(report)}",
        gid="envelope",
    )
    c = np.geomspace(*env.diagnostics["compute_range"], 80)
    drawn = envelope_law(env)
    curve = law_along(report, 1, c)
    colour, label = APPROACH_COLOUR[1], envelope_law_legend(env)
    solid, why = {"linewidth": 2.2, "zorder": 5}, bool(drawn.unidentified)
    band_label = interval_legend(report, 1)
    law_line(
        ax,
        c,
        curve,
        "loss",
        colour=colour,
        label=label,
        gid="fit:approach1",
        solid=solid,
        unidentified=why,
        band_label=band_label,
    )


def _frontier(ax, report: FitReport, runs) -> None:
    """Approach 3: the loss at the compute-optimal N, D, dashed."""
    c = np.geomspace(runs["C"].min(), runs["C"].max(), 80)
    frontier = law_along(report, 3, c)
    label = "approach 3: loss at the compute-optimal N, D" + (" (E unidentified)" if floor_phrase(report) else "")
    dashed = {"linewidth": 1.8, "linestyle": "--", "zorder": 5}
    law_line(
        ax, c, frontier, "loss", colour=APPROACH_COLOUR[3], label=label, gid="fit:approach3", solid=dashed, banded=False
    )
