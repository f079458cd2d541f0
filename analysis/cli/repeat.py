"""`scaling fit --approach muennighoff`: the data-constrained law (Muennighoff et al. 2023) fitted to
runs that carry their unique tokens (`analysis.fits.muennighoff_fit`); text, --json, or --out FIT.json
(read back by `scaling optimal --unique-tokens U --law FIT.json`)."""

from __future__ import annotations

import json

from analysis.cli.common import column_map, tell
from analysis.describe.repeat import FORM, TITLE, bootstrap_lines, estimate_rows, runs_text
from analysis.fits.codec import to_jsonable
from analysis.fits.results import FitReport, MuennighoffFit
from scaling.errors import UserError


def fit_repeat(args) -> int:
    """Fit, report, save: the `scaling fit` flow for the data-constrained law."""
    from analysis.fits.muennighoff_fit import fit_muennighoff
    from analysis.sources.load import read_source

    if args.group_by:
        raise UserError("--approach muennighoff fits one table; use --where COLUMN==VALUE instead of --group-by")
    if args.exclude_outliers:  # user36: accepted, and nothing left out nor said
        raise UserError(
            "--exclude-outliers: the outlier rule is approaches 1-3's; the data-constrained fit flags none (its Huber "
            "loss weighs a far run down); leave a run out with --where, e.g. --where 'run_id!=ID'"
        )
    # Runs on cuts of one corpus (data.max_train_tokens) have different fingerprints by design: pooled,
    # as long as they name one corpus; experiments are not, unless --allow-mixed (user36)
    pooled = True if args.allow_mixed_corpora else "corpora"
    source = read_source(args.source, column_map(args), allow_mixed_corpora=pooled)
    names = source.frame["corpus"].dropna().unique() if "corpus" in source.frame else []
    if len(names) > 1 and not args.allow_mixed_corpora:
        raise UserError(
            f"{args.source!r} mixes runs of corpora {', '.join(map(repr, names))}; the data-constrained fit pools cuts "
            "of one corpus: pick one with --where corpus==NAME, or pass --allow-mixed-corpora"
        )
    table = source.table
    warnings, notes = table.lines(plain=False)  # not how runs were grouped into budgets, nor that they repeat data
    tell(warnings, "warning")
    fit = fit_muennighoff(
        table, resamples=args.bootstrap, seed=args.seed, level=args.level, stages=args.muennighoff_stages
    )
    tell(fit.convergence["notes"], "note")
    report = FitReport(
        source=table.source,
        n_kind=table.n_kind,
        loss_unit=table.loss_unit,
        runs=len(fit.n),
        warnings=warnings,
        notes=notes + fit.convergence["notes"],
        muennighoff=fit,
    )
    if args.out:
        try:
            report.save(args.out)
        except OSError as err:
            raise UserError(f"cannot write --out {args.out!r}: {err.strerror or err}") from None
    if args.json:
        print(json.dumps(to_jsonable({**summary(fit), "warnings": report.warnings, "notes": report.notes})))
        return 0
    print(render(fit))
    if args.out:
        print(
            f"\nsaved the full fit to {args.out} (use: scaling optimal --unique-tokens U --budget C --law {args.out})"
        )
    return 0


def summary(fit: MuennighoffFit) -> dict:
    """The ``--json`` object: each estimate with its interval, what was fixed, the runs' epochs range."""
    epochs = fit.epochs
    return {
        "source": fit.source,
        "law": "muennighoff",
        "runs": len(fit.n),
        **{k: e.as_json() for k, e in fit.estimates.items()},
        "fixed": fit.convergence.get("fixed", {}),
        "stages": fit.convergence.get("stages", 1),
        "epochs_min": min(epochs),
        "epochs_max": max(epochs),
        "convergence": fit.convergence,
        "bootstrap": None
        if fit.bootstrap is None
        else {k: getattr(fit.bootstrap, k) for k in ("resamples", "failed", "level", "seed", "notes")},
    }


def render(fit: MuennighoffFit) -> str:
    lines = [f"{TITLE} on {fit.source}: {runs_text(fit)}", f"  {FORM}"]
    if "method" in fit.convergence:  # fits saved before the two-stage fit lack it
        lines.append(f"  {fit.convergence['method']}")
    lines += [f"  {name:<6} {text:<40} {meaning}" for name, text, meaning in estimate_rows(fit)]
    lines += [f"  {line}" for line in bootstrap_lines(fit)]
    if "warning" in fit.convergence:
        lines.append(f"  warning: {fit.convergence['warning']}")
    return "\n".join(lines)
