"""`scaling plot`: write the figures of a source of runs and its fit."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.cli.common import (
    Parser,
    check_output_dir,
    draw_figures,
    formats,
    parse,
    source_and_fit,
    source_options,
    tell,
    write_output,
)


def plot_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="scaling plot",
        description="Write the log-log figures of a sweep or table of runs: loss against "
        "compute, IsoFLOP profiles, compute-optimal N and D, the fitted L(N, D), residuals, training curves.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="directory for the figures (created if missing)")
    p.add_argument(
        "--format",
        type=formats,
        default=["png"],
        metavar="FORMATS",
        help="comma-separated, from png, svg, pdf (default png)",
    )
    source_options(p)
    return p


def plot_main(argv: list[str]) -> int:
    args = parse(plot_parser(), argv)
    if isinstance(args, int):
        return args
    out = Path(args.out)
    check_output_dir(out, f"--out {args.out!r}")
    from analysis.figures import figure_bytes

    source, fit, _how, problems = source_and_fit(args, "plot")
    tell(problems, "warning")
    figures, _missing = draw_figures(source, fit)
    rendered = {out / f"{name}.{fmt}": figure_bytes(fig, fmt) for name, fig in figures.items() for fmt in args.format}
    for path, data in rendered.items():
        write_output(path, data, f"--out {args.out!r}")
        print(path)
    return 0
