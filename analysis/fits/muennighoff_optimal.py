"""`scaling optimal --unique-tokens U`: the best N and D under U unique tokens, by the
data-constrained law (`analysis.fits.muennighoff`), for a budget or a target loss, with the epochs
D/U the answer trains for; intervals from a fit's bootstrap samples.

    law = repeat_law(published_params(), "muennighoff", unique_tokens=25e9)
    law.allocate(1e22)           # RepeatAllocation: N, D, epochs, loss
    law.budget_for_loss(2.2)     # the smallest budget reaching loss 2.2 with 25e9 unique tokens
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.fits import muennighoff as mf
from analysis.fits.muennighoff import NAMES
from analysis.fits.muennighoff_fit import RN_REACH
from analysis.fits.optimal import Allocation, Law, ParametricLaw
from analysis.fits.presets import REPEAT_PRESET
from analysis.fits.results import PARAMETRIC_NAMES, Estimate, FitReport
from scaling.errors import UserError
from scaling.flops import smallest_6nd, tokens_6nd

FLAT = 1e-4  # an optimum within this relative distance of the lowest reachable loss: more compute buys ~nothing
RN_WHY = "rests on R_N"  # how an estimate that the fit's fixed R_N decides begins (`DataConstrainedLaw._allocation`)


@dataclass
class RepeatAllocation(Allocation):
    """An `Allocation` under ``unique_tokens`` U, with the epochs D/U (> 1: the data repeats)."""

    unique_tokens: float = math.nan
    epochs: Estimate | None = None
    lowest_loss: Estimate | None = None  # what U reaches with unbounded compute, with its interval over samples
    lowest_loss_unidentified: str = ""  # why the lowest loss is not a finding (it rests on an unidentified E)

    def follows_n(self) -> list[Estimate]:
        return [*super().follows_n(), self.epochs]

    def as_json(self) -> dict:
        out = super().as_json()
        out.update(
            unique_tokens=self.unique_tokens,
            epochs=None if self.epochs is None else self.epochs.as_json(),
            lowest_loss=self.lowest_loss.value,
            lowest_loss_interval=self.lowest_loss.interval,
        )
        if self.lowest_loss_unidentified:
            out["lowest_loss_unidentified"] = self.lowest_loss_unidentified
        return out


class DataConstrainedLaw(Law):
    """L(N, D, U) of Muennighoff et al. 2023 at a fixed U (``unique_tokens``). When the fit's E is
    unidentified (`Law.floor_unidentified`), so is the lowest loss E + ..., and a predicted loss says it rests on E."""

    predicts_loss = True

    def __init__(self, *args, unique_tokens: float, fixed_rn: str = "", most_epochs: float = math.inf, **kwargs):
        super().__init__(*args, **kwargs)
        self.unique_tokens = float(unique_tokens)
        self.fixed_rn = fixed_rn  # why the fit held R_N at the published value ("" when it fitted it)
        self.most_epochs = most_epochs  # the most epochs a fitted run trained (inf: a preset's)

    def _n_opt(self, p, compute):
        return mf.optimal_n(p, compute, self.unique_tokens)

    def _frontier_loss(self, p, compute):
        n = self._n_opt(p, compute)
        return self._loss(p, n, tokens_6nd(compute, n))

    def _loss(self, p, n, d):
        return mf.loss(n, d, self.unique_tokens, **{k: p[k] for k in mf.NAMES})

    def _lowest(self, p):
        return mf.lowest_loss(self.unique_tokens, **{k: p[k] for k in mf.NAMES})

    def budget_for_loss(self, target: float) -> Allocation:
        """As `Law.budget_for_loss`; a target at or below the lowest loss U reaches is an error when no
        bootstrap sample reaches it either (else the budget is unidentified, `Law._unreached`)."""
        lowest = float(self._lowest(self.params))
        if self.samples is not None and (self._lowest(self.samples) < target).any():
            return self._budget_on_rn(super().budget_for_loss(target))
        if target <= self.params["E"]:
            raise UserError(
                f"--target-loss {target:g} is not above the law's irreducible loss E = {self.params['E']:.4g} "
                f"{self.loss_unit}{self._e_caveat()}; "
                "give a target above it"
            )
        if target <= lowest:
            raise UserError(
                f"--target-loss {target:g} is not reachable with --unique-tokens {self.unique_tokens:g}: repeating "
                f"them, the loss only falls to {lowest:.4g} {self.loss_unit} (law {self.name!r}{self._e_caveat()}); give a "
                "higher target or more unique tokens"
            )
        return self._budget_on_rn(super().budget_for_loss(target))

    @staticmethod
    def _budget_on_rn(out: Allocation) -> Allocation:
        """A target's budget rests on R_N where its N_opt does (review20: 1.7e20 [9.4e19, 2.2e20] printed for a loss
        the true law never reaches)."""
        if out.n.unidentified.startswith(RN_WHY) and not out.budget.unidentified:
            out.budget.unidentified, out.budget.lower, out.budget.upper = out.n.unidentified, None, None
        return out

    def _allocation(
        self, budget: Estimate, n: Estimate, d: Estimate | None = None, ratio: Estimate | None = None, *, loss
    ) -> Allocation:
        base = super()._allocation(budget, n, d, ratio, loss=loss)
        u = self.unique_tokens
        epochs = Estimate(base.d.value / u, unidentified=base.d.unidentified)
        if base.d.lower is not None:
            epochs.lower, epochs.upper = base.d.lower / u, base.d.upper / u
        # per sample, as the predicted loss: each sample's loss at a budget lies above its own lowest loss
        lowest = self._estimate(self._lowest)
        out = RepeatAllocation(**vars(base), unique_tokens=u, epochs=epochs, lowest_loss=lowest)
        on_rn = self.fixed_rn and not out.n.unidentified and out.n.value > RN_REACH * self._unique_params()
        if on_rn:
            why = f"{RN_WHY}, which the fit held {self.fixed_rn}"  # user30: R_N 0.5 truly; N_opt 2.8x off, unsaid
            for estimate in [*out.follows_n(), out.loss]:
                if estimate is not None and not estimate.unidentified:
                    estimate.unidentified, estimate.lower, estimate.upper = why, None, None
            out.lowest_loss_unidentified = why
            out.notes.append(
                f"N_opt is unidentified: it lies beyond {RN_REACH:g}x N_opt(U) (N_opt(U) = {self._unique_params():.4g}), "
                f"where the excess-parameter decay R_N sets N_opt and the loss, and the fit held R_N {self.fixed_rn} (too "
                "few runs that large); train runs above that size to fit it"
            )
        elif epochs.value > self.most_epochs:  # user30: 155.8 epochs from runs of at most 32, unsaid
            out.notes.append(
                f"extrapolation in epochs: {epochs.value:.4g} epochs of U, {epochs.value / self.most_epochs:.3g}x the most "
                f"a fitted run trained ({self.most_epochs:.4g}): the repetition terms are read where no run was"
            )
        if (why := self.floor_unidentified) and not on_rn:
            out.lowest_loss_unidentified = f"as the fit's E: {why}"
            out.loss_rests_on_e = rests_on_e(why) if loss is not None and not loss.unidentified else ""
        if loss is not None and loss.value <= lowest.value * (1 + FLAT) and not on_rn:
            out.notes.append(
                f"the loss is within {FLAT:.0e} of the lowest that {u:.4g} unique tokens reach ("
                + (
                    f"unidentified, {out.lowest_loss_unidentified}"
                    if self.floor_unidentified
                    else f"{lowest.value:.4g} {self.loss_unit}"
                )
                + "): "
                "more compute buys almost nothing here, and N is poorly determined; more unique data is needed"
            )
        return out

    def _unique_params(self) -> float:
        """N_opt(U) of the law's point estimate: the size beyond which parameters are in excess (`mf.unique_params`)."""
        p = self.params
        return float(mf.unique_params(self.unique_tokens, p["A"], p["B"], p["alpha"], p["beta"]))

    def _e_caveat(self) -> str:
        """Said beside a loss floor that rests on E when the fit could not identify E (else "")."""
        return f"; that floor {rests_on_e(self.floor_unidentified)}" if self.floor_unidentified else ""


def rests_on_e(why: str) -> str:
    """The one wording for a value of the law that holds only as far as its E does, when the fit
    could not identify E (``why``, `Estimate.unidentified`): the loss floor, a predicted loss."""
    return f"rests on E, which is unidentified: {why}"


def repeat_law(params: dict, name: str, unique_tokens: float, **kwargs) -> DataConstrainedLaw:
    """The law at U = ``unique_tokens``; U must be a finite number > 0 (else one UserError line)."""
    if not (math.isfinite(unique_tokens) and unique_tokens > 0):
        raise UserError(f"--unique-tokens {unique_tokens!r} is not valid; give the unique tokens available, > 0")
    return DataConstrainedLaw(name, params, unique_tokens=unique_tokens, **kwargs)


def published(unique_tokens: float) -> DataConstrainedLaw:
    """The preset `--law muennighoff` at U = ``unique_tokens``."""
    return repeat_law(
        mf.published_params(),
        REPEAT_PRESET,
        unique_tokens,
        notes=[
            "Muennighoff et al. 2023, data-constrained law: L = E + A/N'^α + B/D'^β, ln A = 6.255, ln B = 7.305, "
            "ln E = 0.6255, α = β = 0.3527, R*_D = 15.39, R*_N = 5.310"
        ],
    )


def resolve_repeat_law(
    name: str, unique_tokens: float | None, approach: str | None, max_tokens: float | None, level: float | None
) -> DataConstrainedLaw:
    """`scaling optimal --unique-tokens U`'s law: the preset ``muennighoff``, or the data-constrained
    fit of a FIT.json (`scaling fit --approach muennighoff`), with its bootstrap samples."""
    from pathlib import Path

    if unique_tokens is None:
        raise UserError("scaling optimal: --law muennighoff needs --unique-tokens U (the unique tokens available)")
    if max_tokens is not None:
        raise UserError(
            "scaling optimal: --max-tokens caps D without repeating; --unique-tokens U lets D repeat U: give one"
        )
    if approach is not None:
        raise UserError("--approach picks a Chinchilla approach; with --unique-tokens the data-constrained law is used")
    if name == REPEAT_PRESET:
        return published(unique_tokens)
    if not Path(name).exists():
        raise UserError(
            f"--law {name!r} with --unique-tokens: give {REPEAT_PRESET} (published) or a FIT.json written by "
            "`scaling fit SOURCE --approach muennighoff --out FIT.json`"
        )
    report = FitReport.load(name)
    fit = report.muennighoff
    if fit is None:
        raise UserError(
            f"{name} holds no data-constrained fit; write one with `scaling fit SOURCE --approach muennighoff "
            "--out FIT.json` (runs with unique_tokens), or use --law muennighoff"
        )
    fixed_rn = (
        f"at the published {fit.convergence['fixed']['R_N']:.4g}" if "R_N" in fit.convergence.get("fixed", {}) else ""
    )
    kwargs = _fitted(report, NAMES, level)
    most = float(max(d / u for d, u in zip(fit.d, fit.unique)))
    law = repeat_law(
        fit.params, f"{name} (data-constrained)", unique_tokens, fixed_rn=fixed_rn, most_epochs=most, **kwargs
    )
    low, high = min(fit.unique), max(fit.unique)  # user27: U = 4 against a fit on U in billions printed loss 721.9
    if unique_tokens > high * U_REACH:
        where = f"{unique_tokens / high:.3g}x the fit's largest U ({high:.4g})"
    elif unique_tokens < low / U_REACH:
        where = f"{low / unique_tokens:.3g}x below the fit's smallest U ({low:.4g}; in other units?)"
    else:
        return law
    law.notes.append(
        f"extrapolation in U: --unique-tokens {unique_tokens:.4g} is {where}: the law's repetition terms are read "
        "where no run was"
    )
    return law


U_REACH = 10.0  # --unique-tokens beyond this factor of the fitted runs' U is an extrapolation, as a budget's 10x


def fresh_data_law(report: FitReport, name: str, level: float | None) -> ParametricLaw:
    """A saved data-constrained fit's law with unlimited unique data: as U → ∞ nothing repeats (D' = D, N' = N), so
    L = E + A/N^alpha + B/D^beta, approach 3's form, with the fit's E, A, B, alpha, beta (their bootstrap samples
    for intervals). `scaling optimal --law FIT.json` answers with it when no --unique-tokens is given."""
    kwargs = _fitted(report, PARAMETRIC_NAMES, level)
    kwargs["notes"].append(
        "unlimited unique data (U → ∞: no token repeats), the fit's law of fresh data L = E + A/N^α + B/D^β; "
        "--unique-tokens U answers for U unique tokens"
    )
    params = {k: report.muennighoff.params[k] for k in PARAMETRIC_NAMES}
    return ParametricLaw(f"{name} (data-constrained fit, unlimited unique data)", params, **kwargs)


def _fitted(report: FitReport, names: tuple, level: float | None) -> dict:
    """The `Law` arguments of ``report``'s data-constrained fit: the bootstrap samples of ``names``, the level
    (``level``, else the bootstrap's), the fitted compute range, what it was fitted to, the loss unit, whether E is
    identified."""
    fit = report.muennighoff
    boot = fit.bootstrap
    samples = boot.samples if boot and boot.samples else None
    return dict(
        samples={k: samples[k] for k in names} if samples else None,
        n_kind=report.n_kind,
        fitted_compute_max=fit.fitted_compute_max,
        level=level if level is not None else (boot.level if boot else 0.95),
        notes=[f"data-constrained fit of {fit.source} ({len(fit.n)} runs)" + _fixed_note(fit)],
        loss_unit=report.loss_unit,
        floor_unidentified=fit.estimates["E"].unidentified,
        fitted_compute_min=smallest_6nd(fit.n, fit.d),
    )


def _fixed_note(fit) -> str:
    fixed = fit.convergence.get("fixed", {})
    return "".join(f"; {k} fixed at the published {v:.4g}" for k, v in fixed.items())
