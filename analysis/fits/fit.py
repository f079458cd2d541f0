"""Run the three approaches of Hoffmann et al. 2022 on one `RunTable` and gather a `FitReport`.

    from analysis.sources.load import load_runs
    from analysis.fits.fit import fit_all
    report = fit_all(load_runs("results/quick"), approaches=(1, 2, 3), resamples=1000, seed=0)
    report.parametric.estimates["alpha"]        # Estimate(value, lower, upper)
    report.save("fit.json")                     # FitReport.load("fit.json") gives it back

Approach 1: `analysis.fits.envelope`; 2: `analysis.fits.isoflop`; 3: `analysis.fits.parametric`;
validation (refit without the largest budget): `analysis.fits.validation`; outliers (flagged
always, left out with ``exclude_outliers=True``): `analysis.fits.outliers`; the LR and batch-size
laws of a hyperparameter sweep: `analysis.fits.hplaws`.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bent_frontier import bent_budgets, bent_text
from analysis.fits.bent_profiles import bent
from analysis.fits.bootstrap import too_few
from analysis.fits.envelope import BINS_PER_DECADE, envelope_law, fit_envelope
from analysis.fits.flagged_profiles import widen_for_flagged
from analysis.fits.hplaws import fit_hyperparameter_laws
from analysis.fits.isoflop import fit_isoflop, in_law
from analysis.fits.outliers import RULE, fit_flagged
from analysis.fits.parametric import fit_parametric
from analysis.fits.results import FitReport
from analysis.fits.validation import lack_of_fit, validate_envelope, validate_isoflop, validate_parametric
from analysis.sources.schema import RunTable
from scaling.errors import DataError

APPROACHES = (1, 2, 3)


def fit_all(
    table: RunTable,
    approaches=APPROACHES,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    bins_per_decade: int = BINS_PER_DECADE,
    validate: bool = True,
    exclude_outliers: bool = False,
) -> FitReport:
    """Fit each approach in ``approaches``. With one approach asked for, its DataError propagates;
    with several, an approach the data cannot support is skipped and the reason recorded in
    ``report.skipped``; all failing is an error (`scaling fit` also refuses none to headline: `require_headline`).
    Outliers (`analysis.fits.outliers`) are
    always flagged in ``report.outliers``; with ``exclude_outliers`` the fits run without them."""

    def fit(fitted: RunTable) -> FitReport:
        report = FitReport(
            source=table.source,
            n_kind=table.n_kind,
            loss_unit=table.loss_unit,
            runs=len(fitted),
            warnings=table.lines()[0] + ([rough] if (rough := too_few(resamples, level)) else []),  # --json too
            notes=table.lines()[1],
            outlier_rule=RULE,
            outliers_excluded=exclude_outliers,
        )
        _fit_each(fitted, approaches, report, resamples, seed, level, bins_per_decade, validate)
        return report

    with np.errstate(all="ignore"):  # wild resamples overflow on purpose; every fit checks its own results
        flagged = fit_flagged(table, fit, exclude_outliers, lambda report: report.parametric)
        report = flagged.fit
        report.outliers = flagged.outliers
        report.notes += flagged.notes
        if not exclude_outliers:
            report.notes += outliers_in_dropped_budgets(report, table)
        if report.isoflop is not None:  # the run the outlier rule flagged, named as the text names it (review24)
            ids, profiles = {o.run_id for o in report.outliers}, report.isoflop.profiles
            report.isoflop.diagnostics["bent"] = bent(profiles, ids)
            if not exclude_outliers:  # a budget's N_opt with and without a flagged run it keeps (user40)
                report.isoflop.diagnostics["flagged_kept"] = widen_for_flagged(
                    table, profiles, ids, resamples, seed, level
                )
        if table.hparams is not None:
            report.hyperparameter_fit = fit_hyperparameter_laws(
                table.hparams, resamples=resamples, seed=seed, level=level
            )
            report.hyperparameter_laws = report.hyperparameter_fit["laws"]
    if not report.fits:
        _refuse(report, "no approach could be fitted")
    if misfit := lack_of_fit(report):  # said with approach 3's own warnings, and kept in its FIT.json
        report.parametric.convergence["misfit"] = misfit
    if report.parametric is not None:  # user41: a law through a diverged run, its frontier below every run, unsaid
        _bent_law(report, table, exclude_outliers)
    return report


def _bent_law(report: FitReport, table: RunTable, exclude_outliers: bool) -> None:
    """Approach 3's warning where its law gives a least loss far below every run of a budget (`bent_budgets`)."""
    flagged = [] if exclude_outliers else [o.run_id for o in report.outliers]
    if far_below := bent_text(bent_budgets(report.parametric, table.budget_compute), flagged):
        report.parametric.convergence["bent"] = far_below + "; its loss and allocation there and beyond follow that run"


def require_headline(report: FitReport, approaches) -> None:
    """`scaling fit` of several approaches with none to headline (`FitReport.headline`) is an error: some were fitted
    but none has a law a summary can lead with. The report and figures still show each approach's own lines."""
    if len(approaches) > 1 and not report.headline:
        _refuse(report, "no approach has a law to headline")


def _refuse(report: FitReport, what: str) -> None:
    why = {**{str(k): v for k, v in report.headline_left_out().items()}, **report.skipped}
    raise DataError(
        f"{what}: "
        + "; ".join(v if v.startswith(f"approach {k}") else f"approach {k}: {v}" for k, v in sorted(why.items()))
    )


def _fit_each(table, approaches, report, resamples, seed, level, bins_per_decade, validate) -> None:
    for approach in approaches:
        try:
            if approach == 1:
                report.envelope = fit_envelope(
                    table, bins_per_decade=bins_per_decade, resamples=resamples, seed=seed, level=level
                )
                if validate:
                    report.envelope.validation = validate_envelope(
                        table, bins_per_decade, envelope_law(report.envelope).with_floor
                    )
            elif approach == 2:
                report.isoflop = fit_isoflop(table, resamples=resamples, seed=seed, level=level)
                if validate:
                    report.isoflop.validation = validate_isoflop(
                        table, {p.budget: p for p in report.isoflop.profiles if in_law(p)}
                    )
            else:
                report.parametric = fit_parametric(table, resamples=resamples, seed=seed, level=level)
                if validate:
                    report.parametric.validation = validate_parametric(table)
        except DataError as err:
            if len(approaches) == 1:
                raise
            report.skipped[str(approach)] = str(err)


def outliers_in_dropped_budgets(report: FitReport, table) -> list[str]:
    """Notes for the budgets approach 2 dropped (no parabola) that hold a run flagged by the residual
    rule: a diverged run (loss 10 among 2-3) bends a profile out of shape, and the drop's own reason
    ("does not curve upward") does not name it."""
    if report.isoflop is None:
        return []
    kept = {p.budget for p in report.isoflop.profiles}

    def why(budget: float) -> str:  # user28: "dropped ..., flagged an outlier" read as the cause where 2 sizes were
        prefix = f"budget {budget:.3g}: "
        return next((f" ({d[len(prefix) :]})" for d in report.isoflop.dropped if d.startswith(prefix)), "")

    return [
        f"approach 2 dropped budget {o.budget:.3g}{why(o.budget)}; it holds {o.run_id} (N = {o.n:.4g}, loss "
        f"{o.loss:.4g}), flagged an outlier: {o.detail}"
        + (
            ""
            if "distinct model size" in why(o.budget)
            else "; if that run bent its profile, --exclude-outliers refits without it"
        )
        for o in report.outliers
        if o.rule in ("residual", "off_budget") and o.budget in set(table.budgets) - kept
    ]
