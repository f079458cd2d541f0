"""Check a DataFrame of runs into a `RunTable`: one row per usable run with N, D, C and loss.

Rules, applied the same way to every source (`analysis.sources.load` reads them):
  * ``--where`` filters keep the rows asked for (`analysis.sources.groups`);
  * a run id repeated at growing token counts is a training curve: its last row is the run
    (`analysis.sources.curverows`);
  * rows whose ``status`` is not "completed" (a wandb export's ``State`` not "finished") are excluded, and a
    warning names them and why;
  * runs from different corpora or experiments are refused unless allowed (`analysis.sources.groups`);
  * a row whose N, D (or C) or loss is not a finite number > 0 is excluded and listed (refused
    under ``--strict``); exact duplicates are counted once; repeated seeds of one (N, D) share a
    ``unit`` (`analysis.sources.rows`);
  * a count column whose name carries its unit (params_M, tokens_B, compute_pfdays) is scaled, and a
    loss column named as a perplexity refused (`analysis.sources.colunits`);
  * D = C/(6N) when D is absent, and C = 6·N·D always (Kaplan et al. 2020, §2.1): a C column
    that disagrees is noted, and arithmetic wins;
  * runs are grouped into compute budgets by the one rule of `analysis.sources.budgets`;
  * a sweep over hyperparameters is reduced to one point per (N, budget) (`analysis.sources.hparams`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from analysis.sources import evalsets
from analysis.sources.budget_drift import drift_warning
from analysis.sources.budgets import NOMINAL_FACTOR, budget_as_c_offer, budget_column_of, budgets_of_frame
from analysis.sources.colunits import (
    apply_column_units,
    budget_kind_note,
    find_usual,
    leaf_name,
    logged_name,
    refuse_perplexity,
    warn_implausible_counts,
    warn_loss_range,
    warn_tokens_per_parameter,
)
from analysis.sources.curverows import run_ids_of, split_curve_rows
from analysis.sources.duplicates import first_of_duplicates
from analysis.sources.groups import apply_where, check_one_experiment, warn_mixed_runs, warn_separating_columns
from analysis.sources.hparams import lr_alias, reduce_sweep
from analysis.sources.rows import LOSS, numeric, unit_ids, usable_rows
from analysis.sources.schema import (
    FALLBACK_COLUMNS,
    KNOWN_LOSS_UNITS,
    LOSS_UNIT_COLUMN,
    NON_EMBEDDING_NAME,
    OPTION_OF,
    ColumnMap,
    RunTable,
    parse_loss_unit,
    unit_of_name,
)
from analysis.sources.status import drop_incomplete
from analysis.sources.unique import repeats_warning, unique_column_of, unique_tokens_of
from scaling.errors import DataError
from scaling.flops import flops_6nd, tokens_6nd


# ---------------------------------------------------------------- checking
def table_from_frame(
    frame: pd.DataFrame,
    source: str,
    columns: ColumnMap = ColumnMap(),
    *,
    curves: pd.DataFrame | None = None,
    warnings: list[str] | None = None,
    allow_mixed_corpora: bool | str = False,  # "corpora": pool corpora, not experiments (`check_one_experiment`)
) -> RunTable:
    """Check a DataFrame of runs and build the `RunTable` (see the module docstring for the rules).
    Row numbers in messages are the frame's index + 1 (its rows as the source holds them)."""
    warnings, notes = list(warnings or []), []
    if frame.empty:
        raise DataError(f"{source!r} holds no runs (the table is empty)")
    frame = lr_alias(apply_where(frame, columns.where, source, notes, warnings), notes)
    columns, eval_fingerprint = evalsets.resolve(frame, columns, source)
    run_ids = run_ids_of(frame, columns.rows_are_runs, notes)
    frame = drop_incomplete(frame, run_ids, warnings, notes)
    counts = {"read": len(run_ids), "incomplete": len(run_ids) - len(frame)}
    run_ids = run_ids[frame.index]
    check_one_experiment(frame, source, columns.experiment, allow_mixed_corpora, notes, eval_fingerprint, run_ids)
    warn_mixed_runs(frame, warnings)
    n_col, d_col, c_col, loss_col = _columns(frame, columns, source)
    columns = _loss_unit_of_column(frame, columns, loss_col, source)
    budget_col = budget_column_of(frame, columns.budget, source)
    unique_col = unique_column_of(frame, columns.unique, source)
    picked = (n_col, d_col, c_col, loss_col, unique_col)
    lines, budget = (notes, warnings), (budget_col, columns.as_given)
    frame, run_ids, curves, reading, scaled = _as_named(frame, run_ids, picked, curves, lines, budget)
    what = "runs" if reading is not None and reading.curves else "rows"  # rows read as curves: a row per run now
    keep = usable_rows(frame, run_ids, _needed(n_col, d_col, c_col, loss_col), columns.strict, warnings, what)
    frame, run_ids = frame[keep], run_ids[keep]
    runs = _runs(frame, run_ids, (n_col, d_col, c_col, loss_col), columns.n_kind, notes)
    warn_tokens_per_parameter(runs, warnings, scaled, d_col is not None)
    warn_loss_range(runs, columns.unit_of_loss(loss_col), warnings)
    first = first_of_duplicates(runs, frame, run_ids, warnings)
    runs, frame = runs[first].reset_index(drop=True), frame[first]
    runs["U"] = unique_tokens_of(frame, unique_col, runs["D"].to_numpy(), warnings)
    picked = {n_col, d_col, c_col, loss_col, unique_col, columns.experiment, eval_fingerprint}
    warn_separating_columns(frame, runs, picked | set(columns.hp_columns or ()), warnings)
    plain = repeats_warning(runs["D"], runs["U"], columns.refit or (source,))  # approaches 1-3 only, as budgets'
    runs["budget"], clustered, (budget_notes, budget_warnings) = _budgets(frame, runs, budget_col, columns, source)
    runs, hparams = reduce_sweep(runs, frame, columns.hp_columns, columns.hp_reduce, notes)
    runs["unit"] = unit_ids(runs, _families(frame, runs["run_id"]))
    counts |= _counts(counts, keep, first, len(runs)) | {"kept": len(runs)}
    return RunTable(
        runs=runs,
        curves=_curves(curves, runs, loss_col, columns.unit_of_loss(loss_col), notes),
        source=source,
        n_kind=columns.n_kind,
        warnings=warnings,
        notes=notes,
        counts=counts,
        hparams=hparams,
        plain_warnings=plain + budget_warnings,
        plain_notes=budget_notes,
        loss_unit=columns.unit_of_loss(loss_col),
        budgets_clustered=clustered,
        reading=reading,
    )


def _counts(counts: dict, keep: np.ndarray, first: np.ndarray, kept: int) -> dict:
    """How many of the rows read became no run: after those not completed (``counts``), the rows of a run's curve
    beside its final one, unusable rows (``keep`` false), duplicates (``first`` false), the runs of a hyperparameter
    sweep beside each point's chosen one; and the runs ``kept``, so that the counts add up to the rows read."""
    curve_rows = counts["read"] - counts["incomplete"] - len(keep)
    excluded, duplicates = int((~keep).sum()), int((~first).sum())
    return {
        "curve_rows": curve_rows,
        "excluded": excluded,
        "duplicates": duplicates,
        "reduced": int(first.sum()) - kept,
    }


def _budgets(frame: pd.DataFrame, runs: pd.DataFrame, budget_col, columns: ColumnMap, source: str):
    """Each run's budget, whether they were clustered from C (`budgets_of_frame`) and the lines that says: (notes,
    warnings)."""
    notes, warnings = [], []
    budgets, clustered = budgets_of_frame(
        frame,
        runs["C"].to_numpy(),
        notes,
        budget_col,
        columns.budget_tolerance,
        source=source,
        named=columns.budget is not None,
        sizes=runs["N"].to_numpy(),
        warnings=warnings,
        run_ids=pd.Series(runs["run_id"].to_numpy(), index=frame.index),  # by the source's row: `row_label`
    )
    if budget_col is not None and not clustered:
        n_col = _pick_column(frame, "n", columns.n, source, columns.n_kind)
        if made := budget_kind_note(frame, n_col, columns.n_kind, np.asarray(budgets, float), runs):
            notes.append(made)  # its remedy (--n-kind) ends a drift too
        elif drift := drift_warning(runs, np.asarray(budgets, float)):
            warnings.append(drift)
    return budgets, clustered, (notes, warnings)


def _needed(n_col: str, d_col: str | None, c_col: str | None, loss_col: str) -> dict[str, str]:
    """The columns every usable row needs, with each one's role (`rows.usable_rows`)."""
    return {n_col: "n", loss_col: LOSS, **({d_col: "d"} if d_col is not None else {c_col: "c"})}


def _as_named(frame: pd.DataFrame, run_ids: pd.Series, picked: tuple, curves, lines: tuple, budget):
    """Units from the N, D, C and unique-tokens columns' names (`colunits`; ``picked``: those and the loss
    column; ``budget``: the budget column and the columns read as given), then training curves given as rows
    (`curverows.split_curve_rows`: frame, run ids, curves and how the rows were read); the columns scaled last.
    ``lines``: (notes, warnings)."""
    (notes, warnings), (budget_col, as_given) = lines, budget
    n_col, d_col, c_col, loss_col, unique_col = picked
    roles = {"n": n_col, "d": d_col, "c": c_col, "u": unique_col}
    frame, scaled = apply_column_units(frame, roles, notes, budget_col, as_given)
    warn_implausible_counts(frame, roles, warnings)
    picked = (n_col, d_col, c_col, loss_col)
    return *split_curve_rows(frame, run_ids, picked, curves, notes, budget_col, warnings), scaled


def _loss_unit_of_column(frame: pd.DataFrame, columns: ColumnMap, loss_col: str, source: str) -> ColumnMap:
    """A ``loss_unit`` column holding one value sets the loss's unit (`parse_loss_unit`) when the loss column's
    name carries none (`unit_of_name`: val_bpb, loss_bits); --loss-unit wins. A value other than the name's
    unit is refused when both are known units: the column may describe another loss of the table (val_loss
    beside val_bpb); a label of the column's own yields to the name's unit.
    Several values are several experiments (`groups.EXPERIMENT_COLUMNS`), refused there."""
    if columns.loss_unit is not None or LOSS_UNIT_COLUMN not in frame.columns:
        return columns
    units = frame[LOSS_UNIT_COLUMN].dropna().astype(str).str.strip().unique()
    if len(units) != 1:
        return columns
    unit, named = parse_loss_unit(units[0], f"column {LOSS_UNIT_COLUMN!r}: value"), unit_of_name(loss_col)
    if named and unit not in KNOWN_LOSS_UNITS:  # a label of its own ("bits (log2)"): the name's unit is known
        return columns
    if named and named.lower() != unit.lower():
        raise DataError(
            f"{source!r}: column {LOSS_UNIT_COLUMN!r} says the loss is in {unit}, but loss column {loss_col!r} is in "
            f"{named} by its name (the column may describe another loss of the table); give --loss-unit to choose"
        )
    return replace(columns, loss_unit=unit)


def _families(frame: pd.DataFrame, run_ids: pd.Series) -> pd.Series | None:
    """Each run's WSD trunk (its ``branch_of``, a trunk its own run id), None without that column."""
    if "branch_of" not in frame.columns or "run_id" not in frame.columns:
        return None
    trunk = frame["branch_of"].where(frame["branch_of"].notna() & (frame["branch_of"].astype(str) != ""))
    trunk_of = dict(zip(frame["run_id"].astype(str), trunk.astype(object), strict=True))
    return pd.Series([t if isinstance(t, str) else r for r, t in ((r, trunk_of.get(r)) for r in run_ids)])


def _runs(frame: pd.DataFrame, run_ids: pd.Series, picked: tuple, n_kind: str, notes: list[str]) -> pd.DataFrame:
    """run_id, N, D, C = 6·N·D and loss of usable rows; D = C/(6N) without a token column."""
    n_col, d_col, c_col, loss_col = picked
    n, loss = numeric(frame, n_col, "n")[0], numeric(frame, loss_col, count=False)[0]
    c_given = None if c_col is None else numeric(frame, c_col, "c")[0]
    if d_col is not None:
        d = numeric(frame, d_col, "d")[0]
    else:
        d = tokens_6nd(c_given, n)
        notes.append(f"no token column: D = C/(6N) from column {c_col!r}")
    _check_tokens(d, d_col, c_col)
    compute = flops_6nd(n, d)
    if c_given is not None and d_col is not None:
        _note_compute_mismatch(c_given, compute, c_col, notes)
    notes.append(
        f"N = column {n_col!r} ({n_kind if leaf_name(n_col) in map(str.lower, _n_names(n_kind)) else 'as named'}),"
        f" loss = column {loss_col!r}, C = 6·N·D"
    )
    from analysis.sources.rows import text_cells

    schedule = text_cells(frame["schedule"]) if "schedule" in frame.columns else ""  # WSD's final points: `envelope`
    return pd.DataFrame(
        {"run_id": run_ids.to_numpy(), "N": n, "D": d, "C": compute, "loss": loss, "schedule": schedule}
    )


def _check_tokens(d: np.ndarray, d_col: str | None, c_col: str | None) -> None:
    """Most runs trained on under one token: the units are wrong (C in PF-days, D in billions...)."""
    median = float(np.nanmedian(d)) if len(d) else 1.0
    if median >= 1:
        return
    source = f"column {d_col!r}" if d_col is not None else f"D = C/(6N) from column {c_col!r}"
    hint = (
        "tokens"
        if d_col is not None
        else f"FLOPs, or if it is in PF-days (a PF-day is 8.64e19 FLOPs) rename it {c_col + '_pfdays'!r} "
        "(with --c-column, name that) to have it read in FLOPs; GPU-hours need the hardware's sustained FLOP/s "
        "(times 3600) to become FLOPs"
    )
    raise DataError(
        f"{source} gives a median D of {median:.3g} tokens, under one token per run; give it in {hint} "
        f"(or name other columns with --d-column/--c-column)"
    )


def _columns(frame: pd.DataFrame, columns: ColumnMap, source: str) -> tuple:
    n_col = _pick_column(frame, "n", columns.n, source, columns.n_kind)
    loss_col = _pick_column(frame, "loss", columns.loss, source)
    d_col = _pick_column(frame, "d", columns.d, source, required=False)
    c_col = _pick_column(frame, "c", columns.c, source, required=False)
    refuse_perplexity(loss_col, source)
    for column in columns.as_given:  # a name that is no column is an error, as --n-column's is
        _pick_column(frame, "as_given", column, source)
    if d_col is None and c_col is None:
        offer = budget_as_c_offer(frame, columns.budget, source)
        raise DataError(
            f"{source!r} has neither a token count D nor a compute C column (tried "
            f"{', '.join(FALLBACK_COLUMNS['d'] + FALLBACK_COLUMNS['c'])}); name one with --d-column "
            f"or --c-column{offer}{_n_alone(frame, n_col, loss_col)}. Columns present: {_present(frame)}"
        )
    return n_col, d_col, c_col, loss_col


def _n_alone(frame: pd.DataFrame, n_col: str, loss_col: str) -> str:
    """For a table whose only numbers are N and the loss (Kaplan's L(N)): what approaches 1-3 need; ""."""
    others = [c for c in frame.columns if c not in (n_col, loss_col) and np.mean(numeric(frame, c)[1]) < 0.5]
    if others:
        return ""
    return " (approaches 1-3 need D or C for every run: a loss by N alone, Kaplan's L(N), cannot be fitted here)"


LABEL_PRONE = ("model size", "model_size")


def _labels(frame: pd.DataFrame, name: str) -> bool:
    """Whether the columns named ``name`` (in any case) hold mostly text that is no number ("s0", "small")."""
    columns = [c for c in frame.columns if str(c).lower() == name]
    return any(np.mean(numeric(frame, c)[1]) > 0.5 for c in columns)


def _n_names(n_kind: str) -> tuple[str, ...]:
    return FALLBACK_COLUMNS["n"][n_kind]


def _pick_column(
    frame: pd.DataFrame, role: str, named: str | None, source: str, n_kind: str = "total", required: bool = True
) -> str | None:
    present = _present(frame)
    if named is not None:
        if named not in frame.columns:
            raise DataError(f"{OPTION_OF[role]} {named!r}: no such column in {source!r}; columns present: {present}")
        return named
    candidates = _n_names(n_kind) if role == "n" else FALLBACK_COLUMNS[role]
    # "model_size" is often a label ("s0", "small"): such a column is not N (the error then names --n-column)
    candidates = tuple(c for c in candidates if not (c in LABEL_PRONE and _labels(frame, c)))
    # as written, a published table's capitals (Parameters, Tokens, Loss), a usual name with its unit (params_M)
    found = find_usual(frame.columns, candidates, None if role == "loss" else role)
    if found is None and role != "loss":  # user31: log10_params, as the implausible-counts warning advises, had
        usual = {c.lower() for c in candidates}  # "no column for N"
        found = next((c for c in frame.columns if str(logged_name(c)).lower() in usual), None)
    if found is not None and f"{found}.1" in frame.columns:  # pandas' name for a header's second column of one name
        raise DataError(  # user23: a second 'params' column, half the first, was passed over without a word
            f"column {found!r} appears more than once in the header of {source!r} (the second read as {found + '.1'!r}):"
            f" which holds {'N' if role == 'n' else role}? Rename or drop one, or name it with {OPTION_OF[role]}"
        )
    if found is None and required:
        other = next((c for c in frame.columns if NON_EMBEDDING_NAME.search(str(c))), None) if role == "n" else None
        hint = f" (or --n-kind non_embedding for column {other!r})" if other else ""
        if other and other not in _n_names("non_embedding"):  # a name not tried: named with its kind
            hint = f" (or --n-column {other!r} --n-kind non_embedding: a non-embedding count)"
        raise DataError(
            f"{source!r} has no column for {'N' if role == 'n' else role} (tried {', '.join(candidates)}); "
            f"name it with {OPTION_OF[role]}{hint}. Columns present: {present}"
        )
    return found


def _present(frame: pd.DataFrame) -> str:
    """The columns, for an error line; when most are pandas' "Unnamed: k" (empty header cells), a hint that
    the header is on a later line (a spreadsheet's title row above it)."""
    names = list(map(str, frame.columns))
    unnamed = sum(name.startswith("Unnamed: ") for name in names)
    hint = " (the header may be on a later line: a title row above it?)" if unnamed > len(names) / 2 else ""
    return ", ".join(names) + hint


def _note_compute_mismatch(c_given: np.ndarray, compute: np.ndarray, c_col: str, notes: list[str]) -> None:
    usable = np.isfinite(c_given) & (c_given > 0)
    worst = float(np.max(np.abs(c_given[usable] / compute[usable] - 1.0), initial=0.0))
    if worst <= 0.02:
        return
    factor = float(np.median(compute[usable] / c_given[usable])) if usable.any() else 1.0
    if 1 / NOMINAL_FACTOR <= factor <= NOMINAL_FACTOR:
        notes.append(f"column {c_col!r} differs from 6·N·D by up to {worst:.0%}; the analysis uses C = 6·N·D")
        return
    notes.append(  # "differs by up to 83%" read as rounding for a column 6x off (DeepSeek's C = M·D)
        f"6·N·D is {factor:.3g}x column {c_col!r} (median over runs): it counts compute otherwise (C = M·D with "
        "M FLOPs per token, as DeepSeek's?) or N, D or C is in other units; the analysis uses C = 6·N·D"
    )


def _curves(curves: pd.DataFrame | None, runs: pd.DataFrame, loss_col: str, unit: str, notes: list[str]):
    """Curve points of the kept runs as run_id, N, C = 6·N·tokens, loss (finite, positive); the curves'
    val_loss stands in for a loss column they lack only when the two share ``unit`` (the table's)."""
    if curves is None or curves.empty:
        return None
    column = loss_col if loss_col in curves.columns else "val_loss"
    if column != loss_col and ColumnMap().unit_of_loss(column) != unit:
        notes.append(f"curves: they hold no {loss_col!r} ({unit}) but {column!r}, in other units: final points only")
        return None
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
