"""`scaling fit`: fit approaches 1-3 to a source of runs; text, --json, or --out FIT.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis.cli.common import (
    FIT_RESAMPLES,
    add_fit_options,
    add_table_options,
    column_map,
    parse,
    tell,
)
from analysis.describe.fit import describe_fit, law_test_text
from analysis.describe.numbers import num
from analysis.fits.bootstrap import unchecked
from analysis.fits.codec import to_jsonable
from analysis.fits.isoflop import in_law, left_out_of_law
from analysis.fits.outliers import RULE as OUTLIER_RULE
from analysis.fits.results import FitReport
from analysis.fits.saved_law import fitted_compute_min
from scaling.errors import Parser, UserError

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
        help="a sweep's results store directory, a .csv/.tsv/.parquet/.json/.jsonl table of runs, or wandb:ENTITY/PROJECT (online)",
    )
    p.add_argument(
        "--approach",
        choices=["1", "2", "3", "all", "muennighoff"],
        default="all",
        help="1: envelope of loss curves; 2: IsoFLOP parabolas; 3: parametric L(N, D); all (default): "
        "each the data supports; muennighoff: the data-constrained L(N, D, U) (Muennighoff et al. 2023) of runs "
        "with unique tokens (--unique-column)",
    )
    add_fit_options(p, default_resamples=FIT_RESAMPLES)
    p.add_argument(
        "--muennighoff-stages",
        choices=["auto", "1", "2"],
        default="auto",
        help="--approach muennighoff: 1 fits all parameters at once; 2 the paper's two stages (E, A, B, alpha, beta "
        "from the runs with D <= U, then R_D, R_N); auto (default): 2 when 8 such runs at 3+ distinct N and D exist",
    )
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
    p.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="fit each value of COLUMN (e.g. dataset) separately, in one call; --where filters first",
    )
    p.add_argument(
        "--show-budgets",
        action="store_true",
        help="after the fit, list which runs went to which compute budget (--json always holds it)",
    )
    return p


def fit_main(argv: list[str]) -> int:
    args = parse(fit_parser(), argv)
    if isinstance(args, int):
        return args
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise UserError(f"--out {args.out!r}: directory {str(Path(args.out).parent)!r} does not exist")
    if args.out and args.group_by:
        raise UserError(
            f"--out saves one fit, --group-by {args.group_by!r} makes one per group; save a group's fit with "
            f"--where {args.group_by}==VALUE --out FIT.json"
        )
    if args.approach == "muennighoff":
        from analysis.cli.repeat import fit_repeat

        return fit_repeat(args)
    approaches = (1, 2, 3) if args.approach == "all" else (int(args.approach),)
    fitted = [(value, table, _fit_one(table, approaches, args, value)) for value, table in _tables(args)]
    if all(isinstance(report, str) for _, _, report in fitted):  # only with --group-by: else it raised
        raise UserError(f"no group of --group-by {args.group_by!r} could be fitted: {fitted[0][2]}")
    if args.out:
        try:
            fitted[0][2].save(args.out)
        except OSError as err:
            raise UserError(f"cannot write --out {args.out!r}: {err.strerror or err}") from None
    single = len(approaches) == 1
    if args.json:
        parts = [_json_of(table, report, single) for _, table, report in fitted]
        out = parts[0] if not args.group_by else {"source": args.source, "group_by": args.group_by, "groups": parts}
        print(json.dumps(to_jsonable(out)))
        return 0
    for i, (value, table, report) in enumerate(fitted):
        if args.group_by:
            print(f"{chr(10) if i else ''}== {args.group_by} = {value} ==")
        print(render_fit(report) if not isinstance(report, str) else f"{table.source}: not fitted: {report}")
        if args.show_budgets:
            print("\n" + render_budgets(table))
    if args.out:
        print(f"\nsaved the full fit to {args.out} (use: scaling optimal --budget C --law {args.out})")
    return 0


def _tables(args) -> list:
    """(group value or None, RunTable) for each table to fit: the source, or its groups."""
    from analysis.sources.load import load_runs, read_groups

    columns = column_map(args)
    if args.group_by:
        groups = read_groups(args.source, columns, args.group_by, allow_mixed_corpora=args.allow_mixed_corpora)
        return [(value, source.table) for value, source in groups]
    return [(None, load_runs(args.source, columns, allow_mixed_corpora=args.allow_mixed_corpora))]


def _fit_one(table, approaches, args, group):
    """The FitReport of one table, its lines on stderr; with groups, why it failed (a string)."""
    from analysis.fits.fit import fit_all, require_headline
    from scaling.errors import DataError

    where = "" if group is None else f" [{args.group_by}={group}]"
    tell(table.lines()[0], f"warning{where}")
    try:
        report = fit_all(
            table,
            approaches,
            resamples=args.bootstrap,
            seed=args.seed,
            level=args.level,
            bins_per_decade=args.bins_per_decade,
            exclude_outliers=args.exclude_outliers,
        )
        require_headline(report, approaches)
    except DataError as err:
        if group is None:
            raise
        tell([f"not fitted: {err}"], f"warning{where}")
        return str(err)
    tell(report.notes, f"note{where}")  # a skipped approach is said once: in the text (or --json's "skipped")
    return report


def _json_of(table, report, single: bool) -> dict:
    """One table's ``--json`` object: `fit_summary`, or the error with the reading's warnings and notes, and
    `table_summary`."""
    if isinstance(report, str):
        warnings, notes = table.lines()
        out = {"source": table.source, "error": report, "warnings": warnings, "notes": notes}
    else:
        out = fit_summary(report, single)
    return {**out, "table": table_summary(table)}


def table_summary(table) -> dict:
    """What was read (rows read, excluded, duplicates counted once, kept), the budgets (one object
    each: budget, runs, sizes, C_min, C_max, off_max = largest |C/budget - 1|) and every run kept,
    with its budget and unit: {run_id, N, D, C, loss, budget, unit}."""
    from analysis.sources.budgets import budget_table

    return {
        "counts": table.counts,
        "budgets": budget_table(table.runs).to_dict(orient="records"),
        "rows": table.runs[["run_id", "N", "D", "C", "loss", "budget", "unit"]].to_dict(orient="records"),
    }


def render_budgets(table) -> str:
    """The text of ``--show-budgets``: one line per budget (runs, sizes, range of C = 6·N·D)."""
    from analysis.sources.budgets import budget_table

    lines = [f"budgets of {table.source} ({len(table.budgets)}; C = 6·N·D of their runs):"]
    lines.append(f"  {'budget':<10} {'runs':>5} {'sizes':>5}  {'C from':<10} {'C to':<10} {'|C/budget - 1| max'}")
    for row in budget_table(table.runs).itertuples():
        lines.append(
            f"  {row.budget:<10.4g} {row.runs:>5} {row.sizes:>5}  {row.C_min:<10.4g} {row.C_max:<10.4g} "
            f"{row.off_max:.1%}"
        )
    return "\n".join(lines)


def fit_summary(report: FitReport, single: bool) -> dict:
    """The ``--json`` object: one object per approach under approach_1/2/3; for one approach its keys at the top
    level too; for several, approach 3's E, A, B, alpha, beta, a, b repeated at the top level as the headline law
    (``headline_approach``: 3; user25: a script reading the top-level a got approach 2's under --approach 2). ``warnings`` and ``notes``: the lines `scaling fit`
    prints on stderr as "warning:" and "note:" (how the input was read, the outlier rule's notes); each approach's
    ``approach_warnings``: those it prints under its estimates."""
    head = {"source": report.source, "runs": report.runs, "n_kind": report.n_kind, "loss_unit": report.loss_unit}
    head.update(warnings=report.warnings, notes=report.notes)
    head["outliers"] = {
        "rule": report.outlier_rule,
        "excluded": report.outliers_excluded,
        "runs": [to_jsonable(o) for o in report.outliers],
    }
    head["headline_left_out"] = {str(k): why for k, why in report.headline_left_out().items()}
    if said := unchecked(report.fits):  # only when not checked
        head["identification"] = said[0]
    if report.hyperparameter_fit:
        head.update(hyperparameter_laws=report.hyperparameter_laws, hyperparameter_fit=report.hyperparameter_fit)
    parts = {f"approach_{f.approach}": _approach_summary(f) for f in report.fits}
    for d in describe_fit(report):  # the lines printed under each approach as "warning:" (user40: bent ones unsaid)
        parts[f"approach_{d.approach}"]["approach_warnings"] = d.warnings
    if single:  # review18: the key the top level names its approach by, as with several
        only = next(iter(parts.values()))
        return {**head, **only, **parts, "headline_approach": only["approach"]}
    out = {**head, **parts, "skipped": report.skipped}
    if report.parametric is not None:
        out.update({k: parts["approach_3"][k] for k in HEADLINE}, headline_approach=3)
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
    out["fitted_compute_min"] = fitted_compute_min(fit)  # the range `optimal` extrapolates beyond, both ends
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
                "in_law": in_law(p),  # the law's own test (`isoflop.in_law`), whatever the printed interval says
                "law_note": law_test_text(p) or None,  # where the two disagree, which one the law took
            }
            for p in fit.profiles
        ]
        out.update(dropped=fit.dropped, left_out_of_law=left_out_of_law(fit.profiles), validation=fit.validation)
    else:
        out["diagnostics"] = fit.diagnostics
    return out


def render_fit(report: FitReport) -> str:
    """The fit as text: the items of `analysis.describe.fit`, laid out in columns."""
    from analysis.describe.fit import describe_fit

    lines = [f"{report.source}: {report.runs} runs, N = {report.n_kind.replace('_', '-')} parameters"]
    lines += unchecked(report.fits)  # said once, before any number
    for d in describe_fit(report, compact=False):
        lines += ["", f"{d.heading}  ({d.reference})"]
        lines += [f"  {row.key:<14} {row.text:<34} {row.meaning}".rstrip() for row in d.rows]
        lines += [
            f"  C = {m.budget:<7} N_opt {m.n_opt}, D_opt {m.d_opt}, loss {m.loss}, sizes {m.sizes}"
            + ("" if m.inside else f"; {m.where}")
            + (f"; {m.law_note}" if m.law_note else "")
            for m in d.minima
        ]
        lines += [f"  {why}" for why in d.dropped]
        lines += [f"  {line.label}: {line.text}" for line in d.lines]
        lines += [f"  warning: {w}" for w in d.warnings]
    for approach, why in report.skipped.items():
        lines += ["", f"approach {approach}: skipped ({why})"]
    lines += _render_headline(report) + _render_outliers(report)
    if report.hyperparameter_fit:
        from analysis.describe.hparams import hyperparameter_lines

        lines += ["", *hyperparameter_lines(report.hyperparameter_fit)]
    return "\n".join(lines)


def _render_headline(report: FitReport) -> list[str]:
    """Which approaches a summary leads with, when some are left out (`FitReport.headline_left_out`); none for
    one approach asked for (`--approach k`): its own lines say what it lacks, and a fit of several with none
    to headline is an error (`require_headline`)."""
    left_out = report.headline_left_out()
    # user16: "headline: approach 3" above eight unidentified estimates; the line now says a is unidentified
    unidentified = [f for f in report.headline if f.estimates["a"].unidentified]
    # user28: approaches 1 and 2 skipped, approach 3 alone printed no headline, where --json named it
    if len(report.fits) + len(report.skipped) == 1 or not (left_out or unidentified or report.skipped):
        return []
    lead = ", ".join(str(f.approach) for f in report.headline) or "none"
    if unidentified and len(unidentified) == len(report.headline):
        lead += (
            f" (a is unidentified in {'each' if len(unidentified) > 1 else 'it'}: these runs do not say how N_opt "
            "scales with C, nor what to train at another budget)"
        )
    elif unidentified:
        which = ", ".join(str(f.approach) for f in unidentified)
        lead += f" (a is unidentified in approach{'es' * (len(unidentified) > 1)} {which})"
    return ["", f"headline: approach {lead}"] + [f"  approach {k} left out: {why}" for k, why in left_out.items()]


def _render_outliers(report: FitReport) -> list[str]:
    from analysis.describe.outliers import flagged_line

    lines = ["", f"outliers: {flagged_line(report.outliers, report.outliers_excluded)}"]
    lines += [
        f"  {o.run_id}: {o.rule.replace('_', ' ')}, {o.detail} (C = {o.budget:.3g}, N = {num(o.n)}, loss {num(o.loss)})"
        for o in report.outliers
    ]
    return lines
