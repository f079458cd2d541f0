"""A comparison of recipes (`analysis.compare`): the loss frontiers with their bands, and the
effective compute multiplier m(C) with its band."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from analysis.compare.answer import holds_one_widely
from analysis.compare.bent import bent_at
from analysis.compare.multiplier import evaluate
from analysis.compare.result import Comparison, floor_sides
from analysis.describe.numbers import flops_label, plain_label
from analysis.figures.axes import BAND_ALPHA, DPI, LABEL_COMPUTE, OKABE_ITO, legend, log_axes, loss_label, style
from analysis.fits.bent_frontier import nearest_budget
from scaling.flops import flops_6nd

CANDIDATE_COLOURS = [OKABE_ITO[k] for k in ("vermillion", "blue", "green", "orange", "purple", "sky_blue")]
BASELINE_COLOUR = OKABE_ITO["black"]
POINTS = 120  # compute values along each curve
CAPTION = (
    "Left: each source's loss frontier L*(C) = min over N of its approach-3 law L(N, C/6N), with its bootstrap "
    "band, and each source's lowest observed loss per budget (markers). Right: the effective compute multiplier "
    "m(C), the compute the baseline needs to reach the loss the candidate reaches with C, with its bootstrap band; "
    "m = 1 (dotted) means no difference. Shaded: beyond the fitted range (either source's budgets), where a law "
    "is extrapolated: all of it when the two sources' budgets do not overlap."
)


def compare_figure(comparisons: list[Comparison]) -> Figure:
    """Two panels: frontiers with bands and observed best losses; m(C) with its band (log C)."""
    first = comparisons[0]
    budgets = [b for c in comparisons for side in (c.baseline, c.candidate) for b in side.budgets]
    top = max(r.compute for c in comparisons for r in c.rows)
    compute = np.geomspace(min(budgets) / 2.0, top, POINTS)
    fig = Figure(figsize=(11.0, 4.6), dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2)
    _frontier(left, first.baseline, first, compute, "baseline_loss", BASELINE_COLOUR)
    dashed = False  # whether a dashed stretch of m(C) is in the legend yet
    for k, c in enumerate(comparisons):
        colour = CANDIDATE_COLOURS[k % len(CANDIDATE_COLOURS)]
        values = _frontier(left, c.candidate, c, compute, "candidate_loss", colour)
        m = values["multiplier"]
        finite = np.isfinite(m["value"])
        # user29: a solid m(C) line ran on where the text called m unidentified (its interval unbounded above)
        unbounded = np.zeros(len(compute), bool) if m["lower"] is None else ~np.isfinite(m["upper"])
        unbounded |= _on_floor(c, compute, m["value"], reads=True)  # as the table's rows (`floor_sides`)
        unbounded |= bent_at(c.baseline, compute) | bent_at(c.candidate, compute)  # and `mark_bent`'s
        if m["lower"] is not None:  # an interval holding 1 widely: no finding, as the answer says (user37: drawn
            unbounded |= holds_one_widely(
                m["lower"], m["upper"]
            )  # solid with its band where the text said unidentified)
        label, style_ = (f"{_name(c.candidate.source)} (m(C) unidentified)", "--") if c.unidentified else (None, "-")
        solid = np.where(finite & ~unbounded, m["value"], np.nan)
        right.plot(
            compute, solid, color=colour, linewidth=1.6, linestyle=style_, label=label or _name(c.candidate.source)
        )
        if (finite & unbounded).any() and not c.unidentified:  # joined to the solid line on both sides
            edges = unbounded | np.r_[unbounded[1:], False] | np.r_[False, unbounded[:-1]]
            said = None if dashed else "m(C) unidentified here"  # in the legend once
            dashed = True
            loose = np.where(finite & edges, m["value"], np.nan)
            right.plot(compute, loose, color=colour, linewidth=1.2, linestyle="--", label=said)
        if m["lower"] is not None:
            upper = np.where(np.isfinite(m["upper"]) & ~unbounded, m["upper"], np.nan)
            right.fill_between(compute, m["lower"], upper, color=colour, alpha=BAND_ALPHA, linewidth=0)
    right.axhline(1.0, color="0.3", linestyle=":", linewidth=1.0)
    lo, hi = first.shared_range if first.overlap else (compute[-1], compute[-1])  # no overlap: all extrapolated
    shade = "beyond the shared fitted range" if first.overlap else "no shared fitted range: laws extrapolated"
    for ax in (left, right):  # the shade in the legend once (user25: a grey figure, unexplained)
        ax.set_xlim(compute[0], compute[-1])
        spans = [(start, stop) for start, stop in ((compute[0], lo), (hi, compute[-1])) if stop > start]
        for k, (start, stop) in enumerate(spans):
            ax.axvspan(start, stop, color="0.5", alpha=0.12, linewidth=0, label=None if k else shade)
    style(left, "loss frontiers")
    style(right, "effective compute multiplier of the candidate")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
    legend(left, loc="upper right")
    legend(right, loc="best")
    log_axes(left, flops_label, plain_label)
    log_axes(right, flops_label, plain_label)
    left.set_xlabel(LABEL_COMPUTE)
    left.set_ylabel(loss_label(first.baseline.loss_unit))
    right.set_xlabel(LABEL_COMPUTE)
    right.set_ylabel("m(C): baseline compute / candidate compute")
    return fig


def _frontier(ax, side, comparison: Comparison, compute, key: str, colour) -> dict:
    """Draw one source's frontier and band (from ``comparison``'s evaluation) and its best run per budget."""
    values = evaluate(comparison.baseline.fit, comparison.candidate.fit, compute, comparison.level)
    curve = values[key]
    role = "baseline" if key == "baseline_loss" else "candidate"
    floor = _on_floor(comparison, compute, values["multiplier"]["value"], role=role)  # dotted, no band: unidentified
    floor |= bent_at(side, compute)
    ax.plot(
        compute,
        np.where(floor, np.nan, curve["value"]),
        color=colour,
        linewidth=1.6,
        label=f"{role}: {_name(side.source)}",
    )
    if floor.any():
        edges = floor | np.r_[floor[1:], False] | np.r_[False, floor[:-1]]
        ax.plot(
            compute,
            np.where(edges, curve["value"], np.nan),
            color=colour,
            linewidth=1.2,
            linestyle=":",
            label=None if SAID in ax.get_legend_handles_labels()[1] else SAID,
        )
    if curve["lower"] is not None:
        lower, upper = (np.where(floor, np.nan, curve[b]) for b in ("lower", "upper"))
        ax.fill_between(compute, lower, upper, color=colour, alpha=BAND_ALPHA, linewidth=0)
    fit = side.fit
    c = flops_6nd(np.asarray(fit.n), np.asarray(fit.d))
    best = {}
    for budget, loss in zip(_nearest_budget(c, side.budgets), fit.loss):
        best[budget] = min(loss, best.get(budget, np.inf))
    ax.scatter(
        list(best), list(best.values()), color=colour, s=22, marker="o", edgecolors="black", linewidths=0.4, zorder=3
    )
    return values


SAID = "loss unidentified here (rests on an unidentified E, or a run off the law bends it)"


def _on_floor(c: Comparison, compute, m, role: str = "", reads: bool = False) -> np.ndarray:
    """Where a side's loss (``role``'s), or m(C) (``reads``), rests on an unidentified E (`floor_sides`)."""
    sides = [floor_sides(c.baseline, c.candidate, float(x), float(mx)) for x, mx in zip(compute, m)]
    return np.array([bool(read) if reads else role in losses for losses, read in sides], dtype=bool)


def _nearest_budget(compute, budgets) -> np.ndarray:
    return np.asarray(budgets, dtype=float)[nearest_budget(compute, budgets)]


def _name(source: str, width: int = 40) -> str:
    return source if len(source) <= width else "…" + source[-(width - 1) :]
