"""`scaling report`: one self-contained HTML report and its Markdown twin."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.cli.common import (
    check_output_dir,
    draw_figures,
    parse,
    source_and_fit,
    source_options,
    tell,
)
from analysis.cli.compare import add_group_options, check_group_options
from scaling.errors import Parser, UserError


def report_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="scaling report",
        description="Write one self-contained HTML report of a sweep (figures embedded, "
        "no network needed to view it) and its Markdown twin (NAME.md, figures in NAME-figures/).",
    )
    p.add_argument(
        "--out",
        required=True,
        type=html_file,
        metavar="FILE.html",
        help="the report (its directory is created if missing)",
    )
    source_options(p)
    p.add_argument(
        "candidates",
        nargs="*",
        metavar="CANDIDATE",
        help="further sources: the report adds a comparison of each with the first (as `scaling compare`)",
    )
    add_group_options(p)
    p.add_argument(
        "--allow-different-eval",
        action="store_true",
        help="with several sources: compare them even when evaluated on different data",
    )
    return p


def html_file(value: str) -> str:
    """--out's value, checked as it is parsed (user22: a warning on --bootstrap came before the error on --out)."""
    if Path(value).is_dir():
        example = str(Path(value) / "report.html")
        raise argparse.ArgumentTypeError(f"{value!r} is a directory; give an .html file name, e.g. {example!r}")
    if Path(value).suffix.lower() not in (".html", ".htm"):
        raise argparse.ArgumentTypeError(f"{value!r}: give an .html file name (the Markdown twin is written beside it)")
    return value


def report_main(argv: list[str]) -> int:
    args = parse(report_parser(), argv)
    if isinstance(args, int):
        return args
    check_group_options(args, 1 + len(args.candidates), "SOURCE and no CANDIDATE")
    if args.group_by and args.fit:  # as plot refuses it (review24: a group's fit read as another's, a warning only)
        raise UserError(
            f"--fit is the fit of one table, --group-by {args.group_by!r} reports the baseline group and fits each "
            f"group; report a group with its saved fit by --where {args.group_by}==VALUE --fit FIT.json"
        )
    out = Path(args.out)
    check_output_dir(out.parent, f"--out {args.out!r}")
    from analysis.figures import figure_bytes
    from analysis.report import report_blocks, write_report
    from analysis.report.render import guard_twin

    guard_twin(out, f"--out {args.out!r}")

    groups = _groups(args)
    source, fit, how, problems = source_and_fit(args, "report", groups[0] if groups else None)
    tell(problems, "warning")
    figures, missing = draw_figures(source, fit)
    pngs = {name: figure_bytes(fig, "png") for name, fig in figures.items()}
    blocks = report_blocks(source, fit, pngs, missing, how_fitted=how, fit_problems=problems)
    if args.candidates or groups:
        from analysis.cli.compare import report_comparison

        blocks += report_comparison(args, source, pngs, groups[1:])
    try:
        written = write_report(out, blocks, pngs)
    except OSError as err:
        raise UserError(
            f"--out {args.out!r}: cannot write the report: {err.strerror or err}; give a path you can write to"
        ) from None
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(pngs)} figures embedded) and {written[-2]} "
        f"(figures in {written[0].parent}/)"
    )
    return 0


def _groups(args: argparse.Namespace) -> list:
    """With --group-by: the baseline group, then the candidates (`analysis.compare.inputs.select_groups`)."""
    if not args.group_by:
        return []
    from analysis.cli.common import column_map
    from analysis.compare.inputs import select_groups

    return select_groups(
        args.source, args.group_by, column_map(args), args.baseline, args.candidate, args.allow_mixed_corpora
    )
