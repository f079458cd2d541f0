"""Which rows of a table are one experiment: ``--where`` filters, ``--group-by`` groups, and the
guard against pooling experiments without saying so.

  * ``--where COLUMN OP VALUE`` (OP one of ==, !=, <=, >=, <, >; repeated: all must hold) keeps
    the rows that satisfy it. VALUE compares as a number when the column is numeric, else as text.
  * ``--group-by COLUMN`` splits the table into one group per value of COLUMN (``scaling fit``
    fits each).
  * A column naming the experiment, corpus or source (`EXPERIMENT_COLUMNS`, or the one named with
    ``--experiment-column``) that holds more than one value is refused unless ``--group-by`` splits
    on it or ``--allow-mixed`` says the runs are meant to be pooled (then it is noted).
  * Any other text column whose values differ between rows at one (N, D) is warned about
    (`warn_separating_columns`): such rows look like two experiments, not repeated seeds.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.sources.budgets import cluster_budgets
from analysis.sources.colunits import leaf_name
from analysis.sources.hparams import SEQ_LEN_NAMES
from analysis.sources.rows import count_value, listing, text_cells
from analysis.sources.schema import LOSS_NAME, LOSS_UNIT_COLUMN
from scaling.errors import DataError, UserError

# Columns whose values name different experiments (a tokenizer or a loss unit too: losses per token of two
# tokenizers, or in two units, lie on no one law); the corpus columns first (the store's own).
CORPUS_COLUMNS = ("corpus_fingerprint", "corpus")
EXPERIMENT_COLUMNS = ("dataset", "source", "experiment", "recipe", "variant", "arm", "tokenizer", LOSS_UNIT_COLUMN)
# Text columns of the store's records that are bookkeeping (ids, outcome, where and when a run ran, its shape's
# name for its N), which differ between repeated seeds of one experiment. Not a recipe: `schedule` (cosine,
# wsd, constant) changes the loss and is checked as any other column; every run of one of our sweeps has one
# schedule (a WSD trunk's branches too; records before WSD, empty, ran cosine: `load.py`). `architecture`
# is warned about in its own words (`warn_mixed_runs`).
RUN_METADATA = frozenset(
    {"run_id", "sweep", "status", "failure", "error_type", "reason", "shape", "branch_of", "device"}
    | {"code_version", "started_at", "finished_at", "pack_job", "param_count", "gpu", "host", "hostname", "node"}
    # what a run's execution measured (two executions of one run differ in it; user26: a rerun kept as a seed)
    | {"wall_time_s", "tokens_per_s", "flops_per_s", "pack_tokens_per_s", "threads"}
)
WARNED_APART = ("architecture",)  # columns a check of their own warns about


def is_run_metadata(column) -> bool:
    """Whether a column is a run's bookkeeping, which two copies or seeds of one run may differ in: `RUN_METADATA`,
    wandb's `_`-keys (`_timestamp`, `_runtime`) and a runs-table export's times (`wandb.EXPORT_TIMES`: Created)."""
    from analysis.sources.wandb import EXPORT_TIMES

    name = str(column)
    return name in RUN_METADATA or name.startswith("_") or name.strip().lower() in EXPORT_TIMES


OPERATORS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_WHERE = re.compile(r"^\s*([^=!<>]+?)\s*(==|!=|<=|>=|<|>)\s*(.*?)\s*$")
MAX_VALUES = 8  # values of a column an error lists before "..."
MISSING = "(missing)"  # the group of rows with no value in a column (`split_groups`, `check_one_experiment`)


@dataclass(frozen=True)
class Where:
    """One ``--where`` filter: COLUMN OP VALUE."""

    column: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.column}{self.op}{self.value}"


def parse_where(text: str) -> Where:
    """``"dataset==c4"`` -> Where; anything else is a UserError saying what is valid."""
    match = _WHERE.match(text)
    if not match or not match.group(3):
        raise UserError(
            f"--where {text!r} is not valid; give COLUMN OP VALUE with OP one of {', '.join(OPERATORS)}, "
            "e.g. --where dataset==c4 or --where params>=1e8"
        )
    return Where(*match.groups())


def apply_where(
    frame: pd.DataFrame, filters, source: str, notes: list[str], warnings: list[str] | None = None
) -> pd.DataFrame:
    """The rows of ``frame`` that satisfy every filter (their index is kept: row numbers stay those
    of the source); a filter naming no column, or keeping no row, is a DataError. A bound on a loss column
    selects runs by the outcome the laws model: said in ``warnings`` (None: ``notes``)."""
    for where in filters:
        column = _existing(frame, where.column, f"--where {str(where)!r}", source)
        if where.op not in ("==", "!=") and LOSS_NAME.search(str(column)):
            (notes if warnings is None else warnings).append(
                f"--where {where} selects runs by their loss, the outcome every law models: the runs it leaves out "
                "bias the fits (a selection on the result); filter on N, D, C or a recipe column instead"
            )
        values, wanted = _comparable(frame[column], where)
        kept = frame[OPERATORS[where.op](values, wanted).fillna(False).astype(bool)]
        if kept.empty:
            raise DataError(
                f"--where {str(where)!r} keeps none of the {len(frame)} rows of {source!r}; column {column!r} "
                f"holds {_values(frame[column])}"
            )
        notes.append(f"--where {where}: kept {len(kept)} of {len(frame)} rows")
        frame = kept
    return frame


def _comparable(column: pd.Series, where: Where):
    """The column and the value compared, as numbers where every cell is one ('70M' and '1.4B' are, as the
    N column reads them, and so is the value: `--where params>=50M`), else as text."""
    counts = column if pd.api.types.is_numeric_dtype(column) else column.map(count_value)
    numbers = pd.to_numeric(counts, errors="coerce")
    if numbers.notna().any() and numbers.notna().sum() == column.notna().sum():
        try:
            return numbers, float(count_value(where.value))
        except ValueError:
            if where.op not in ("==", "!="):
                raise DataError(
                    f"--where {str(where)!r}: column {where.column!r} is numeric; give a number, e.g. "
                    f"{where.column}{where.op}1e8"
                ) from None
    if where.op not in ("==", "!="):
        raise DataError(
            f"--where {str(where)!r}: column {where.column!r} is not numeric; text columns take == or != only"
        )
    return column.astype(str), where.value


def split_groups(
    frame: pd.DataFrame, column: str, source: str, distinct_case: bool = False
) -> list[tuple[str, pd.DataFrame]]:
    """(value, rows) per value of ``column`` (`experiment_labels`: stripped) in order of first appearance;
    empty or missing values form the group `MISSING`. Two values that differ only in case ("Base",
    "base") are one recipe spelled two ways, far more often than two recipes: a UserError naming both,
    unless ``distinct_case`` (the user named the groups, e.g. `scaling compare --baseline`)."""
    name = _existing(frame, column, f"--group-by {column!r}", source)
    labels = experiment_labels(frame[name])
    values = list(labels.unique())
    folded: dict[str, str] = {}
    for value in values:
        twin = folded.setdefault(value.casefold(), value)
        if twin != value and not distinct_case:
            raise UserError(
                f"--group-by {column!r}: {source!r} has labels {twin!r} and {value!r}, which differ only in case; "
                f"spell them one way in the table, keep one with --where {column}!={value}, or (scaling compare) "
                "name the baseline with --baseline to compare them as two groups"
            )
    return [(value, frame[labels == value]) for value in values]


def check_one_experiment(
    frame: pd.DataFrame,
    source: str,
    named: str | None,
    allow_mixed: bool | str,
    notes: list[str],
    eval_fingerprint: str | None = None,
    run_ids: pd.Series | None = None,
) -> None:
    """Refuse rows of several experiments (the module docstring) unless ``allow_mixed`` (True; "corpora": corpora only,
    as the data-constrained fit pools cuts of one; user36: it pooled two experiments unsaid). With
    ``eval_fingerprint`` (--eval NAME: the set's column), that column is checked, not the corpus. ``run_ids``
    (each row's run): runs are counted, not rows (user25: 15 runs of 8 curve rows read "120 runs")."""
    extra = () if named is None else (_existing(frame, named, f"--experiment-column {named!r}", source),)
    corpus = eval_fingerprint or next((c for n in CORPUS_COLUMNS for c in frame.columns if _named_as(c, (n,))), None)
    named_so = tuple(c for c in frame.columns if _named_as(c, EXPERIMENT_COLUMNS))  # user31: `Recipe` only warned of
    for column in dict.fromkeys(((corpus,) if corpus else ()) + named_so + extra):
        if column not in frame.columns:
            continue
        what = "corpora" if column == corpus else "experiments"
        labels = experiment_labels(frame[column], missing=what == "experiments")
        counts = labels[labels != ""].value_counts()
        if len(counts) <= 1:
            continue
        runs = labels.groupby(labels).size() if run_ids is None else run_ids.groupby(labels).nunique()
        runs = runs[counts.index].sort_values(ascending=False, kind="stable")  # ranked by runs (review18), not rows
        shown = ", ".join(
            f"{name!r} ({k} runs{f' in {counts[name]} rows' if counts[name] != k else ''}{_missing_rows(labels, name)})"
            for name, k in runs.items()
        )
        counts = runs
        if allow_mixed is True or allow_mixed == what:
            notes.append(f"pooling runs from {len(counts)} {what} as asked ({column}: {shown})")
            continue
        named_one = next(n for n in counts.index if n != MISSING)
        outside = _outside_the_largest(frame, labels, counts) if "run_id" in frame.columns and what == "corpora" else ""
        raise DataError(
            f"{source!r} mixes runs from {len(counts)} {what} ({column}: {shown}{outside}); fit each with "
            f"`scaling fit|plot --group-by {column}` (or compare them: `scaling compare|report --group-by {column}`), pick "
            f"one with --where {column}=={named_one}, or pass "
            f"--allow-mixed{'-corpora' if what == 'corpora' else ''} if they are meant to be pooled"
        )


def _outside_the_largest(frame: pd.DataFrame, labels: pd.Series, counts: pd.Series) -> str:
    """The runs of a store outside its largest corpus (runs/<run_id>/record.json), or each corpus's runs when
    two tie for the largest (which was "the largest" then hung on how the run ids sort)."""
    ids = frame["run_id"].astype(str)

    def of(rows) -> str:  # each run once (a curve's rows share its id)
        return listing(list(dict.fromkeys(ids[rows])))

    if len(counts) > 1 and counts.iloc[0] == counts.iloc[1]:
        return "; runs of each: " + "; ".join(f"{name!r}: {of(labels == name)}" for name in counts.index)
    return f"; runs outside the largest: {of(labels != counts.index[0])}"


def experiment_labels(column: pd.Series, missing: bool = True) -> pd.Series:
    """Each row's value of ``column`` as text (stripped); an empty or missing value is `MISSING` (its own
    experiment: which recipe such a row ran is unknown, so it is pooled with none), or "" (not counted)
    when not ``missing``: a corpus fingerprint is missing where a run was not scored on that set, and
    such a row has no loss either."""
    labels = pd.Series(text_cells(column), index=column.index)
    return labels.where(labels != "", MISSING if missing else "")


def _missing_rows(labels: pd.Series, name: str) -> str:
    """': rows 4, 9' (source rows, from 1) for the `MISSING` group, whose rows have no name to find them by."""
    if name != MISSING:
        return ""
    return ": rows " + listing([str(int(i) + 1) for i in labels.index[labels == MISSING]])


def warn_separating_columns(frame: pd.DataFrame, runs: pd.DataFrame, skip, warnings: list[str]) -> None:
    """Warn about a text column, or a numeric one named like an experiment (`_names_an_experiment`: codes 0, 1),
    (not a run's metadata, ids, the columns `check_one_experiment` checks or ``skip``) whose values differ between rows at one (N, D) point, or split the runs into at most
    `MAX_VALUES` groups that are each a sweep of their own (`_sweeps_of_their_own`: a wandb ``Group``
    of muP runs beside one of SP runs at other sizes was pooled without a word): such rows
    are usually different experiments (a recipe, an optimizer), not repeated seeds, and pooling them
    makes every fit describe neither. ``frame`` and ``runs`` are row-aligned."""
    point = runs.groupby(["N", "D"], sort=False).ngroup().to_numpy()
    for column in frame.columns:
        values = frame[column]
        checked = is_run_metadata(column) or column in (*WARNED_APART, *skip)
        checked = checked or _named_as(column, CORPUS_COLUMNS + EXPERIMENT_COLUMNS)
        numeric = not checked and pd.api.types.is_numeric_dtype(values) and not _names_an_experiment(column)
        if numeric and (_warn_numeric_sweep(column, values, point, warnings) or not _names_a_setting(column)):
            continue  # a setting's value per group of runs (wd 0.0 beside 0.1) is checked as a label's (user30)
        if checked:
            continue
        labels = values.fillna("").astype(str).to_numpy()
        if not 1 < len(set(labels)) < len(labels):
            continue
        varied = pd.DataFrame({"point": point, "label": labels}).groupby("point")["label"].nunique()
        hint = f"fit them apart with --group-by {column} (or --where, --experiment-column {column}); the fits pool them"
        if (varied > 1).any():
            warnings.append(
                f"rows at the same (N, D) differ in column {column!r} ({_values(values)}) at {int((varied > 1).sum())} "
                f"of {len(varied)} points: if these are different experiments, {hint}"
            )
        elif _sweeps_of_their_own(labels, runs, overlap_only=numeric):
            warnings.append(
                f"column {column!r} splits the runs into {len(set(labels))} groups ({_values(values)}), each a sweep of "
                f"its own (several sizes and token counts): if these are different experiments, {hint}"
            )


# Words of a numeric column that differs between repeated seeds of one point (not a setting swept)
MEASURED_WORDS = {"seed", "time", "runtime", "duration", "timestamp", "step", "steps", "epoch", "epochs", "unique"}
MEASURED_WORDS |= {"throughput", "speed", "mfu", "memory", "mem", "rank", "wall", "elapsed", "per", "hours"}  # _per_s


def _warn_numeric_sweep(column, values: pd.Series, point: np.ndarray, warnings: list[str]) -> bool:
    """A warning (and True) when a numeric column that is neither measured (`MEASURED_WORDS`) nor a loss takes several
    values at one (N, D) point: a setting swept there (user27: an LR sweep under config.lr, a batch sweep under
    batch_tokens, pooled as seeds of each point: N_opt's interval missed the truth)."""
    from analysis.sources.hparams import BATCH_TOKENS, HP_COLUMNS  # swept where they are: reduced, not pooled

    words = set(re.split(r"[^a-z]+", str(column).lower()))
    if (
        words & MEASURED_WORDS
        or LOSS_NAME.search(str(column))
        or str(column).startswith("_")
        or column in (*HP_COLUMNS, BATCH_TOKENS)
    ):
        return False
    varied = pd.DataFrame({"point": point, "value": values.to_numpy()}).groupby("point")["value"].nunique()
    if (varied > 1).any():
        warnings.append(
            f"rows at the same (N, D) differ in column {column!r} ({_values(values)}) at {int((varied > 1).sum())} of "
            f"{len(varied)} points, pooled as seeds of each point: if it is a setting swept there, name it with "
            f"--hp-columns {column} (the best run of each point is kept), or pick one with --where"
        )
    return bool((varied > 1).any())


# Training settings: a value of one per group of runs, each group a sweep of its own, is two recipes (user30: wd 0.0
# beside 0.1 pooled, alpha 0.18 for 0.34); swept at each point, a hyperparameter sweep (`_warn_numeric_sweep`)
SETTING_NAMES = {"wd", "weight_decay", "dropout", "attn_dropout", "resid_dropout", "embd_dropout", "beta1", "beta2"}
SETTING_NAMES |= {"adam_beta1", "adam_beta2", "eps", "adam_eps", "grad_clip", "max_grad_norm", "clip_grad"}
SETTING_NAMES |= {"label_smoothing", "z_loss", "min_lr_ratio", "min_lr", "init_std", "tied_head", "tie_embeddings"}
SETTING_NAMES |= {"tie_word_embeddings", "cooldown_frac", "warmup_steps", "mup", "qk_norm"}


def _named_as(column, names: tuple) -> bool:
    """Whether a column is one of ``names``, in any case (`Recipe`, ` Corpus`), as N's and D's columns are found."""
    return str(column).strip().lower() in names


def _names_a_setting(column) -> bool:
    """Whether a column is named as a training setting (`SETTING_NAMES`; in a namespace: optim.weight_decay)."""
    return leaf_name(column) in SETTING_NAMES


# Words that name an experiment in a column of numeric codes (user21: experiment_id 0/1, two recipes, one worth 2x
# compute, were pooled without a word, where text values were warned about); other numeric columns (seeds, times,
# throughput) differ between repeated seeds of one point and are not checked
EXPERIMENT_WORDS = {"experiment", "exp", "recipe", "variant", "arm", "version", "group", "setting", "config"}
# user28: model_family 0/1, lr_schedule 0/1, two recipes pooled without a word
EXPERIMENT_WORDS |= {"family", "schedule", "tokenizer", "optimizer", "dataset", "mixture", "mix"}
CODE_WORDS = {"id", "name", "no", "nr", "number", "code", "idx", "index"}  # what may follow one: experiment_id
CODE_WORDS |= {"model", "data", "train", "training", "run", "type", "kind", "vocab"}  # or beside it: model_family
# Numeric settings whose values are recipes, not a setting swept at each point: the context length, the vocabulary
# (user28: vocab_size 32000 beside 50257, two tokenizers, pooled; user29: a store relaunched at seq_len=64)
RECIPE_NUMBERS = set(SEQ_LEN_NAMES)
RECIPE_NUMBERS |= {"vocab_size", "n_vocab", "vocab", "lr_schedule", "lr_scheduler", "scheduler"}  # codes 0/1 too


def _names_an_experiment(column) -> bool:
    """Whether a column's name is an experiment word, alone or with a code word (`experiment_id`, `arm_no`,
    `model_family`), or one of `RECIPE_NUMBERS` (in a namespace: `train.seq_len`); not `group_size` (review17:
    GQA's group size changes with N) nor `exp_decay`."""
    name = str(column).strip().lower()
    if leaf_name(column) in RECIPE_NUMBERS:
        return True
    words = {w for w in re.split(r"[^a-z]+", name) if w}
    return bool(words & EXPERIMENT_WORDS) and words <= EXPERIMENT_WORDS | CODE_WORDS


def _sweeps_of_their_own(labels: np.ndarray, runs: pd.DataFrame, overlap_only: bool = False) -> bool:
    """Whether ``labels`` take at most `MAX_VALUES` values, each on 3 or more runs of 2 or more sizes N and
    token counts D, and either each group is a sweep across budgets (C clustered by `cluster_budgets`: 2 or
    more budgets, 2 or more sizes at one) or two groups overlap in N at one budget (muP beside SP). A
    model-name column's groups (one N each, or one N per budget) and a label per budget (a text "C=1e18", a
    wandb Group per IsoFLOP budget: each group within one budget) are not this."""
    frame = pd.DataFrame({"label": labels, "N": runs["N"].to_numpy(), "D": runs["D"].to_numpy()})
    frame["budget"] = cluster_budgets(runs["C"].to_numpy()) if len(frame) else []
    spans = frame.groupby("label").agg(runs=("N", "size"), sizes=("N", "nunique"), tokens=("D", "nunique"))
    if len(spans) > MAX_VALUES or not ((spans["runs"] >= 3) & (spans[["sizes", "tokens"]] >= 2).all(axis=1)).all():
        return False
    at_budget = frame.groupby(["label", "budget"])["N"].agg(["min", "max", "nunique"]).reset_index()
    per_group = at_budget.groupby("label").agg(budgets=("budget", "size"), sizes=("nunique", "max"))
    if ((per_group["budgets"] >= 2) & (per_group["sizes"] >= 2)).all():
        # a setting's number (``overlap_only``) may follow the size (review20: warmup 0 below 1e8, 100 above): its
        # groups are recipes only where their sizes overlap (user30: wd 0.0 and 0.1 ladders at other budgets)
        return not overlap_only or _overlap(frame.groupby("label")["N"].agg(["min", "max"]))
    return any(_overlap(ranges) for _, ranges in at_budget.groupby("budget"))  # at one budget (muP beside SP)


def _overlap(ranges: pd.DataFrame) -> bool:
    """Whether two of the N ranges (columns min, max) overlap."""
    ranges = ranges.sort_values("min")
    return bool((ranges["min"].to_numpy()[1:] <= np.maximum.accumulate(ranges["max"].to_numpy())[:-1]).any())


def _existing(frame: pd.DataFrame, column: str, option: str, source: str) -> str:
    if column not in frame.columns:
        raise DataError(
            f"{option}: no column {column!r} in {source!r}; columns present: {', '.join(map(str, frame.columns))}"
        )
    return column


def _values(column: pd.Series) -> str:
    # pandas 3's astype(str) keeps a blank cell missing (NaN, not "nan"), which join refused (review15b: a text
    # column with blank cells ended `scaling fit` in a TypeError)
    values = list(dict.fromkeys("(blank)" if pd.isna(v) else str(v) for v in column))
    return ", ".join(values[:MAX_VALUES]) + (", ..." if len(values) > MAX_VALUES else "")


def warn_mixed_runs(frame: pd.DataFrame, warnings: list[str]) -> None:
    """Runs of different model architectures (scaling.shapes.ARCHITECTURE; empty: written before
    the field existed) do not lie on one law: a warning, since a user may pool them on purpose. So with runs whose
    held-out sets differ in size (a store's `eval_tokens`; user24: 4,096 and 8,192 tokens, d48's loss 0.035 apart)."""
    if "architecture" in frame.columns:
        counts = frame["architecture"].fillna("").astype(str).value_counts()
        kinds = ", ".join(f"{name or 'unrecorded (older records)'} ({k} runs)" for name, k in counts.items())
        warnings += [f"runs of {len(counts)} model architectures are fitted together: {kinds}"] * (len(counts) > 1)
    sizes = pd.to_numeric(frame.get("eval_tokens", pd.Series(dtype=float)), errors="coerce").dropna().value_counts()
    if len(sizes) > 1:
        sets = ", ".join(f"{int(size):,} tokens ({k} runs)" for size, k in sizes.items())
        warnings.append(
            f"runs scored on held-out sets of {len(sizes)} sizes are fitted together (train.eval_tokens: "
            f"{sets}): their losses are measured on different sets; keep one (--where eval_tokens==N)"
        )
