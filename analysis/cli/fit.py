"""`scaling fit`: fit approaches 1-3 to a source of runs; text, --json, or --out FIT.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis.cli.common import (
    Parser,
    add_fit_options,
    add_table_options,
    column_map,
    parse,
    tell,
)
from analysis.describe.numbers import num
from analysis.fits.outliers import RULE as OUTLIER_RULE
from analysis.fits.results import FitReport, to_jsonable
from scaling.errors import UserError

HEADLINE = ("E", "A", "B", "alpha", "beta", "a", "b")  # approach 3's keys, at the top of `fit --json`


# ================================================================= scaling fit
def fit_parser() -> argparse.ArgumentParser:
    p = Parser(
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
    p.add_argument(
        "--exclude-outliers",
        action="store_true",
        help="refit without the runs the outlier rule flags (they are listed either way). The rule: "
        + OUTLIER_RULE.replace("%", "%%"),
    )
    add_table_options(p)
    return p


def fit_main(argv: list[str]) -> int:
    args = parse(fit_parser(), argv)
    if isinstance(args, int):
        return args
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise UserError(f"--out {args.out!r}: directory {str(Path(args.out).parent)!r} does not exist")
    # scipy and pandas are imported once the arguments are known to be good
    from analysis.fits.fit import fit_all
    from analysis.sources.load import load_runs

    table = load_runs(args.source, column_map(args), allow_mixed_corpora=args.allow_mixed_corpora)
    tell(table.warnings, "warning")
    approaches = (1, 2, 3) if args.approach == "all" else (int(args.approach),)
    report = fit_all(
        table,
        approaches,
        resamples=args.bootstrap,
        seed=args.seed,
        level=args.level,
        bins_per_decade=args.bins_per_decade,
        exclude_outliers=args.exclude_outliers,
    )
    tell(report.notes, "note")
    tell([f"approach {k} skipped: {why}" for k, why in report.skipped.items()], "warning")
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
    head["outliers"] = {
        "rule": report.outlier_rule,
        "excluded": report.outliers_excluded,
        "runs": [to_jsonable(o) for o in report.outliers],
    }
    head["headline_left_out"] = {str(k): why for k, why in report.headline_left_out().items()}
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
                "n_opt_unidentified": p.n_opt_unidentified,
                "resamples_failed": p.resamples_failed,
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
    """The fit as text: the items of `analysis.describe.fit`, laid out in columns."""
    from analysis.describe.fit import describe_fit

    lines = [f"{report.source}: {report.runs} runs, N = {report.n_kind.replace('_', '-')} parameters"]
    for d in describe_fit(report, compact=False):
        lines += ["", f"{d.heading}  ({d.reference})"]
        lines += [f"  {row.key:<14} {row.text:<34} {row.meaning}".rstrip() for row in d.rows]
        lines += [
            f"  C = {m.budget:<7} N_opt {m.n_opt}, D_opt {m.d_opt}, loss {m.loss}, sizes {m.sizes}"
            + ("" if m.inside else f"; {m.where}")
            for m in d.minima
        ]
        lines += [f"  {why}" for why in d.dropped]
        lines += [f"  {line.label}: {line.text}" for line in d.lines]
        lines += [f"  warning: {w}" for w in d.warnings]
    for approach, why in report.skipped.items():
        lines += ["", f"approach {approach}: skipped ({why})"]
    lines += _render_headline(report) + _render_outliers(report)
    return "\n".join(lines)


def _render_headline(report: FitReport) -> list[str]:
    left_out = report.headline_left_out()
    if not left_out:
        return []
    lead = ", ".join(str(f.approach) for f in report.headline) or "none"
    return ["", f"headline: approach {lead}"] + [f"  approach {k} left out: {why}" for k, why in left_out.items()]


def _render_outliers(report: FitReport) -> list[str]:
    done = (
        "fitted without them (--exclude-outliers)"
        if report.outliers_excluded
        else "kept (--exclude-outliers drops them)"
    )
    if not report.outliers:
        return ["", "outliers: none flagged"]
    lines = ["", f"outliers: {len(report.outliers)} run(s) flagged, {done}"]
    lines += [
        f"  {o.run_id}: {o.rule.replace('_', ' ')}, {o.detail} (C = {o.budget:.3g}, N = {num(o.n)}, loss {num(o.loss)})"
        for o in report.outliers
    ]
    return lines
