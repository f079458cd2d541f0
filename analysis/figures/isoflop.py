"""IsoFLOP profiles: loss against N at each budget, approach 2's parabolas and their minima."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.fit import (
    band_phrase,
    drawable,
    drawn_phrase,
    fitted_phrase,
    floor_phrase,
    floor_unidentified,
    minimum_legend,
)
from analysis.describe.numbers import count_label
from analysis.figures.axes import (
    DPI,
    MAX_LEGEND_BUDGETS,
    WIDE,
    FigureUnavailable,
    budget_colorbar,
    budget_colours,
    limits,
    log_axes,
    loss_label,
    many_budgets,
    ring_outliers,
    style,
)
from analysis.fits.isoflop import budget_profile, in_law
from analysis.fits.results import FitReport, Parabola
from analysis.fits.vertex_intervals import VERTEX_DRAWS, n_opt_intervals
from analysis.sources.schema import RunTable
from scaling.flops import tokens_6nd

LONE = "no law across budgets (approach 2 needs 2 or more)"
PARABOLA_REACH = 30.0  # a parabola is drawn out to its minimum only within this factor of the trained sizes


def caption(report: FitReport | None) -> str:
    """What `isoflop_profiles` shows."""
    return (
        f"At each budget (one colour per budget: named in the legend, or on a colour bar when there are more "
        f"than {MAX_LEGEND_BUDGETS}), loss against N with the parabola in ln N fitted by "
        f"{fitted_phrase(report, 2)} (dotted where it is extended beyond the trained sizes to reach its minimum) "
        "and its minimum (star; hollow when left out of the law N_opt ∝ C^a: outside the trained sizes, an "
        "extrapolation of the parabola, or inside them with an unbounded N_opt) "
        f"with the bootstrap interval of N_opt ({band_phrase(report, 2).removeprefix('its ')}; a triangle marks "
        f"an interval that runs off the axes; none where the fit calls N_opt unidentified). Dashed: {drawn_phrase(report, 3, 'L(N, C/6N) at the same budget')}{floor_phrase(report)}. "
        "Grey crosses: runs of budgets without a parabola."
        + (
            f" One budget only: its parabola and minimum, {LONE}."
            if report is not None and report.isoflop is None
            else ""
        )
    )


def isoflop_profiles(report: FitReport, table: RunTable | None = None) -> Figure:
    """Loss against N at each budget (approach 2): the runs, the fitted parabola in ln N (solid over
    the trained sizes, dotted where extended to a minimum outside them), its minimum (filled star
    in the law, hollow when left out of it) with the bootstrap interval of N_opt; approach 3's
    L(N, C/(6N)) at the same budget, dashed. Budgets without a parabola are drawn as grey crosses;
    runs flagged as outliers are ringed in red."""
    fit = report.isoflop
    profiles = fit.profiles if fit is not None else [p for p in [_lone_profile(report, table)] if p is not None]
    if not profiles:
        raise FigureUnavailable(
            "approach 2 (IsoFLOP parabolas) was not fitted: " + report.skipped.get("2", "not asked for")
        )
    fig = Figure(figsize=WIDE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    colours = budget_colours(p.budget for p in profiles)
    many = many_budgets(colours)  # then a colour bar names the budgets, not a legend entry each
    shown_n, shown_loss = [], []
    parametric = drawable(report.parametric)
    for p in profiles:
        _profile(ax, p, colours[p.budget], parametric, shown_n, shown_loss, named=not many)
    if many:
        _budget_key(fig, ax, list(colours))
    if table is not None:
        _other_runs(ax, table, profiles, shown_n, shown_loss)
    ring_outliers(ax, report, {o.run_id: (o.n, o.loss) for o in report.outliers})
    shown_n += [o.n for o in report.outliers]
    shown_loss += [o.loss for o in report.outliers]
    if parametric is not None:  # one legend entry for all the dashed lines
        label = "approach 3: L(N, C/6N) at each budget" + (
            " (E unidentified)" if floor_unidentified(parametric) else ""
        )
        ax.plot([], [], color="0.3", linestyle="--", linewidth=1.0, label=label)
    ax.set_xscale("log")
    ax.set_xlim(*limits(shown_n, 1.5))
    _mark_cut_intervals(ax, [p for p in profiles if p.n_opt_interval is not None and not p.n_opt_unidentified], colours)
    lo, hi = min(shown_loss), max(shown_loss)
    ax.set_ylim(lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
    ax.set_xlabel("parameters N")
    ax.set_ylabel(loss_label(report.loss_unit))
    title = "IsoFLOP profiles (approach 2): loss against model size at fixed compute"
    style(ax, title if fit is not None else f"IsoFLOP profile of one budget: {LONE}")
    handles, labels = ax.get_legend_handles_labels()  # beside the axes: inside, any place hid some run
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    log_axes(ax, count_label)
    return fig


def _budget_key(fig, ax, budgets) -> None:
    """For many budgets: a colour bar of the budgets and one legend entry for all the runs, parabolas and minima."""
    ax.plot(
        [],
        [],
        color="0.45",
        marker="o",
        markeredgecolor="black",
        linewidth=1.8,
        label="each budget's runs and parabola",
    )
    ax.scatter([], [], marker="*", s=160, color="0.45", edgecolors="black", linewidths=1.2, label="each budget's N_opt")
    budget_colorbar(fig, ax, budgets)


def _profile(ax, p, colour, parametric, shown_n: list, shown_loss: list, named: bool = True) -> None:
    """One budget: its runs, its parabola (dotted beyond the trained sizes), its minimum, and approach
    3's L(N, C/6N) dashed; what it drew is added to ``shown_n`` and ``shown_loss`` (the axes' limits).
    ``named``: the parabola has a legend entry (budget and N_opt)."""
    n = np.asarray(p.n)
    ax.scatter(n, p.loss, color=colour, s=30, edgecolors="black", linewidths=0.5, zorder=3, gid=f"points:{p.budget:g}")
    trained = np.geomspace(n.min(), n.max(), 60)
    ax.plot(
        trained,
        p(trained),
        color=colour,
        linewidth=1.8,
        gid=f"parabola:{p.budget:g}",
        label=minimum_legend(p) if named else None,
    )
    reachable = n.min() / PARABOLA_REACH <= p.n_opt <= n.max() * PARABOLA_REACH
    if not p.inside_range and reachable:  # dotted: the parabola extended from the trained sizes to its minimum
        beyond = np.geomspace(p.n_opt, n.min(), 30) if p.n_opt < n.min() else np.geomspace(n.max(), p.n_opt, 30)
        ax.plot(beyond, p(beyond), color=colour, linewidth=1.2, linestyle=":")
    if reachable:
        _minimum_marker(ax, p, colour)
        shown_n.append(p.n_opt)
        shown_loss.append(p.loss_opt)
    shown_n += list(n)
    shown_loss += list(p.loss)
    if parametric is not None:
        grid = np.geomspace(
            min(n.min(), p.n_opt if reachable else n.min()), max(n.max(), p.n_opt if reachable else n.max()), 60
        )
        ax.plot(
            grid,
            parametric.predict(grid, tokens_6nd(p.compute, grid)),
            color=colour,
            linewidth=1.0,
            linestyle="--",
            alpha=0.9,
            gid=f"approach3:{p.budget:g}",
        )


def _lone_profile(report: FitReport, table: RunTable | None) -> Parabola | None:
    """The parabola of a table's only budget, which approach 2 refuses (no law across one budget) while `scaling fit`
    gives its minimum in the refusal (`isoflop._lone_minimum`: the same parabola and intervals, at the default seed;
    user34: a one-budget table, often a researcher's first IsoFLOP, drew no profile)."""
    if table is None or len(table.budgets) != 1:
        return None
    budget = table.budgets[0]
    profile, _ = budget_profile(table, budget, np.flatnonzero(table.runs["budget"].to_numpy() == budget))
    if profile is not None:
        boot = report.parametric.bootstrap if report.parametric is not None else None
        n_opt_intervals([profile], VERTEX_DRAWS, 0, boot.level if boot is not None else 0.95)
    return profile


def _other_runs(ax, table: RunTable, profiles: list[Parabola], shown_n: list, shown_loss: list) -> None:
    """The runs of budgets without a parabola, as grey crosses."""
    fitted = {p.budget for p in profiles}
    other = table.runs[~table.runs["budget"].isin(fitted)]
    if len(other):
        ax.scatter(
            other["N"],
            other["loss"],
            marker="x",
            color="0.5",
            s=26,
            zorder=2,
            label="runs of budgets without a parabola",
        )
        shown_n += list(other["N"])
        shown_loss += list(other["loss"])


def _mark_cut_intervals(ax, profiles, colours) -> None:
    """A triangle at the edge of the axes where an N_opt interval runs beyond it."""
    x_lo, x_hi = ax.get_xlim()
    for p in profiles:
        lower, upper = p.n_opt_interval
        for cut, edge, marker in ((lower < x_lo, x_lo, "<"), (upper > x_hi, x_hi, ">")):
            if cut:
                ax.plot(
                    [edge], [p.loss_opt], marker=marker, color=colours[p.budget], markersize=7, clip_on=False, zorder=6
                )


def _minimum_marker(ax, p, colour) -> None:
    """N_opt of one parabola: a star (hollow when left out of the law: `in_law`) and its interval, unless
    the fit calls it unidentified (then the interval is not a statement about N_opt)."""
    if p.n_opt_interval is not None and not p.n_opt_unidentified:
        lo, hi = p.n_opt_interval
        xerr = [[max(p.n_opt - lo, 0.0)], [max(hi - p.n_opt, 0.0)]]
        ax.errorbar([p.n_opt], [p.loss_opt], xerr=xerr, color=colour, linewidth=1.0, capsize=3, zorder=4, fmt="none")
    ax.scatter(
        [p.n_opt],
        [p.loss_opt],
        marker="*",
        s=160,
        zorder=5,
        edgecolors="black" if in_law(p) else colour,  # as `optimal_allocation` draws the minima (user34)
        facecolors=colour if in_law(p) else "white",
        linewidths=1.2,
        gid=f"minimum:{p.budget:g}",
    )
