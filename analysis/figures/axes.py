"""What every figure shares: the palettes, sizes and axis labels, log axes with readable ticks,
the model-size colour bar, budget colours, and the fitted laws along a curve with their bands.

Conventions: log axes for compute, parameters and tokens, labelled 1e12 / 10M / 1B (never 10^x
offsets); units in the axis labels (FLOPs, parameters, tokens, the loss's own: `loss_label`). Model size N is
coloured with viridis (perceptually uniform, monotone in lightness, so it survives greyscale
printing and the common colour-vision deficiencies; van der Walt & Smith 2015), cut at 90% so
its palest yellow stays visible on white; categories (approaches, reference laws) use the
Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"). Bands are the fit's bootstrap
percentile intervals, evaluated along the curve (`analysis.fits.saved_law.law_from_fit`).
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from analysis.describe.numbers import count_label, flops_label
from analysis.fits.results import FitReport
from analysis.fits.saved_law import law_from_fit
from analysis.sources.budgets import cluster_budgets
from analysis.sources.schema import RunTable

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
MAX_LEGEND_BUDGETS = 8  # beyond this many budgets, a colour bar names them instead of a legend entry each
WIDE = (7.5, 4.8)  # inches: 1125 × 720 px at DPI

LABEL_COMPUTE = "compute C (FLOPs)"
LABEL_TOKENS = "tokens D"


def loss_label(unit: str) -> str:
    """The loss axis' label in the table's loss unit (`analysis.sources.schema.RunTable.loss_unit`)."""
    return f"validation loss ({unit})"


class FigureUnavailable(Exception):
    """The data or the fits cannot support this figure; the message says why (one line)."""


# ---------------------------------------------------------------- log axes
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


def finish_log_axis(axis, label) -> None:
    """Freeze the axis' current limits and label it with ``label`` (e.g. `count_label`) at `log_ticks`."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = log_ticks(lo, hi)
    axis.set_major_locator(LogLocator(10, numticks=9) if ticks is None else FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    axis.set_minor_locator(LogLocator(10, subs=np.arange(2, 10), numticks=100))
    axis.set_minor_formatter(NullFormatter())
    (axis.axes.set_xlim if axis.axis_name == "x" else axis.axes.set_ylim)(lo, hi)


def log_axes(ax, x_label, y_label=None) -> None:
    """Log scale on x (and on y when ``y_label`` is given): call after everything is drawn."""
    finish_log_axis(ax.xaxis, x_label)
    if y_label is not None:
        finish_log_axis(ax.yaxis, y_label)


def size_colorbar(fig: Figure, axes, norm: LogNorm, label: str = "parameters N", tick_label=count_label):
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=SIZE_CMAP), ax=axes, pad=0.02)
    bar.set_label(label)
    ticks = log_ticks(norm.vmin, norm.vmax) or [
        10.0**e for e in range(math.ceil(math.log10(norm.vmin)), math.floor(math.log10(norm.vmax)) + 1)
    ]
    bar.set_ticks(ticks)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick_label(v)))
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return bar


def size_norm(n_values) -> LogNorm:
    n = np.asarray(n_values, dtype=float)
    lo, hi = float(n.min()), float(n.max())
    return LogNorm(lo / 1.2, hi * 1.2) if lo == hi else LogNorm(lo, hi)


def many_budgets(budgets) -> bool:
    """More budgets than a legend can name readably (`MAX_LEGEND_BUDGETS`): a colour bar names them."""
    return len(set(float(b) for b in budgets)) > MAX_LEGEND_BUDGETS


def budget_colours(budgets) -> dict[float, tuple]:
    """One colour per budget along the truncated viridis: evenly spaced by rank when a legend names
    each budget, by log budget (`budget_norm`, as `budget_colorbar` shows them) when there are many."""
    budgets = sorted(set(float(b) for b in budgets))
    if many_budgets(budgets):
        norm = budget_norm(budgets)
        return {b: SIZE_CMAP(norm(b)) for b in budgets}
    positions = np.linspace(0.0, 1.0, len(budgets)) if len(budgets) > 1 else [0.0]
    return {b: SIZE_CMAP(p) for b, p in zip(budgets, positions)}


def budget_norm(budgets) -> LogNorm:
    return size_norm(sorted(set(float(b) for b in budgets)))


def budget_colorbar(fig: Figure, axes, budgets):
    """The colour bar of `budget_colours` for many budgets (in place of a legend entry per budget)."""
    label = f"compute budget C (FLOPs), {len(set(float(b) for b in budgets))} budgets"
    return size_colorbar(fig, axes, budget_norm(budgets), label, flops_label)


def style(ax, title: str | None = None) -> None:
    ax.grid(True, which="major", color="0.85", linewidth=0.6)
    ax.set_axisbelow(True)
    if title:
        ax.set_title(title, fontsize=11)


def legend(ax, **kwargs) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, framealpha=0.92, **kwargs)


def limits(values, pad: float = 1.25) -> tuple[float, float]:
    values = np.asarray([v for v in np.ravel(values) if np.isfinite(v) and v > 0], dtype=float)
    return float(values.min()) / pad, float(values.max()) * pad


# ---------------------------------------------------------------- laws along a curve, with bands
def law_along(report: FitReport, approach: int, compute) -> dict[str, np.ndarray]:
    """N_opt, D_opt and (when the law predicts it) the optimal loss of one approach's law at each
    budget in ``compute``, with the lower/upper ends of their bootstrap intervals (NaN without);
    approach 1's loss law is the one drawn (`law_from_fit` takes `envelope_law`'s)."""
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
        out[f"{key}_unidentified"] = np.array([bool(e.unidentified) for e in estimates])  # as `optimal` says there
    return out


# A law the fit calls unidentified (its interval does not pin it down): drawn dotted and thin, without a band, its
# legend saying so; its value is not a finding (`analysis.fits.envelope.envelope_law`, `exponent_legend`).
UNIDENTIFIED_LINE = {"linestyle": ":", "linewidth": 1.6}


def law_line(
    ax,
    x,
    curve: dict,
    key: str,
    *,
    colour,
    label: str,
    gid: str,
    solid: dict,
    unidentified=False,
    band_label=None,
    banded=True,
) -> None:
    """``curve[key]`` along ``x`` (`law_along`): in the ``solid`` style with its band where the law's estimate is a
    finding, dotted (`UNIDENTIFIED_LINE`) without a band where `optimal` calls it unidentified there (all of it with
    ``unidentified``), the dotted stretch labelled as such (user34: solid lines and bands beyond 10x the largest run,
    where the text said unidentified)."""
    x, y = np.asarray(x, float), np.asarray(curve[key], float)
    dotted = np.full(len(x), True) if unidentified else curve.get(f"{key}_unidentified", np.full(len(x), False))
    grown = dotted | np.r_[dotted[1:], False] | np.r_[False, dotted[:-1]]  # each stretch reaches its neighbour's end
    if not dotted.all():
        ax.plot(x, np.where(dotted, np.nan, y), color=colour, label=label, gid=gid, **solid)
        kept = {k: np.where(dotted, np.nan, v) for k, v in curve.items() if k.startswith(f"{key}_")}
        if banded:
            band(ax, x, kept, key, colour, band_label)
    if dotted.any():
        said = f"{label} (unidentified: not a finding)" if dotted.all() and not unidentified else label
        said = said if dotted.all() else f"{label.split(':')[0]}: unidentified here (not a finding)"
        gid = gid if dotted.all() else f"{gid}:unidentified"
        ax.plot(x, np.where(grown, y, np.nan), color=colour, label=said, gid=gid, **UNIDENTIFIED_LINE)


def ring_outliers(ax, report: FitReport, where: dict[str, tuple[float, float]]) -> None:
    """A red ring round each run the outlier rule flagged (`analysis.fits.outliers`) that ``where`` places (run id
    -> x, y on ``ax``): the IsoFLOP profiles' and the residuals' (user34: a +150% residual, unmarked, there)."""
    shown = [where[o.run_id] for o in report.outliers if o.run_id in where]
    if not shown:
        return
    state = "excluded from the fits" if report.outliers_excluded else "kept in the fits"
    x, y = zip(*shown)
    ax.scatter(x, y, s=110, facecolors="none", edgecolors="red", linewidths=1.4, zorder=6, gid="outliers")
    ax.scatter([], [], s=110, facecolors="none", edgecolors="red", linewidths=1.4, label=f"flagged outlier ({state})")


def band(ax, x, curve: dict, key: str, colour, label: str | None) -> None:
    lower, upper = curve[f"{key}_lower"], curve[f"{key}_upper"]
    if np.isfinite(lower).any():
        ax.fill_between(x, lower, upper, color=colour, alpha=BAND_ALPHA, linewidth=0, label=label)


def run_budgets(run_ids, compute, table: RunTable | None = None) -> np.ndarray:
    """Each run's compute budget by the one rule (`analysis.sources.budgets`): the table's (which
    applied the source's budget column), where the fits place it (`RunTable.budget_compute`: review17, a nominal
    column's iso-FLOP lines lay 1.3x below their runs), when it holds every run, else clustered from C."""
    if table is not None:
        placed = dict(zip(table.budgets, table.budget_compute))
        budget_of = dict(zip(table.runs["run_id"], table.runs["budget"].map(placed)))
        if all(r in budget_of for r in run_ids):
            return np.array([budget_of[r] for r in run_ids], dtype=float)
    return cluster_budgets(compute)
