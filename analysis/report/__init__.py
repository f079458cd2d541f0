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
each approach's fitted parameters with intervals and diagnostics, the runs the outlier rule
flagged (kept or excluded), the fit's own warnings and notes (as `scaling fit` prints them), the compute-optimal N and D
along a ladder of budgets with extrapolations (> 10× the largest fitted run) flagged and the
Chinchilla preset beside it, the held-out validation, and every run that failed, was dropped at
planning, or is planned but has no record, with reasons.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from analysis.figures import ALL_FIGURES, figure_caption
from analysis.fits.results import FitReport
from analysis.report.allocation import allocation_blocks, budget_ladder
from analysis.report.blocks import Bullets, FigureBlock, Heading, Paragraph
from analysis.report.hparams import hyperparameter_blocks
from analysis.report.laws import fit_notes_blocks, fitted_laws_blocks, outlier_blocks, validation_blocks
from analysis.report.render import REPORT_TITLE, render_html, render_markdown, write_readable, write_report
from analysis.report.runs import failures_blocks, reading_notes
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
    blocks: list = [Heading(f"{REPORT_TITLE}: {sweep_name(source)}", 1)]
    blocks += about_blocks(source, fit, how_fitted, generated_at)
    blocks += summary_blocks(source, fit, fit_problems or [])
    blocks += swept_blocks(source)
    blocks += figure_blocks(figures, missing, fit)
    blocks += fitted_laws_blocks(fit, source)
    blocks += hyperparameter_blocks(fit)
    blocks += outlier_blocks(fit)
    blocks += fit_notes_blocks(fit, reading_notes(source, fit))
    # overflowed bootstrap samples (A or B = +inf) give N_opt inf or 0 and a loss of +inf: kept in the intervals
    with np.errstate(all="ignore"):
        blocks += allocation_blocks(fit, source)
    blocks += validation_blocks(fit)
    blocks += failures_blocks(source, fit)
    return blocks


# ---------------------------------------------------------------- figures
def figure_blocks(figures: dict[str, bytes], missing: dict[str, str], fit: FitReport | None) -> list:
    """Each figure drawn, with the caption its module declares (`analysis.figures.figure_caption`)."""
    blocks: list = [Heading("Figures")]
    for name, (title, _draw) in ALL_FIGURES.items():
        if name in figures:
            blocks.append(FigureBlock(name, title, figure_caption(name, fit)))
    if missing:
        blocks.append(Paragraph("Not drawn:"))
        blocks.append(Bullets([f"{ALL_FIGURES[name][0]}: {why}" for name, why in missing.items()]))
    return blocks
