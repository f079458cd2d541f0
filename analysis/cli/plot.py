"""`scaling plot`: write the figures of a source of runs and its fit, and `captions.md` beside them
(each figure's caption, as the report shows it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.cli.common import (
    check_output_dir,
    draw_figures,
    formats,
    parse,
    source_and_fit,
    source_options,
    tell,
    write_output,
)
from scaling.errors import Parser

CAPTIONS_FILE = "captions.md"  # beside the figures: each file with its caption


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
    from analysis.figures import ALL_FIGURES, figure_bytes, figure_caption

    source, fit, _how, problems = source_and_fit(args, "plot")
    tell(problems, "warning")
    if fit is not None and fit.muennighoff is None:  # runs that repeat data: the law of loss against epochs
        from analysis.fits.muennighoff_fit import fit_if_repeating

        fit.muennighoff = fit_if_repeating(source.table, 0, args.seed, args.level)  # the line only
    figures, _missing = draw_figures(source, fit)
    rendered = {out / f"{name}.{fmt}": figure_bytes(fig, fmt) for name, fig in figures.items() for fmt in args.format}
    captions = {name: figure_caption(name, fit) for name in figures}
    for path, data in rendered.items():
        write_output(path, data, f"--out {args.out!r}")
        print(path)
        if path.suffix == f".{args.format[-1]}":  # the caption once, after the figure's last file
            print(f"  {captions[path.stem]}")
    listing = [
        f"## {ALL_FIGURES[name][0]}\n\n{', '.join(f'`{name}.{fmt}`' for fmt in args.format)}\n\n{caption}\n"
        for name, caption in captions.items()
    ]
    write_output(out / CAPTIONS_FILE, "\n".join(listing).encode(), f"--out {args.out!r}")
    print(out / CAPTIONS_FILE)
    return 0
