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

import base64
import html
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.describe.numbers import count_label, flops_label
from analysis.figures import FIGURES
from analysis.fits.optimal import EXTRAPOLATION_FACTOR, PRESETS, law_from_fit
from analysis.fits.results import Estimate, FitReport
from analysis.sources.schema import RunTable, Source
from scaling.store import atomic_write_bytes

HEADLINE_BUDGETS = (1e18, 1e21, 1e24)  # FLOPs: always in the allocation table, for orientation
LADDER_DECADES = 6  # the ladder runs from the smallest swept budget to 10^6 times it


# ---------------------------------------------------------------- the source
def fit_matches_source(fit: FitReport, table: RunTable, fit_path: str) -> list[str]:
    """Warnings when a saved fit was not made from the runs ``table`` holds now."""
    used = set()
    for f in fit.fits:
        used |= set(getattr(f, "run_id", []) or [])
        used |= {r for p in getattr(f, "profiles", []) for r in p.run_id}
    now = set(table.runs["run_id"])
    lines = []
    if fit.runs != len(table) or not used <= now:
        lines.append(
            f"the fit {fit_path!r} was made from {fit.runs} runs of {fit.source!r}; {table.source!r} now holds "
            f"{len(table)} usable runs ({len(used - now)} runs of the fit are not among them): refit to "
            "describe the runs as they are"
        )
    return lines


# ---------------------------------------------------------------- content blocks
@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    flagged: set[int] = field(default_factory=set)  # rows to highlight (extrapolations)


@dataclass
class FigureBlock:
    name: str
    title: str
    caption: str


FLAG = "⚠"


def _num(x: float) -> str:
    return f"{x:.4g}"


def _interval(e: Estimate | None, fmt=_num) -> str:
    if e is None:
        return "–"
    return fmt(e.value) if e.interval is None else f"{fmt(e.value)} [{fmt(e.lower)}, {fmt(e.upper)}]"


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
    blocks: list = [Heading(f"Scaling-law report: {_sweep_name(source)}", 1)]
    blocks += _about(source, fit, how_fitted, generated_at)
    blocks += _summary(source, fit, fit_problems or [])
    blocks += _swept(source)
    blocks += _figures(figures, missing)
    blocks += _fitted_laws(fit, source)
    with np.errstate(all="ignore"):  # bootstrap samples with an overflowed A give NaN, which intervals skip
        blocks += _allocation(fit, source)
    blocks += _validation(fit)
    blocks += _failures(source, fit)
    return blocks


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame.columns:
        return pd.Series([], dtype=object)
    return frame[name].dropna().astype(str).str.strip().loc[lambda s: s != ""]


def _sweep_name(source: Source) -> str:
    names = sorted(set(_column(source.frame, "sweep")))
    return source.manifest.get("sweep") or (", ".join(names) if names else Path(source.table.source).name)


def _about(source: Source, fit: FitReport | None, how_fitted: str, generated_at: datetime) -> list:
    frame = source.frame
    corpora = (
        frame[["corpus", "corpus_fingerprint"]].astype(str).drop_duplicates().itertuples(index=False)
        if {"corpus", "corpus_fingerprint"} <= set(frame.columns)
        else []
    )
    corpus = (
        "; ".join(f"{name} (fingerprint {fp})" for name, fp in corpora if name or fp) or "not recorded in the source"
    )
    versions = _column(frame, "code_version").value_counts()
    code = (
        "; ".join(f"{v} ({k} run{'s' * (k != 1)})" for v, k in versions.items())
        if len(versions)
        else "not recorded in the source"
    )
    if any(v.endswith("-dirty") for v in versions.index):
        code += " (-dirty: trained from a checkout with uncommitted changes)"
    started, finished = _column(frame, "started_at"), _column(frame, "finished_at")
    dates = f"{started.min()} to {finished.max()}" if len(started) and len(finished) else "not recorded in the source"
    n_kind = source.table.n_kind.replace("_", "-")
    rows = [
        ["sweep", _sweep_name(source)],
        ["source", source.table.source],
        ["corpus", corpus],
        ["code version of the runs", code],
        ["runs trained", dates],
    ]
    if source.manifest.get("launched_at"):
        rows.append(["sweep launched", str(source.manifest["launched_at"])])
    rows += [
        ["N counts", f"{n_kind} parameters"],
        ["fits", how_fitted],
        ["report generated", f"{generated_at.isoformat(timespec='seconds')} by scaling {_package_version()}"],
    ]
    return [Table(["", ""], rows)]


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scaling")
    except PackageNotFoundError:
        return "(not installed)"


def _summary(source: Source, fit: FitReport | None, fit_problems: list[str]) -> list:
    table = source.table
    budgets = table.budgets
    items = [
        f"{len(table)} completed runs used, over {len(budgets)} compute budget{'s' * (len(budgets) != 1)} from "
        f"{flops_label(budgets[0])} to {flops_label(budgets[-1])} FLOPs and model sizes from "
        f"{count_label(table.runs['N'].min())} to {count_label(table.runs['N'].max())} parameters."
    ]
    if fit is None:
        items.append("No scaling law could be fitted to these runs (see the notes below).")
    else:
        for f in fit.fits:
            items.append(
                f"Approach {f.approach}: N_opt ∝ C^a with a = {_interval(f.estimates['a'], _two)}, "
                f"D_opt ∝ C^b with b = {_interval(f.estimates['b'], _two)} (Chinchilla: a ≈ b ≈ 0.5)."
            )
        if fit.parametric is not None and fit.parametric.validation and "skipped" not in fit.parametric.validation:
            v = fit.parametric.validation
            items.append(
                f"Held out: approach 3 refitted without the largest budget predicts its runs' loss within "
                f"{v['loss_relative_error_mean_abs']:.1%} on average ({v['loss_relative_error_max_abs']:.1%} at "
                "worst)."
            )
    items += [f"{FLAG} {line}" for line in fit_problems]
    return [Heading("Summary"), Bullets(items)]


def _two(x: float) -> str:
    return f"{x:.2f}"


# ---------------------------------------------------------------- what was swept
def _swept(source: Source) -> list:
    """Budgets × shapes: the loss of each completed run (from the checked table, so mapped columns
    work), the status of each other recorded run, and the sweep plan's runs without a record and
    dropped combinations. A shape is the ``shape`` column's name, else the run's N."""
    frame, runs = source.frame, source.table.runs
    shape_of = (
        dict(zip(frame["run_id"].astype(str), frame["shape"].fillna("").astype(str)))
        if {"run_id", "shape"} <= set(frame.columns)
        else {}
    )
    cells: dict[tuple[float, str], str] = {}
    size_of: dict[str, float] = {}

    def put(budget: float, shape: str, size: float, text: str) -> None:
        size_of.setdefault(shape, size)
        cells.setdefault((budget, shape), text)

    for run in runs.itertuples(index=False):
        put(float(run.budget), shape_of.get(str(run.run_id)) or count_label(run.N), float(run.N), _num(run.loss))
    if "status" in frame.columns:
        for row in frame[frame["status"].astype(str) != "completed"].to_dict("records"):
            budget, size = _finite(row.get("budget_flops")), _finite(row.get("params")) or math.nan
            if budget is not None:
                put(budget, str(row.get("shape") or "") or count_label(size), size, str(row["status"]))
    for run in source.manifest.get("runs", []):
        put(float(run["budget_flops"]), str(run["shape"]), float(run.get("params", math.nan)), "not recorded")
    for dropped in source.manifest.get("dropped", []):
        overrides = dict(o.split("=", 1) for o in dropped.get("overrides", []) if "=" in o)
        if "budget" in overrides and "model" in overrides and _finite(overrides["budget"]):
            put(float(overrides["budget"]), overrides["model"], size_of.get(overrides["model"], math.nan), "dropped")
    shapes = sorted(size_of, key=lambda s: (size_of[s] if math.isfinite(size_of[s]) else math.inf, s))
    budgets = sorted({b for b, _ in cells})
    header = ["budget C (FLOPs)"] + [
        s if not math.isfinite(size_of[s]) or s == count_label(size_of[s]) else f"{s} ({count_label(size_of[s])})"
        for s in shapes
    ]
    rows = [[flops_label(b)] + [cells.get((b, s), "") for s in shapes] for b in budgets]
    return [
        Heading("What was swept"),
        Paragraph(
            "Each cell is one (budget, shape) combination: the final validation loss in nats/token of a "
            "completed run; 'failed' (see the failures below); 'dropped' (not launched: see the reasons "
            "below); 'not recorded' (planned, but no record yet: still running or never run); empty when "
            f"not planned. Columns: shape (N, {source.table.n_kind.replace('_', '-')} parameters)."
        ),
        Table(header, rows),
    ]


def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


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


def _figures(figures: dict[str, bytes], missing: dict[str, str]) -> list:
    blocks: list = [Heading("Figures")]
    for name, (title, _draw) in FIGURES.items():
        if name in figures:
            blocks.append(FigureBlock(name, title, CAPTIONS[name]))
    if missing:
        blocks.append(Paragraph("Not drawn:"))
        blocks.append(Bullets([f"{FIGURES[name][0]}: {why}" for name, why in missing.items()]))
    return blocks


# ---------------------------------------------------------------- fitted laws
MEANINGS = {
    "E": "irreducible loss (nats/token)",
    "A": "model-size term coefficient",
    "alpha": "model-size exponent α",
    "B": "data term coefficient",
    "beta": "data exponent β",
    "a": "N_opt ∝ C^a",
    "b": "D_opt ∝ C^b",
    "G": "N_opt = G·(C/6)^a",
    "N_coefficient": "k_N in N_opt = k_N·C^a",
    "D_coefficient": "k_D in D_opt = k_D·C^b",
    "loss_A": "L = A·C^(−α): A",
    "loss_alpha": "L = A·C^(−α): α",
    "floor_E": "L = E + A·C^(−α): E (nats/token)",
    "floor_A": "L = E + A·C^(−α): A",
    "floor_alpha": "L = E + A·C^(−α): α",
}
TITLES = {
    1: "Approach 1: envelope of the training curves (Hoffmann et al. 2022, §3.1)",
    2: "Approach 2: IsoFLOP profiles (Hoffmann et al. 2022, §3.2)",
    3: "Approach 3: parametric L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, §3.3)",
}


def _fitted_laws(fit: FitReport | None, source: Source) -> list:
    blocks: list = [Heading("Fitted laws")]
    if fit is None:
        return blocks + [Paragraph("No approach could be fitted to these runs.")]
    level = next((f.bootstrap.level for f in fit.fits if f.bootstrap), None)
    blocks.append(
        Paragraph(
            "Estimates with "
            + (
                f"{level:.0%} bootstrap percentile intervals [lower, upper]."
                if level
                else "no intervals (no bootstrap)."
            )
        )
    )
    for f in fit.fits:
        blocks.append(Heading(TITLES[f.approach], 3))
        blocks.append(
            Table(
                ["parameter", "estimate [interval]", "meaning"],
                [[k, _interval(e), MEANINGS.get(k, "")] for k, e in f.estimates.items()],
            )
        )
        blocks.append(Bullets(_diagnostics(f, source)))
        if f.approach == 2:
            blocks += _minima(f)
    for approach, why in fit.skipped.items():
        blocks.append(Paragraph(f"Approach {approach} was not fitted: {why}"))
    return blocks


def _diagnostics(f, source: Source) -> list[str]:
    lines = []
    if f.approach == 3:
        c = f.convergence
        lines.append(
            f"Optimizer: {'converged' if c['converged'] else 'NOT converged'} ({c['optimizer']}; "
            f"{c['starts_agreeing']} of {c['refined_starts']} best grid starts reach the optimum; max |gradient| "
            f"{c['gradient_max_abs']:.2g}; Huber δ = {f.huber_delta:g}, objective {f.objective:.6g}; "
            f"{len(f.n)} runs)."
        )
        lines += [f"{FLAG} {c[key]}" for key in ("warning", "note") if c.get(key)]
        lines += _loss_floor(f, source)
    elif f.approach == 1:
        d = f.diagnostics
        lines.append(
            f"{d['envelope_points']} envelope points from {d['points_used']} ({d['bins_per_decade']} bins per "
            f"decade, compute {flops_label(d['compute_range'][0])} to {flops_label(d['compute_range'][1])} "
            f"FLOPs); the law with a floor: {d['loss_law_with_floor']}."
        )
    lines.append(_bootstrap_line(f.bootstrap))
    return lines


def _loss_floor(f, source: Source) -> list[str]:
    """The corpus' true lowest loss when the records know it (synthetic corpora), beside the fitted E."""
    floors = pd.to_numeric(source.frame.get("loss_floor", pd.Series([], dtype=float)), errors="coerce").dropna()
    if not len(floors):
        return []
    return [
        f"The corpus' lowest reachable loss (loss_floor of the records) is {floors.min():.4g} nats/token; "
        f"compare E = {f.estimates['E'].value:.4g}."
    ]


def _bootstrap_line(boot) -> str:
    if boot is None:
        return "No bootstrap (0 resamples): no intervals."
    notes = "".join(f"; {n}" for n in boot.notes)
    intervals = f"{boot.level:.0%} percentile intervals" if boot.samples else "no intervals"
    return f"Bootstrap: {boot.resamples} resamples (seed {boot.seed}), {boot.failed} unusable; {intervals}{notes}."


def _minima(f) -> list:
    rows = []
    for p in f.profiles:
        n = np.asarray(p.n)
        where = (
            "inside the trained sizes"
            if p.inside_range
            else f"{FLAG} outside the trained sizes: the parabola is extrapolated to its minimum"
        )
        n_opt = Estimate(p.n_opt, *(p.n_opt_interval or (None, None)))
        rows.append(
            [
                flops_label(p.budget),
                f"{len(set(p.n))} ({count_label(n.min())} to {count_label(n.max())})",
                _interval(n_opt, count_label),
                count_label(p.d_opt),
                _num(p.loss_opt),
                where,
            ]
        )
    blocks = [
        Paragraph("The minimum of each budget's parabola:"),
        Table(
            ["budget C (FLOPs)", "sizes trained (N)", "N_opt [interval]", "D_opt", "loss at N_opt", "where"],
            rows,
            {i for i, p in enumerate(f.profiles) if not p.inside_range},
        ),
    ]
    if f.dropped:
        blocks.append(Bullets([f"Budget without a parabola: {why}" for why in f.dropped]))
    return blocks


# ---------------------------------------------------------------- compute-optimal allocation
def budget_ladder(smallest: float) -> list[float]:
    """The smallest swept budget times 10^k for k = 0…`LADDER_DECADES`, with `HEADLINE_BUDGETS`, ascending."""
    ladder = {smallest * 10.0**k for k in range(LADDER_DECADES + 1)} | set(HEADLINE_BUDGETS)
    return sorted(ladder)


def _allocation(fit: FitReport | None, source: Source) -> list:
    blocks: list = [Heading("Compute-optimal allocation")]
    if fit is None:
        return blocks + [Paragraph("No law was fitted, so no allocation can be given.")]
    approach = max(f.approach for f in fit.fits)  # 3 predicts loss at any N, D; then 2, then 1
    law = law_from_fit(fit, "this fit", approach)
    reference = PRESETS["chinchilla"]()
    ladder = budget_ladder(float(source.table.budgets[0]))
    rows, flagged = [], set()
    for i, c in enumerate(ladder):
        a, r = law.allocate(c), reference.allocate(c)
        note = ""
        if a.extrapolation:
            flagged.add(i)
            note = f"{FLAG} extrapolation: {_times(c / law.fitted_compute_max)} the largest fitted run"
        rows.append(
            [
                flops_label(c),
                _interval(a.n, count_label),
                _interval(a.d, count_label),
                _interval(a.tokens_per_parameter, count_label),
                _interval(a.loss),
                count_label(r.n.value),
                count_label(r.d.value),
                note,
            ]
        )
    fitted_max = law.fitted_compute_max
    blocks += [
        Paragraph(
            f"From approach {approach}'s law (the most complete fitted: 3 predicts loss at any N and D, "
            f"then 2, then 1), for budgets from the smallest swept to 10^{LADDER_DECADES} times it and "
            f"{', '.join(flops_label(b) for b in HEADLINE_BUDGETS)} FLOPs. D = C/(6·N), so 6·N·D = C in "
            f"every row. The largest fitted run used {flops_label(fitted_max)} FLOPs; budgets beyond "
            f"{EXTRAPOLATION_FACTOR:g}× that are extrapolations, flagged {FLAG}: treat them as speculation. "
            "Chinchilla: the published rule (Hoffmann et al. 2022, Table 3: N_opt = sqrt(C/120), "
            "20 tokens per parameter) for reference."
            + (
                ""
                if source.table.n_kind == "total"
                else " Note: N here counts non-embedding parameters, Chinchilla's N counts all."
            )
        ),
        Table(
            [
                "budget C (FLOPs)",
                "N_opt [interval]",
                "D_opt [interval]",
                "tokens/parameter",
                "predicted loss (nats/token)",
                "Chinchilla N_opt",
                "Chinchilla D_opt",
                "note",
            ],
            rows,
            flagged,
        ),
    ]
    if len(fit.fits) > 1:
        blocks += _approaches_side_by_side(fit, ladder, reference)
    return blocks


def _times(factor: float) -> str:
    """A ratio as 99.9×, 1,000×, 3.33e8×."""
    return f"{factor:.3g}×" if factor < 100 else f"{factor:,.0f}×" if factor < 1e6 else f"{flops_label(factor)}×"


def _approaches_side_by_side(fit: FitReport, ladder: list[float], reference) -> list:
    laws = {f.approach: law_from_fit(fit, "fit", f.approach) for f in fit.fits}
    rows = [
        [flops_label(c)]
        + [_interval(law.allocate(c).n, count_label) for law in laws.values()]
        + [count_label(reference.allocate(c).n.value)]
        for c in ladder
    ]
    flagged = {
        i for i, c in enumerate(ladder) if c > EXTRAPOLATION_FACTOR * max(f.fitted_compute_max for f in fit.fits)
    }
    return [
        Paragraph("N_opt by approach (the approaches disagree when the data cannot pin the exponent down):"),
        Table(["budget C (FLOPs)"] + [f"approach {k}" for k in laws] + ["Chinchilla"], rows, flagged),
    ]


# ---------------------------------------------------------------- validation
def _validation(fit: FitReport | None) -> list:
    blocks: list = [Heading("Held-out validation")]
    checked = [f for f in (fit.fits if fit else []) if getattr(f, "validation", None)]
    if not checked:
        return blocks + [Paragraph("Not run (it needs at least two budgets).")]
    blocks.append(Paragraph("Each law is refitted without the runs of the largest budget and asked to predict them."))
    for f in checked:
        v = f.validation
        if "skipped" in v:
            blocks.append(Paragraph(f"Approach {f.approach}: skipped ({v['skipped']})."))
            continue
        where = (
            f"held out {flops_label(v['held_out_budget'])} FLOPs, {_times(v['extrapolation_factor'])} beyond the "
            "budgets fitted" + (f" ({FLAG} an extrapolation)" if v["extrapolation"] else "")
        )
        if f.approach == 1:
            blocks.append(
                Paragraph(
                    f"Approach 1 ({where}): the lowest loss there predicted {_num(v['loss_predicted'])} "
                    f"against {_num(v['loss_observed'])} ({v['loss_relative_error']:+.2%}), and the size "
                    f"that reaches it {count_label(v['n_opt_predicted'])} against "
                    f"{count_label(v['n_opt_observed'])} ({v['n_opt_relative_error']:+.1%}); observed: "
                    f"that budget's best run, {v['best_run_id']}."
                )
            )
        elif f.approach == 3:
            blocks.append(
                Paragraph(
                    f"Approach 3 ({where}): the loss of its {v['held_out_runs']} runs is predicted within "
                    f"{v['loss_relative_error_mean_abs']:.2%} on average, "
                    f"{v['loss_relative_error_max_abs']:.2%} at worst."
                )
            )
            blocks.append(
                Table(
                    ["run", "observed loss", "predicted loss", "error"],
                    [
                        [
                            r["run_id"],
                            _num(r["observed"]),
                            _num(r["predicted"]),
                            f"{r['predicted'] / r['observed'] - 1:+.2%}",
                        ]
                        for r in v["runs"]
                    ],
                )
            )
        else:
            blocks.append(
                Paragraph(
                    f"Approach 2 ({where}): N_opt predicted {count_label(v['n_opt_predicted'])} against "
                    f"{count_label(v['n_opt_observed'])} from that budget's own parabola "
                    f"({v['n_opt_relative_error']:+.1%})."
                )
            )
    return blocks


# ---------------------------------------------------------------- failures and notes
def _failures(source: Source, fit: FitReport | None) -> list:
    frame = source.frame
    blocks: list = [Heading("Failed, dropped and missing runs")]
    if "status" in frame.columns:
        failed = frame[frame["status"].astype(str) != "completed"]
        if len(failed):
            blocks.append(
                Paragraph(f"{len(failed)} run{'s' * (len(failed) != 1)} did not complete (not used in the fits):")
            )
            blocks.append(
                Table(
                    ["run", "budget (FLOPs)", "shape", "N", "status", "reason"],
                    [
                        [
                            str(r.get("run_id", "")),
                            _flops_or_dash(r.get("budget_flops")),
                            str(r.get("shape", "")),
                            _count_or_dash(r.get("params")),
                            str(r["status"]),
                            str(r.get("reason", "")),
                        ]
                        for r in failed.to_dict("records")
                    ],
                )
            )
    dropped = source.manifest.get("dropped", [])
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
    notes = [*source.table.warnings, *source.table.notes]
    if source.manifest_problem:
        notes.append(source.manifest_problem)
    if fit is not None:
        notes += [f"approach {k} not fitted: {why}" for k, why in fit.skipped.items()]
    if len(blocks) == 1:
        blocks.append(Paragraph("None: every planned run completed."))
    if notes:
        blocks += [Paragraph("Notes on reading the input:"), Bullets(notes)]
    return blocks


def _flops_or_dash(value) -> str:
    value = _finite(value)
    return "–" if value is None else flops_label(value)


def _count_or_dash(value) -> str:
    value = _finite(value)
    return "–" if value is None else count_label(value)


# ---------------------------------------------------------------- rendering
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1180px; margin: 2em auto;
       padding: 0 1em; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.7em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: .88em; }
th, td { border: 1px solid #ccc; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr.flag td { background: #fff1d6; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #333; max-width: 60em; }
@media print { figure { break-inside: avoid; } }
"""


def figure_file_name(name: str) -> str:
    return f"{name}.png"


def render_html(blocks: list, figures: dict[str, bytes]) -> str:
    """One self-contained page: inline CSS, figures as data: URIs; no scripts, no external references."""
    title = next(b.text for b in blocks if isinstance(b, Heading))
    body = "\n".join(_html_block(b, figures) for b in blocks)
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f"<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _html_block(block, figures: dict[str, bytes]) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{e(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>\n" + "\n".join(f"<li>{e(item)}</li>" for item in block.items) + "\n</ul>"
    if isinstance(block, Table):
        head = "" if not any(block.header) else "<tr>" + "".join(f"<th>{e(h)}</th>" for h in block.header) + "</tr>\n"
        rows = "\n".join(
            ('<tr class="flag">' if i in block.flagged else "<tr>") + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
            for i, row in enumerate(block.rows)
        )
        return f"<table>\n{head}{rows}\n</table>"
    data = base64.b64encode(figures[block.name]).decode("ascii")
    return (
        f'<figure id="{e(block.name)}">\n<img src="data:image/png;base64,{data}" alt="{e(block.title)}">\n'
        f"<figcaption><b>{e(block.title)}.</b> {e(block.caption)}</figcaption>\n</figure>"
    )


def render_markdown(blocks: list, figure_dir: str) -> str:
    """The Markdown twin: the same blocks, figures referenced as ``figure_dir/NAME.png``."""
    return "\n\n".join(_markdown_block(b, figure_dir) for b in blocks) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_block(block, figure_dir: str) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Table):
        header = [h or " " for h in block.header]
        lines = ["| " + " | ".join(_md(h) for h in header) + " |", "|" + "---|" * len(header)]
        for i, row in enumerate(block.rows):
            cells = [_md(c) for c in row]
            if i in block.flagged:
                cells[0] = f"**{cells[0]}**"
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)
    return f"![{block.title}]({figure_dir}/{figure_file_name(block.name)})\n\n*{block.title}.* {block.caption}"


def report_paths(out_html: Path) -> tuple[Path, Path]:
    """(Markdown twin, figure directory) written beside ``out_html``: NAME.md and NAME-figures/."""
    return out_html.with_suffix(".md"), out_html.with_name(f"{out_html.stem}-figures")


def write_readable(path: Path, data: bytes) -> None:
    """`scaling.store.atomic_write_bytes`, then the permissions of a file created normally (0666 less
    the umask): the temporary file it renames is private (0600), and a report is meant to be shared."""
    atomic_write_bytes(path, data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_report(out_html: Path, blocks: list, figures: dict[str, bytes]) -> list[Path]:
    """Write the figures, the Markdown twin and the HTML (last), each atomically; returns the paths."""
    out_html = Path(out_html)
    markdown, figure_dir = report_paths(out_html)
    html_text, markdown_text = (
        render_html(blocks, figures),
        render_markdown(blocks, figure_dir.name),
    )  # before any write
    written = []
    for name, png in figures.items():
        write_readable(figure_dir / figure_file_name(name), png)
        written.append(figure_dir / figure_file_name(name))
    write_readable(markdown, markdown_text.encode())
    write_readable(out_html, html_text.encode())
    return written + [markdown, out_html]
