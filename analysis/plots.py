"""The figures of a sweep and its fits: one function per figure, each returning a matplotlib Figure.

    loss_vs_compute(table, report)   every run's loss curve against C, coloured by N; the envelope
                                     and approach 1's law L(C) with its band; approach 3's frontier
    isoflop_profiles(report, table)  loss against N per budget, approach 2's parabolas and minima
    optimal_allocation(report)       N_opt(C) and D_opt(C): approach 2 minima with intervals, the
                                     fitted power laws with bands, the Chinchilla preset for reference
    loss_landscape(report)           contours of approach 3's L(N, D), the runs, the iso-FLOP lines
                                     C = 6·N·D and the compute-optimal path
    residuals(report)                observed against fitted loss, per approach
    training_curves(table)           validation loss against tokens, one panel per budget

`make_figures(table, report)` draws every figure the data supports and says why each other one
is missing; `figure_bytes(fig, "png")` renders one.

Conventions: log axes for compute, parameters and tokens, labelled 1e12 / 10M / 1B (never 10^x
offsets); units in the axis labels (FLOPs, parameters, tokens, nats/token). Model size N is
coloured with viridis (perceptually uniform, monotone in lightness, so it survives greyscale
printing and the common colour-vision deficiencies; van der Walt & Smith 2015), cut at 90% so
its palest yellow stays visible on white; categories (approaches, reference laws) use the
Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"). Bands are the fit's bootstrap
percentile intervals, evaluated along the curve (`analysis.optimal.law_from_fit`).
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap, LogNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from analysis import laws  # noqa: E402
from analysis.optimal import EXTRAPOLATION_FACTOR, PRESETS, law_from_fit  # noqa: E402
from analysis.results import FitReport  # noqa: E402
from analysis.table import RunTable  # noqa: E402
from scaling.flops import flops_6nd, tokens_6nd

# Okabe & Ito 2008: eight colours distinguishable under the common colour-vision deficiencies.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
APPROACH_COLOUR = {1: OKABE_ITO["green"], 2: OKABE_ITO["blue"], 3: OKABE_ITO["vermillion"]}
REFERENCE_COLOUR = OKABE_ITO["black"]
SIZE_CMAP = ListedColormap(colormaps["viridis"](np.linspace(0.0, 0.9, 256)), name="viridis_to_90")
BAND_ALPHA = 0.18
DPI = 150
WIDE = (7.5, 4.8)  # inches: 1125 × 720 px at DPI

LABEL_COMPUTE = "compute C (FLOPs)"
LABEL_LOSS = "validation loss (nats/token)"
LABEL_TOKENS = "tokens D"


class FigureUnavailable(Exception):
    """The data or the fits cannot support this figure; the message says why (one line)."""


# ---------------------------------------------------------------- tick labels
def count_label(value: float) -> str:
    """A count as 950, 10k, 2.5M, 1B, 3T (k = 1e3, M = 1e6, B = 1e9, T = 1e12); 1e15 and up as `flops_label`."""
    if value >= 1e15:
        return flops_label(value)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def flops_label(value: float) -> str:
    """FLOPs as 1e15, 3e12, 2.5e11: mantissa (3 significant digits at most) and power of ten."""
    if not (math.isfinite(value) and value > 0):
        return f"{value:g}"
    exponent = math.floor(math.log10(value))
    mantissa = round(value / 10.0**exponent, 2)
    if mantissa >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:g}e{exponent}"


def plain_label(value: float) -> str:
    """A loss as 1.5, 2, 3."""
    return f"{value:.3g}"


def log_ticks(lo: float, hi: float) -> list[float] | None:
    """Labelled tick positions for a log axis from ``lo`` to ``hi``: None (powers of ten only) over
    more than 3.2 decades; else 1-2-5 (over 1.3 decades), 1-2-3-5 (over 0.6) or finer mantissas,
    and a few evenly spaced values when the axis spans too little for any of those."""
    span = math.log10(hi / lo)
    if span > 3.2:
        return None
    mantissas = (1, 2, 5) if span > 1.3 else (1, 2, 3, 5) if span > 0.6 else (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8)
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in mantissas]
    ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    if len(ticks) < 3:
        ticks = [t for t in MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]
    return ticks


def _finish_log_axis(axis, label) -> None:
    """Freeze the axis' current limits and label it with ``label`` (e.g. `count_label`) at `log_ticks`."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = log_ticks(lo, hi)
    axis.set_major_locator(LogLocator(10, numticks=9) if ticks is None else FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    axis.set_minor_locator(LogLocator(10, subs=np.arange(2, 10), numticks=100))
    axis.set_minor_formatter(NullFormatter())
    (axis.axes.set_xlim if axis.axis_name == "x" else axis.axes.set_ylim)(lo, hi)


def _log_axes(ax, x_label, y_label=None) -> None:
    """Log scale on x (and on y when ``y_label`` is given): call after everything is drawn."""
    _finish_log_axis(ax.xaxis, x_label)
    if y_label is not None:
        _finish_log_axis(ax.yaxis, y_label)


def _size_colorbar(fig: Figure, axes, norm: LogNorm, label: str = "parameters N"):
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=SIZE_CMAP), ax=axes, pad=0.02)
    bar.set_label(label)
    ticks = log_ticks(norm.vmin, norm.vmax) or [
        10.0**e for e in range(math.ceil(math.log10(norm.vmin)), math.floor(math.log10(norm.vmax)) + 1)
    ]
    bar.set_ticks(ticks)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: count_label(v)))
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return bar


def _size_norm(n_values) -> LogNorm:
    n = np.asarray(n_values, dtype=float)
    lo, hi = float(n.min()), float(n.max())
    return LogNorm(lo / 1.2, hi * 1.2) if lo == hi else LogNorm(lo, hi)


def _budget_colours(budgets) -> dict[float, tuple]:
    """One colour per budget, ordered along the truncated viridis by log budget."""
    budgets = sorted(set(float(b) for b in budgets))
    positions = np.linspace(0.0, 1.0, len(budgets)) if len(budgets) > 1 else [0.0]
    return {b: SIZE_CMAP(p) for b, p in zip(budgets, positions)}


def _style(ax, title: str | None = None) -> None:
    ax.grid(True, which="major", color="0.85", linewidth=0.6)
    ax.set_axisbelow(True)
    if title:
        ax.set_title(title, fontsize=11)


def _legend(ax, **kwargs) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, framealpha=0.92, **kwargs)


def _limits(values, pad: float = 1.25) -> tuple[float, float]:
    values = np.asarray([v for v in np.ravel(values) if np.isfinite(v) and v > 0], dtype=float)
    return float(values.min()) / pad, float(values.max()) * pad


# ---------------------------------------------------------------- laws along a curve, with bands
def law_along(report: FitReport, approach: int, compute) -> dict[str, np.ndarray]:
    """N_opt, D_opt and (when the law predicts it) the optimal loss of one approach's law at each
    budget in ``compute``, with the lower/upper ends of their bootstrap intervals (NaN without)."""
    law = law_from_fit(report, f"approach {approach}", approach)
    with np.errstate(all="ignore"):  # a bootstrap sample with an overflowed A gives NaN, which intervals skip
        allocations = [law.allocate(float(c)) for c in compute]
    out: dict[str, np.ndarray] = {}
    for key in ("n", "d", "loss"):
        estimates = [getattr(a, key) for a in allocations]
        if any(e is None for e in estimates):
            continue
        out[key] = np.array([e.value for e in estimates])
        out[f"{key}_lower"] = np.array([np.nan if e.lower is None else e.lower for e in estimates])
        out[f"{key}_upper"] = np.array([np.nan if e.upper is None else e.upper for e in estimates])
    return out


def _band(ax, x, curve: dict, key: str, colour, label: str | None) -> None:
    lower, upper = curve[f"{key}_lower"], curve[f"{key}_upper"]
    if np.isfinite(lower).any():
        ax.fill_between(x, lower, upper, color=colour, alpha=BAND_ALPHA, linewidth=0, label=label)


def _interval_label(report: FitReport, approach: int) -> str:
    fit = {f.approach: f for f in report.fits}[approach]
    return f"{fit.bootstrap.level:.0%} bootstrap interval" if fit.bootstrap else ""


# ---------------------------------------------------------------- 1. loss against compute
def loss_vs_compute(table: RunTable, report: FitReport | None = None) -> Figure:
    """Every run's validation-loss curve against compute C = 6·N·(tokens so far), coloured by N,
    its final point as a dot; approach 1's envelope points and its law L(C) (with a floor E when
    fitted) with the bootstrap band over the fitted compute range; approach 3's loss on the
    compute-optimal frontier L(N_opt(C), D_opt(C)) for comparison."""
    runs = table.runs
    fig = Figure(figsize=WIDE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    norm = _size_norm(runs["N"])
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
    if report is not None and report.envelope is not None:
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
            label="envelope: lowest loss per compute bin",
            gid="envelope",
        )
        c = np.geomspace(*env.diagnostics["compute_range"], 80)
        curve = law_along(report, 1, c)
        law = env.loss_law_with_floor or env.loss_law
        formula = f"L = {law.coefficient:.3g}·C^{law.exponent:.3g}"
        if law.floor > 1e-3 * min(env.loss):  # else the floor E is indistinguishable from 0
            formula = f"L = {law.floor:.3g} + {formula[4:]}"
        ax.plot(
            c,
            curve["loss"],
            color=APPROACH_COLOUR[1],
            linewidth=2.2,
            zorder=5,
            label=f"approach 1: {formula}",
            gid="fit:approach1",
        )
        _band(ax, c, curve, "loss", APPROACH_COLOUR[1], _interval_label(report, 1))
    if report is not None and report.parametric is not None:
        c = np.geomspace(runs["C"].min(), runs["C"].max(), 80)
        frontier = law_along(report, 3, c)
        ax.plot(
            c,
            frontier["loss"],
            color=APPROACH_COLOUR[3],
            linewidth=1.8,
            linestyle="--",
            zorder=5,
            label="approach 3: loss at the compute-optimal N, D",
            gid="fit:approach3",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(*_limits(np.concatenate([runs["loss"], [] if table.curves is None else table.curves["loss"]]), 1.05))
    ax.set_xlabel(LABEL_COMPUTE)
    ax.set_ylabel(LABEL_LOSS)
    _style(ax, f"Loss against compute ({len(runs)} runs)")
    _legend(ax, loc="upper right")
    _size_colorbar(fig, ax, norm)
    _log_axes(ax, flops_label, plain_label)
    return fig


# ---------------------------------------------------------------- 2. IsoFLOP profiles
PARABOLA_REACH = 30.0  # a parabola is drawn out to its minimum only within this factor of the trained sizes


def isoflop_profiles(report: FitReport, table: RunTable | None = None) -> Figure:
    """Loss against N at each budget (approach 2): the runs, the fitted parabola in ln N (solid over
    the trained sizes, dotted where extended to a minimum outside them), its minimum (filled star
    inside the trained sizes, hollow outside) with the bootstrap interval of N_opt; approach 3's
    L(N, C/(6N)) at the same budget, dashed. Budgets without a parabola are drawn as grey crosses."""
    fit = report.isoflop
    if fit is None:
        raise FigureUnavailable(
            "approach 2 (IsoFLOP parabolas) was not fitted: " + report.skipped.get("2", "not asked for")
        )
    fig = Figure(figsize=WIDE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    colours = _budget_colours(p.budget for p in fit.profiles)
    shown_n, shown_loss = [], []
    for p in fit.profiles:
        colour = colours[p.budget]
        n = np.asarray(p.n)
        ax.scatter(
            n, p.loss, color=colour, s=30, edgecolors="black", linewidths=0.5, zorder=3, gid=f"points:{p.budget:g}"
        )
        trained = np.geomspace(n.min(), n.max(), 60)
        ax.plot(
            trained,
            p(trained),
            color=colour,
            linewidth=1.8,
            gid=f"parabola:{p.budget:g}",
            label=f"C = {flops_label(p.budget)}: N_opt = {count_label(p.n_opt)}"
            + ("" if p.inside_range else " (outside the trained sizes)"),
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
        if report.parametric is not None:
            grid = np.geomspace(
                min(n.min(), p.n_opt if reachable else n.min()), max(n.max(), p.n_opt if reachable else n.max()), 60
            )
            ax.plot(
                grid,
                report.parametric.predict(grid, tokens_6nd(p.compute, grid)),
                color=colour,
                linewidth=1.0,
                linestyle="--",
                alpha=0.9,
                gid=f"approach3:{p.budget:g}",
            )
    if table is not None:
        fitted = {p.budget for p in fit.profiles}
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
    if report.parametric is not None:  # one legend entry for all the dashed lines
        ax.plot([], [], color="0.3", linestyle="--", linewidth=1.0, label="approach 3: L(N, C/6N) at each budget")
    ax.set_xscale("log")
    ax.set_xlim(*_limits(shown_n, 1.5))
    _mark_cut_intervals(ax, [p for p in fit.profiles if p.n_opt_interval is not None], colours)
    lo, hi = min(shown_loss), max(shown_loss)
    ax.set_ylim(lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
    ax.set_xlabel("parameters N")
    ax.set_ylabel(LABEL_LOSS)
    _style(ax, "IsoFLOP profiles (approach 2): loss against model size at fixed compute")
    _legend(ax, loc="best")  # "upper center" hid a run of the smallest budget
    _log_axes(ax, count_label)
    return fig


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
    """N_opt of one parabola: a star (hollow when outside the trained sizes) and its interval."""
    xerr = None
    if p.n_opt_interval is not None:
        lo, hi = p.n_opt_interval
        xerr = [[max(p.n_opt - lo, 0.0)], [max(hi - p.n_opt, 0.0)]]
    ax.errorbar([p.n_opt], [p.loss_opt], xerr=xerr, color=colour, linewidth=1.0, capsize=3, zorder=4, fmt="none")
    ax.scatter(
        [p.n_opt],
        [p.loss_opt],
        marker="*",
        s=160,
        zorder=5,
        edgecolors=colour if not p.inside_range else "black",
        facecolors=colour if p.inside_range else "white",
        linewidths=1.2,
        gid=f"minimum:{p.budget:g}",
    )


# ---------------------------------------------------------------- 3. N_opt and D_opt against C
REFERENCE_PRESET = "chinchilla"
ALLOCATION_REACH = 1e3  # the allocation figure runs to this factor beyond the largest budget


def optimal_allocation(report: FitReport) -> Figure:
    """N_opt(C) and D_opt(C) = C/(6·N_opt): approach 2's per-budget minima with their bootstrap
    intervals (hollow when a minimum lies outside the trained sizes) and each fitted law with its
    band, from the smallest budget to `ALLOCATION_REACH` beyond the largest; the shaded region lies
    more than 10× beyond the largest run (extrapolation). The Chinchilla preset (Hoffmann et al.
    2022, Table 3: N_opt = sqrt(C/120), 20 tokens per parameter) is drawn for reference."""
    if not report.fits:
        raise FigureUnavailable("no approach was fitted")
    largest = max(f.fitted_compute_max for f in report.fits)
    smallest = min(_smallest_compute(f) for f in report.fits)
    c = np.geomspace(smallest / 2.0, largest * ALLOCATION_REACH, 120)
    fig = Figure(figsize=(10.5, 5.4), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 2)
    reference = PRESETS[REFERENCE_PRESET]()
    reference_n = np.array([reference.allocate(float(x)).n.value for x in c])
    shown = {"n": list(reference_n), "d": list(tokens_6nd(c, reference_n))}
    for fit in report.fits:
        curve = law_along(report, fit.approach, c)
        exponent = fit.estimates["a"]
        label = f"approach {fit.approach}: N_opt ∝ C^{exponent.value:.2f}"
        if exponent.interval is not None:
            label += f" [{exponent.lower:.2f}, {exponent.upper:.2f}]"
        for ax, key in zip(axes, ("n", "d")):
            ax.plot(
                c,
                curve[key],
                color=APPROACH_COLOUR[fit.approach],
                linewidth=2.0,
                label=label,
                gid=f"fit:approach{fit.approach}",
            )
            _band(ax, c, curve, key, APPROACH_COLOUR[fit.approach], None)
            shown[key] += list(curve[key])
    if report.isoflop is not None:
        _isoflop_minima(axes, report.isoflop, shown)
    for ax, key in zip(axes, ("n", "d")):
        ax.plot(
            c,
            reference_n if key == "n" else tokens_6nd(c, reference_n),
            color=REFERENCE_COLOUR,
            linestyle="--",
            linewidth=1.2,
            label="Chinchilla (Hoffmann et al. 2022): 20 tokens/parameter",
            gid="reference",
        )
        ax.axvspan(
            largest * EXTRAPOLATION_FACTOR,
            c[-1],
            color="0.92",
            zorder=0,
            label=f"extrapolation: > {EXTRAPOLATION_FACTOR:g}× the largest run",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(c[0], c[-1])
        ax.set_ylim(*_limits(shown[key], 2.0))
        ax.set_xlabel(LABEL_COMPUTE)
        ax.set_ylabel("compute-optimal parameters N_opt" if key == "n" else "compute-optimal tokens D_opt")
        _style(ax, "Model size" if key == "n" else "Training tokens")
        _log_axes(ax, flops_label, count_label)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig


def _smallest_compute(fit) -> float:
    if fit.approach == 1:
        return float(fit.diagnostics["compute_range"][0])
    if fit.approach == 2:
        return min(p.compute for p in fit.profiles)
    return float(min(flops_6nd(n, d) for n, d in zip(fit.n, fit.d)))


def _isoflop_minima(axes, fit, shown) -> None:
    for inside in (True, False):
        profiles = [p for p in fit.profiles if p.inside_range == inside]
        if not profiles:
            continue
        compute = np.array([p.compute for p in profiles])
        n_opt = np.array([p.n_opt for p in profiles])
        lower, upper = np.array([p.n_opt_interval or [p.n_opt, p.n_opt] for p in profiles]).T
        d_opt = tokens_6nd(compute, n_opt)
        n_err = np.maximum([n_opt - lower, upper - n_opt], 0.0)
        # D = C/(6N): the upper end of N's interval is the lower end of D's
        d_err = np.maximum([d_opt - tokens_6nd(compute, upper), tokens_6nd(compute, lower) - d_opt], 0.0)
        label = "approach 2: parabola minima" + ("" if inside else " outside the trained sizes")
        for ax, y, err, key in ((axes[0], n_opt, n_err, "n"), (axes[1], d_opt, d_err, "d")):
            bars = ax.errorbar(
                compute,
                y,
                yerr=err,
                fmt="o",
                markersize=6,
                capsize=3,
                color=APPROACH_COLOUR[2],
                markerfacecolor=APPROACH_COLOUR[2] if inside else "white",
                zorder=5,
                label=label,
            )
            bars.lines[0].set_gid("minima" if inside else "minima:outside")
            shown[key] += list(y)


# ---------------------------------------------------------------- 4. the fitted L(N, D)
def loss_landscape(report: FitReport) -> Figure:
    """Contours of approach 3's L(N, D) = E + A/N^α + B/D^β over the trained N and D (×/÷ 3), the
    runs coloured by their observed loss on the same scale (a run that matches its background is
    fitted well), the iso-FLOP lines D = C/(6N) of the budgets, the compute-optimal path
    (N_opt(C), D_opt(C)) and, for reference, Chinchilla's 20 tokens per parameter."""
    fit = report.parametric
    if fit is None:
        raise FigureUnavailable(
            "approach 3 (parametric L(N, D)) was not fitted: " + report.skipped.get("3", "not asked for")
        )
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
    c_runs = flops_6nd(n_runs, d_runs)
    for c in _distinct_budgets(c_runs):
        ax.plot(n_grid, tokens_6nd(c, n_grid), color="white", linestyle=":", linewidth=1.0)
        smallest = n_runs[np.abs(c_runs / c - 1.0) < 0.05].min()  # label the line just before its first run
        _label_along(ax, n_grid, tokens_6nd(c, n_grid), f"C = {flops_label(c)}", near_x=smallest / 1.8)
    c_path = np.geomspace(flops_6nd(n_grid[0], d_grid[0]), flops_6nd(n_grid[-1], d_grid[-1]), 200)
    n_opt, d_opt = laws.chinchilla_allocation(c_path, *(fit.params[k] for k in ("A", "B", "alpha", "beta")))
    ax.plot(
        n_opt,
        d_opt,
        color=OKABE_ITO["orange"],
        linewidth=2.4,
        label="compute-optimal N, D (approach 3)",
        gid="optimal-path",
    )
    ax.plot(
        n_grid, 20.0 * n_grid, color="black", linestyle="--", linewidth=1.2, label="20 tokens/parameter (Chinchilla)"
    )
    ax.scatter(
        n_runs,
        d_runs,
        c=loss_runs,
        cmap=cmap,
        norm=norm,
        s=64,
        edgecolors="white",
        linewidths=0.9,
        zorder=5,
        gid="runs",
    )
    ax.scatter([], [], color="0.6", s=64, edgecolors="white", linewidths=0.9, label="runs (colour: observed loss)")
    ax.set_xlabel("parameters N")
    ax.set_ylabel(LABEL_TOKENS)
    p = fit.params
    _style(ax, f"Fitted L(N, D) = {p['E']:.3g} + {p['A']:.3g}/N^{p['alpha']:.3g} + {p['B']:.3g}/D^{p['beta']:.3g}")
    ax.grid(False)
    _legend(ax, loc="upper right")
    bar = fig.colorbar(filled, ax=ax, pad=0.02)
    bar.set_label(LABEL_LOSS)
    _log_axes(ax, count_label, count_label)
    return fig


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


def _distinct_budgets(compute) -> list[float]:
    """The compute values of the runs, merged when within 5% of each other (one per budget)."""
    merged: list[float] = []
    for c in np.sort(np.asarray(compute, dtype=float)):
        if not merged or c > merged[-1] * 1.05:
            merged.append(float(c))
    return merged


# ---------------------------------------------------------------- 5. residuals
def residuals(report: FitReport) -> Figure:
    """Observed against fitted loss, in % of the fitted value, one panel per approach:
    approach 1 the envelope points against L(C); approach 2 each run against its budget's parabola;
    approach 3 each run against L(N, D). Points scattered evenly around 0 mean the law's shape fits."""
    if not report.fits:
        raise FigureUnavailable("no approach was fitted")
    fig = Figure(figsize=(4.0 * len(report.fits) + 1.0, 4.2), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(report.fits), sharey=True))
    for ax, fit in zip(axes, report.fits):
        if fit.approach == 1:
            key = "loss_law_with_floor" if fit.loss_law_with_floor is not None else "loss_law"
            percent = 100.0 * (np.exp(np.asarray(fit.residuals[key])) - 1.0)  # log(obs) − log(fit)
            ax.scatter(fit.compute, percent, color=APPROACH_COLOUR[1], s=26, edgecolors="black", linewidths=0.5)
            ax.set_xlabel(LABEL_COMPUTE)
            ax.set_xscale("log")
            label = flops_label
            title = "approach 1: envelope against L(C)"
        else:
            n, percent, budget = _run_residuals(fit)
            colours = _budget_colours(budget)
            for b in sorted(set(budget)):
                pick = budget == b
                ax.scatter(
                    n[pick],
                    percent[pick],
                    color=colours[b],
                    s=26,
                    edgecolors="black",
                    linewidths=0.5,
                    label=f"C = {flops_label(b)}",
                )
            ax.set_xlabel("parameters N")
            ax.set_xscale("log")
            label = count_label
            title = "approach 2: runs against parabolas" if fit.approach == 2 else "approach 3: runs against L(N, D)"
        ax.axhline(0.0, color="0.3", linewidth=0.8)
        _style(ax, title)
        _log_axes(ax, label)
    axes[0].set_ylabel("observed − fitted loss (% of fitted)")
    handles, labels = axes[-1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
    return fig


def _run_residuals(fit):
    """(N, residual in % of the fitted loss, budget) per run for approach 2 or 3."""
    if fit.approach == 2:
        n = np.concatenate([p.n for p in fit.profiles])
        observed = np.concatenate([p.loss for p in fit.profiles])
        fitted = np.concatenate([p(p.n) for p in fit.profiles])
        budget = np.concatenate([[p.budget] * len(p.n) for p in fit.profiles])
        return n, 100.0 * (observed / fitted - 1.0), budget
    n, d = np.asarray(fit.n), np.asarray(fit.d)
    percent = 100.0 * (np.exp(-np.asarray(fit.residuals)) - 1.0)  # residuals are log(predicted) − log(observed)
    return n, percent, np.array(_budget_of(flops_6nd(n, d)))


def _budget_of(compute) -> list[float]:
    budgets = _distinct_budgets(compute)
    return [max(b for b in budgets if b <= c * (1 + 1e-12)) for c in compute]


# ---------------------------------------------------------------- 6. training curves
MAX_PANEL_COLUMNS = 3


def training_curves(table: RunTable) -> Figure:
    """Validation loss against tokens trained D (= C/(6N) along the run), one panel per compute
    budget, each run coloured by N on one shared scale; the run's final point is a dot."""
    if table.curves is None or table.curves.empty:
        raise FigureUnavailable(f"{table.source!r} holds no loss curves (only final losses)")
    runs = table.runs
    budgets = list(table.budgets)
    columns = min(MAX_PANEL_COLUMNS, len(budgets))
    rows = math.ceil(len(budgets) / columns)
    fig = Figure(figsize=(3.6 * columns + 1.2, 3.2 * rows + 0.4), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns, sharey=True, squeeze=False)).ravel()
    norm = _size_norm(runs["N"])
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
        _style(ax, f"C = {flops_label(budget)} FLOPs ({len(final)} runs)")
    for ax in axes[len(budgets) :]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel(LABEL_LOSS)
    for ax in axes[: len(budgets)]:
        _log_axes(ax, count_label, plain_label)
    _size_colorbar(fig, list(axes[: len(budgets)]), norm)
    return fig


# ---------------------------------------------------------------- all of them
FIGURES = {
    "loss_vs_compute": ("Loss against compute", lambda table, report: loss_vs_compute(table, report)),
    "isoflop_profiles": ("IsoFLOP profiles", lambda table, report: isoflop_profiles(report, table)),
    "optimal_allocation": ("Compute-optimal N and D", lambda table, report: optimal_allocation(report)),
    "loss_landscape": ("Fitted L(N, D)", lambda table, report: loss_landscape(report)),
    "residuals": ("Residuals", lambda table, report: residuals(report)),
    "training_curves": ("Training curves", lambda table, report: training_curves(table)),
}
NEEDS_A_FIT = {"isoflop_profiles", "optimal_allocation", "loss_landscape", "residuals"}


def make_figures(table: RunTable, report: FitReport | None) -> tuple[dict[str, Figure], dict[str, str]]:
    """Every figure of `FIGURES` the data supports, by name, and for each other one why it is missing."""
    figures, missing = {}, {}
    for name, (_title, draw) in FIGURES.items():
        if report is None and name in NEEDS_A_FIT:
            missing[name] = "no law could be fitted"
            continue
        try:
            figures[name] = draw(table, report)
        except FigureUnavailable as why:
            missing[name] = str(why)
    return figures, missing


PNG_COLOURS = 256  # a palette PNG is ~4x smaller than matplotlib's RGBA and looks the same for line art


def figure_bytes(fig: Figure, fmt: str = "png") -> bytes:
    """The figure rendered as ``fmt`` (png, svg or pdf); no timestamps, so equal figures give equal
    files. PNGs are quantised to a `PNG_COLOURS`-colour palette (the report embeds six of them)."""
    buffer = io.BytesIO()
    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    with matplotlib.rc_context({"svg.hashsalt": "scaling"}):  # SVG element ids: fixed, not random
        fig.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata)
    if fmt != "png":
        return buffer.getvalue()
    from PIL import Image  # matplotlib's own dependency

    palette = io.BytesIO()
    Image.open(buffer).convert("RGB").quantize(PNG_COLOURS).save(palette, format="PNG", optimize=True)
    return palette.getvalue()
