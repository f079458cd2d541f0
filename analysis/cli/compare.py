"""`scaling compare`: how much compute is a candidate recipe worth? (`analysis.compare`)"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analysis.cli.argtypes import count, level
from analysis.cli.common import (
    FIGURE_FORMATS,
    add_table_options,
    check_output_dir,
    column_map,
    parse,
    tell,
    write_output,
)
from analysis.fits.codec import to_jsonable
from scaling.errors import Parser, UserError


def compare_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="scaling compare",
        description="Compare recipes by their fitted scaling laws (approach 3): the effective compute "
        "multiplier m(C) (the compute the baseline needs to reach the loss the candidate reaches with C), the "
        "loss difference at fixed compute and the exponent differences, each with a bootstrap interval "
        "(the sources resampled independently). The first source is the baseline.",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="BASELINE CANDIDATE [CANDIDATE ...]: results store directories, .csv/.tsv/.parquet/.json/.jsonl tables or "
        "wandb:ENTITY/PROJECT; with --group-by, one table",
    )
    add_group_options(p)
    p.add_argument(
        "--eval-column",
        metavar="COLUMN",
        help="the column that names each run's evaluation data (default: corpus_fingerprint, when present)",
    )
    p.add_argument(
        "--allow-different-eval",
        action="store_true",
        help="compare sources evaluated on different data (their losses are then not comparable)",
    )
    p.add_argument("--bootstrap", type=count, default=1000, metavar="K", help="bootstrap resamples (default 1000)")
    p.add_argument(
        "--seed", type=count, default=0, help="seed: the baseline's; every candidate uses seed + 1 (default 0)"
    )
    p.add_argument("--level", type=level, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument(
        "--exclude-outliers",
        action="store_true",
        help="fit each source without the runs the outlier rule flags (as `scaling fit --exclude-outliers`); "
        "without it they are kept, and each side's line says how many were flagged, by rule",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--out-figure", metavar="FILE", help=f"write the figure to FILE ({', '.join(FIGURE_FORMATS)})")
    p.add_argument("--out", metavar="DIR", help="write the figure (compare.png) and the JSON (compare.json) to DIR")
    p.set_defaults(out_files=("compare.png", "compare.json"))  # what --out DIR holds after (`outputs.guard_outputs`)
    add_table_options(p)
    return p


def add_group_options(p: argparse.ArgumentParser) -> None:
    """--group-by, --baseline and --candidate: the groups of one table as the sources (compare, report)."""
    p.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="the groups of one table by the values of COLUMN as the sources: the baseline, then the candidates "
        "compared with it",
    )
    p.add_argument("--baseline", metavar="GROUP", help="with --group-by: the baseline group (default: the first)")
    p.add_argument(
        "--candidate",
        action="append",
        metavar="GROUP",
        help="with --group-by: a candidate group (repeatable; default: every other group)",
    )


def check_group_options(args: argparse.Namespace, sources: int, what: str) -> None:
    """--group-by takes one table (``sources`` given in all); --baseline and --candidate need it."""
    if args.group_by and sources != 1:
        raise UserError(
            f"--group-by {args.group_by!r} compares the groups of one table; give one {what}, not {sources}"
        )
    if not args.group_by and (args.baseline or args.candidate):
        raise UserError("--baseline and --candidate name groups and need --group-by COLUMN")


def _another_baseline(args: argparse.Namespace) -> str:
    """How to choose another baseline, for the error of one that cannot be fitted."""
    return "--baseline GROUP names another of the groups" if args.group_by else "give another source first"


def _check_arguments(args: argparse.Namespace) -> None:
    check_group_options(args, len(args.sources), "SOURCE")
    if not args.group_by and len(args.sources) < 2:
        raise UserError("give at least two sources (BASELINE CANDIDATE), or one table with --group-by COLUMN")
    if args.out_figure:
        suffix = Path(args.out_figure).suffix.lower().lstrip(".")
        if suffix not in FIGURE_FORMATS:
            raise UserError(
                f"--out-figure {args.out_figure!r}: give a file ending in one of .{', .'.join(FIGURE_FORMATS)}"
            )
        check_output_dir(Path(args.out_figure).parent, f"--out-figure {args.out_figure!r}")
    if args.out:
        check_output_dir(Path(args.out), f"--out {args.out!r}")


def _inputs(args: argparse.Namespace):
    """The sources read, and the notes of the check that they share evaluation data; each told on stderr."""
    from analysis.compare import read_groups, read_inputs

    columns = column_map(args)
    if args.group_by:
        inputs = read_groups(
            args.sources[0], args.group_by, columns, args.baseline, args.candidate, args.allow_mixed_corpora
        )
    else:
        inputs = read_inputs(args.sources, columns, args.allow_mixed_corpora)
    for item in inputs:  # as `scaling fit` tells them: excluded rows, budgets, --where
        warnings, notes = item.table.lines()
        tell(warnings, f"warning [{item.label}]")
        tell(notes, f"note [{item.label}]")
    eval_notes = _check_same_eval(inputs, args)
    tell(eval_notes, "note")
    return inputs, eval_notes


def _check_same_eval(inputs, args: argparse.Namespace) -> list[str]:
    """`check_same_eval` on --eval-column, else on --eval NAME's fingerprints, else the corpora's."""
    from analysis.compare import check_same_eval
    from analysis.sources.evalsets import same_eval_inputs

    if args.eval and not args.eval_column:
        inputs, column = same_eval_inputs(inputs, args.eval)
        return check_same_eval(inputs, None, args.allow_different_eval, default=column)
    return check_same_eval(inputs, args.eval_column, args.allow_different_eval)


def compare_main(argv: list[str]) -> int:
    args = parse(compare_parser(), argv)
    if isinstance(args, int):
        return args
    _check_arguments(args)
    from analysis.compare import compare_inputs
    from analysis.compare.render import comparison_json, render_comparison

    inputs, eval_notes = _inputs(args)
    comparisons = compare_inputs(
        inputs,
        resamples=args.bootstrap,
        seed=args.seed,
        level=args.level,
        exclude_outliers=args.exclude_outliers,
        another_baseline=_another_baseline(args),
    )
    for side in [comparisons[0].baseline, *(c.candidate for c in comparisons)]:
        tell(side.outlier_notes, f"note [{side.source}]")  # as `scaling fit` tells them
    payload = {"comparisons": [comparison_json(c) for c in comparisons], "notes": eval_notes}
    if args.out_figure or args.out:
        _write_outputs(args, comparisons, payload)
    if args.json:
        print(json.dumps(to_jsonable(payload), allow_nan=False))
    else:
        print("\n\n".join(render_comparison(c) for c in comparisons))
    return 0


def _write_outputs(args: argparse.Namespace, comparisons, payload: dict) -> None:
    from analysis.figures import figure_bytes
    from analysis.figures.compare import compare_figure

    fig = compare_figure(comparisons)
    if args.out_figure:
        path = Path(args.out_figure)
        write_output(path, figure_bytes(fig, path.suffix.lower().lstrip(".")), f"--out-figure {args.out_figure!r}")
        print(f"wrote {path}", file=sys.stderr)
    if args.out:
        out = Path(args.out)
        write_output(out / "compare.png", figure_bytes(fig, "png"), f"--out {args.out!r}")
        write_output(
            out / "compare.json", (json.dumps(to_jsonable(payload), indent=1) + "\n").encode(), f"--out {args.out!r}"
        )
        print(f"wrote {out / 'compare.png'} and {out / 'compare.json'}", file=sys.stderr)


def report_comparison(args: argparse.Namespace, source, pngs: dict[str, bytes], groups=()) -> list:
    """The comparison section of `scaling report SOURCE CANDIDATE ...` (its figure added to ``pngs``), or
    of `scaling report TABLE --group-by COLUMN`: ``source`` the baseline group, ``groups`` the candidates."""
    from analysis.compare import Input, compare_inputs, read_inputs
    from analysis.figures import figure_bytes
    from analysis.figures.compare import compare_figure
    from analysis.report.compare import FIGURE_NAME, comparison_blocks

    inputs = [Input(source.table.source, source.table, source.frame)]
    inputs += [Input(g.table.source, g.table, g.frame.reset_index(drop=True)) for g in groups]
    inputs += read_inputs(args.candidates, column_map(args), args.allow_mixed_corpora)
    eval_notes = _check_same_eval(inputs, argparse.Namespace(**{**vars(args), "eval_column": None}))
    tell(eval_notes, "note")
    comparisons = compare_inputs(
        inputs, resamples=args.bootstrap, seed=args.seed, level=args.level, another_baseline=_another_baseline(args)
    )
    pngs[FIGURE_NAME] = figure_bytes(compare_figure(comparisons), "png")
    return comparison_blocks(comparisons, has_figure=True, notes=eval_notes)
