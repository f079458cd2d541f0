"""How an allocation's derived values inherit the identification of what they are derived from
(`analysis.fits.optimal.Law`): D = C/(6N) and D/N follow N's interval, or N's being unidentified
("as N's"); N, D and D/N at a budget that the fit cannot identify are unidentified with it
("as the budget's"; the loss there is the target asked for), and the one wording for bootstrap samples that never reach a target loss and
for a budget beyond the fitted ones (an extrapolation). The
rules of when an interval identifies a value live in `analysis.fits.bootstrap`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.fits.bootstrap import scale_identification
from analysis.fits.results import UNBOUNDED, Estimate
from analysis.sources.budgets import BUDGET_TOLERANCE

AS_BUDGET = "as the budget's"  # N, D, D/N, loss (epochs) at a budget the fit does not identify
AS_N = "as N's"  # how the reason of D, D/N (epochs) unidentified with N begins: "as N's: <N's reason>"
EXTRAPOLATION_FACTOR = 10.0  # budgets more than 10x the largest fitted run are flagged (docs/NOTES.md, Fitting rules)


def extrapolation_note(compute: float, fitted_compute_max: float | None) -> str:
    """The note on a training budget beyond `EXTRAPOLATION_FACTOR` x the largest fitted run ("" within it)."""
    high = fitted_compute_max
    if high is None or not compute > EXTRAPOLATION_FACTOR * high:
        return ""
    return (
        f"extrapolation: {compute:.3g} FLOPs is {compute / high:.3g}x the largest fitted run ({high:.3g} FLOPs); "
        f"beyond {EXTRAPOLATION_FACTOR:g}x a prediction is speculation"
    )


@dataclass(frozen=True)
class TrainedRange:
    """The sizes N and tokens per parameter D/N of the runs a law was fitted on (a saved approach 3's): an
    allocation far outside them rests on the law's terms where no run measured them."""

    n_min: float
    n_max: float
    ratio_min: float
    ratio_max: float

    @classmethod
    def of(cls, n, d) -> TrainedRange:
        n, ratio = np.asarray(n, float), np.asarray(d, float) / np.asarray(n, float)
        return cls(float(n.min()), float(n.max()), float(ratio.min()), float(ratio.max()))


def outside_trained_notes(n: float, d: float, trained: TrainedRange | None) -> list[str]:
    """The notes on an N, or a D/N, beyond `EXTRAPOLATION_FACTOR` x the trained runs' range on either side (none
    within it, or where the range is unknown): an inference-aware N of 5e3 from runs of 1.6e7 to 3.2e9 at
    1.7e9 tokens per parameter, its loss of 29 nats unflagged."""
    if trained is None:
        return []
    f, notes = EXTRAPOLATION_FACTOR, []
    for what, value, low, high, kind in (
        ("N", n, trained.n_min, trained.n_max, "size"),
        ("D/N", d / n, trained.ratio_min, trained.ratio_max, "tokens per parameter"),
    ):
        if value > f * high:
            notes.append(f"{value / high:.3g}x the largest trained {kind} ({high:.4g})")
        elif value * f < low:
            notes.append(f"{low / value:.3g}x below the smallest trained {kind} ({low:.4g})")
        else:
            continue
        notes[-1] = (
            f"extrapolation in {what}: {what} = {value:.4g} is {notes[-1]}; beyond {f:g}x a prediction is speculation"
        )
    return notes


def within_fitted(compute: float, smallest: float | None, largest: float | None) -> bool:
    """A budget within the fitted budgets [smallest, largest] by the same tolerance at either end as `below_fitted`'s
    (review22: a store's rounded tokens put its smallest run's 6·N·D 2e-7 above the budget, which `optimal` then
    called inside the fitted range and its loss "as the fit's E" at once)."""
    return largest is not None and not below_fitted(compute, smallest) and compute <= largest * (1.0 + BUDGET_TOLERANCE)


def rests_on_floor(compute: float, floor_unidentified: str, smallest: float | None, largest: float | None) -> bool:
    """Whether a law's loss at ``compute`` rests on an irreducible loss E that its fit leaves unidentified
    (``floor_unidentified`` says why, "" when E is identified): outside its fitted budgets (`within_fitted`), where no
    run measured the loss, E sets it (a one-budget fit with E at 0 gave 3.909 [3.577, 4.118] at 1/100 of its budget,
    truth 3.51; `scaling compare` read m = 79 [30, 540] three decades below a candidate's budgets, its E at 0)."""
    return bool(floor_unidentified) and not within_fitted(compute, smallest, largest)


def below_fitted(compute: float, smallest_fitted_budget: float | None) -> bool:
    """A budget below the smallest fitted one, and not the same budget by the clustering rule (within
    `BUDGET_TOLERANCE`: approach 3's smallest is a run's 6·N·D, which rounding steps up puts just above its
    label, and its label's row was flagged "1x below"): the law is extrapolated downwards (the report's ladder
    and `scaling optimal` flag it)."""
    return smallest_fitted_budget is not None and compute * (1.0 + BUDGET_TOLERANCE) < smallest_fitted_budget


def below_range_note(compute: float, fitted_compute_min: float | None) -> str:
    """The note on a budget `below_fitted` ("" when it is not)."""
    if not below_fitted(compute, fitted_compute_min):
        return ""
    return (
        f"below the fitted range: {compute:.3g} FLOPs is {fitted_compute_min / compute:.3g}x below the smallest "
        f"fitted budget ({fitted_compute_min:.3g} FLOPs); the law is extrapolated downwards"
    )


def range_notes(compute: float, fitted_compute_min: float | None, fitted_compute_max: float | None) -> dict[str, str]:
    """The notes on a budget outside the fitted range, by the allocation's flag each sets ("" when it does not)."""
    return {
        "extrapolation": extrapolation_note(compute, fitted_compute_max),
        "below_range": below_range_note(compute, fitted_compute_min),
    }


def above_fitted_losses_note(target: float, highest: float, loss_unit: str) -> str:
    """The note on a --target-loss whose budget is `below_fitted`: the target is above ``highest``, the law's
    optimal loss at its smallest fitted budget (a loss in another unit, a bits/byte fit asked for 2.1 nats?)."""
    return (
        f"--target-loss {target:g} is above the law's optimal loss at its smallest fitted budget ({highest:.4g} "
        f"{loss_unit}); is it in {loss_unit}?"
    )


def falling(n: Estimate, fall) -> Estimate:
    """The estimate of ``fall(N)``, a quantity that falls as N grows (D = C/(6N), D/N = C/(6N²)): N's
    interval maps onto its reversed. Where N's reaches 0 (samples whose N_opt underflowed) it is
    unbounded above; where N's is unbounded (`Estimate.from_samples`), so is it: no interval, unidentified."""
    out = Estimate(float(fall(n.value)))
    if n.interval is not None:
        with np.errstate(divide="ignore"):
            out.lower, out.upper = float(fall(np.float64(n.upper))), float(fall(np.float64(n.lower)))
        if not np.isfinite(out.upper):
            out.lower = out.upper = None
            out.unidentified = f"{UNBOUNDED} above: N's interval reaches {n.lower:g}"
    elif n.unidentified:
        out.unidentified = f"{AS_N}: {n.unidentified}"
    return out


def scale_rule(n: Estimate, *derived: Estimate) -> None:
    """N_opt is a positive scale: an interval spanning more than `bootstrap.MAX_DECADES` (or reaching 0)
    does not identify it (`scale_identification`, as `scaling fit` prints a budget's N_opt), and the
    ``derived`` values (D, D/N, epochs) are unidentified "as N's". Their intervals stay for JSON readers."""
    if why := not n.unidentified and scale_identification(n.lower, n.upper):
        n.unidentified = why
        for estimate in derived:
            estimate.unidentified = estimate.unidentified or f"{AS_N}: {why}"


def as_budget(allocation) -> None:
    """The values of an `Allocation` for a target loss whose budget is unidentified: unidentified too
    (`AS_BUDGET`), no interval (the printed N_opt 8.2e10 [1.14e10, 2.09e12] at an unidentified budget left the
    truth 6.72e9 outside it); its loss is the target, by construction, without an interval."""
    for estimate in allocation.follows_n():
        estimate.lower = estimate.upper = None
        estimate.unidentified = estimate.unidentified or AS_BUDGET
    if allocation.loss is not None:
        allocation.loss = Estimate(float(allocation.target_loss))
    allocation.loss_rests_on_e = ""  # the target does not rest on E


def never_reached(count: int, size: int) -> str:
    """The reason an interval is unbounded by samples that never reach a target loss."""
    return f"{count} of {size} samples never reach the target loss"


def never_reached_note(count: int) -> str:
    return f"{count} bootstrap samples never reach the target loss"
