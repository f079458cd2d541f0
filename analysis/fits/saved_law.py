"""The allocation law of a saved fit (FIT.json, or a fit made in this process): `chosen_fit` picks the
approach, `law_from_fit` turns its estimates and bootstrap samples into a `scaling optimal` law
(`analysis.fits.optimal`)."""

from __future__ import annotations

import numpy as np

from analysis.fits.bootstrap import WITHHELD, unchecked
from analysis.fits.envelope import envelope_law
from analysis.fits.identified import TrainedRange
from analysis.fits.isoflop import fitted_min
from analysis.fits.optimal import Law, ParametricLaw, PowerLawAllocation
from analysis.fits.parametric_form import collinear_reason
from analysis.fits.results import FitReport, ParametricFit
from scaling.errors import UserError
from scaling.flops import smallest_6nd


def fitted_compute_min(fit) -> float:
    """The smallest C a fit's law was fitted at, below which `optimal` says it extrapolates downwards: approach 3's
    smallest run (6·N·D), approach 2's smallest budget in its law (`isoflop.fitted_min`), approach 1's envelope."""
    if isinstance(fit, ParametricFit):
        return smallest_6nd(fit.n, fit.d)
    return fitted_min(fit) if fit.approach == 2 else min(fit.compute)


def chosen_fit(report: FitReport, label: str, approach: int | None = None):
    """The fit of ``report`` a law is taken from: the one asked for, else the highest headlined approach
    (3 also predicts loss at any N, D; then 2, then 1), else the highest (`FitReport.headline_left_out` says why)."""
    fits = {f.approach: f for f in report.fits}
    if approach is not None and approach not in fits:
        raise UserError(
            f"{label} holds no approach {approach} fit (it has: {', '.join(map(str, sorted(fits))) or 'none'})"
        )
    if not fits:
        raise UserError(f"{label} holds no fit")
    with_law = [f.approach for f in report.headline] or list(fits)
    return fits[approach if approach is not None else max(with_law)]


def law_from_fit(report: FitReport, label: str, approach: int | None = None, level: float | None = None) -> Law:
    """The allocation law of a saved fit's `chosen_fit`. Bootstrap samples become intervals."""
    fit = chosen_fit(report, label, approach)
    boot = fit.bootstrap
    level = level if level is not None else (boot.level if boot else 0.95)
    common = dict(
        n_kind=report.n_kind,
        fitted_compute_max=fit.fitted_compute_max,
        level=level,
        notes=[f"fit of {report.source} (approach {fit.approach}, {report.runs} runs)", *unchecked([fit])],
        unidentified=fit.estimates["a"].unidentified if "a" in fit.estimates else "",
        loss_unit=report.loss_unit,
    )
    samples = boot.samples if boot and boot.samples else None
    withheld = WITHHELD if boot is not None and samples is None else ""  # user26: a bare loss beside it, before
    if isinstance(fit, ParametricFit):  # without a law (`parametric_form`): NaN, unidentified, no samples
        common["floor_unidentified"] = fit.estimates["E"].unidentified if "E" in fit.estimates else ""
        common["fitted_compute_min"] = fitted_compute_min(fit)
        # runs along one line of D/N see the loss only there: the optimum's loss, off it, is the law's split of its terms
        common["loss_unidentified"] = (
            collinear_reason(np.log(fit.n), np.log(fit.d), np.asarray(fit.residuals)) or withheld
        )
        lawless = not all(np.isfinite(list(fit.params.values())))
        law = ParametricLaw(f"{label} (approach 3)", fit.params, None if lawless else samples, **common)
        law.trained = TrainedRange.of(fit.n, fit.d)  # an N or D/N far outside it extrapolates (`Law.capped`, inference)
        return law
    common["fitted_compute_min"] = fitted_compute_min(fit)
    params = {"N_coefficient": fit.n_opt_law.coefficient, "a": fit.n_opt_law.exponent}
    names = {"N_coefficient": "N_coefficient", "a": "a"}
    if fit.approach == 1:  # the loss law the figures draw (`envelope_law`): with a floor only when identified
        drawn = envelope_law(fit)
        params.update(loss_A=drawn.law.coefficient, loss_alpha=-drawn.law.exponent)
        if drawn.with_floor:
            params["loss_E"] = drawn.law.floor
            names.update(loss_E="floor_E", loss_A="floor_A", loss_alpha="floor_alpha")
        else:
            names.update(loss_A="loss_A", loss_alpha="loss_alpha")
        common["loss_unidentified"] = drawn.unidentified or withheld
        # without an identified floor, a loss beyond the fitted budgets rests on one (E = 0 or E unidentified)
        # (its floor E's own reason: user26, E was said unidentified for floor_A's interval of 34.5 decades)
        floor_e = fit.estimates.get("floor_E")
        common["floor_unidentified"] = drawn.floor_unidentified or (
            floor_e.unidentified if drawn.with_floor and floor_e is not None else ""
        )
    if samples is not None:
        samples = {ours: samples[theirs] for ours, theirs in names.items()}
    return PowerLawAllocation(f"{label} (approach {fit.approach})", params, samples, **common)
