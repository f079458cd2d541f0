"""Runs that differ only in hyperparameters: one point per (N, D), not independent runs.

A table whose rows at one (N, compute budget) differ in a hyperparameter column (`HP_COLUMNS`, or the
columns named with ``--hp-columns``) is a hyperparameter sweep: its rows are not independent runs of
the scaling law, and fitting them as such made approach 1's interval of zero width (the envelope
took the same best run in every resample). Each (N, budget) is reduced to one point before the fits:

  * ``best`` (default): the setting of the swept columns with the lowest loss (its mean over seeds);
    its runs are kept (seeds share a unit), the other settings' runs are left out of the fits.
  * ``interpolate``: the learning rate of that best setting is refined by the parabola in log LR
    through the best LR and its two neighbours (loss is convex in log η near the optimum: Li et al.
    2025, Step Law): the point's LR and loss are the parabola's vertex. At the edge of the LR grid,
    or with a parabola that is not convex, the best run is kept and a note counts them.

Runs at one N in one budget have the same D up to the rounding of steps (the planner fixes D =
C/(6N)), so (N, budget) is the key. Every row, with its hyperparameters, stays in `HyperSweep.rows`
(figures, hyperparameter laws); `HyperSweep.optima` holds one row per point.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaling.errors import DataError

HP_COLUMNS = ("lr", "batch_size", "warmup_frac")  # the store's own hyperparameter columns
REDUCE = ("best", "interpolate")
LR = "lr"
SEQ_LEN = "seq_len"  # batch size in tokens = batch_size · seq_len
# a table's names for the sequence length, the store's first (user30: context_length read as none)
SEQ_LEN_NAMES = (SEQ_LEN, "seq_length", "sequence_length", "context_length", "max_seq_len", "block_size", "n_ctx")
BATCH_TOKENS = "batch_tokens"  # a table's batch size in tokens, read as the batch axis where it has no batch_size
N_NON_EMBEDDING = "params_non_embedding"  # the Step Law's N


@dataclass
class HyperSweep:
    """A hyperparameter sweep found in a table, and how it was reduced.

    columns: the hyperparameter columns read; swept: those that vary at some (N, budget).
    rows:    every usable run: run_id, N, D, C, loss, budget, the hyperparameter columns, N_hp
             (non-embedding N when the source has it, else N), batch_tokens (NaN without
             batch_size and seq_len), chosen (True: the run stands for its point in the fits).
    optima:  one row per (N, budget): N, N_hp, D, C, budget, runs, lr_best, loss_best, lr_interp,
             loss_interp (NaN at the grid's edge), lr_opt (interpolated where possible, else best),
             batch_size, batch_tokens (of the best setting), edge (True: best LR at the grid's edge),
             batch_edge (True: best batch size at the grid's edge, or fewer than 3 swept).
    reduce:  "best" or "interpolate"; n_hp: which N the laws use ("non-embedding" or "as fitted");
    note:    how many runs became how many points, and how.
    """

    columns: list[str]
    swept: list[str]
    rows: pd.DataFrame
    optima: pd.DataFrame
    reduce: str
    n_hp: str
    note: str = ""  # what was reduced to what, as the notes and the report's summary say it

    @property
    def lr_swept(self) -> bool:
        return LR in self.swept

    @property
    def batch_column(self) -> str | None:
        """The swept column of batch sizes (in sequences, or `BATCH_TOKENS`), None when none is swept."""
        return next((c for c in ("batch_size", BATCH_TOKENS) if c in self.swept), None)

    @property
    def batch_swept(self) -> bool:
        return self.batch_column is not None and bool(np.isfinite(self.optima["batch_tokens"]).any())


# Other tables' names for the peak learning rate (HF Trainer's `learning_rate`), read as `LR` where it is absent
# (user21: an LR sweep in a `learning_rate` column was pooled as 4 seeds per point, E 1.78 for a true 1.69)
LR_NAMES = ("lr", "learning_rate", "peak_lr", "max_lr", "lr_max", "lr_peak")
# an exporter's namespace before the name (wandb's flat config.lr, config/lr, optimizer.lr, opt_lr; user27: an LR
# sweep under config.lr or LR was pooled as seeds of each point, N_opt's interval missing the truth)
NAMESPACE = re.compile(r"^(?:.*[./])?(?:opt_|optim_|optimizer_)?")


def lr_alias(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """``frame`` with its learning-rate column (`LR_NAMES`, any case, after a `NAMESPACE`) named `LR`, said in
    ``notes``; as given when it has an `LR` column or none of those. Named in --hp-columns it is `LR`
    too (`hp_columns_of` reads the name so): the LR law is fitted for `LR` only (user27: --hp-columns config.lr
    reduced the sweep and fitted no law)."""
    named = [c for c in frame.columns if _lr_name(c)]
    if LR in frame.columns or len(named) != 1:
        return frame
    if _logged(frame, named[0]):
        return frame
    notes.append(f"column {named[0]!r} read as the learning rate {LR!r} (a sweep over it is reduced as over {LR})")
    return frame.rename(columns={named[0]: LR})


def _lr_name(column) -> bool:
    return NAMESPACE.sub("", str(column).strip().lower().replace(" ", "_")) in LR_NAMES


def _logged(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` varies along a run's curve: within a run id whose rows differ in a token or step column (a
    schedule an export logs on every row: review17, its curves were read as an LR sweep), not within a name that an
    LR sweep at one D repeats."""
    from analysis.sources.curverows import STEP_COLUMNS
    from analysis.sources.schema import FALLBACK_COLUMNS

    if "run_id" not in frame.columns:
        return False
    runs = frame.groupby("run_id")
    varying = runs[column].nunique() > 1
    along = [c for c in (*FALLBACK_COLUMNS["d"], *STEP_COLUMNS) if c in frame.columns]
    return bool(varying.any()) and any((runs[c].nunique() > 1)[varying].any() for c in along)


def hp_columns_of(frame: pd.DataFrame, named: tuple[str, ...] | None) -> list[str]:
    """The hyperparameter columns present: those named (each must exist), else `HP_COLUMNS` present."""
    if named:  # a learning-rate column named by its own name, read as `LR` (`lr_alias`)
        named = tuple(LR if c not in frame.columns and LR in frame.columns and _lr_name(c) else c for c in named)
        missing = [c for c in named if c not in frame.columns]
        if missing:
            raise DataError(
                f"--hp-columns: no column {missing[0]!r} in the table; columns present: "
                f"{', '.join(map(str, frame.columns))}"
            )
        return list(dict.fromkeys(named))
    batch = (BATCH_TOKENS,) if "batch_size" not in frame.columns else ()  # user27: a batch sweep in tokens
    return [c for c in (*HP_COLUMNS, *batch) if c in frame.columns]


def reduce_sweep(
    runs: pd.DataFrame, frame: pd.DataFrame, named: tuple[str, ...] | None, how: str, notes: list[str]
) -> tuple[pd.DataFrame, HyperSweep | None]:
    """``runs`` (checked: run_id, N, D, C, loss, budget; row i is ``frame``'s row i) reduced to one
    point per (N, budget) when some hyperparameter column varies there; else unchanged and None."""
    if how not in REDUCE:
        raise DataError(f"--hp-reduce {how!r} is not valid; use one of: {', '.join(REDUCE)}")
    columns = hp_columns_of(frame, named)
    if not columns:
        return runs, None
    rows = runs.copy()
    for column in columns:
        values = frame[column].to_numpy()
        numbers = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
        rows[column] = numbers if np.isfinite(numbers).all() else values.astype(str)
    keys = ["N", "budget"]
    swept = [c for c in columns if (rows.groupby(keys)[c].nunique(dropna=False) > 1).any()]
    if not swept:
        return runs, None
    if LR in swept and not (pd.api.types.is_numeric_dtype(rows[LR]) and (rows[LR] > 0).all()):
        raise DataError(
            f"column {LR!r} varies at one (N, budget) but holds values that are not numbers > 0: "
            f"{', '.join(map(str, frame[LR].unique()[:5]))}; give learning rates, or name the "
            "hyperparameter columns with --hp-columns"
        )
    if how == "interpolate" and LR not in swept:
        raise DataError(f"--hp-reduce interpolate needs a swept {LR!r} column; swept here: {', '.join(swept)}")
    rows["N_hp"] = _n_hp(frame, rows)
    rows["batch_tokens"] = _batch_tokens(frame, rows)
    optima, chosen = _optima(rows, swept, keys)
    rows["chosen"] = chosen
    reduced = _reduced(rows, optima, how)
    n_hp = "non-embedding" if N_NON_EMBEDDING in frame.columns else "as fitted"
    sweep = HyperSweep(columns, swept, rows, optima, how, n_hp)
    sweep.note = _note(sweep, len(runs), len(reduced))
    notes.append(sweep.note)
    return reduced, sweep


def _n_hp(frame: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    if N_NON_EMBEDDING not in frame.columns:
        return rows["N"].to_numpy(dtype=float)
    values = pd.to_numeric(frame[N_NON_EMBEDDING], errors="coerce").to_numpy(dtype=float)
    return np.where(np.isfinite(values) & (values > 0), values, np.nan)


def _batch_tokens(frame: pd.DataFrame, rows: pd.DataFrame) -> np.ndarray:
    if "batch_size" not in rows.columns and BATCH_TOKENS in rows.columns:  # as counts are read: "0.5M" (review19)
        from analysis.sources.rows import numeric

        values, bad = numeric(rows, BATCH_TOKENS)
        return np.where(bad, np.nan, values)
    seq_len = next((c for c in SEQ_LEN_NAMES if c in frame.columns), None)
    if "batch_size" not in rows.columns or seq_len is None:
        return np.full(len(rows), np.nan)
    seq = pd.to_numeric(frame[seq_len], errors="coerce").to_numpy(dtype=float)
    return pd.to_numeric(rows["batch_size"], errors="coerce").to_numpy(dtype=float) * seq


def _optima(rows: pd.DataFrame, swept: list[str], keys: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per (N, budget) (see `HyperSweep.optima`) and the mask of the best setting's runs."""
    chosen = np.zeros(len(rows), dtype=bool)
    out = []
    for (_n, _budget), group in rows.groupby(keys, sort=True):
        settings = group.groupby(swept, dropna=False)["loss"].mean()
        best = settings.idxmin()
        best = best if isinstance(best, tuple) else (best,)
        at_best = np.ones(len(group), dtype=bool)
        for column, value in zip(swept, best):  # a missing value is a setting of its own (review19: it crashed)
            at_best &= ((group[column] == value) | (group[column].isna() & pd.isna(value))).to_numpy()
        chosen[rows.index.get_indexer(group.index[at_best])] = True
        first = group[at_best].iloc[0]
        point = {"N": first.N, "N_hp": first.N_hp, "D": group["D"].mean(), "C": group["C"].mean()}
        point.update(budget=first.budget, runs=len(group), loss_best=float(settings.min()))
        point.update(_lr_optimum(group, swept, dict(zip(swept, best))))
        point.update(batch_size=first.get("batch_size", np.nan), batch_tokens=first.batch_tokens)
        batch = next((c for c in ("batch_size", BATCH_TOKENS) if c in swept), None)
        point["batch_edge"] = batch is not None and _at_edge(group[batch], first[batch])
        out.append(point)
    return pd.DataFrame(out), chosen


def _at_edge(values: pd.Series, best) -> bool:
    """Whether ``best`` is the smallest or largest of the swept ``values`` (or not a number): the optimum may lie
    beyond the grid. Compared as numbers: a column with a blank cell is text (review15c: "16" against 32.0)."""
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    best = pd.to_numeric(pd.Series([best]), errors="coerce").iloc[0]
    return bool(numbers.nunique() < 3 or not best > numbers.min() or not best < numbers.max())


def _lr_optimum(group: pd.DataFrame, swept: list[str], best: dict) -> dict:
    """The best LR, and the vertex of the parabola in log LR through it and its neighbours (the
    other swept columns held at the best setting's values)."""
    if LR not in swept:
        return {"lr_best": np.nan, "lr_interp": np.nan, "loss_interp": np.nan, "lr_opt": np.nan, "edge": False}
    same = np.ones(len(group), dtype=bool)
    for column in swept:
        if column != LR:
            same &= (group[column] == best[column]).to_numpy()
    curve = group[same].groupby(LR)["loss"].mean().sort_index()
    x, y = np.log(curve.index.to_numpy(dtype=float)), curve.to_numpy(dtype=float)
    i = int(np.argmin(y))
    out = {"lr_best": float(np.exp(x[i])), "lr_interp": np.nan, "loss_interp": np.nan, "edge": True}
    vertex = parabola_vertex(x[i - 1 : i + 2], y[i - 1 : i + 2]) if 0 < i < len(x) - 1 else None
    if vertex is not None:
        out.update(lr_interp=float(np.exp(vertex[0])), loss_interp=vertex[1], edge=False)
    out["lr_opt"] = out["lr_best"] if out["edge"] else out["lr_interp"]
    return out


def parabola_vertex(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(x, y) of the vertex of the parabola through three points; None when it is not convex."""
    a, b, c = np.polyfit(x, y, 2)
    if not (np.isfinite(a) and a > 0):
        return None
    at = float(np.clip(-b / (2 * a), x.min(), x.max()))
    return at, float(a * at * at + b * at + c)


def _reduced(rows: pd.DataFrame, optima: pd.DataFrame, how: str) -> pd.DataFrame:
    """The runs the fits use: the best setting's runs; with ``interpolate``, one row per point at
    the parabola's vertex where there is one (the best run's id, N, D, C and budget)."""
    base = ["run_id", "N", "D", "C", "loss", "budget"]
    kept = rows.loc[rows["chosen"], base].reset_index(drop=True)
    if how == "best":
        return kept
    vertex = optima.set_index(["N", "budget"])["loss_interp"]
    at = pd.MultiIndex.from_frame(kept[["N", "budget"]])
    loss = vertex.reindex(at).to_numpy(dtype=float)
    kept["loss"] = np.where(np.isfinite(loss), loss, kept["loss"])
    interpolated = np.isfinite(loss)
    first = ~kept.duplicated(subset=["N", "budget"]).to_numpy()
    return kept[~interpolated | first].reset_index(drop=True)


def _note(sweep: HyperSweep, before: int, after: int) -> str:
    how = (
        "the best setting of each"
        if sweep.reduce == "best"
        else "each one's optimum interpolated in log LR (best run at the grid's edge: "
        f"{int(sweep.optima['edge'].sum())})"
    )
    return (
        f"hyperparameter sweep over {', '.join(sweep.swept)}: {before} runs reduced to {after} runs at "
        f"{len(sweep.optima)} (N, budget) points, {how} (--hp-reduce {sweep.reduce}); they are not "
        "independent runs of the law"
    )
