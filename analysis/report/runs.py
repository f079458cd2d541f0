"""The report's failed, dropped and missing runs, and the notes on reading the input."""

from __future__ import annotations

from pathlib import Path

from analysis.describe.numbers import count_label, flops_label
from analysis.fits.results import FitReport
from analysis.report.blocks import Bullets, Heading, Paragraph, Table
from analysis.report.sweep import finite
from analysis.sources.curverows import run_ids_of
from analysis.sources.schema import Source
from analysis.sources.status import completed, status_column


# ---------------------------------------------------------------- failures and notes
def failures_blocks(source: Source, fit: FitReport | None) -> list:
    frame = source.frame
    blocks: list = [Heading("Failed, dropped and missing runs")]
    blocks += _incomplete(frame)
    if unusable := source.table.counts.get("excluded", 0):  # a NaN, text or non-positive value (user34: unsaid)
        blocks.append(
            Paragraph(
                f"{unusable} row{'s' * (unusable != 1)} of the input excluded as unusable (a value that is not a finite "
                "number > 0): each is named in the notes below."
            )
        )
    dropped = source.manifest.get("dropped", [])  # {} without a plan
    blocks += _merged_paragraph(source.manifest.get("duplicates", []))
    if dropped:
        blocks.append(
            Paragraph(
                f"{len(dropped)} combination{'s' * (len(dropped) != 1)} dropped when the sweep was "
                "planned (never launched):"
            )
        )
        blocks.append(
            Table(["combination", "reason"], [[" ".join(d.get("overrides", [])), d.get("reason", "")] for d in dropped])
        )
    recorded = set(frame["run_id"].astype(str)) if "run_id" in frame.columns else set()
    absent = [r for r in source.manifest.get("runs", []) if r["run_id"] not in recorded]
    if absent:
        blocks.append(
            Paragraph(
                f"{len(absent)} planned run{'s' * (len(absent) != 1)} without a record (still running, "
                "interrupted, or never run; `scaling status` tells which):"
            )
        )
        blocks.append(
            Table(
                ["run", "budget (FLOPs)", "shape", "N"],
                [[r["run_id"], flops_label(r["budget_flops"]), r["shape"], count_label(r["params"])] for r in absent],
            )
        )
    blocks += _outside_the_plan(source, recorded | {r["run_id"] for r in source.manifest.get("runs", [])})
    if len(blocks) == 1:
        blocks.append(Paragraph("None: every planned run completed."))
    notes = reading_notes(source, fit)
    if notes:
        blocks += [Paragraph("Notes on reading the input:"), Bullets(notes)]
    return blocks


def _incomplete(frame) -> list:
    """A table of the runs whose status marks them not completed, as the reader excludes them
    (`analysis.sources.status`: user34, a table's "finished" runs were all listed as failed here)."""
    if (status := status_column(frame)) is None:
        return []
    ids = run_ids_of(frame)  # a table's rows without a run id: "rowK"
    not_done = ~completed(frame[status]) & ~ids.duplicated(keep="last")  # a curve's rows: its run once (review22)
    failed, ids = frame[not_done], ids[not_done]
    if not len(failed):
        return []
    rows = [
        [
            run_id,
            _flops_or_dash(r.get("budget_flops", r.get("budget"))),
            str(r.get("shape", "")),
            _count_or_dash(r.get("params")),
            str(r[status]),
            str(r.get("reason", "")),
        ]
        for run_id, r in zip(ids, failed.to_dict("records"))
    ]
    return [
        Paragraph(f"{len(failed)} run{'s' * (len(failed) != 1)} did not complete (not used in the fits):"),
        Table(["run", "budget (FLOPs)", "shape", "N", "status", "reason"], rows),
    ]


def _outside_the_plan(source: Source, known: set[str]) -> list:
    """A table of each run directory of a store (`source.origin`) with no record and not in ``known``, with its
    state (user24: a second sweep's plan replaced the first's, whose interrupted runs then vanished from the report)."""
    from scaling.store import RunPaths, run_state

    runs = Path(source.origin or ".") / "runs"
    ids = sorted(d.name for d in runs.iterdir() if d.is_dir() and d.name not in known) if runs.is_dir() else []
    rows = [[i, str(run_state(RunPaths(runs.parent, i)))] for i in ids if not RunPaths(runs.parent, i).record.exists()]
    if not rows:
        return []
    return [
        Paragraph(
            f"{len(rows)} run{'s' * (len(rows) != 1)} in the store without a record and outside its plan (an earlier "
            "sweep's, or `scaling train`'s, interrupted: relaunching it resumes them):"
        ),
        Table(["run", "state"], rows),
    ]


def reading_notes(source: Source, fit: FitReport | None) -> list[str]:
    """Exclusions and column notes of the reader, a damaged plan, and approaches not fitted."""
    plain = fit is None or bool(fit.fits)  # a data-constrained fit alone: not the lines of the fits of L(N, D)
    notes = [line for lines in source.table.lines(plain) for line in lines]
    if source.manifest_problem:
        notes.append(source.manifest_problem)
    if fit is not None:
        notes += [f"approach {k} not fitted: {why}" for k, why in fit.skipped.items()]
    return notes


def _flops_or_dash(value) -> str:
    value = finite(value)
    return "–" if value is None else flops_label(value)


def _count_or_dash(value) -> str:
    value = finite(value)
    return "–" if value is None else count_label(value)


def _merged_paragraph(duplicates: list[dict]) -> list:
    """The combinations the sweeper merged into another of the same run id (trained once), if any."""
    if not duplicates:
        return []
    listed = "; ".join(f"{' '.join(d.get('overrides', []))} (as {d.get('same_as', '')})" for d in duplicates)
    return [
        Paragraph(
            f"{len(duplicates)} combination{'s' * (len(duplicates) != 1)} merged when the sweep was planned: the "
            f"same run id as another, trained once: {listed}"
        )
    ]
