"""Compute-optimal N and D against compute: each approach's law with its band, the Chinchilla preset."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.figure import Figure

from analysis.describe.fit import band_phrase, exponent_legend, fitted_phrase
from analysis.describe.numbers import count_label, flops_label
from analysis.figures.axes import (
    APPROACH_COLOUR,
    DPI,
    LABEL_COMPUTE,
    REFERENCE_COLOUR,
    FigureUnavailable,
    law_along,
    law_line,
    limits,
    log_axes,
    style,
)
from analysis.fits.bent_profiles import is_bent
from analysis.fits.identified import EXTRAPOLATION_FACTOR
from analysis.fits.isoflop import in_law
from analysis.fits.presets import PRESETS
from analysis.fits.results import FitReport, no_law
from scaling.flops import flops_6nd, tokens_6nd

REFERENCE_PRESET = "chinchilla"
LEGEND_COLUMN_CHARS = 60  # a legend label longer than this puts the legend in one column
ALLOCATION_REACH = 1e3  # the allocation figure runs to this factor beyond the largest budget


def caption(report: FitReport | None) -> str:
    """What `optimal_allocation` shows."""
    fits = {f.approach: f for f in report.fits} if report is not None else {}
    approaches = ", ".join(
        f"{fitted_phrase(report, k)} ({colour}, {_drawn(report, fits[k]) if k in fits else band_phrase(report, k)})"
        for k, colour in ((1, "green"), (2, "blue"), (3, "vermillion"))
    )
    return (
        "Model size (left) and tokens (right) against compute: approach 2's parabola minima (dots, hollow "
        "outside the trained sizes: left out of its law) with their intervals (none where N_opt is "
        f"unidentified); each approach's power law: {approaches}; dashed black: the Chinchilla preset "
        "(Hoffmann et al. 2022, Table 3: ~20 tokens per parameter) for reference. "
        f"In the shaded region the budget is more than {EXTRAPOLATION_FACTOR:g}× the largest run: an extrapolation."
    )


def _drawn(report: FitReport, fit) -> str:
    """How an approach's law is drawn: not at all without one (`no_law`), dotted without a band when its a is
    unidentified, else with its band."""
    if no_law(fit):
        return "not drawn: no law, a unidentified"
    a = fit.estimates["a"]
    return (
        f"dotted, no band: a unidentified ({a.unidentified})" if a.unidentified else band_phrase(report, fit.approach)
    )


def optimal_allocation(report: FitReport) -> Figure:
    """N_opt(C) and D_opt(C) = C/(6·N_opt): approach 2's per-budget minima with their bootstrap
    intervals (hollow when a minimum lies outside the trained sizes: left out of the law) and each fitted law with its
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
        _law(axes, report, fit, c, shown)
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
        ax.set_ylim(*limits(shown[key], 2.0))
        ax.set_xlabel(LABEL_COMPUTE)
        ax.set_ylabel("compute-optimal parameters N_opt" if key == "n" else "compute-optimal tokens D_opt")
        style(ax, "Model size" if key == "n" else "Training tokens")
        log_axes(ax, flops_label, count_label)
    handles, labels = axes[0].get_legend_handles_labels()
    # long labels (an unidentified a and its reason) in one column, wrapped: two ran off both edges (user26)
    wide = max(map(len, labels), default=0) > LEGEND_COLUMN_CHARS
    labels = [textwrap.fill(label, 2 * LEGEND_COLUMN_CHARS) for label in labels]
    fig.legend(handles, labels, loc="outside lower center", ncols=1 if wide else 2, fontsize=8, frameon=False)
    return fig


def _law(axes, report: FitReport, fit, c, shown) -> None:
    """One approach's N_opt(C) and D_opt(C), with its band; dotted without one when its a is unidentified."""
    curve = law_along(report, fit.approach, c)
    label, unidentified = exponent_legend(fit), fit.estimates["a"].unidentified
    for ax, key in zip(axes, ("n", "d")):
        colour, gid = APPROACH_COLOUR[fit.approach], f"fit:approach{fit.approach}"
        law_line(
            ax, c, curve, key, colour=colour, label=label, gid=gid, solid={"linewidth": 2.0}, unidentified=unidentified
        )
        shown[key] += list(curve[key])


def _smallest_compute(fit) -> float:
    if fit.approach == 1:
        return float(fit.diagnostics["compute_range"][0])
    if fit.approach == 2:
        return min(p.compute for p in fit.profiles)
    return float(min(flops_6nd(n, d) for n, d in zip(fit.n, fit.d)))


def _isoflop_minima(axes, fit, shown) -> None:
    for inside in (True, False):
        profiles = [p for p in fit.profiles if in_law(p) == inside]
        if not profiles:
            continue
        compute = np.array([p.compute for p in profiles])
        n_opt = np.array([p.n_opt for p in profiles])
        # no bar where the fit calls N_opt unidentified: that interval is no statement about N_opt
        lower, upper = np.array([(not p.n_opt_unidentified and p.n_opt_interval) or [p.n_opt] * 2 for p in profiles]).T
        d_opt = tokens_6nd(compute, n_opt)
        n_err = np.maximum([n_opt - lower, upper - n_opt], 0.0)
        # D = C/(6N): the upper end of N's interval is the lower end of D's
        d_err = np.maximum([d_opt - tokens_6nd(compute, upper), tokens_6nd(compute, lower) - d_opt], 0.0)
        # left out of the law: outside their sizes, or inside them with an unbounded N_opt or bent (`in_law`)
        left_out = " outside the trained sizes" + (" or unbounded" if any(p.inside_range for p in profiles) else "")
        left_out += " or bent" * any(map(is_bent, profiles))
        label = "approach 2: parabola minima" + ("" if inside else f"{left_out} (not in its law)")
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
