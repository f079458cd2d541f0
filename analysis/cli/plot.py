"""`scaling plot`: write the figures of a source of runs and its fit, and `captions.md` beside them
(each figure's caption, as the report shows it)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from analysis.cli.common import (
    check_output_dir,
    column_map,
    draw_figures,
    formats,
    parse,
    source_and_fit,
    source_options,
    tell,
    write_output,
)
from scaling.errors import Parser, UserError

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
    p.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="draw the runs of each value of COLUMN apart (several recipes in one file), each into DIR/COLUMN=VALUE/",
    )
    return p


def plot_main(argv: list[str]) -> int:
    args = parse(plot_parser(), argv)
    if isinstance(args, int):
        return args
    out = Path(args.out)
    check_output_dir(out, f"--out {args.out!r}")
    if not args.group_by:
        _plot(args, out, None)
        return 0
    if args.fit:
        raise UserError(
            f"--fit is the fit of one table, --group-by {args.group_by!r} draws one per group; draw a group with its "
            f"saved fit by --where {args.group_by}==VALUE --fit FIT.json"
        )
    from analysis.sources.load import read_groups

    groups = read_groups(args.source, column_map(args), args.group_by, allow_mixed_corpora=args.allow_mixed_corpora)
    for (value, source), folder in zip(groups, group_folders(args.group_by, [v for v, _ in groups]), strict=True):
        print(f"== {args.group_by} = {value} ==")
        _plot(args, out / folder, source)
    return 0


def group_folders(column: str, values: list) -> list[str]:
    """A folder name per group, COLUMN=VALUE with characters other than letters, digits and ``._=-`` as ``_``
    (a value may hold a slash), numbered where two groups would share one."""
    names = [re.sub(r"[^A-Za-z0-9._=-]", "_", f"{column}={value}") for value in values]
    return [f"{name}-{i + 1}" if names.count(name) > 1 else name for i, name in enumerate(names)]


def _plot(args: argparse.Namespace, out: Path, source) -> None:
    """The figures of ``source`` (None: ``args.source`` read) and their captions, written into ``out``."""
    from analysis.figures import ALL_FIGURES, figure_bytes, figure_caption

    source, fit, _how, problems = source_and_fit(args, "plot", source)
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
