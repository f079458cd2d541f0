"""The analysis verbs of `scaling`: ``fit``, ``optimal``, ``plot`` and ``report``.

Each ``*_main(argv) -> int`` parses its arguments and calls plain functions. Bad input raises
`scaling.errors.UserError` (argument errors included), which `scaling.cli.main` prints as one line
``error: ...`` with exit status 2. Warnings and notes go to stderr, results to stdout; with
``--json`` stdout holds exactly one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from analysis.fits.results import Estimate, FitReport, to_jsonable
from scaling.errors import UserError
from scaling.flops import flops_6nd

HEADLINE = ("E", "A", "B", "alpha", "beta", "a", "b")  # approach 3's keys, at the top of `fit --json`


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one-line UserErrors instead of usage text and exit(2)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # argparse takes "-1e21" for an option (its pattern knows -1 and -.5, not exponents), so
        # `--budget -1e21` said "expected one argument"; as a value it reaches the check that names it.
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def error(self, message):
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    try:
        return parser.parse_args(argv)
    except SystemExit as done:  # --help
        return int(done.code or 0)


def _positive_float(what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; give {what}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not valid; give {what} (a finite number > 0)")
        return value

    return parse


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; give a confidence level between 0 and 1, e.g. 0.95")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; give a whole number >= 0")
    return value


def _tell(lines: list[str], prefix: str) -> None:
    for line in lines:
        print(f"{prefix}: {line}", file=sys.stderr)


def _g(x: float) -> str:
    return f"{x:.4g}"


def _with_interval(e: Estimate) -> str:
    return _g(e.value) if e.interval is None else f"{_g(e.value):<10} [{_g(e.lower)}, {_g(e.upper)}]"


# ================================================================= scaling fit
def fit_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="scaling fit",
        description="Fit scaling laws (Hoffmann et al. 2022, approaches 1-3) to a table "
        "of runs, with bootstrap intervals and a hold-out check.",
    )
    p.add_argument(
        "source",
        help="a sweep's results store directory, a .csv/.parquet table of runs, or wandb:ENTITY/PROJECT (online)",
    )
    p.add_argument(
        "--approach",
        choices=["1", "2", "3", "all"],
        default="all",
        help="1: envelope of loss curves; 2: IsoFLOP parabolas; 3: parametric L(N, D); all (default): "
        "each the data supports",
    )
    add_fit_options(p, default_resamples=1000)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--out",
        metavar="FIT.json",
        help="save the full fit (points, residuals, bootstrap samples) for "
        "`scaling optimal --law FIT.json`, plots and reports",
    )
    add_table_options(p)
    return p


def add_fit_options(p: argparse.ArgumentParser, default_resamples: int) -> None:
    """--bootstrap, --seed, --level, --bins-per-decade: how `fit`, `plot` and `report` fit."""
    p.add_argument(
        "--bootstrap",
        type=_count,
        default=default_resamples,
        metavar="K",
        help=f"bootstrap resamples (default {default_resamples}; 0: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--level", type=_level, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument(
        "--bins-per-decade", type=_count, default=10, help="compute bins per decade for approach 1 (default 10)"
    )


def add_table_options(p: argparse.ArgumentParser) -> None:
    """The column mapping of a source of runs (see `column_map`), shared by `fit`, `plot` and `report`."""
    p.add_argument("--n-column", help="column holding N (default: params, else N, n, ...)")
    p.add_argument("--d-column", help="column holding D, tokens (default: tokens, else D, ...); D = C/(6N) if absent")
    p.add_argument("--c-column", help="column holding C, FLOPs (default: flops, else C, compute, ...)")
    p.add_argument("--loss-column", help="column holding the loss (default: val_loss, else loss, L, ...)")
    p.add_argument(
        "--n-kind",
        choices=["total", "non_embedding"],
        default="total",
        help="which parameter count is N: total (Chinchilla, default) or non_embedding (Kaplan)",
    )
    p.add_argument("--allow-mixed-corpora", action="store_true", help="pool runs trained on different corpora")


def column_map(args: argparse.Namespace):
    from analysis.sources.schema import ColumnMap

    return ColumnMap(n=args.n_column, d=args.d_column, c=args.c_column, loss=args.loss_column, n_kind=args.n_kind)


def fit_main(argv: list[str]) -> int:
    args = _parse(fit_parser(), argv)
    if isinstance(args, int):
        return args
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise UserError(f"--out {args.out!r}: directory {str(Path(args.out).parent)!r} does not exist")
    # scipy and pandas are imported once the arguments are known to be good
    from analysis.fits.fit import fit_all
    from analysis.sources.load import load_runs

    table = load_runs(args.source, column_map(args), allow_mixed_corpora=args.allow_mixed_corpora)
    _tell(table.warnings, "warning")
    approaches = (1, 2, 3) if args.approach == "all" else (int(args.approach),)
    report = fit_all(
        table,
        approaches,
        resamples=args.bootstrap,
        seed=args.seed,
        level=args.level,
        bins_per_decade=args.bins_per_decade,
    )
    _tell(report.notes, "note")
    _tell([f"approach {k} skipped: {why}" for k, why in report.skipped.items()], "warning")
    if args.out:
        try:
            report.save(args.out)
        except OSError as err:
            raise UserError(f"cannot write --out {args.out!r}: {err.strerror or err}") from None
    if args.json:
        print(json.dumps(to_jsonable(fit_summary(report, single=len(approaches) == 1))))
    else:
        print(render_fit(report))
        if args.out:
            print(f"\nsaved the full fit to {args.out} (use: scaling optimal --budget C --law {args.out})")
    return 0


def fit_summary(report: FitReport, single: bool) -> dict:
    """The ``--json`` object: for one approach its keys at the top level; for several, one
    object per approach under approach_1/2/3, with approach 3's E, A, B, alpha, beta, a, b
    repeated at the top level as the headline law."""
    head = {"source": report.source, "runs": report.runs, "n_kind": report.n_kind}
    parts = {f"approach_{f.approach}": _approach_summary(f) for f in report.fits}
    if single:
        return {**head, **next(iter(parts.values()))}
    out = {**head, **parts, "skipped": report.skipped}
    if report.parametric is not None:
        out.update({k: parts["approach_3"][k] for k in HEADLINE})
    return out


def _approach_summary(fit) -> dict:
    out = {"approach": fit.approach, **{k: e.as_json() for k, e in fit.estimates.items()}}
    boot = fit.bootstrap
    out["bootstrap"] = (
        None
        if boot is None
        else {
            "resamples": boot.resamples,
            "failed": boot.failed,
            "level": boot.level,
            "seed": boot.seed,
            "notes": boot.notes,
        }
    )
    out["fitted_compute_max"] = fit.fitted_compute_max
    if fit.approach == 3:
        out.update(
            objective=fit.objective,
            converged=fit.convergence["converged"],
            convergence=fit.convergence,
            validation=fit.validation,
        )
    elif fit.approach == 2:
        out["budgets"] = [
            {
                "budget": p.budget,
                "compute": p.compute,
                "n_opt": p.n_opt,
                "n_opt_interval": p.n_opt_interval,
                "d_opt": p.d_opt,
                "loss_opt": p.loss_opt,
                "sizes": len(set(p.n)),
                "inside_sampled_sizes": p.inside_range,
            }
            for p in fit.profiles
        ]
        out.update(dropped=fit.dropped, validation=fit.validation)
    else:
        out["diagnostics"] = fit.diagnostics
    return out


def render_fit(report: FitReport) -> str:
    lines = [f"{report.source}: {report.runs} runs, N = {report.n_kind.replace('_', '-')} parameters"]
    for fit in report.fits:
        lines.append("")
        lines += {1: _render_envelope, 2: _render_isoflop, 3: _render_parametric}[fit.approach](fit)
    for approach, why in report.skipped.items():
        lines += ["", f"approach {approach}: skipped ({why})"]
    return "\n".join(lines)


def _rows(fit, names_and_labels) -> list[str]:
    return [
        f"  {label:<26} {_with_interval(fit.estimates[name])}"
        for name, label in names_and_labels
        if name in fit.estimates
    ]


def _render_parametric(fit) -> list[str]:
    c = fit.convergence
    lines = [
        f"approach 3: L(N, D) = E + A/N^alpha + B/D^beta  (Huber, delta {fit.huber_delta:g}, on log-loss; "
        f"{len(fit.n)} runs)"
    ]
    lines += _rows(
        fit,
        [
            ("E", "E"),
            ("A", "A"),
            ("B", "B"),
            ("alpha", "alpha"),
            ("beta", "beta"),
            ("a", "a   (N_opt ~ C^a)"),
            ("b", "b   (D_opt ~ C^b)"),
            ("G", "G"),
        ],
    )
    state = "converged" if c["converged"] else "NOT converged"
    lines.append(
        f"  optimizer: {state} ({c['optimizer']}; {c['starts_agreeing']} of {c['refined_starts']} starts "
        f"reach the optimum; max |gradient| {c['gradient_max_abs']:.2g}; objective {fit.objective:.6g})"
    )
    lines += [f"  {key}: {c[key]}" for key in ("warning", "note") if key in c]
    lines.append(_render_bootstrap(fit.bootstrap))
    lines.append(_render_validation(fit.validation, "loss"))
    return lines


def _render_isoflop(fit) -> list[str]:
    lines = [f"approach 2: IsoFLOP profiles ({len(fit.profiles)} budgets; parabola of loss in ln N per budget)"]
    for p in fit.profiles:
        interval = "" if p.n_opt_interval is None else f" [{_g(p.n_opt_interval[0])}, {_g(p.n_opt_interval[1])}]"
        where = "" if p.inside_range else "  (minimum outside the sizes trained)"
        lines.append(
            f"  C = {p.budget:<9.3g} N_opt {_g(p.n_opt)}{interval}, D_opt {_g(p.d_opt)}, loss {_g(p.loss_opt)}"
            f" ({len(set(p.n))} sizes){where}"
        )
    lines += [f"  dropped {why}" for why in fit.dropped]
    lines += _rows(
        fit,
        [
            ("a", "a   (N_opt = k_N·C^a)"),
            ("b", "b   (D_opt = k_D·C^b)"),
            ("N_coefficient", "k_N"),
            ("D_coefficient", "k_D"),
        ],
    )
    lines.append(_render_bootstrap(fit.bootstrap))
    lines.append(_render_validation(fit.validation, "n_opt"))
    return lines


def _render_envelope(fit) -> list[str]:
    d = fit.diagnostics
    lines = [
        f"approach 1: envelope of the loss curves ({d['envelope_points']} points from {d['points_used']}, "
        f"{d['bins_per_decade']} bins per decade)"
    ]
    lines += _rows(
        fit,
        [
            ("a", "a   (N_opt = k_N·C^a)"),
            ("b", "b   (D_opt = k_D·C^b)"),
            ("N_coefficient", "k_N"),
            ("loss_A", "A   (L = A·C^-alpha)"),
            ("loss_alpha", "alpha"),
            ("floor_E", "E   (L = E + A·C^-alpha)"),
            ("floor_A", "A"),
            ("floor_alpha", "alpha"),
        ],
    )
    if fit.loss_law_with_floor is None:
        lines.append(f"  L = E + A·C^-alpha: {d['loss_law_with_floor']}")
    lines.append(_render_bootstrap(fit.bootstrap))
    lines.append(_render_validation(fit.validation, "envelope"))
    return lines


def _render_bootstrap(boot) -> str:
    if boot is None:
        return "  no intervals (--bootstrap 0)"
    extra = "".join(f"; {note}" for note in boot.notes)
    intervals = f"{boot.level:.0%} percentile intervals" if boot.samples else "no intervals"
    return f"  bootstrap: {boot.resamples} resamples (seed {boot.seed}), {boot.failed} failed; {intervals}{extra}"


def _render_validation(v: dict | None, kind: str) -> str:
    if not v:
        return "  validation: not run"
    if "skipped" in v:
        return f"  validation: skipped ({v['skipped']})"
    where = (
        f"refit without the largest budget ({v['held_out_budget']:.3g} FLOPs, {v['extrapolation_factor']:.3g}x beyond "
        f"the rest{', an EXTRAPOLATION' if v['extrapolation'] else ''})"
    )
    if kind == "envelope":
        return (
            f"  validation: {where}: lowest loss there predicted {_g(v['loss_predicted'])} against "
            f"{_g(v['loss_observed'])} ({v['loss_relative_error']:+.2%}), its N {_g(v['n_opt_predicted'])} against "
            f"{_g(v['n_opt_observed'])} ({v['n_opt_relative_error']:+.1%}) (the budget's best run)"
        )
    if kind == "loss":
        return (
            f"  validation: {where}: loss of its {v['held_out_runs']} runs predicted within "
            f"{v['loss_relative_error_mean_abs']:.2%} on average, {v['loss_relative_error_max_abs']:.2%} at worst"
        )
    return (
        f"  validation: {where}: N_opt predicted {_g(v['n_opt_predicted'])} against {_g(v['n_opt_observed'])} "
        f"observed ({v['n_opt_relative_error']:+.1%})"
    )


# ================================================================= scaling optimal
def optimal_parser() -> argparse.ArgumentParser:
    from analysis.fits.optimal import PRESETS

    p = _Parser(
        prog="scaling optimal",
        description="Compute-optimal model size N and tokens D for a FLOP budget "
        "(C = 6·N·D), from a published law or a saved fit.",
    )
    p.add_argument("--budget", type=_positive_float("a budget in FLOPs, e.g. 1e21"), help="compute budget C in FLOPs")
    p.add_argument(
        "--law",
        default="chinchilla",
        help=f"{', '.join(PRESETS)} (published; default chinchilla), or a FIT.json written by `scaling fit --out`",
    )
    p.add_argument(
        "--approach", choices=["1", "2", "3"], help="which approach of FIT.json (default: 3 if present, else 2, else 1)"
    )
    p.add_argument(
        "--target-loss",
        type=_positive_float("a loss in nats per token"),
        metavar="L",
        help="instead of --budget: the smallest budget whose optimal loss is L (laws that predict loss)",
    )
    p.add_argument(
        "--max-tokens",
        type=_positive_float("a token count"),
        metavar="D",
        help="data-limited: at most D tokens available; the best N for the budget under that cap",
    )
    p.add_argument("--level", type=_level, help="confidence level for a fit's intervals (default: the fit's)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def optimal_main(argv: list[str]) -> int:
    args = _parse(optimal_parser(), argv)
    if isinstance(args, int):
        return args
    if args.max_tokens is not None and args.budget is None:
        raise UserError("scaling optimal: --max-tokens needs --budget")
    if (args.budget is None) == (args.target_loss is None):
        raise UserError("scaling optimal: give either --budget C (FLOPs) or --target-loss L")
    law = resolve_law(args.law, None if args.approach is None else int(args.approach), args.level)
    with np.errstate(all="ignore"):  # bootstrap samples of a poorly determined fit may overflow: they become inf
        if args.target_loss is not None:
            allocation = law.budget_for_loss(args.target_loss)
        elif args.max_tokens is not None:
            allocation = law.capped(args.budget, args.max_tokens)
        else:
            allocation = law.allocate(args.budget)
    if args.json:
        print(json.dumps(to_jsonable(allocation.as_json())))
    else:
        print(render_allocation(allocation))
    return 0


def resolve_law(name: str, approach: int | None = None, level: float | None = None):
    """A preset by name, or the law of a FIT.json file."""
    from analysis.fits.optimal import PRESETS, law_from_fit

    if name in PRESETS:
        if approach is not None:
            raise UserError(f"--approach applies to a FIT.json law, not to the preset {name!r}")
        return PRESETS[name]()
    if not Path(name).exists():
        raise UserError(
            f"--law {name!r} is neither a preset ({', '.join(PRESETS)}) nor an existing FIT.json file "
            "(write one with `scaling fit SOURCE --out FIT.json`)"
        )
    return law_from_fit(FitReport.load(name), name, approach, level)


def render_allocation(a) -> str:
    n_kind = "non-embedding parameters" if a.n_kind == "non_embedding" else "parameters (total)"
    lines = [f"law: {a.law}"]
    if a.target_loss is not None:
        lines.append(f"  target loss        {_g(a.target_loss)} nats/token")
    lines += [
        f"  budget C           {_with_interval(a.budget)} FLOPs" + ("   EXTRAPOLATION" if a.extrapolation else ""),
        f"  N_opt              {_with_interval(a.n)} {n_kind}",
        f"  D_opt              {_with_interval(a.d)} tokens",
        f"  tokens/parameter   {_with_interval(a.tokens_per_parameter)}",
        "  predicted loss     "
        + ("- (this law does not predict loss)" if a.loss is None else f"{_with_interval(a.loss)} nats/token"),
        f"  check              6·N·D = {flops_6nd(a.n.value, a.d.value):.6g} FLOPs",
    ]
    if a.n.interval is not None:
        lines.append(f"  intervals: {a.level:.0%} bootstrap percentiles")
    lines += [f"  note: {note}" for note in a.notes]
    return "\n".join(lines)


# ================================================================= scaling plot / scaling report
FIGURE_FORMATS = ("png", "svg", "pdf")


def _formats(text: str) -> list[str]:
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad or not formats:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid; give a comma-separated list of {', '.join(FIGURE_FORMATS)}"
        )
    return list(dict.fromkeys(formats))


def _source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source",
        help="a sweep's results store directory, a .csv/.parquet table of runs, or wandb:ENTITY/PROJECT (online)",
    )
    p.add_argument(
        "--fit", metavar="FIT.json", help="use this saved fit (`scaling fit --out FIT.json`) instead of fitting again"
    )
    add_fit_options(p, default_resamples=200)
    add_table_options(p)


def plot_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="scaling plot",
        description="Write the log-log figures of a sweep or table of runs: loss against "
        "compute, IsoFLOP profiles, compute-optimal N and D, the fitted L(N, D), residuals, training curves.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="directory for the figures (created if missing)")
    p.add_argument(
        "--format",
        type=_formats,
        default=["png"],
        metavar="FORMATS",
        help="comma-separated, from png, svg, pdf (default png)",
    )
    _source_options(p)
    return p


def report_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="scaling report",
        description="Write one self-contained HTML report of a sweep (figures embedded, "
        "no network needed to view it) and its Markdown twin (NAME.md, figures in NAME-figures/).",
    )
    p.add_argument("--out", required=True, metavar="FILE.html", help="the report (its directory is created if missing)")
    _source_options(p)
    return p


def check_output_dir(directory: Path, option: str) -> None:
    """A directory we may create or write into: the nearest existing ancestor must be a writable
    directory (nothing is created here: bad input must leave no trace)."""
    import os

    path = directory.absolute()
    while not path.exists():
        path = path.parent
    if not path.is_dir():
        raise UserError(f"{option}: {str(path)!r} is a file, not a directory; give a directory path")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{option}: directory {str(path)!r} is not writable; give a directory you can write to")


def _source_and_fit(args: argparse.Namespace, verb: str):
    """(Source, FitReport or None, how it was fitted, warnings about the fit) for `plot` and `report`."""
    from analysis.fits.fit import fit_all
    from analysis.report import fit_matches_source
    from analysis.sources.load import read_source
    from scaling.errors import DataError

    source = read_source(args.source, column_map(args), allow_mixed_corpora=args.allow_mixed_corpora)
    _tell(source.table.warnings, "warning")
    if args.fit:
        fit = FitReport.load(args.fit)
        problems = fit_matches_source(fit, source.table, args.fit)
        boot = next((f.bootstrap for f in fit.fits if f.bootstrap), None)
        how = f"loaded from {args.fit} (a fit of {fit.source}, {fit.runs} runs; " + (
            f"{boot.resamples} bootstrap resamples, seed {boot.seed})" if boot else "no bootstrap)"
        )
        return source, fit, how, problems
    how = (
        f"fitted by `scaling {verb}`: approaches 1-3, {args.bootstrap} bootstrap resamples (seed {args.seed}), "
        f"{args.level:.0%} intervals"
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


def _figures(source, fit) -> tuple[dict, dict[str, str]]:
    from analysis.figures import make_figures

    figures, missing = make_figures(source.table, fit)
    _tell([f"not drawn: {name}: {why}" for name, why in missing.items()], "note")
    if not figures:
        raise UserError(f"nothing to plot from {source.table.source!r}: " + "; ".join(missing.values()))
    return figures, missing


def plot_main(argv: list[str]) -> int:
    args = _parse(plot_parser(), argv)
    if isinstance(args, int):
        return args
    out = Path(args.out)
    check_output_dir(out, f"--out {args.out!r}")
    from analysis.figures import figure_bytes
    from analysis.report import write_readable

    source, fit, _how, problems = _source_and_fit(args, "plot")
    _tell(problems, "warning")
    figures, _missing = _figures(source, fit)
    rendered = {out / f"{name}.{fmt}": figure_bytes(fig, fmt) for name, fig in figures.items() for fmt in args.format}
    for path, data in rendered.items():
        write_readable(path, data)
        print(path)
    return 0


def report_main(argv: list[str]) -> int:
    args = _parse(report_parser(), argv)
    if isinstance(args, int):
        return args
    out = Path(args.out)
    if out.is_dir():
        raise UserError(
            f"--out {args.out!r} is a directory; give an .html file name, e.g. {str(out / 'report.html')!r}"
        )
    if out.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"--out {args.out!r}: give an .html file name (the Markdown twin is written beside it as .md)")
    check_output_dir(out.parent, f"--out {args.out!r}")
    from analysis.figures import figure_bytes
    from analysis.report import report_blocks, write_report

    source, fit, how, problems = _source_and_fit(args, "report")
    _tell(problems, "warning")
    figures, missing = _figures(source, fit)
    pngs = {name: figure_bytes(fig, "png") for name, fig in figures.items()}
    blocks = report_blocks(source, fit, pngs, missing, how_fitted=how, fit_problems=problems)
    written = write_report(out, blocks, pngs)
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(pngs)} figures embedded) and {written[-2]} "
        f"(figures in {written[0].parent}/)"
    )
    return 0
