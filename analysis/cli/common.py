"""What the analysis verbs share (their parser, `scaling.errors.Parser`, gives one-line errors): value
types, the fit and column options, reading a source and its fit, drawing the figures, writing outputs."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from analysis.cli.argtypes import count, level, whole
from analysis.cli.outputs import guard_outputs
from analysis.fits.percentiles import level_text
from analysis.fits.results import FitReport
from analysis.sources.budgets import BUDGET_TOLERANCE
from scaling.errors import Parser, UserError

NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def join_negative_values(argv: list[str]) -> list[str]:
    """``--opt -1e21`` as ``--opt=-1e21``: argparse takes a word that starts with '-' for an option
    unless it looks like a number by its own pattern (which knows -1 and -.5, not exponents), so
    ``--budget -1e21`` said "expected one argument"; joined, the value reaches the check that names it."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and "=" not in word and i + 1 < len(argv) and NEGATIVE_NUMBER.match(argv[i + 1]):
            joined.append(f"{word}={argv[i + 1]}")
            i += 2
        else:
            joined.append(word)
            i += 1
    return joined


def parse(parser: Parser, argv: list[str]) -> argparse.Namespace | int:
    """The parsed ``argv``, with ``refit_words``: the words of its options that `refit_words` keeps; --help's exit code."""
    words = join_negative_values(list(argv))
    try:
        args = parser.parse_args(words)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    args.refit_words = refit_words(parser, words)
    guard_outputs(args)
    if (
        hasattr(args, "bootstrap") and hasattr(args, "level") and not getattr(args, "fit", None)
    ):  # a --fit: not resampled
        from analysis.fits.bootstrap import too_few

        tell([why] if (why := too_few(args.bootstrap, args.level)) else [], "warning")
    return args


REFIT_OPTIONS = ("bootstrap", "seed", "level")  # a fit's options `scaling fit` takes too, beside the table options


def refit_words(parser: Parser, words: list[str]) -> tuple[str, ...]:
    """The words of ``words`` (parsed by ``parser``) that set options of `add_table_options` (how a source's rows
    are read) or `REFIT_OPTIONS`, in order, each option by its full name: `scaling fit SOURCE` with them reads the
    source, and fits it, as this command did (`ColumnMap.refit`)."""
    table = argparse.ArgumentParser(add_help=False)
    add_table_options(table)
    dests = {*vars(table.parse_args([])), *REFIT_OPTIONS}
    options = parser.options
    out: list[str] = []
    rest = iter(words)
    for word in rest:
        name, joined, value = word.partition("=")
        # an abbreviation (argparse allows them) matches one action's option strings only, or parsing had failed
        matched = [a for s, a in options.items() if s == name] or [a for s, a in options.items() if s.startswith(name)]
        if word.startswith("--") and matched and matched[0].dest in dests:
            action = matched[0]
            takes_value = action.nargs != 0
            out += [action.option_strings[-1], *([value if joined else next(rest)] if takes_value else [])]
    return tuple(out)


def tell(lines: list[str], prefix: str) -> None:
    for line in lines:
        print(f"{prefix}: {line}", file=sys.stderr)


FIT_RESAMPLES = 1000  # `scaling fit`'s bootstrap resamples, which `next` refits as (`next.refits_of`)


def add_fit_options(p: argparse.ArgumentParser, default_resamples: int) -> None:
    """--bootstrap, --seed, --level, --bins-per-decade: how `fit`, `plot` and `report` fit."""
    p.add_argument(
        "--bootstrap",
        type=count,
        default=default_resamples,
        metavar="K",
        help=f"bootstrap resamples (default {default_resamples}; 0: none)",
    )
    p.add_argument("--seed", type=count, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--level", type=level, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument(
        "--bins-per-decade", type=whole(1), default=10, help="compute bins per decade for approach 1 (default 10)"
    )


def add_table_options(p: argparse.ArgumentParser) -> None:
    """How a source's rows are read (see `column_map`), shared by `fit`, `plot` and `report`."""
    add_column_options(p)
    p.add_argument(
        "--budget-column",
        metavar="COLUMN",
        help="column holding each run's compute budget, used as given (default: budget_flops, else budget, "
        "else compute_budget; 'none': ignore it and cluster C = 6·N·D); a note says how far 6·N·D is from it",
    )
    p.add_argument(
        "--budget-tolerance",
        type=tolerance,
        default=BUDGET_TOLERANCE,
        metavar="REL",
        help=f"without a budget column, runs are clustered by C = 6·N·D in log space and a gap wider than REL "
        f"between neighbouring C values starts a new budget (default {BUDGET_TOLERANCE:g}); so are a budget "
        "column's values when most hold fewer than 3 sizes (each run's C written as its budget; 0: never)",
    )
    p.add_argument(
        "--where",
        type=where,
        action="append",
        default=[],
        metavar="EXPR",
        help="keep only rows where COLUMN OP VALUE holds, OP one of ==, !=, <, <=, >, >= (e.g. dataset==c4, "
        "params>=1e8); repeat to require several",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse a table with a row whose N, D, C or loss is not a finite number > 0 (default: exclude and list)",
    )
    p.add_argument(
        "--experiment-column",
        metavar="COLUMN",
        help="a column naming experiments that must not be pooled, beside dataset, source, experiment and corpus",
    )
    p.add_argument(
        "--allow-mixed",
        "--allow-mixed-corpora",
        dest="allow_mixed_corpora",
        action="store_true",
        help="pool runs of different corpora or experiments (dataset/source/experiment columns) in one fit",
    )
    add_hp_options(p)
    add_data_options(p)


def add_column_options(p: argparse.ArgumentParser) -> None:
    """Which columns hold N, D, C and the loss, the loss's unit, and which parameter count N is."""
    p.add_argument("--n-column", help="column holding N (default: params, else N, n, ...)")
    p.add_argument("--d-column", help="column holding D, tokens (default: tokens, else D, ...); D = C/(6N) if absent")
    p.add_argument("--c-column", help="column holding C, FLOPs (default: flops, else C, compute, ...)")
    p.add_argument("--loss-column", help="column holding the loss (default: val_loss, else loss, L, ...)")
    p.add_argument(
        "--loss-unit",
        type=loss_unit,
        metavar="UNIT",
        help="the loss column's unit, for labels only (numbers are not converted): e.g. nats/token, bits/token, "
        "bits/byte or bpb (default: a store's val_bpb is bits/byte, any other loss nats/token)",
    )
    p.add_argument(
        "--as-given",
        action="append",
        default=[],
        metavar="COLUMN",
        help="read COLUMN's counts as they are, though its name carries a unit (tokens_B, params_M, "
        "compute_pfdays are otherwise scaled by it); repeat for several columns",
    )
    p.add_argument(
        "--rows-are-runs",
        action="store_true",
        help="read each row as a run of its own: a table with a step column and no run_id (model,N,D,step,loss) "
        "is otherwise read as checkpoints, one training curve per model (and seed)",
    )
    p.add_argument(
        "--n-kind",
        choices=["total", "non_embedding"],
        default="total",
        help="which parameter count is N: total (Chinchilla, default) or non_embedding (Kaplan)",
    )


def add_data_options(p: argparse.ArgumentParser) -> None:
    """Which evaluation set's losses, and the unique tokens of runs that repeat data."""
    p.add_argument(
        "--eval",
        metavar="NAME",
        help="the losses of evaluation set NAME (columns val_loss.NAME, eval_fingerprint.NAME; default: val_loss); "
        "runs are then checked for one evaluation set, not one training corpus",
    )
    p.add_argument(
        "--unique-column",
        metavar="COLUMN",
        help="column holding each run's unique tokens, for --approach muennighoff (default: unique_tokens, else U)",
    )


def add_hp_options(p: argparse.ArgumentParser) -> None:
    """--hp-columns, --hp-reduce: a sweep over hyperparameters is one point per (N, D) (`analysis.sources.hparams`)."""
    p.add_argument(
        "--hp-columns",
        type=lambda text: tuple(c.strip() for c in text.split(",") if c.strip()),
        metavar="COLS",
        help="comma-separated hyperparameter columns (default: lr, batch_size, warmup_frac when present); rows at "
        "one (N, budget) that differ in them are one sweep, reduced to one point before the fits",
    )
    p.add_argument(
        "--hp-reduce",
        choices=["best", "interpolate"],
        default="best",
        help="each (N, budget) of a hyperparameter sweep as its best run (default), or at the optimum of the "
        "parabola in log LR through the best LR and its neighbours",
    )


def tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid; give a relative gap >= 0 and < 1, e.g. {BUDGET_TOLERANCE} ({BUDGET_TOLERANCE:.0%})"
        )
    return value


def loss_unit(text: str) -> str:
    from analysis.sources.schema import parse_loss_unit

    try:
        return parse_loss_unit(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--loss-unit ")) from None


def where(text: str):
    from analysis.sources.groups import parse_where

    try:
        return parse_where(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--where ")) from None


def column_map(args: argparse.Namespace):
    from analysis.sources.schema import ColumnMap

    def name(column):  # as a table's header names are read: without blanks around them (`files._stripped_headers`)
        return column.strip() if isinstance(column, str) else column

    return ColumnMap(
        n=name(args.n_column),
        d=name(args.d_column),
        c=name(args.c_column),
        loss=name(args.loss_column),
        loss_unit=args.loss_unit,
        n_kind=args.n_kind,
        budget=name(args.budget_column),
        budget_tolerance=args.budget_tolerance,
        strict=args.strict,
        where=tuple(args.where),
        experiment=name(args.experiment_column),
        hp_columns=args.hp_columns,
        hp_reduce=args.hp_reduce,
        unique=getattr(args, "unique_column", None),
        eval=args.eval,
        as_given=tuple(args.as_given),
        rows_are_runs=args.rows_are_runs,
        refit=args.refit_words,
    )


FIGURE_FORMATS = ("png", "svg", "pdf")


def formats(text: str) -> list[str]:
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad or not formats:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid; give a comma-separated list of {', '.join(FIGURE_FORMATS)}"
        )
    return list(dict.fromkeys(formats))


def source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source",
        help="a sweep's results store directory, a .csv/.tsv/.parquet/.json/.jsonl table of runs, or wandb:ENTITY/PROJECT (online)",
    )
    p.add_argument(
        "--fit", metavar="FIT.json", help="use this saved fit (`scaling fit --out FIT.json`) instead of fitting again"
    )
    add_fit_options(p, default_resamples=200)
    add_table_options(p)


def check_output_dir(directory: Path, option: str) -> None:
    """A directory we may create or write into: the nearest existing ancestor must be a writable
    directory (nothing is created here: bad input must leave no trace)."""

    path = directory.absolute()
    while not path.exists():
        path = path.parent
    if not path.is_dir():
        raise UserError(f"{option}: {str(path)!r} is a file, not a directory; give a directory path")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{option}: directory {str(path)!r} is not writable; give a directory you can write to")
    try:  # os.access says yes to root where nothing can be made (/proc): try, before any figure is drawn
        os.rmdir(tempfile.mkdtemp(prefix=".scaling-probe-", dir=path))
    except OSError as err:
        raise UserError(
            f"{option}: nothing can be created in {str(path)!r} ({err.strerror or err}); give a directory you can "
            "write to"
        ) from None


def source_and_fit(args: argparse.Namespace, verb: str, source=None):
    """(Source, FitReport or None, how it was fitted, warnings about the fit) for `plot` and `report`:
    ``source`` (a `Source` already read, e.g. one group of a table) or ``args.source`` read."""
    from analysis.fits.fit import fit_all
    from analysis.report import fit_matches_source
    from analysis.sources.load import read_source
    from scaling.errors import DataError

    if source is None:
        source = read_source(args.source, column_map(args), allow_mixed_corpora=args.allow_mixed_corpora)
    fit = FitReport.load(args.fit) if args.fit else None
    tell(source.table.lines(plain=fit is None or bool(fit.fits))[0], "warning")  # a data-constrained fit: not theirs
    if fit is not None:
        problems = fit_matches_source(fit, source.table, args.fit)
        boot = next((f.bootstrap for f in [*fit.fits, fit.muennighoff] if f and f.bootstrap), None)
        how = f"loaded from {args.fit} (a fit of {fit.source}, {fit.runs} runs; " + (
            f"{boot.resamples} bootstrap resamples, seed {boot.seed})" if boot else "no bootstrap)"
        )
        return source, fit, how, problems
    how = f"fitted by `scaling {verb}`: approaches 1-3, " + (
        f"{args.bootstrap} bootstrap resamples (seed {args.seed}), {level_text(args.level)} intervals"
        if args.bootstrap
        else "no bootstrap (no intervals on the laws)"
    )
    try:
        fit = fit_all(
            source.table,
            (1, 2, 3),
            resamples=args.bootstrap,
            seed=args.seed,
            level=args.level,
            bins_per_decade=args.bins_per_decade,
        )
    except DataError as err:
        return source, None, how, [str(err)]
    return source, fit, how, []


def draw_figures(source, fit) -> tuple[dict, dict[str, str]]:
    from analysis.figures import make_figures

    figures, missing = make_figures(source.table, fit)
    tell([f"not drawn: {name}: {why}" for name, why in missing.items()], "note")
    if not figures:
        raise UserError(f"nothing to plot from {source.table.source!r}: " + "; ".join(missing.values()))
    return figures, missing


def write_output(path: Path, data: bytes, option: str) -> None:
    """Write one output file atomically and readable (`analysis.report.render.write_readable`); a
    path that cannot be written is one UserError line naming it."""
    from analysis.report.render import write_readable

    try:
        write_readable(path, data)
    except OSError as err:
        raise UserError(
            f"{option}: cannot write {str(path)!r}: {err.strerror or err}; give a path you can write to"
        ) from None
