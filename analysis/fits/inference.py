"""Inference-aware allocation (Sardana et al. 2024, "Beyond Chinchilla-Optimal: Accounting for
Inference in Language Model Scaling Laws"): the N and D that minimise the lifetime cost

    F(N, D) = 6·N·D + 2·N·T      (training, `scaling.flops.flops_6nd`; serving T tokens, `inference_flops_2nt`)

under L(N, D) = E + A/N^α + B/D^β, either for a target loss ℓ (the common case: a quality level to
reach at least cost) or for a total budget F = C (the lowest loss C FLOPs of training and serving buy).

Both problems share one optimality condition (Lagrange: ∇L ∥ ∇F). With x = A/N^α, y = B/D^β:

    k := α·x / (β·y) = (6·D + 2·T) / (6·D) = 1 + (2·N·T) / (6·N·D),

i.e. k − 1 is the ratio of inference to training FLOPs at the optimum; T = 0 gives k = 1, the
compute-optimal condition α·A/N^α = β·B/D^β of Hoffmann et al. (their Eq. 4). For a target loss,
x + y = ℓ − E =: r, so k fixes the point:

    x = r·β·k / (α + β·k),  y = r·α / (α + β·k),  N = (A/x)^(1/α),  D = (B/y)^(1/β),

and k − 1 − T/(3·D(k)) rises with k (D(k) grows) from −T/(3·D(1)) at k = 1: one root, found by
bisection in [1, 1 + T/(3·D(1))] (at T = 0 the interval is the point k = 1). For a total budget C,
D = (C − 2·N·T)/(6·N) and the condition α·x/(β·y) − 1 − T/(3·D) falls as N grows, from +∞ (N → 0)
to below 0 at N = min(N_opt(C), C/(2T)): bisection in ln N. At T = 0 the budget case is the
closed-form optimum (`laws.chinchilla_allocation`). Every function is vectorised over the law's
parameters, so a bootstrap sample of the law is one array per name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.fits import laws
from analysis.fits.bootstrap import AS_A, AS_E
from analysis.fits.identified import never_reached, never_reached_note, outside_trained_notes, range_notes, scale_rule
from analysis.fits.optimal import parametric_loss
from analysis.fits.results import UNBOUNDED, Estimate
from scaling.errors import UserError
from scaling.flops import flops_6nd, inference_flops_2nt, tokens_6nd

# What it costs to reach a target loss: +inf for a sample that never reaches it (`never_reaching`)
COSTS = ("N", "D", "training_flops", "total_flops", "reference_N", "reference_D", "reference_total_flops")
BISECTIONS = 200  # halvings of the bracket: far below float precision for any bracket used here
LOG_N_SPAN = 60.0  # the budget case searches ln N in [ln N_hi − LOG_N_SPAN, ln N_hi] (26 decades)


# ---------------------------------------------------------------- the solvers (vectorised)
def _point_at_ratio(p, r, k):
    """(N, D) on the loss contour E + r where α·x/(β·y) = k (module docstring)."""
    alpha, beta = p["alpha"], p["beta"]
    x = r * beta * k / (alpha + beta * k)
    y = r * alpha / (alpha + beta * k)
    return np.power(p["A"] / x, 1.0 / alpha), np.power(p["B"] / y, 1.0 / beta)


def for_loss(p, target: float, inference_tokens: float) -> dict[str, np.ndarray]:
    """The cheapest (N, D) reaching loss ``target`` with T = ``inference_tokens`` served; NaN where
    the target is at or below E."""
    r = np.where(target > p["E"], target - np.asarray(p["E"], float), np.nan)
    _, d_one = _point_at_ratio(p, r, 1.0)
    lo = np.ones_like(r)
    # k − 1 = 2·N·T/(6·N·D(k)) <= that at k = 1: D grows with k
    hi = 1.0 + inference_flops_2nt(1.0, inference_tokens) / flops_6nd(1.0, d_one)
    for _ in range(BISECTIONS):
        k = 0.5 * (lo + hi)
        n, d = _point_at_ratio(p, r, k)
        below = k - 1.0 < inference_flops_2nt(n, inference_tokens) / flops_6nd(n, d)
        lo, hi = np.where(below, k, lo), np.where(below, hi, k)
    n, d = _point_at_ratio(p, r, hi if inference_tokens > 0 else lo)
    return {"N": n, "D": d, "loss": np.where(np.isfinite(r), target, np.nan)}


def for_budget(p, budget: float, inference_tokens: float) -> dict[str, np.ndarray]:
    """The lowest-loss (N, D) with 6·N·D + 2·N·T = ``budget``."""
    n = laws.chinchilla_allocation(budget, p["A"], p["B"], p["alpha"], p["beta"])[0]  # T = 0: the answer
    if inference_tokens > 0:
        hi = np.log(np.minimum(n, budget / inference_flops_2nt(1.0, inference_tokens)))
        lo = hi - LOG_N_SPAN
        for _ in range(BISECTIONS):
            mid = 0.5 * (lo + hi)
            rising = _budget_condition(p, np.exp(mid), budget, inference_tokens) > 0
            lo, hi = np.where(rising, mid, lo), np.where(rising, hi, mid)
        n = np.exp(0.5 * (lo + hi))
    d = tokens_6nd(budget - inference_flops_2nt(n, inference_tokens), n)  # at T = 0: D = C/(6N), as `allocate`
    return {"N": n, "D": d, "loss": parametric_loss(p, n, d)}


def _budget_condition(p, n, budget, inference_tokens):
    """α·x/(β·y) − 1 − 2·N·T/(6·N·D) at N on the budget line (> 0: the optimum has a larger N)."""
    d = tokens_6nd(budget - inference_flops_2nt(n, inference_tokens), n)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (p["alpha"] * p["A"] * np.power(n, -p["alpha"])) / (p["beta"] * p["B"] * np.power(d, -p["beta"]))
        return np.where(d > 0, ratio - 1.0 - inference_flops_2nt(n, inference_tokens) / flops_6nd(n, d), -np.inf)


def never_reaching(law, target: float, inference_tokens: float, central, draws, values) -> list[str]:
    """Samples of ``law`` that never reach ``target`` (`Law.never_reaches`, the rule of `scaling optimal
    --target-loss`): +inf in each of `COSTS` (and the inference FLOPs when T > 0), no value in the rest.
    When they leave N's interval unbounded (and not some other
    reason `Law.interval` gave), every quantity is unidentified, saying why (``values``
    rewritten in place). Returns the note counting them (none when there are none)."""
    never = law.never_reaches(law.samples, target)
    if not never.any():
        return []
    costs = COSTS + ("inference_flops",) * (inference_tokens > 0)
    for k in draws:
        draws[k] = np.where(never, np.inf if k in costs else np.nan, draws[k])
    size = int(np.sum(~np.isnan(draws["N"])))
    for k, v in central.items():
        values[k] = law.interval(float(v), draws[k])
    if values["N"].unbounded:  # not another reason (overflowed A, B)
        why = never_reached(int(never.sum()), size)
        for k, e in values.items():
            values[k] = Estimate(e.value, unidentified=f"{UNBOUNDED} above: {why}" if k in costs else why)
    return [never_reached_note(int(never.sum()))]


def lifetime(p, solution: dict, inference_tokens: float) -> dict[str, np.ndarray]:
    """``solution`` with its FLOPs and the training-optimal model of the same loss: its N, D and
    lifetime FLOPs, and what the inference-aware choice saves against it."""
    n, d = solution["N"], solution["D"]
    reference = _reference(p, solution)
    training, inference = flops_6nd(n, d), inference_flops_2nt(n, inference_tokens)
    ref_total = flops_6nd(reference["N"], reference["D"]) + inference_flops_2nt(reference["N"], inference_tokens)
    saving = ref_total - (training + inference)
    saving = np.where(np.abs(saving) < 1e-9 * ref_total, 0.0, saving)  # rounding (-6.7e7 of 1e23 at T = 0: user17)
    return {
        **solution,
        "tokens_per_parameter": d / n,
        "training_flops": training,
        "inference_flops": inference,
        "total_flops": training + inference,
        "reference_N": reference["N"],
        "reference_D": reference["D"],
        "reference_total_flops": ref_total,
        "saving_flops": saving,
        "saving_fraction": saving / ref_total,
    }


def _reference(p, solution):
    """The training-optimal (T = 0, k = 1) model of the loss ``solution`` reaches (per element); none
    (NaN) for an infinite loss (a sample whose coefficient overflowed, `parametric_loss`)."""
    r = np.asarray(solution["loss"], float) - np.asarray(p["E"], float)
    return dict(zip(("N", "D"), _point_at_ratio(p, np.where((r > 0) & np.isfinite(r), r, np.nan), 1.0)))


# ---------------------------------------------------------------- the answer with intervals
@dataclass
class InferenceAllocation:
    """One answer of `scaling optimal --inference-tokens`: each quantity of `lifetime` as an
    `Estimate` (intervals: percentiles over the law's bootstrap samples)."""

    law: str
    inference_tokens: float
    values: dict[str, Estimate]
    level: float
    target_loss: float | None = None
    budget: float | None = None
    n_kind: str = "total"
    notes: list[str] = field(default_factory=list)
    extrapolation: bool = False  # its training FLOPs beyond `EXTRAPOLATION_FACTOR` x the largest fitted run
    below_range: bool = False  # its training FLOPs below the smallest fitted (`identified.below_fitted`)

    def as_json(self) -> dict:
        out = {"law": self.law, "inference_tokens": self.inference_tokens, "level": self.level}
        out.update(target_loss=self.target_loss, total_budget_flops=self.budget, n_kind=self.n_kind)
        out.update(extrapolation=self.extrapolation, below_fitted_range=self.below_range)
        out.update({k: v.as_json() for k, v in self.values.items()})
        return {**out, "notes": self.notes}


def inference_allocation(
    law, inference_tokens: float, *, target_loss: float | None = None, budget: float | None = None
) -> InferenceAllocation:
    """Solve for ``law`` (a `analysis.fits.optimal.ParametricLaw`) at the central parameters and
    on every bootstrap sample; exactly one of ``target_loss`` and ``budget`` is given."""
    if not (np.isfinite(inference_tokens) and inference_tokens >= 0):
        raise UserError(f"--inference-tokens {inference_tokens!r} is not valid; give a token count >= 0, e.g. 2e12")
    if target_loss is not None and not target_loss > law.params["E"]:
        raise UserError(
            f"--target-loss {target_loss:g} is at or below the irreducible loss E = {law.params['E']:.4g} "
            f"{law.loss_unit} of law {law.name!r}: no model reaches it; give a target above {law.params['E']:.4g}"
        )

    def solve(p):
        with np.errstate(all="ignore"):
            if target_loss is not None:
                return lifetime(p, for_loss(p, target_loss, inference_tokens), inference_tokens)
            return lifetime(p, for_budget(p, budget, inference_tokens), inference_tokens)

    central = solve({k: np.float64(v) for k, v in law.params.items()})
    draws = solve(law.samples) if law.samples is not None else {}
    values = {k: law.interval(float(v), draws[k]) if k in draws else Estimate(float(v)) for k, v in central.items()}
    never = []
    if target_loss is not None and draws:  # first: it rebuilds every value from its draws, dropping the flags set below
        never = never_reaching(law, target_loss, inference_tokens, central, draws, values)
    given = "loss" if target_loss is not None else "total_flops"
    values[given] = Estimate(float(target_loss if target_loss is not None else budget))  # asked for: no interval
    notes = list(law.notes)
    _flag_unidentified(law, values, given, budget, notes)
    scale_rule(values["N"], values["D"], values["tokens_per_parameter"])  # as a plain allocation's N_opt
    ranged = range_notes(values["training_flops"].value, law.fitted_compute_min, law.fitted_compute_max)
    notes += [note for note in ranged.values() if note]
    outside = outside_trained_notes(values["N"].value, values["D"].value, law.trained)
    notes += outside
    return InferenceAllocation(
        law=law.name,
        inference_tokens=inference_tokens,
        values=values,
        level=law.level,
        target_loss=target_loss,
        budget=budget,
        n_kind=law.n_kind,
        notes=notes + never,
        extrapolation=bool(ranged["extrapolation"] or outside),  # beyond the fitted budgets, sizes or D/N
        below_range=bool(ranged["below_range"]),
    )


def _flag_unidentified(law, values: dict[str, Estimate], given: str, budget, notes: list[str]) -> None:
    """The plain allocation's rules (`analysis.fits.optimal.Law`): a fit whose a is unidentified makes
    the allocation unidentified (not the loss); one whose E is unidentified, the loss outside its fitted
    budgets (for a target loss: every answer, since they all rest on where the loss levels off). ``given``:
    the quantity asked for ("loss" for a target, "total_flops" for a budget), never unidentified."""
    if getattr(law, "unidentified", ""):
        notes.append(f"the fit's exponent a is unidentified ({law.unidentified}): so is this allocation")
        for name in set(values) - {given, "loss"}:
            values[name].unidentified = AS_A
    reach = budget if budget is not None else values["reference_total_flops"].value
    if law.rests_on_floor(reach):
        notes.append(
            f"the fit's irreducible loss E is unidentified ({law.floor_unidentified}): so is what it predicts "
            "outside its fitted budgets"
        )
        for name in {"loss"} if given == "total_flops" else set(values) - {given}:
            values[name].unidentified = values[name].unidentified or AS_E
