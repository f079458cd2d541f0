"""Check a DataFrame of runs into a `RunTable`: one row per usable run with N, D, C and loss.

Rules, applied the same way to every source (`analysis.sources.load` reads them):
  * rows whose ``status`` is not "completed" are excluded, and a warning names them and why;
  * runs from different corpora (``corpus_fingerprint``) are refused unless allowed;
  * N, D and loss must be finite and positive; the first bad value is reported with its column,
    row and run;
  * D = C/(6N) when D is absent, and C = 6·N·D always (Kaplan et al. 2020, §2.1): a C column
    that disagrees is noted, and arithmetic wins;
  * runs are grouped into compute budgets by the one rule of `analysis.sources.budgets`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sources.budgets import budgets_of_frame
from analysis.sources.schema import FALLBACK_COLUMNS, OPTION_OF, ColumnMap, RunTable
from scaling.errors import DataError
from scaling.flops import flops_6nd, tokens_6nd

MAX_LISTED = 5  # how many excluded runs a warning names before "and k more"


# ---------------------------------------------------------------- checking
def table_from_frame(
    frame: pd.DataFrame,
    source: str,
    columns: ColumnMap = ColumnMap(),
    *,
    curves: pd.DataFrame | None = None,
    warnings: list[str] | None = None,
    allow_mixed_corpora: bool = False,
) -> RunTable:
    """Check a DataFrame of runs and build the `RunTable` (see the module docstring for the rules)."""
    warnings = list(warnings or [])
    notes: list[str] = []
    frame = frame.reset_index(drop=True)
    if frame.empty:
        raise DataError(f"{source!r} holds no runs (the table is empty)")
    run_ids = _run_ids(frame)  # rows keep their position in the source (row k = index k - 1)
    frame = _drop_incomplete(frame, run_ids, warnings)
    run_ids = run_ids[frame.index]
    _check_single_corpus(frame, run_ids, source, allow_mixed_corpora, notes)
    _warn_mixed_architectures(frame, warnings)

    n_col = _pick_column(frame, "n", columns.n, source, columns.n_kind)
    loss_col = _pick_column(frame, "loss", columns.loss, source)
    d_col = _pick_column(frame, "d", columns.d, source, required=False)
    c_col = _pick_column(frame, "c", columns.c, source, required=False)
    if d_col is None and c_col is None:
        raise DataError(
            f"{source!r} has neither a token count D nor a compute C column (tried "
            f"{', '.join(FALLBACK_COLUMNS['d'] + FALLBACK_COLUMNS['c'])}); name one with --d-column "
            f"or --c-column. Columns present: {', '.join(map(str, frame.columns))}"
        )

    n = _positive_column(frame, n_col, run_ids, "parameter counts N")
    loss = _positive_column(frame, loss_col, run_ids, "losses")
    c_given = None if c_col is None else _positive_column(frame, c_col, run_ids, "compute values C (FLOPs)")
    if d_col is not None:
        d = _positive_column(frame, d_col, run_ids, "token counts D")
    else:
        d = tokens_6nd(c_given, n)
        notes.append(f"no token column: D = C/(6N) from column {c_col!r}")
    compute = flops_6nd(n, d)
    if c_given is not None and d_col is not None:
        _note_compute_mismatch(c_given, compute, c_col, notes)
    notes.append(
        f"N = column {n_col!r} ({columns.n_kind if n_col in _n_names(columns.n_kind) else 'as named'}),"
        f" loss = column {loss_col!r}, C = 6·N·D"
    )

    runs = pd.DataFrame({"run_id": run_ids.to_numpy(), "N": n, "D": d, "C": compute, "loss": loss})
    runs["budget"] = budgets_of_frame(frame, runs["C"].to_numpy(), notes, columns.budget, columns.budget_tolerance)
    return RunTable(
        runs=runs,
        curves=_curves(curves, runs, loss_col, notes),
        source=source,
        n_kind=columns.n_kind,
        warnings=warnings,
        notes=notes,
    )


def _run_ids(frame: pd.DataFrame) -> pd.Series:
    if "run_id" in frame.columns:
        return frame["run_id"].astype(str)
    return pd.Series([f"row{i + 1}" for i in range(len(frame))], index=frame.index)


def _row_label(position: int, run_ids: pd.Series) -> str:
    """'row k' (k counts data rows of the source from 1) and the run id when the source has one."""
    row = int(run_ids.index[position]) + 1
    run = str(run_ids.iloc[position])
    return f"row {row}" if run == f"row{row}" else f"row {row} (run {run})"


def _drop_incomplete(frame: pd.DataFrame, run_ids: pd.Series, warnings: list[str]) -> pd.DataFrame:
    if "status" not in frame.columns:
        return frame
    done = frame["status"].astype(str).str.strip().str.lower() == "completed"
    if done.all():
        return frame
    reasons = frame["reason"].fillna("").astype(str) if "reason" in frame.columns else pd.Series("", index=frame.index)
    listed = [
        f"{run_ids[i]} ({frame['status'][i]}{': ' + reasons[i] if reasons[i] else ''})" for i in frame.index[~done]
    ]
    more = f", and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
    warnings.append(
        f"excluded {len(listed)} of {len(frame)} runs that did not complete: {', '.join(listed[:MAX_LISTED])}{more}"
    )
    kept = frame[done]
    if kept.empty:  # say why, as the warning would have: the reasons are what the user needs now
        raise DataError(
            f"no completed runs to fit: all {len(frame)} runs are marked failed or incomplete: "
            f"{', '.join(listed[:MAX_LISTED])}{more}"
        )
    return kept


def _check_single_corpus(
    frame: pd.DataFrame, run_ids: pd.Series, source: str, allow_mixed: bool, notes: list[str]
) -> None:
    column = next((c for c in ("corpus_fingerprint", "corpus") if c in frame.columns), None)
    if column is None:
        return
    counts = frame[column].fillna("").astype(str).value_counts()
    counts = counts[counts.index != ""]
    if len(counts) <= 1:
        return
    listing = ", ".join(f"{name!r} ({k} runs)" for name, k in counts.items())
    if not allow_mixed:
        # name the runs outside the largest corpus: in a store, runs/<run_id>/record.json
        others = run_ids[frame[column].fillna("").astype(str) != counts.index[0]].tolist()
        more = f" and {len(others) - MAX_LISTED} more" if len(others) > MAX_LISTED else ""
        raise DataError(
            f"{source!r} mixes runs from {len(counts)} corpora ({column}: {listing}; runs outside the "
            f"largest: {', '.join(others[:MAX_LISTED])}{more}); fit one corpus at a time, or pass "
            "--allow-mixed-corpora if they are meant to be pooled"
        )
    notes.append(f"pooling runs from {len(counts)} corpora as asked ({column}: {listing})")


def _warn_mixed_architectures(frame: pd.DataFrame, warnings: list[str]) -> None:
    """Runs of different model architectures (scaling.shapes.ARCHITECTURE; empty: written before
    the field existed) do not lie on one law: a warning, since a user may pool them on purpose."""
    if "architecture" not in frame.columns:
        return
    counts = frame["architecture"].fillna("").astype(str).value_counts()
    if len(counts) > 1:
        listing = ", ".join(f"{name or 'unrecorded (older records)'} ({k} runs)" for name, k in counts.items())
        warnings.append(f"runs of {len(counts)} model architectures are fitted together: {listing}")


def _n_names(n_kind: str) -> tuple[str, ...]:
    return FALLBACK_COLUMNS["n"][n_kind]


def _pick_column(
    frame: pd.DataFrame, role: str, named: str | None, source: str, n_kind: str = "total", required: bool = True
) -> str | None:
    present = ", ".join(map(str, frame.columns))
    if named is not None:
        if named not in frame.columns:
            raise DataError(f"{OPTION_OF[role]} {named!r}: no such column in {source!r}; columns present: {present}")
        return named
    candidates = _n_names(n_kind) if role == "n" else FALLBACK_COLUMNS[role]
    found = next((c for c in candidates if c in frame.columns), None)
    if found is None and required:
        raise DataError(
            f"{source!r} has no column for {'N' if role == 'n' else role} (tried {', '.join(candidates)}); "
            f"name it with {OPTION_OF[role]}. Columns present: {present}"
        )
    return found


def _positive_column(frame: pd.DataFrame, column: str, run_ids: pd.Series, what: str) -> np.ndarray:
    """The column as float64; the first value that is not a finite positive number is an error."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values) | (values <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        value = raw.iloc[i]
        shown = repr(value) if isinstance(value, str) else str(value.item() if hasattr(value, "item") else value)
        more = f" ({int(bad.sum()) - 1} more bad values)" if bad.sum() > 1 else ""
        raise DataError(
            f"column {column!r}, {_row_label(i, run_ids)}: value {shown} is not usable; {what} must be "
            f"finite numbers > 0{more}"
        )
    return values


def _note_compute_mismatch(c_given: np.ndarray, compute: np.ndarray, c_col: str, notes: list[str]) -> None:
    worst = float(np.max(np.abs(c_given / compute - 1.0)))
    if worst > 0.02:
        notes.append(f"column {c_col!r} differs from 6·N·D by up to {worst:.0%}; the analysis uses C = 6·N·D")


def _curves(curves: pd.DataFrame | None, runs: pd.DataFrame, loss_col: str, notes: list[str]) -> pd.DataFrame | None:
    """Curve points of the kept runs as run_id, N, C = 6·N·tokens, loss (finite, positive)."""
    if curves is None or curves.empty:
        return None
    column = loss_col if loss_col in curves.columns else "val_loss"
    merged = curves.merge(runs[["run_id", "N"]], on="run_id", how="inner")
    tokens = pd.to_numeric(merged["tokens"], errors="coerce").to_numpy(dtype=float)
    loss = pd.to_numeric(merged[column], errors="coerce").to_numpy(dtype=float)
    measured = ~np.isnan(loss)  # a curve row without this loss is a step where it was not evaluated
    usable = measured & np.isfinite(tokens) & (tokens > 0) & np.isfinite(loss) & (loss > 0)
    if not usable.any():
        return None
    if (measured & ~usable).any():
        notes.append(
            f"curves: skipped {(measured & ~usable).sum()} points whose {column!r} or tokens are not finite "
            "positive numbers"
        )
    notes.append(f"curves: {usable.sum()} points of {column!r} from {merged.loc[usable, 'run_id'].nunique()} runs")
    n = merged["N"].to_numpy(dtype=float)[usable]
    return pd.DataFrame(
        {"run_id": merged["run_id"].to_numpy()[usable], "N": n, "C": flops_6nd(n, tokens[usable]), "loss": loss[usable]}
    )
