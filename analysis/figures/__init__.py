"""The figures of a sweep and its fits: one module per figure family, each function returning a
matplotlib Figure (shared palettes, axes and bands: `analysis.figures.axes`).

    loss_vs_compute(table, report)   compute.py: every run's loss curve against C, coloured by N; the
                                     envelope and approach 1's law L(C) with its band; approach 3's frontier
    isoflop_profiles(report, table)  isoflop.py: loss against N per budget, approach 2's parabolas and minima
    optimal_allocation(report)       allocation.py: N_opt(C) and D_opt(C): approach 2 minima with intervals,
                                     the fitted power laws with bands, the Chinchilla preset for reference
    loss_landscape(report, table)    landscape.py: contours of approach 3's L(N, D), the runs, the iso-FLOP
                                     lines C = 6·N·D and the compute-optimal path
    residuals(report, table)         residuals.py: observed against fitted loss, per approach
    training_curves(table)           curves.py: validation loss against tokens, one panel per budget
    lr_sweep(table, report)          lrsweep.py: loss against LR per size and budget, the optima, the LR law
                                     (drawn only for a table with an LR sweep: `OPTIONAL_FIGURES`)
    loss_vs_epochs(table, report)    epochs.py: loss against epochs D/U for sources whose runs repeat data,
                                     with the data-constrained law (drawn only then: `OPTIONAL_FIGURES`)

`make_figures(table, report)` draws every figure the data supports and says why each other one
is missing; `figure_bytes(fig, "png")` renders one; `figure_caption(name, report)` says what it shows.
"""

from __future__ import annotations

import io

import matplotlib
from matplotlib.figure import Figure

from analysis.figures import allocation, compute, curves, epochs, isoflop, landscape, lrsweep
from analysis.figures import residuals as residuals_module
from analysis.figures.allocation import optimal_allocation
from analysis.figures.axes import DPI, OKABE_ITO, FigureUnavailable, log_ticks
from analysis.figures.compute import loss_vs_compute
from analysis.figures.curves import training_curves
from analysis.figures.isoflop import isoflop_profiles
from analysis.figures.landscape import loss_landscape
from analysis.figures.lrsweep import lr_sweep
from analysis.figures.residuals import residuals
from analysis.fits.results import FitReport
from analysis.sources.schema import RunTable

__all__ = [
    "ALL_FIGURES",
    "FIGURES",
    "OPTIONAL_FIGURES",
    "OKABE_ITO",
    "FigureUnavailable",
    "figure_bytes",
    "figure_caption",
    "isoflop_profiles",
    "log_ticks",
    "loss_landscape",
    "loss_vs_compute",
    "lr_sweep",
    "make_figures",
    "optimal_allocation",
    "residuals",
    "training_curves",
]

FIGURES = {
    "loss_vs_compute": ("Loss against compute", lambda table, report: loss_vs_compute(table, report)),
    "isoflop_profiles": ("IsoFLOP profiles", lambda table, report: isoflop_profiles(report, table)),
    "optimal_allocation": ("Compute-optimal N and D", lambda table, report: optimal_allocation(report)),
    "loss_landscape": ("Fitted L(N, D)", lambda table, report: loss_landscape(report, table)),
    "residuals": ("Residuals", lambda table, report: residuals(report, table)),
    "training_curves": ("Training curves", lambda table, report: training_curves(table)),
}


def _lr_sweep(table: RunTable, report: FitReport | None) -> Figure:
    if table.hparams is None or not table.hparams.lr_swept:
        raise FigureUnavailable("the runs sweep no learning rate")
    return lr_sweep(table, report)


# Drawn when the data has what they show (an LR sweep, runs that repeat data), never listed as missing.
OPTIONAL_FIGURES = {
    "lr_sweep": ("Loss against learning rate", _lr_sweep),
    "loss_vs_epochs": ("Loss against epochs", lambda table, report: epochs.loss_vs_epochs(table, report)),
}
# Each figure module declares its caption (what is drawn, what colours, markers and bands mean, which
# approach), built from `analysis.describe.fit` where it depends on the fit; the report and `scaling plot` show it.
CAPTIONS = {
    "loss_vs_compute": compute.caption,
    "isoflop_profiles": isoflop.caption,
    "optimal_allocation": allocation.caption,
    "loss_landscape": landscape.caption,
    "residuals": residuals_module.caption,
    "training_curves": curves.caption,
    "lr_sweep": lrsweep.caption,
    "loss_vs_epochs": epochs.caption,
}
ALL_FIGURES = {**FIGURES, **OPTIONAL_FIGURES}
NEEDS_A_FIT = {"isoflop_profiles", "optimal_allocation", "loss_landscape", "residuals"}


def make_figures(table: RunTable, report: FitReport | None) -> tuple[dict[str, Figure], dict[str, str]]:
    """Every figure of `FIGURES` the data supports, by name, and for each other one why it is missing."""
    figures, missing = {}, {}
    for name, (_title, draw) in ALL_FIGURES.items():
        if report is None and name in NEEDS_A_FIT:
            missing[name] = "no law could be fitted"
            continue
        try:
            figures[name] = draw(table, report)
        except FigureUnavailable as why:
            if name not in OPTIONAL_FIGURES:
                missing[name] = str(why)
    return figures, missing


def figure_caption(name: str, report: FitReport | None) -> str:
    """The caption figure ``name`` declares, for this fit."""
    return CAPTIONS[name](report)


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
