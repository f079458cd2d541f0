"""A table whose rows are training curves: a run id repeated at growing token counts (a wandb export,
a log scraped per evaluation). Read as runs, each evaluation would be a run of its own, trained on
that many tokens with a schedule made for more: 35 runs with 10 evaluations each became 350 "runs" in
47 budgets, and approach 2 put a parabola through mid-training points. Here each run's last row (the
most tokens) is its final point, or its last row with a finite loss where only blank losses follow, near
its most tokens (`_final_rows`: an export's last row often holds the train loss only; a diverged run is
excluded, not ended early), and every row is a point of its curve, as a store's curves.csv is.

Rows are read as curves only when they look like one: every run id holds one N, its token counts
differ, its budget column (if any) holds one value, and in most runs the loss at the most tokens is
below the loss at the fewest (rows may come in any order). A table keyed by model name at several budgets (``model-50M`` at 4 budgets)
repeats a run id at growing token counts too, but each row is a run: it stays rows, and a note says why.
Without a budget column such a table looks exactly like curves (one N, growing D, falling loss) and
is read as curves: name the budgets in a column (or give each row its own run id).

Without a ``run_id`` column, a table with a step column (`STEP_COLUMNS`: ``step``, ``iteration``,
``checkpoint``: a suite's checkpoints as rows, as Pythia publishes them; wandb's ``_step``, Lightning's
``trainer/global_step``) names its runs by its ``run``/``name``/``model`` column with its seed, experiment and
group columns (`run_key`: three seeds of a model are three curves, not one) where its rows look like a history
(`_history`: a name repeats, most names hold `HISTORY_ROWS` rows or more, and no text column varies within a
name); read as runs, 8 models x 8 checkpoints were 64 "runs" in 19 budgets spanning up to 2x in C. The data cannot
tell such checkpoints from approach 3's grid with each run's total steps beside it (``model,N,D,step,loss``,
one run per row: D/step is constant in both), so it is read as curves where nothing says otherwise, and the
note names ``--rows-are-runs`` (`ColumnMap.rows_are_runs`), which reads each row as a run of its own. A
budget column or a hyperparameter column (`hparams.HP_COLUMNS`: lr, ...) varying within one run's rows
says otherwise: those rows are runs, and a note says which column. A run id at one token count with a step column
growing along it and the loss falling is a run's evaluations beside its planned total: its last step is its final
row, with a warning (`PLANNED`). Not an ``lr`` that a history (a step column)
logs as its schedule (`_scheduled`: one value per step, rising then falling along the run's tokens): it varies
along a curve. A grid whose lr was tuned to fall with D, a step column beside it, reads the same: curves.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sources.groups import CORPUS_COLUMNS, EXPERIMENT_COLUMNS
from analysis.sources.hparams import HP_COLUMNS, LR
from analysis.sources.rows import blank_cells, numeric
from analysis.sources.schema import RowsReading
from scaling.flops import tokens_6nd

RUN_ID = "run_id"
# The columns counting a run's steps, one row per checkpoint or logged step (a suite's checkpoints, a history
# export); in a table of one row per run they hold each run's total, which `_history` tells apart. The last are
# the ones loggers write into every export (wandb's own _step, Lightning's, HF Trainer's global step): a runs
# table's summary holds them too, and beside them only a run's name names a run, not a model's (`MODEL_NAMES`:
# one model name repeats over approach 3's runs), where the writer of a step column names checkpoints by model.
LOGGED_STEPS = ("_step", "trainer/global_step", "train/global_step")
STEP_COLUMNS = ("step", "Step", "global_step", "iteration", "iter", "checkpoint", *LOGGED_STEPS)
NAME_COLUMNS = ("run", "run_name", "name", "Name", "model", "model_name", "id")  # the first present names the run
MODEL_NAMES = ("model", "model_name")
HISTORY_ROWS = 3  # most names hold this many rows or more in a history (2 rows a name: a recipe's 2 runs?)
# Beside the name, what tells one checkpointed run from another of the same model: its seed, experiment, group.
SEED_COLUMNS = ("seed", "Seed", "data_seed")
GROUP_COLUMNS = ("group", "Group")  # a wandb export's Group
# A run's last row with a loss is its final point when it holds this share of the run's most tokens (a trailing
# train-only row at +1%); short of it the run did not finish (diverged, or stopped): it is excluded.
COMPLETE = 0.9
CURVES = "rows are training curves"  # the note's start
RUNS = "rows are runs, not training curves"  # the note's start where a step column is read as a run's


def run_key(frame: pd.DataFrame) -> list[str]:
    """The columns naming each row's run: ``run_id``, else (rows with one of `STEP_COLUMNS`) the first of
    `NAME_COLUMNS` (beside one of `LOGGED_STEPS`, not of `MODEL_NAMES`) and every seed, corpus, experiment and
    group column present; [] when rows name no run. Rows whose names repeat are one run's only where they
    look like a history (`_history`, asked by `split_curve_rows`)."""
    if RUN_ID in frame.columns:
        return [RUN_ID]
    step = _step_column(frame)
    if step is None:
        return []
    names = (c for c in NAME_COLUMNS if c in frame.columns and not (step in LOGGED_STEPS and c in MODEL_NAMES))
    name = next(names, None)
    if name is None:
        return []
    others = (*SEED_COLUMNS, *CORPUS_COLUMNS, *EXPERIMENT_COLUMNS, *GROUP_COLUMNS)
    return [name, *(c for c in others if c in frame.columns)]


def _history(frame: pd.DataFrame, run_ids: pd.Series, key: list[str]) -> bool:
    """Whether rows named by the ``key`` columns (``run_ids``) look like a history, one row per step of each
    run: most names hold `HISTORY_ROWS` rows or more and no text column varies within a name."""
    if (run_ids.value_counts() >= HISTORY_ROWS).mean() <= 0.5:
        return False
    text = (c for c in frame.columns if c not in key and _is_text(frame, c))
    return not any((_values_per_run(frame, run_ids, c) > 1).any() for c in text)


def _is_text(frame: pd.DataFrame, column: str) -> bool:
    """A column of words: no value of it reads as a number (as `rows.numeric` reads counts: "82,339,987")."""
    raw = frame[column]
    return not pd.api.types.is_numeric_dtype(raw) and raw.notna().any() and np.isnan(numeric(frame, column)[0]).all()


def _step_column(frame: pd.DataFrame) -> str | None:
    """The column counting each run's steps: the first of `STEP_COLUMNS` present, None without one."""
    return next((c for c in STEP_COLUMNS if c in frame.columns), None)


def run_ids_of(frame: pd.DataFrame, rows_are_runs: bool = False, notes: list[str] | None = None) -> pd.Series:
    """Each row's run: its `run_key` columns' values ("pythia-70m seed=1"), else (or with ``rows_are_runs``
    and no run_id column: --rows-are-runs) "rowK", K counting the source's rows from 1."""
    if rows_are_runs and RUN_ID in frame.columns and notes is not None:
        notes.append(f"--rows-are-runs: not applied, the table has a {RUN_ID!r} column (each of its values is a run)")
    key = [] if rows_are_runs and RUN_ID not in frame.columns else run_key(frame)
    return _joined(frame, key) if key else _row_ids(frame)


def _joined(frame: pd.DataFrame, key: list[str]) -> pd.Series:
    """Each row's values of the ``key`` columns as one text: "pythia-70m seed=1"."""
    ids = frame[key[0]].astype(str)
    for column in key[1:]:
        ids = ids + f" {column}=" + frame[column].astype(str)
    return ids


def curves_hint(reading: RowsReading | None) -> str:
    """A refusal's hint where rows named by a column other than run_id were read as curves (``reading``, a
    `RunTable.reading`): each run is then its last row, which may leave too few runs or token counts; else ""."""
    read = reading is not None and reading.curves and reading.by_name
    return " (rows were read as training curves: if each row is a run of its own, --rows-are-runs reads them so)" * read


def _row_ids(frame: pd.DataFrame) -> pd.Series:
    return pd.Series([f"row{i + 1}" for i in frame.index], index=frame.index, dtype=object)


def _repeat(key: list[str]) -> str:
    """ "column 'run_id' repeats", "columns 'model', 'seed' repeat"."""
    return f"column {key[0]!r} repeats" if len(key) == 1 else "columns " + ", ".join(map(repr, key)) + " repeat"


def split_curve_rows(
    frame: pd.DataFrame,
    run_ids: pd.Series,
    picked: tuple,
    curves: pd.DataFrame | None,
    notes: list[str],
    budget_col: str | None = None,
    warnings: list[str] | None = None,
) -> tuple[pd.DataFrame, pd.Series, pd.DataFrame | None, RowsReading | None]:
    """``frame`` (and its ``run_ids``) cut to each run's last row, and the curves (run_id, tokens and
    the loss column) of every row, when a run id repeats at more than one token count, the source has
    no curves of its own and the rows look like curves (the module docstring); else everything as given
    (run ids named by a checkpoint table's model column that repeat become "rowK": each row is a run).
    And how the rows were read (`RowsReading`, its note added to ``notes``; None where no run repeats).
    ``picked``: the N, D, C and loss columns (D None: tokens = C/(6N)); ``budget_col``: the budget column;
    ``warnings``: where a token column of planned totals is said (`PLANNED`; in ``notes`` without)."""
    (n_col, d_col, c_col, loss_col), warnings, key = picked, notes if warnings is None else warnings, run_key(frame)
    if curves is not None or not key or not run_ids.duplicated().any():
        return frame, run_ids, curves, None
    rows = run_ids if key == [RUN_ID] else _row_ids(frame)  # not curves: each row its own run
    if key != [RUN_ID] and not _history(frame, run_ids, key):
        return frame, rows, curves, None
    n = pd.Series(numeric(frame, n_col, "n")[0], index=frame.index)
    if d_col is not None:
        tokens = pd.Series(numeric(frame, d_col, "d")[0], index=frame.index)
    else:
        tokens = pd.Series(tokens_6nd(numeric(frame, c_col, "c")[0], n.to_numpy()), index=frame.index)
    counts = tokens.groupby(run_ids).nunique()
    by_name = key != [RUN_ID]
    if (n.groupby(run_ids).nunique() > 1).any():  # several N: not one run
        return frame, rows, curves, None
    if not (counts > 1).any():  # seeds of one point, unless a step column grows along the runs (`_planned`)
        if (last := _planned(frame, run_ids, loss_col)) is None:
            return frame, rows, curves, None
        keep, note = frame.index.isin(last.to_numpy()), f"{RUNS}: {PLANNED.format(step=_step_column(frame))}"
        warnings.append(note)
        return frame[keep], run_ids[keep], curves, RowsReading(curves=False, by_name=by_name, note=note)
    why = _not_curves(frame, run_ids, tokens, loss_col, budget_col)
    if why:
        reading = RowsReading(curves=False, by_name=by_name, note=f"{RUNS}, though {_repeat(key)}: {why}")
        notes.append(reading.note)
        return frame, rows, curves, reading
    last, ended = _final_rows(frame, run_ids, tokens, loss_col)
    keep = frame.index.isin(last.to_numpy())
    curve = pd.DataFrame({"run_id": run_ids.to_numpy(), "tokens": tokens.to_numpy(), loss_col: frame[loss_col]})
    note = (
        f"{CURVES}: {len(frame)} rows of {len(last)} runs ({_repeat(key)} at "
        f"{int(counts.max())} token counts at most); each run's last row (most tokens) is its final point, "
        "every row a point of its curve"
    )
    if by_name:
        note += (
            f"; if each row is a run of its own (column {_step_column(frame)!r} its total steps: approach 3's grid), "
            "--rows-are-runs reads them so"
        )
    reading = RowsReading(curves=True, by_name=by_name, note=note)
    notes.append(note)
    notes.extend(ended)
    return frame[keep], run_ids[keep], curve.reset_index(drop=True), reading


def _final_rows(frame: pd.DataFrame, run_ids: pd.Series, tokens: pd.Series, loss_col: str):
    """Each run's final row: its row with the most tokens, or its last row with a finite loss > 0 where every
    row after it leaves the loss blank (not logged: an export's last row often holds the train loss only)
    and it holds at least `COMPLETE` of the run's most tokens; a run that ends past an inf or non-numeric
    loss (diverged), or far short of its most tokens, keeps its last row, which `rows.usable_rows` excludes
    with a warning. And a note (a list of 0 or 1) naming the runs whose final row is not their last.
    (One groupby over the runs: a loop over them took 4x as long on an export of 20,000 runs x 5 rows.)"""
    loss = numeric(frame, loss_col, count=False)[0]
    tokens = tokens.fillna(-np.inf).to_numpy()
    scored = np.where(np.isfinite(loss) & (loss > 0), tokens, -np.inf)  # the tokens of rows with a loss
    run, names = pd.factorize(run_ids, sort=True)  # each row's run, numbered
    at = pd.Series(scored).groupby(run).transform("max").to_numpy()  # its run's most tokens with a loss
    rows = pd.DataFrame({"run": run, "tokens": tokens, "scored": scored, "unlogged": blank_cells(frame[loss_col])})
    rows["unlogged"] |= tokens <= at  # every row after the scored one leaves the loss blank
    rows.index = frame.index
    runs = rows.groupby("run").agg(
        last=("tokens", "idxmax"),  # the row with the most tokens
        scored=("scored", "idxmax"),  # the row with the most tokens and a loss (none: `at` is -inf)
        most=("tokens", "max"),
        at=("scored", "max"),
        unlogged=("unlogged", "all"),
    )
    runs.index = names
    ends = runs["unlogged"] & (runs["at"] >= COMPLETE * runs["most"])  # the scored row ends the run
    final = runs["scored"].where(ends, runs["last"])
    moved = runs.index[ends & (runs["at"] < runs["most"])]
    if not len(moved):
        return final, []
    return final, [
        f"{len(moved)} of {len(runs)} runs end in rows with no {loss_col!r} (e.g. run {moved[0]!r}, "
        f"row {int(runs['last'][moved[0]]) + 1}): each such run's final point is its last row with one, at its tokens"
    ]


# user21: an export of 28 runs x 10 evaluations whose token column held each run's planned total was read as 280
# seeds of 28 points, mid-training losses among them: N_opt 5.4e7 [2.5e7, 7.1e7] at 1e18 for a true 8.1e7
PLANNED = (
    "a run id repeats at one token count while column {step!r} grows and the loss falls along it: the token column "
    "holds each run's planned total, not the tokens at each row; each run's row at its last step is its final "
    "point (trained to that total?), the others are left out (give the tokens at each row to read them as curves)"
)


PLANNED_FALLING = 0.8  # the share of runs whose loss falls from their first step to their last, in a history


def _planned(frame: pd.DataFrame, run_ids: pd.Series, loss_col: str) -> pd.Series | None:
    """Each run's row at its last step (`PLANNED`) when every repeated run is a history: `HISTORY_ROWS` rows or
    more, its first step at most half its last, no hyperparameter varying along it (`_swept`: a batch sweep keyed by
    model), and the loss falls from its first step to its last in `PLANNED_FALLING` of them; else None (seeds of
    one point: review17, seeds whose final steps differed by a few were read so in 9 of 20 draws)."""
    step = _step_column(frame)
    if step is None:
        return None
    steps = pd.Series(numeric(frame, step, count=False)[0], index=frame.index)
    order = pd.DataFrame({"run": run_ids, "step": steps, "loss": numeric(frame, loss_col, count=False)[0]})
    order = order[run_ids.duplicated(keep=False).to_numpy()].dropna().sort_values(["run", "step"], kind="stable")
    runs = order.groupby("run")["step"].agg(["size", "min", "max"])
    if order.empty or (runs["size"] < HISTORY_ROWS).any() or (runs["min"] > 0.5 * runs["max"]).any():
        return None
    ends = order.groupby("run")["loss"].agg(["first", "last"])
    if (ends["last"] < ends["first"]).mean() < PLANNED_FALLING or _swept(frame, run_ids, steps):
        return None
    last = order.groupby("run")["step"].idxmax()
    lone = run_ids[~run_ids.duplicated(keep=False).to_numpy()]
    return pd.concat([last, pd.Series(lone.index, index=lone.to_numpy())])


def _not_curves(frame: pd.DataFrame, run_ids: pd.Series, tokens: pd.Series, loss_col: str, budget_col) -> str:
    """Why rows sharing a run id are not one run's curve ("" when they may be): a budget column that varies
    within a run, a loss that does not fall along most runs, or a hyperparameter column varying within a run."""
    if budget_col is not None and budget_col in frame.columns:
        why = _varies(frame, run_ids, budget_col, "budget column")
        if why:
            return why
    order = pd.DataFrame({"run": run_ids, "tokens": tokens, "loss": numeric(frame, loss_col, count=False)[0]})
    order = order[run_ids.duplicated(keep=False)].sort_values(["run", "tokens"], kind="stable")
    ends = order.groupby("run")["loss"].agg(["first", "last"])  # at the fewest and the most tokens
    if (ends["last"] >= ends["first"]).mean() > 0.5:
        return "in most runs the loss at the most tokens is not below the loss at the fewest (a curve's falls)"
    return _swept(frame, run_ids, tokens)


def _swept(frame: pd.DataFrame, run_ids: pd.Series, along: pd.Series) -> str:
    """Why rows sharing a run id are several runs of a hyperparameter sweep ("": none is): a `HP_COLUMNS` column
    varying within a run, but an lr a history (a step column) logs as its schedule along ``along``."""
    for column in (c for c in HP_COLUMNS if c in frame.columns):
        scheduled = _scheduled(frame, run_ids, along, column) if column == LR and _step_column(frame) else None
        if why := _varies(frame, run_ids, column, "column", scheduled):
            return why
    return ""


def _scheduled(frame: pd.DataFrame, run_ids: pd.Series, tokens: pd.Series, column: str) -> pd.Series:
    """Per run, whether ``column`` is a schedule logged on every row of a history (a step column present): the run
    holds `HISTORY_ROWS` rows or more, one value per token count, rising then falling along its tokens (warmup,
    then decay; either or both flat). A swept lr repeats at each D (1e-3, 2e-3, 4e-3, 1e-3, ...): not one.
    Before, a wandb export logging the scheduled lr on every row was read as one run per row."""
    values = pd.DataFrame({"run": run_ids, "tokens": tokens, "v": numeric(frame, column)[0]}).dropna()

    def schedule(run: pd.DataFrame) -> bool:
        if len(run) < HISTORY_ROWS or run.groupby("tokens")["v"].nunique().max() > 1:
            return False
        step = np.diff(run.sort_values("tokens", kind="stable")["v"].to_numpy())
        falling = np.flatnonzero(step < 0)
        return not falling.size or not (step[falling[0] :] > 0).any()

    scheduled = {run: schedule(part) for run, part in values.groupby("run")}
    return pd.Series(scheduled, dtype=bool).reindex(run_ids.unique(), fill_value=False)


def _varies(frame: pd.DataFrame, run_ids: pd.Series, column: str, what: str, scheduled=None) -> str:
    """'run 'm0' has 3 values of column 'lr' (a curve has one)' for the first run whose ``column`` varies; "".
    ``scheduled``: per run, whether its values are a schedule (`_scheduled`), which varies along a curve."""
    values = _values_per_run(frame, run_ids, column)
    if scheduled is not None:
        values = values.where(~scheduled.reindex(values.index, fill_value=False).astype(bool), 1)
    if not (values > 1).any():
        return ""
    run = values.index[int(np.argmax(values.to_numpy() > 1))]
    return f"run {run!r} has {int(values[run])} values of {what} {column!r} (a curve has one)"


def _values_per_run(frame: pd.DataFrame, run_ids: pd.Series, column: str) -> pd.Series:
    """How many values ``column`` holds within each run (blanks none): numbers as `rows.numeric` reads them
    (3e-4 and "0.0003", 1e19 and "1.0e19 FLOPs" are one value), words as written ("adamw", "lion")."""
    number = pd.Series(numeric(frame, column)[0], index=frame.index)
    words = number.isna().to_numpy() & ~blank_cells(frame[column])
    values = number.astype(object).where(~words, frame[column].astype(str)) if words.any() else number
    return values.groupby(run_ids).nunique()
