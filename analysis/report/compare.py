"""The comparison section of `scaling report A B ...`: for each candidate against the baseline
(the first source), the answer, a table per budget and the exponent differences; one figure."""

from __future__ import annotations

from analysis.compare.multiplier import DIFFERENCES
from analysis.compare.render import BEYOND, LABELS
from analysis.compare.result import Comparison, Side
from analysis.figures.compare import CAPTION
from analysis.fits.bootstrap import unchecked
from analysis.fits.percentiles import level_text
from analysis.report.blocks import FLAG, Bullets, FigureBlock, Heading, Paragraph, Table

FIGURE_NAME = "compare"


def _cell(value: float, lower: float | None, upper: float | None, signed: bool = False, unidentified: str = "") -> str:
    """A number with its interval; "unidentified" when the comparison cannot pin it down (its answer says why)."""
    if unidentified:
        return "unidentified"

    def g(x):
        return "unbounded" if x == float("inf") else f"{x:.4g}"

    text = f"{value:+.4g}" if signed else g(value)
    return text if lower is None else f"{text} [{g(lower)}, {g(upper)}]"


def comparison_blocks(comparisons: list[Comparison], has_figure: bool, notes: list[str] | None = None) -> list:
    """Heading, ``notes`` (the check of the evaluation data's) and the baseline's, then per candidate: the answer,
    the per-budget table (rows beyond the fitted range flagged), the differences and its notes; then the figure
    (when drawn)."""
    first = comparisons[0]
    blocks: list = [
        Heading("Comparison of recipes"),
        Paragraph(
            f"Baseline: {first.baseline.source} ({first.baseline.runs} runs). Each source is fitted with approach 3 "
            "and compared through its loss frontier L*(C). m(C) is the effective compute multiplier: the compute the "
            "baseline needs to reach the loss the candidate reaches with C (m > 1: the candidate is better). "
            + (
                f"Intervals: {level_text(first.level)} percentile intervals over bootstrap pairs, the sources resampled "
                "independently."
                if first.pairs
                else "No intervals"
                + "".join(f": {line}" for line in unchecked([first.baseline.fit, first.candidate.fit]))
                + "."
            )
        ),
        *(Paragraph(f"Note: {note}") for note in notes or []),
        *side_notes(first.baseline),
    ]
    for c in comparisons:
        blocks += _one(c)
    if has_figure:
        blocks.append(FigureBlock(FIGURE_NAME, "Loss frontiers and the effective compute multiplier", CAPTION))
    return blocks


def _one(c: Comparison) -> list:
    unit = c.baseline.loss_unit  # both sides' (`analysis.compare.compare_inputs` refuses mixed units)
    rows, flagged = [], set()
    for i, r in enumerate(c.rows):
        m, d = r.multiplier, r.loss_difference
        rows.append(
            [
                f"{r.compute:.3g}" + (f" {FLAG} {BEYOND}" if r.beyond_fitted_range else ""),
                _cell(m.value, m.lower, m.upper, unidentified=m.unidentified),
                _cell(d.value, d.lower, d.upper, signed=True, unidentified=d.unidentified),
                _cell(r.baseline_loss.value, None, None, unidentified=r.baseline_loss.unidentified),
                _cell(r.candidate_loss.value, None, None, unidentified=r.candidate_loss.unidentified),
            ]
        )
        if r.beyond_fitted_range:
            flagged.add(i)
    diffs = [
        [
            LABELS[name].removesuffix(")") + f", {unit})" if name == "E" else LABELS[name],  # E is a loss
            f"unidentified ({d['unidentified']})"
            if d.get("unidentified")
            else _cell(d["value"], d["lower"], d["upper"], signed=True),
            f"{d['baseline']:.4g}",
            f"{d['candidate']:.4g}",
        ]
        for name, d in ((name, c.differences[name]) for name in DIFFERENCES)
    ]
    return [
        Heading(f"Candidate: {c.candidate.source} ({c.candidate.runs} runs)", 3),
        Paragraph(c.summary),
        Table(
            [
                "C (FLOPs)",
                "m(C)",
                f"loss difference (candidate − baseline, {unit})",
                f"baseline loss ({unit})",
                f"candidate loss ({unit})",
            ],
            rows,
            flagged,
        ),
        Table(["difference (candidate − baseline)", "estimate", "baseline", "candidate"], diffs),
        *(Paragraph(f"Note: {note}") for note in c.notes),
        *side_notes(c.candidate),
    ]


def side_notes(side: Side) -> list:
    """What `scaling compare` prints on stderr under a side's name: its reading's warnings (flagged) and notes, the
    outlier rule's notes; none when it printed none."""
    notes = [f"{FLAG} {w}" for w in side.warnings] + side.notes
    return [Paragraph(f"Notes on {side.source}, as `scaling compare` prints them:"), Bullets(notes)] if notes else []
