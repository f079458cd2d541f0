"""The typed schema of a source of runs: how its columns map (`ColumnMap`), the checked runs
(`RunTable`) and everything read from the source beside them (`Source`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from analysis.sources.budgets import AGREEING, BUDGET_TOLERANCE
from analysis.sources.hparams import HyperSweep
from scaling.errors import UserError

N_KINDS = ("total", "non_embedding")

# a column so named holds a non-embedding count (Kaplan's N): "no column for N" names --n-kind non_embedding for it
NON_EMBEDDING_NAME = re.compile(r"non[\s_-]?embed", re.IGNORECASE)
# a column of the outcome the laws model (a loss in any unit): never a count, nor a setting or a run's identity; not
# the store's `entropy_rate`, a synthetic corpus's true entropy (a property of the data: `--where entropy_rate<2`)
LOSS_NAME = re.compile(r"loss|bpb|bits_per_byte|ppl|perplexity|nll|entropy(?![\s_-]?rate)", re.IGNORECASE)

# Column names tried, in order, when the user names none. The first of each is the store's own.
FALLBACK_COLUMNS = {
    "n": {
        # "Model Size", "Training Tokens", "Training FLOP": Epoch's release of Chinchilla's points (Besiroglu et al. 2024)
        "total": (
            "params",
            "N",
            "n",
            "n_params",
            "num_params",
            "parameters",
            "model size",
            "model_size",
            "total_params",
        ),
        "non_embedding": ("params_non_embedding", "non_embedding_params", "n_non_embedding", "N", "n"),
    },
    # the usual names, then the cumulative counts loggers write (a history export's per row, a runs table's per run):
    # HF Trainer's num_input_tokens_seen (train/ in wandb), Levanter's and OLMo's throughput/total_tokens
    "d": (
        "tokens",
        "D",
        "d",
        "n_tokens",
        "num_tokens",
        "training tokens",
        "training_tokens",
        "train_tokens",
        "tokens_seen",
        "train/tokens_seen",
        "tokens_processed",
        "num_input_tokens_seen",
        "train/num_input_tokens_seen",
        "throughput/total_tokens",
    ),
    "c": ("flops", "C", "c", "compute", "FLOPs", "training flop", "training flops", "training_flops"),
    # then the names loggers give an evaluation loss (wandb's eval/loss, HF Trainer's eval_loss), a loss in bits
    # per byte (its unit from the name: `unit_of_name`) and a perplexity, found to be refused (`refuse_perplexity`)
    "loss": (
        "val_loss",
        "loss",
        "L",
        "eval_loss",
        "test_loss",
        "eval/loss",
        "val/loss",
        "validation_loss",
        "validation/loss",
        "valid_loss",
        "val_bpb",
        "eval/bpb",
        "val/bpb",
        "bpb",
        "val_ppl",
        "eval/ppl",
        "val/ppl",
        "ppl",
        "perplexity",
    ),
}
OPTION_OF = {"n": "--n-column", "d": "--d-column", "c": "--c-column", "loss": "--loss-column", "as_given": "--as-given"}

# The loss's unit: the one home of the label every figure, table and text gives it (numbers are never
# converted). The store's val_loss (and loss_floor) is mean cross-entropy in nats/token and val_bpb in
# bits/byte (docs/CONTRACTS.md); a user's table says its own with --loss-unit, else it is read as nats/token.
DEFAULT_LOSS_UNIT = "nats/token"
LOSS_UNIT_COLUMN = "loss_unit"  # a table's column naming its loss's unit (bits/token, nats/token, bpb...)
LOSS_UNIT_OF_COLUMN = {"val_bpb": "bits/byte"}
LOSS_UNIT_ALIASES = {
    "nats": "nats/token",
    "nat/token": "nats/token",
    "bits": "bits/token",
    "bit/token": "bits/token",
    "bpb": "bits/byte",
    "bit/byte": "bits/byte",
    "bits per byte": "bits/byte",
    "bits per token": "bits/token",
    "bits/tok": "bits/token",
    "nats per token": "nats/token",
    "nats/tok": "nats/token",
    "bpc": "bits/character",
    "bits/char": "bits/character",
    "bits per character": "bits/character",
}
KNOWN_LOSS_UNITS = frozenset(LOSS_UNIT_ALIASES.values())  # the units other spellings are read as
MAX_UNIT_LENGTH = 32
UNIT_TEXT = re.compile(r"[A-Za-z0-9/ ._()^*·-]+")


def parse_loss_unit(text: str, what: str = "--loss-unit") -> str:
    """The unit a --loss-unit value names: an alias (bpb, bits, nats, bpc) spelled out, any other short
    label (letters, digits, spaces and / . _ ( ) ^ * · -) kept as given; UserError, naming ``what``
    (the option, or a file's key), for anything else (a value that is not a string included)."""
    unit = " ".join(text.split()) if isinstance(text, str) else ""
    if unit.lower() in LOSS_UNIT_ALIASES:
        return LOSS_UNIT_ALIASES[unit.lower()]
    if not unit or len(unit) > MAX_UNIT_LENGTH or not UNIT_TEXT.fullmatch(unit):
        raise UserError(
            f"{what} {text!r} is not valid; give the loss's unit as a short label of letters, digits, "
            f"spaces and / . _ ( ) ^ * · - (at most {MAX_UNIT_LENGTH} characters), e.g. nats/token, bits/token, "
            "bits/byte (bpb)"
        )
    return unit


@dataclass(frozen=True)
class ColumnMap:
    """How a source's rows are read: which columns hold N, D, C and the loss (None: "try the usual
    names"), which budgets they belong to, and which rows count.

    ``n_kind`` chooses the parameter count when the source has both: "total" (Chinchilla's
    convention, column ``params``) or "non_embedding" (Kaplan's, ``params_non_embedding``).
    ``budget`` names the column of budgets (None: the first of budget_flops, budget, compute_budget
    present; "none": cluster C instead) and ``budget_tolerance`` the relative gap in C that starts a
    new budget when C values are clustered (`analysis.sources.budgets`).
    ``strict``: a row with an unusable N, D, C or loss refuses the table instead of being excluded
    (`analysis.sources.rows`). ``where``: filters (`analysis.sources.groups.Where`) every row must
    pass; ``experiment``: a column naming experiments, beside dataset/source/experiment/corpus,
    whose values may not be pooled without --allow-mixed (`analysis.sources.groups`).
    ``hp_columns``: hyperparameter columns (None: lr, batch_size, warmup_frac when present) and
    ``hp_reduce``: how a sweep over them is reduced to one point per (N, D) (`analysis.sources.hparams`).
    ``loss_unit``: the loss's unit (`parse_loss_unit`; None: `LOSS_UNIT_OF_COLUMN` of the loss column, else
    `DEFAULT_LOSS_UNIT`), a label only.
    """

    n: str | None = None
    d: str | None = None
    c: str | None = None
    loss: str | None = None
    n_kind: str = "total"
    budget: str | None = None
    budget_tolerance: float = BUDGET_TOLERANCE
    strict: bool = False
    where: tuple = ()
    experiment: str | None = None
    hp_columns: tuple | None = None
    hp_reduce: str = "best"
    unique: str | None = None  # column of unique tokens (`analysis.sources.unique`): runs get column U
    eval: str | None = None  # --eval NAME: the loss of that evaluation set (analysis.sources.evalsets)
    loss_unit: str | None = None
    as_given: tuple = ()  # columns whose names' units (tokens_B) are not applied (`analysis.sources.colunits`)
    rows_are_runs: bool = False  # --rows-are-runs: no run_id column, each row a run (`analysis.sources.curverows`)
    # the words after `scaling fit` that read these rows again as this command did, for a command a warning
    # suggests (`analysis.sources.unique.repeats_warning`): `analysis.cli.common.column_map` sets this command's
    # options that apply (`refit_words`), `analysis.sources.load` puts the source first (a group's --where after);
    # (): the source alone
    refit: tuple = ()

    def __post_init__(self):
        if self.loss_unit is not None:
            object.__setattr__(self, "loss_unit", parse_loss_unit(self.loss_unit))
        if self.n_kind not in N_KINDS:
            raise UserError(f"--n-kind {self.n_kind!r} is not valid; use one of: {', '.join(N_KINDS)}")
        if not 0 <= self.budget_tolerance < 1:
            raise UserError(
                f"--budget-tolerance {self.budget_tolerance!r} is not valid; give a relative gap >= 0 and < 1, "
                f"e.g. {BUDGET_TOLERANCE} ({BUDGET_TOLERANCE:.0%})"
            )

    def unit_of_loss(self, column: str) -> str:
        """The unit of the loss read from ``column``: --loss-unit's, else the store's for that column, else
        the one its name spells (`unit_in_name`: loss_bits was labelled nats/token before), else nats/token."""
        return self.loss_unit or unit_of_name(column) or DEFAULT_LOSS_UNIT


def unit_of_name(column: str) -> str:
    """The loss unit ``column``'s name carries: the store's for its columns (val_bpb), else `unit_in_name`; ""."""
    return LOSS_UNIT_OF_COLUMN.get(column) or unit_in_name(column)


def unit_in_name(column: str) -> str:
    """The loss unit a column's name spells as a word (``loss_bits``, ``eval bpb``, ``bpc``, ``loss_nats``):
    bpb/bpc or bits with byte/char are per byte/character, bits alone per token; "" when it names none."""
    words = set(re.split(r"[^a-z]+", str(column).lower()))
    per = "byte" if words & {"byte", "bytes"} else "character" if words & {"char", "chars", "character"} else "token"
    if "bpb" in words or "bpc" in words:
        return LOSS_UNIT_ALIASES["bpb" if "bpb" in words else "bpc"]
    if words & {"bits", "bit"}:
        return f"bits/{per}"
    return "nats/token" if words & {"nats", "nat"} else ""


@dataclass(frozen=True)
class RowsReading:
    """How the rows of a run that repeats were read (`analysis.sources.curverows.split_curve_rows`), said once
    here: ``curves`` True when each run is its final row and every row a point of its curve, False when the rows
    stay runs; ``by_name`` when the runs were named by a column other than run_id (a checkpoint table's model),
    so --rows-are-runs reads each row as a run instead; ``note``: the line that says so (among the notes)."""

    curves: bool
    by_name: bool
    note: str


@dataclass
class RunTable:
    """Checked runs, ready to fit.

    runs:   one row per run: run_id, N, D, C (= 6·N·D), loss, budget (the compute budget the run
            belongs to, in FLOPs: `analysis.sources.budgets`), unit (an integer id per distinct
            (N, D) point: repeated seeds of one point share it, and a bootstrap resamples units,
            not rows: `analysis.sources.rows.unit_ids`), U (the unique tokens the run drew from,
            NaN where unknown: `analysis.sources.unique`). Unusable rows are excluded and exact
            duplicates counted once before this (`analysis.sources.rows`).
    curves: loss curves, one row per evaluation: run_id, N, C (= 6·N·tokens so far), loss; None
            when the source has final losses only.
    source: where the runs came from.  n_kind: which parameter count N is.
    loss_unit: the unit of ``loss`` (`ColumnMap.unit_of_loss`), for every label that shows a loss.
    warnings, notes: lines for the user (exclusions and skipped files; how columns were used).
    counts: how many rows were read and what became of them, adding up to those read: not completed (status),
            a curve's rows beside its run's final one, excluded as unusable, counted once as duplicates, reduced
            away by a hyperparameter sweep (the points' other settings), and kept.
    hparams: the hyperparameter sweep the runs were reduced from (`analysis.sources.hparams`), or None.
    plain_warnings, plain_notes: the lines that concern only the fits of L(N, D) (approaches 1-3), kept out of
            ``warnings`` and ``notes``: how runs were grouped into budgets (`analysis.sources.budgets`) and runs
            that repeat data they count as fresh (`analysis.sources.unique.repeats_warning`); the data-constrained
            fit, which uses neither budgets nor fresh tokens, leaves them out (`lines`).
    budgets_clustered: whether the budgets were clustered from C (`analysis.sources.budgets`), not read.
    reading: how rows repeating a run were read (`RowsReading`: as training curves or as runs); None when no
             run repeats (each row a run, or the source's own curves).
    """

    runs: pd.DataFrame
    curves: pd.DataFrame | None
    source: str
    n_kind: str = "total"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict = field(
        default_factory=dict
    )  # read = incomplete + curve_rows + excluded + duplicates + reduced + kept
    hparams: HyperSweep | None = None
    plain_warnings: list[str] = field(default_factory=list)
    plain_notes: list[str] = field(default_factory=list)
    loss_unit: str = DEFAULT_LOSS_UNIT
    budgets_clustered: bool = False
    reading: RowsReading | None = None

    def __len__(self) -> int:
        return len(self.runs)

    def lines(self, plain: bool = True) -> tuple[list[str], list[str]]:
        """(warnings, notes) to tell: every fit's, then with ``plain`` those of the fits of L(N, D) alone."""
        warnings, notes = (self.plain_warnings, self.plain_notes) if plain else ([], [])
        return [*self.warnings, *warnings], [*self.notes, *notes]

    @property
    def budgets(self) -> np.ndarray:
        """The distinct compute budgets, ascending (FLOPs)."""
        return np.sort(self.runs["budget"].unique())

    @property
    def budget_compute(self) -> np.ndarray:
        """Each of `budgets`' C, where the fits place it: its runs' median C = 6·N·D in log space where that is over
        `AGREEING` off the budget (a nominal label's runs may lie 1.4x from it; a median: one run stopped at 40% moved
        a mean 12%, review17), else the budget itself (a store's, off by its steps' rounding; a clustered one)."""
        if self.budgets_clustered:
            return self.budgets
        median = np.exp(np.log(self.runs["C"]).groupby(self.runs["budget"]).median()).reindex(self.budgets).to_numpy()
        return np.where(np.abs(median / self.budgets - 1.0) <= AGREEING, self.budgets, median)

    def without_budget(self, budget: float) -> RunTable:
        """The same table less the runs (and curves) of one budget: for hold-out validation."""
        keep = self.runs["budget"] != budget
        runs = self.runs[keep].reset_index(drop=True)
        curves = None if self.curves is None else self.curves[self.curves["run_id"].isin(runs["run_id"])]
        return replace(self, runs=runs, curves=curves, warnings=[], notes=[])

    def without_runs(self, drop: set[str]) -> RunTable:
        """The same table less the runs (and their curves) named in ``drop``: outliers left out of a fit."""
        keep = ~self.runs["run_id"].astype(str).isin(drop)
        runs = self.runs[keep].reset_index(drop=True)
        kept = set(runs["run_id"].astype(str))
        curves = None if self.curves is None else self.curves[self.curves["run_id"].astype(str).isin(kept)]
        return replace(self, runs=runs, curves=curves)


@dataclass
class Source:
    """A source read once: the checked `RunTable` and the raw facts around it: every row as read
    (failed runs included), the store's unreadable files (``problems``) and its sweep plan
    (``manifest``, {} without one; ``manifest_problem`` says why it is missing)."""

    table: RunTable
    frame: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    manifest_problem: str = ""
    origin: str = ""  # the source as given (a path), where ``table.source`` adds a filter or group: `SOURCE [..]`
