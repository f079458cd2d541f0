"""The report's account of the sweep: what was run and read, the summary, the budgets × shapes table."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.describe.fit import exponents_text
from analysis.describe.numbers import count_label, flops_label, num
from analysis.describe.repeat import HEADING, repetition_text, runs_text
from analysis.fits.bootstrap import unchecked
from analysis.fits.results import FitReport
from analysis.report.blocks import FLAG, Bullets, Heading, Paragraph, Table
from analysis.sources.schema import RunTable, Source


# ---------------------------------------------------------------- the source
def fit_matches_source(fit: FitReport, table: RunTable, fit_path: str) -> list[str]:
    """Warnings when a saved fit was not made from the runs ``table`` holds now."""
    used = set()
    for f in fit.fits:
        used |= set(getattr(f, "run_id", []) or [])
        used |= {r for p in getattr(f, "profiles", []) for r in p.run_id}
    now = set(table.runs["run_id"])
    left_out = excluded_outliers(fit, table)  # fitted without them on purpose (user34: "refit" was advised)
    now, table = now - left_out, table.without_runs(left_out)
    lines = []
    filtered = fit.source.startswith(f"{table.source} [") and fit.source.endswith("]")  # fit --where: user26
    if filtered and (fit.runs != len(table) or not used <= now):
        lines.append(
            f"the fit {fit_path!r} was made from {fit.runs} runs of {fit.source!r}, {table.source!r} filtered "
            f"({len(table)} runs here): give the report the fit's --where ({fit.source[len(table.source) + 2 : -1]}) "
            "to describe the runs it fitted"
        )
    elif fit.runs != len(table) or not used <= now:
        lines.append(
            f"the fit {fit_path!r} was made from {fit.runs} runs of {fit.source!r}; {table.source!r} now holds "
            f"{len(table)} usable runs ({len(used - now)} runs of the fit are not among them): refit to "
            "describe the runs as they are"
        )
    if moved := _other_losses(fit, table):
        lines.append(
            f"the fit {fit_path!r} was made from other losses of these runs ({moved}): another loss column or "
            "evaluation set (--eval)? Refit, or read the source as the fit did"
        )
    if fit.loss_unit != table.loss_unit:
        lines.append(
            f"the fit {fit_path!r} is of losses in {fit.loss_unit}, {table.source!r}'s are in {table.loss_unit}: "
            "refit, or read the source with the fit's --loss-column and --loss-unit"
        )
    return lines


def excluded_outliers(fit: FitReport | None, table: RunTable) -> set[str]:
    """The runs of ``table`` that a fit saved with --exclude-outliers left out (flagged by its outlier rule)."""
    if fit is None or not fit.outliers_excluded:
        return set()
    return {o.run_id for o in fit.outliers} & set(table.runs["run_id"].astype(str))


def _other_losses(fit: FitReport, table: RunTable) -> str:
    """The first run whose loss in the fit differs from the table's, as 'r1: 2.51 in the fit, 2.63 here' ("" when
    none does; user22: `report --eval heldout --fit` of a fit on val_loss showed the heldout losses beside the val
    fit's laws without a word)."""
    ids = table.runs["run_id"]
    now = dict(zip(ids[~ids.duplicated(keep=False)], table.runs["loss"][~ids.duplicated(keep=False)]))  # seeds: not
    pairs = list(zip(fit.parametric.run_id, fit.parametric.loss)) if fit.parametric is not None else []  # final losses
    pairs += [
        (r, x) for p in (fit.isoflop.profiles if fit.isoflop is not None else []) for r, x in zip(p.run_id, p.loss)
    ]
    for run, loss in pairs:  # not approach 1's: an envelope's loss may be a curve's point
        if run in now and not np.isclose(loss, now[run], rtol=1e-9, atol=0.0):
            return f"{run}: {loss:.4g} in the fit, {now[run]:.4g} here"
    return ""


def text_column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame.columns:
        return pd.Series([], dtype=object)
    return frame[name].dropna().astype(str).str.strip().loc[lambda s: s != ""]


def sweep_name(source: Source) -> str:
    """The store's sweep, else the file's name with the filter or group its label adds (`SOURCE [COL==VALUE]`:
    a filter value with a '/' made the path's name "pythia]", review15c)."""
    names = sorted(set(text_column(source.frame, "sweep")))
    origin, label = source.origin or source.table.source, source.table.source
    fallback = Path(origin).name + (label[len(origin) :] if label.startswith(origin) else "")
    return source.manifest.get("sweep") or (", ".join(names) if names else fallback)


def about_blocks(source: Source, fit: FitReport | None, how_fitted: str, generated_at: datetime) -> list:
    frame = source.frame
    corpora = (
        frame[["corpus", "corpus_fingerprint"]].astype(str).drop_duplicates().itertuples(index=False)
        if {"corpus", "corpus_fingerprint"} <= set(frame.columns)
        else []
    )
    corpus = (
        "; ".join(f"{name} (fingerprint {fp})" for name, fp in corpora if name or fp) or "not recorded in the source"
    )
    versions = text_column(frame, "code_version").value_counts()
    code = (
        "; ".join(f"{v} ({k} run{'s' * (k != 1)})" for v, k in versions.items())
        if len(versions)
        else "not recorded in the source"
    )
    if any(v.endswith("-dirty") for v in versions.index):
        code += " (-dirty: trained from a checkout with uncommitted changes)"
    started, finished = text_column(frame, "started_at"), text_column(frame, "finished_at")
    dates = f"{started.min()} to {finished.max()}" if len(started) and len(finished) else "not recorded in the source"
    n_kind = source.table.n_kind.replace("_", "-")
    rows = [
        ["sweep", sweep_name(source)],
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


def summary_blocks(source: Source, fit: FitReport | None, fit_problems: list[str]) -> list:
    table = source.table
    budgets = table.budget_compute  # where the fits place them (review17: the labels contradicted the ladder's)
    left_out = excluded_outliers(fit, table)
    used = (
        f"{len(table) - len(left_out)} of the {len(table)} completed runs"
        if left_out
        else f"{len(table)} completed runs"
    )
    items = [
        f"{used} used{f' ({len(left_out)} flagged outliers left out by the fit)' if left_out else ''}, over {len(budgets)} compute budget{'s' * (len(budgets) != 1)} from "
        f"{flops_label(min(budgets))} to {flops_label(max(budgets))} FLOPs and model sizes from "
        f"{count_label(table.runs['N'].min())} to {count_label(table.runs['N'].max())} parameters."
    ]
    # the source's warnings before any number they bear on (user20: "model sizes from 20.2 to 7.26k parameters"
    # led the summary, the N-in-millions warning 180 lines below)
    plain = fit is None or bool(fit.fits)  # a data-constrained fit alone: not approaches 1-3's lines (`source_and_fit`)
    items += [f"{FLAG} {line[0].upper()}{line[1:]}" for line in table.lines(plain)[0]]
    if table.hparams is not None:
        items.append(f"A {table.hparams.note}.")
    if fit is None:
        items.append("No scaling law could be fitted to these runs (see the notes below).")
    else:
        items += [f"{FLAG} {line[0].upper()}{line[1:]}." for line in unchecked(fit.fits)]  # before any number
        for f in fit.fits:
            items.append(f"Approach {f.approach}: {exponents_text(f)} (Chinchilla: a ≈ b ≈ 0.5).")
        items += [f"Approach {k} is not headlined: {why}." for k, why in fit.headline_left_out().items()]
        if (repeat := fit.muennighoff) is not None:
            items.append(f"{HEADING}, {runs_text(repeat)}: {repetition_text(repeat)}.")
        if fit.parametric is not None and fit.parametric.validation and "skipped" not in fit.parametric.validation:
            v = fit.parametric.validation
            items.append(
                f"Held out: approach 3 refitted without the largest budget predicts its runs' loss within "
                f"{v['loss_relative_error_mean_abs']:.1%} on average ({v['loss_relative_error_max_abs']:.1%} at "
                "worst)."
            )
    items += [f"{FLAG} {line}" for line in fit_problems]
    return [Heading("Summary"), Bullets(items)]


# ---------------------------------------------------------------- what was swept
MAX_SHAPE_COLUMNS = 12  # beyond, a row per budget lists its shapes' cells (a grid of mostly empty columns reads badly)


def swept_blocks(source: Source) -> list:
    """Budgets × shapes: the loss of each completed run (from the checked table, so mapped columns
    work), the status of each other recorded run, and the sweep plan's runs without a record and
    dropped combinations. A shape is the ``shape`` column's name, else the run's N."""
    frame, runs = source.frame, source.table.runs
    shape_of = (
        dict(zip(frame["run_id"].astype(str), frame["shape"].fillna("").astype(str)))
        if {"run_id", "shape"} <= set(frame.columns)
        else {}
    )
    cells: dict[tuple[float, str], list[str]] = {}
    size_of: dict[str, float] = {}

    def put(budget: float, shape: str, size: float, text: str, alone: bool = False) -> None:
        """Every run of a cell (user24: a cell showed its first run only, a WSD branch, not the cosine run beside
        it nor its failures); ``alone``: a plan's mark, where no run is."""
        size_of.setdefault(shape, size)
        if not (alone and cells.get((budget, shape))):
            cells.setdefault((budget, shape), []).append(text)

    for run in runs.itertuples(index=False):
        put(float(run.budget), shape_of.get(str(run.run_id)) or count_label(run.N), float(run.N), num(run.loss))
    if "status" in frame.columns:
        for row in frame[frame["status"].astype(str) != "completed"].to_dict("records"):
            budget, size = finite(row.get("budget_flops")), finite(row.get("params")) or math.nan
            if budget is not None:
                put(budget, str(row.get("shape") or "") or count_label(size), size, str(row["status"]))
    for run in source.manifest.get("runs", []):
        put(float(run["budget_flops"]), str(run["shape"]), float(run.get("params", math.nan)), "not recorded", True)
    for dropped in source.manifest.get("dropped", []):  # not the merged duplicates (`duplicates`): trained
        overrides = dict(o.split("=", 1) for o in dropped.get("overrides", []) if "=" in o)
        if "budget" in overrides and "model" in overrides and finite(overrides["budget"]):
            model = overrides["model"]
            put(float(overrides["budget"]), model, size_of.get(model, math.nan), "dropped", True)
    shapes = sorted(size_of, key=lambda s: (size_of[s] if math.isfinite(size_of[s]) else math.inf, s))
    budgets = sorted({b for b, _ in cells})
    names = [
        s if not math.isfinite(size_of[s]) or s == count_label(size_of[s]) else f"{s} ({count_label(size_of[s])})"
        for s in shapes
    ]
    rows = [[flops_label(b)] + [" / ".join(cells.get((b, s), [])) for s in shapes] for b in budgets]
    header = ["budget C (FLOPs)", *names]
    if len(shapes) > MAX_SHAPE_COLUMNS:  # a table whose budgets share few sizes (user25: 26 sparse columns)
        header = ["budget C (FLOPs)", "runs: shape → cell"]
        rows = [[row[0], "; ".join(f"{n} → {c}" for n, c in zip(names, row[1:]) if c)] for row in rows]
    return [
        Heading("What was swept"),
        Paragraph(
            f"Each cell is one (budget, shape) combination: the final validation loss in {source.table.loss_unit} of a "
            "completed run (several: '/' between them, seeds, settings or a WSD branch); 'failed' (see the failures "
            "below); 'dropped' (not launched: see the reasons below); 'not recorded' (planned, but no record yet: still running or never run); empty when "
            f"not planned. {'Columns' if len(header) > 2 else 'Each row, its shapes'}: shape (N, "
            f"{source.table.n_kind.replace('_', '-')} parameters)."
        ),
        Table(header, rows),
    ]


def finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None
