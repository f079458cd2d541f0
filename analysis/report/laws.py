"""The report's fitted laws: each approach's parameters with intervals and diagnostics, IsoFLOP minima,
held-out validation; every statement from `analysis.describe.fit`, laid out as blocks."""

from __future__ import annotations

import pandas as pd

from analysis.describe.fit import ApproachDescription, describe_fit, intervals_preface, loss_floor_text
from analysis.describe.numbers import num
from analysis.describe.outliers import OUTLIER_HEADER, outlier_rows, outliers_summary
from analysis.describe.repeat import FORM, HEADING, bootstrap_lines, estimate_rows, runs_text
from analysis.fits.results import FitReport
from analysis.report.blocks import FLAG, Bullets, Heading, Paragraph, Table
from analysis.sources.schema import DEFAULT_LOSS_UNIT, Source


def sentence(label: str, text: str) -> str:
    """A described line as a sentence: "Bootstrap: 200 resamples ...."."""
    return f"{label[:1].upper()}{label[1:]}: {text}."


def title(d: ApproachDescription) -> str:
    return f"{d.heading[:1].upper()}{d.heading[1:]} ({d.reference})"


# ---------------------------------------------------------------- fitted laws
def fitted_laws_blocks(fit: FitReport | None, source: Source) -> list:
    blocks: list = [Heading("Fitted laws")]
    if fit is None:
        return blocks + [Paragraph("No approach could be fitted to these runs.")]
    blocks.append(Paragraph(intervals_preface(fit)))
    for f, d in zip(fit.fits, describe_fit(fit)):
        blocks.append(Heading(title(d), 3))
        blocks.append(
            Table(["parameter", "estimate [interval]", "meaning"], [[r.key, r.text, r.meaning] for r in d.rows])
        )
        lines = [sentence(line.label, line.text) for line in d.lines if line.label != "validation"]
        lines += [f"{FLAG} {w}" for w in d.warnings]
        if f.approach == 3:
            lines += _loss_floor(f, source)
        blocks.append(Bullets(lines))
        blocks += _minima(d)
    for approach, why in fit.skipped.items():
        blocks.append(Paragraph(f"Approach {approach} was not fitted: {why}"))
    return blocks + (_repeat_blocks(fit.muennighoff) if fit.muennighoff is not None else [])


def _repeat_blocks(fit) -> list:
    """The data-constrained law (`scaling fit --approach muennighoff`): its estimates, how it was fitted."""
    how = [fit.convergence["method"]] if "method" in fit.convergence else []  # fits saved before the two stages
    how = [sentence(*line.split(": ", 1)) for line in how + bootstrap_lines(fit)]  # "intervals: ...", "note: ..."
    how += [f"{FLAG} {fit.convergence['warning']}"] if "warning" in fit.convergence else []
    return [
        Heading(HEADING, 3),
        Paragraph(f"{FORM}; {runs_text(fit)}."),
        Table(["parameter", "estimate [interval]", "meaning"], [list(row) for row in estimate_rows(fit)]),
        Bullets(how),
    ]


def _loss_floor(f, source: Source) -> list[str]:
    """The corpus' true lowest loss when the records know it (synthetic corpora), beside the fitted E."""
    if source.table.loss_unit != DEFAULT_LOSS_UNIT:  # loss_floor is in nats/token; E is not then
        return []
    floors = pd.to_numeric(source.frame.get("loss_floor", pd.Series([], dtype=float)), errors="coerce").dropna()
    return [loss_floor_text(floors.min(), f)] if len(floors) else []


def _minima(d: ApproachDescription) -> list:
    if not d.minima:
        return []
    blocks = [
        Paragraph("The minimum of each budget's parabola:"),
        Table(
            ["budget C (FLOPs)", "sizes trained (N)", "N_opt [interval]", "D_opt", "loss at N_opt", "where"],
            [
                [m.budget, m.sizes, m.n_opt, m.d_opt, m.loss, m.where if m.inside else f"{FLAG} {m.where}"]
                for m in d.minima
            ],
            {i for i, m in enumerate(d.minima) if not m.inside},
        ),
    ]
    if d.dropped:
        blocks.append(Bullets([sentence(*why.split(": ", 1)) for why in d.dropped]))
    return blocks


# ---------------------------------------------------------------- outliers
def outlier_blocks(fit: FitReport | None) -> list:
    """The runs the outlier rule flagged (`analysis.describe.outliers`), each row flagged; none for a data-constrained
    fit alone (the rule is approach 3's)."""
    if fit is None or not fit.fits:
        return []
    blocks: list = [Heading("Flagged outliers", 3), Paragraph(outliers_summary(fit))]
    rows = outlier_rows(fit)
    if rows:
        blocks.append(Table(OUTLIER_HEADER, rows, set(range(len(rows)))))
    return blocks


# ---------------------------------------------------------------- the fit's notes
def fit_notes_blocks(fit: FitReport | None, reading: list[str]) -> list:
    """The warnings (flagged) and notes of the fit that `scaling fit` prints and ``reading`` (the notes on reading
    the input, listed apart: `analysis.report.runs.reading_notes`) does not hold: the outlier rule's (runs left
    out, runs it could not test), a dropped budget that holds a flagged run; a loaded fit's from when it was made."""
    if fit is None:
        return []
    shown = set(reading)
    notes = [f"{FLAG} {w}" for w in fit.warnings if w not in shown] + [n for n in fit.notes if n not in shown]
    if not notes:
        return []
    return [
        Heading("Notes on the fit", 3),
        Paragraph("As `scaling fit` prints them (its notes on reading the input: under the failed runs, below):"),
        Bullets(notes),
    ]


# ---------------------------------------------------------------- validation
def validation_blocks(fit: FitReport | None) -> list:
    blocks: list = [Heading("Held-out validation")]
    checked = [(f, d) for f, d in zip(fit.fits, describe_fit(fit)) if f.validation] if fit else []
    if fit is not None and not fit.fits and fit.muennighoff is not None:
        return blocks + [Paragraph("Not run: the data-constrained fit has no held-out check.")]
    if not checked:
        return blocks + [Paragraph("Not run (it needs at least two budgets).")]
    blocks.append(Paragraph("Each law is refitted without the runs of the largest budget and asked to predict them."))
    for f, d in checked:
        text = next(line.text for line in d.lines if line.label == "validation")
        blocks.append(Paragraph(sentence(f"Approach {f.approach}", text)))
        if f.approach == 3 and "runs" in f.validation:
            blocks.append(
                Table(
                    ["run", "observed loss", "predicted loss", "error"],
                    [
                        [
                            r["run_id"],
                            num(r["observed"]),
                            num(r["predicted"]),
                            f"{r['predicted'] / r['observed'] - 1:+.2%}",
                        ]
                        for r in f.validation["runs"]
                    ],
                )
            )
    return blocks
