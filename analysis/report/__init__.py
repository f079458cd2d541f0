"""The report of a sweep: one self-contained HTML file and its Markdown twin.

    source = read_source("results/quick")                      # runs + store facts, read once
    fit = fit_all(source.table, resamples=200)                  # or FitReport.load("fit.json")
    blocks = report_blocks(source, fit, figure_pngs, missing, how_fitted="...")
    write_report(Path("reports/quick/report.html"), blocks, figure_pngs)

The content is built once as a list of blocks (headings, paragraphs, tables, figures) and
rendered twice: as HTML with every figure embedded as a base64 PNG (no external URL of any
kind, no script: it opens offline and prints), and as Markdown whose figures are PNG files in
``<stem>-figures/`` beside it. Every file is written atomically (`scaling.store.atomic_write_bytes`),
the HTML last, so an interrupted run never leaves a half-written report.

What it states: the sweep (name, corpus and fingerprint, code versions, dates, budgets × shapes),
each approach's fitted parameters with intervals and diagnostics, the compute-optimal N and D
along a ladder of budgets with extrapolations (> 10× the largest fitted run) flagged and the
Chinchilla preset beside it, the held-out validation, and every run that failed, was dropped at
planning, or is planned but has no record, with reasons.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from analysis.figures import FIGURES
from analysis.fits.results import FitReport
from analysis.report.allocation import allocation_blocks, budget_ladder
from analysis.report.blocks import Bullets, FigureBlock, Heading, Paragraph
from analysis.report.laws import fitted_laws_blocks, validation_blocks
from analysis.report.render import render_html, render_markdown, write_readable, write_report
from analysis.report.runs import failures_blocks
from analysis.report.sweep import about_blocks, fit_matches_source, summary_blocks, sweep_name, swept_blocks
from analysis.sources.schema import Source

__all__ = [
    "budget_ladder",
    "fit_matches_source",
    "render_html",
    "render_markdown",
    "report_blocks",
    "write_readable",
    "write_report",
]


def report_blocks(
    source: Source,
    fit: FitReport | None,
    figures: dict[str, bytes],
    missing: dict[str, str],
    *,
    how_fitted: str,
    fit_problems: list[str] | None = None,
    generated_at: datetime | None = None,
) -> list:
    """The whole report as blocks, in reading order."""
    generated_at = generated_at or datetime.now(timezone.utc)
    blocks: list = [Heading(f"Scaling-law report: {sweep_name(source)}", 1)]
    blocks += about_blocks(source, fit, how_fitted, generated_at)
    blocks += summary_blocks(source, fit, fit_problems or [])
    blocks += swept_blocks(source)
    blocks += figure_blocks(figures, missing)
    blocks += fitted_laws_blocks(fit, source)
    with np.errstate(all="ignore"):  # bootstrap samples with an overflowed A give NaN, which intervals skip
        blocks += allocation_blocks(fit, source)
    blocks += validation_blocks(fit)
    blocks += failures_blocks(source, fit)
    return blocks


# ---------------------------------------------------------------- figures
CAPTIONS = {
    "loss_vs_compute": "Validation loss against training compute C = 6·N·D for every run (curves: the loss as training "
    "went on; dots: final loss; colour: model size N). Diamonds: the envelope, the lowest loss "
    "reached in each compute bin; green: approach 1's law fitted through it, with its bootstrap "
    "band; dashed: approach 3's loss at the compute-optimal N and D.",
    "isoflop_profiles": "At each budget, loss against N with the parabola in ln N fitted by approach "
    "2 (dotted where it is extended beyond the trained sizes to reach its minimum) and its minimum "
    "(star; hollow when it lies outside the trained sizes, an extrapolation of the parabola) with "
    "the bootstrap interval of N_opt (a triangle marks an interval that runs off the axes). "
    "Dashed: approach 3's L(N, C/6N) at the same budget.",
    "optimal_allocation": "Model size and tokens against compute: approach 2's parabola minima with "
    "their intervals, each approach's power law with its bootstrap band, and the Chinchilla "
    "preset (Hoffmann et al. 2022, Table 3: ~20 tokens per parameter) for reference. In the "
    "shaded region the budget is more than 10× the largest run: an extrapolation.",
    "loss_landscape": "Approach 3's L(N, D) (filled contours), the runs coloured by their observed loss on the "
    "same scale (a run whose colour matches its background is fitted well), the lines of constant "
    "compute C = 6·N·D through the budgets (dotted), the compute-optimal path, and Chinchilla's 20 "
    "tokens per parameter.",
    "residuals": "Observed minus fitted loss, in % of the fitted value, per approach. Residuals scattered evenly around "
    "zero mean the law's shape fits; a trend means it does not.",
    "training_curves": "Validation loss against tokens trained, one panel per compute budget, colour: model size N.",
}


def figure_blocks(figures: dict[str, bytes], missing: dict[str, str]) -> list:
    blocks: list = [Heading("Figures")]
    for name, (title, _draw) in FIGURES.items():
        if name in figures:
            blocks.append(FigureBlock(name, title, CAPTIONS[name]))
    if missing:
        blocks.append(Paragraph("Not drawn:"))
        blocks.append(Bullets([f"{FIGURES[name][0]}: {why}" for name, why in missing.items()]))
    return blocks
