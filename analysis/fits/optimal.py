"""Compute-optimal allocation: for a budget C, the N and D that minimise loss under C = 6·N·D.

A law is either a published preset (`analysis.fits.presets.PRESETS`) or a saved fit (`law_from_fit`). Every allocation
printed satisfies 6·N·D = C: N comes from the law and D = C/(6·N). When the law carries bootstrap samples, each sample
gives its own N (and loss), and the intervals are their percentiles. Also: the inverse (the smallest budget whose
optimal loss reaches a target, for laws that predict loss) and the data-limited case (D capped: the budget is best
spent at D = cap, N = C/(6·cap), as at fixed C the loss falls towards the unconstrained optimum and the cap blocks it).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

from analysis.fits import identified as ident
from analysis.fits import laws
from analysis.fits.bootstrap import AS_A, AS_E, AS_LOSS_LAW, identification, reaches_zero
from analysis.fits.results import UNBOUNDED, Estimate
from analysis.sources.schema import DEFAULT_LOSS_UNIT
from scaling.errors import UserError
from scaling.flops import flops_6nd, params_6nd, tokens_6nd

LOG10_BUDGET_RANGE = (0.0, 60.0)  # where the inverse looks for a budget, in log10 FLOPs


@dataclass
class Allocation:
    """One answer of `scaling optimal`. ``loss`` is None when the law does not predict loss."""

    law: str
    budget: Estimate
    n: Estimate
    d: Estimate
    tokens_per_parameter: Estimate
    loss: Estimate | None
    n_kind: str
    extrapolation: bool
    level: float
    below_range: bool = False  # the budget is below the smallest fitted one (`identified.below_fitted`)
    target_loss: float | None = None
    max_tokens: float | None = None
    notes: list[str] = field(default_factory=list)
    loss_rests_on_e: str = ""  # said beside the loss: it holds only as far as an unidentified E (data-constrained)

    def follows_n(self) -> list[Estimate]:
        """The estimates N sets at this budget: N, D = C/(6N), D/N (and the epochs D/U, `RepeatAllocation`)."""
        return [self.n, self.d, self.tokens_per_parameter]

    def as_json(self) -> dict:
        out = {
            "law": self.law,
            "budget_flops": self.budget.value,
            "N": self.n.as_json(),
            "D": self.d.as_json(),
            "tokens_per_parameter": self.tokens_per_parameter.as_json(),
            "loss": None if self.loss is None else self.loss.as_json(),
            "six_N_D": flops_6nd(self.n.value, self.d.value),
            "n_kind": self.n_kind,
            **{"extrapolation": self.extrapolation, "below_fitted_range": self.below_range},
            "level": self.level,
            "notes": self.notes,
        }
        if self.target_loss is not None:
            out.update(target_loss=self.target_loss, budget_interval=self.budget.interval)
            out.update({"budget_unidentified": self.budget.unidentified} if self.budget.unidentified else {})
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out | ({"loss_rests_on_e": self.loss_rests_on_e} if self.loss_rests_on_e else {})


class Law(abc.ABC):
    """Base of the allocation laws. Subclasses define, for parameters ``p`` (a dict of floats, or
    of arrays holding one bootstrap sample per element): ``_n_opt(p, C)``, and optionally
    ``_frontier_loss(p, C)`` (the loss at the optimum) and ``_loss(p, N, D)`` (at any point)."""

    predicts_loss = False

    def __init__(
        self,
        name: str,
        params: dict[str, float],
        samples: dict[str, np.ndarray] | None = None,
        n_kind: str = "total",
        fitted_compute_max: float | None = None,
        level: float = 0.95,
        notes: list[str] | None = None,
        unidentified: str = "",
        loss_unit: str = DEFAULT_LOSS_UNIT,
        floor_unidentified: str = "",
        fitted_compute_min: float | None = None,
        loss_unidentified: str = "",
    ):
        self.name, self.params, self.n_kind, self.level = name, params, n_kind, level
        self.loss_unit = loss_unit  # of every loss it predicts: a fit's (`FitReport.loss_unit`); presets' nats/token
        self.unidentified = unidentified  # why the fit does not pin down its allocation exponent a ("" if it does)
        # why it does not pin down its irreducible loss E ("" if it does): its loss beyond the fitted budgets is unknown
        self.floor_unidentified = floor_unidentified
        self.loss_unidentified = loss_unidentified  # why its loss law is unidentified ("": it is not): approach 1's
        self.fitted_compute_min = fitted_compute_min  # the smallest fitted C (3: run's 6·N·D, 2: budget), or None
        self.samples = {k: np.asarray(v, float) for k, v in samples.items()} if samples else None
        self.unknown = (0, "")  # how many samples have no value for anything the law derives, and why (`ParametricLaw`)
        self.fitted_compute_max = fitted_compute_max
        self.trained: ident.TrainedRange | None = None  # the fitted runs' N and D/N, where known (a saved approach 3's)
        self.notes = list(notes or [])

    @abc.abstractmethod
    def _n_opt(self, p, compute):
        """N_opt(C) for parameters ``p``."""

    def _frontier_loss(self, p, compute):
        return None

    def _loss(self, p, n, d):
        return None

    # ------------------------------------------------------------ answers
    def allocate(self, budget: float) -> Allocation:
        """N_opt, D_opt = C/(6·N_opt), D/N and the loss at the optimum, with intervals."""
        loss = self._estimate(self._frontier_loss, budget) if self.predicts_loss else None
        return self._allocation(Estimate(budget), self.n_opt(budget), loss=loss)

    def n_opt(self, budget: float) -> Estimate:
        """N_opt with its interval, unidentified only where it reaches 0 (interval kept: D's comes from it);
        `scaling next` reads it so, to narrow it however wide (`_allocation` adds the decade rule)."""
        n = self.interval(float(self._n_opt(self.params, budget)), self._on_samples(self._n_opt, budget))
        n.unidentified = n.unidentified or reaches_zero(n.lower, n.upper)
        return n

    def budget_for_loss(self, target: float) -> Allocation:
        """The smallest budget whose compute-optimal loss is ``target``, and its allocation."""
        if not self.predicts_loss:
            raise UserError(
                f"law {self.name!r} does not predict loss, so --target-loss cannot be answered; use "
                "chinchilla-parametric, kaplan, or a fit with approach 3 or 1"
            )
        if not (np.isfinite(target) and target > 0):
            raise UserError(f"--target-loss {target!r} is not valid; give a loss > 0, in the law's unit")
        if self.loss_unidentified:  # each number it would quote (the budget, the loss it reaches) is the law's
            raise UserError(
                f"--target-loss cannot be answered with law {self.name!r}: its loss law is unidentified "
                f"({self.loss_unidentified}), so no budget that reaches a loss can be read from it"
            )
        central = self._solve_budget(self.params, np.array([target]))[0]
        draws = self._on_samples(self._solve_budget, np.full(self._sample_count(), target)) if self.samples else None
        never, size = (0, 0) if draws is None else (int(np.isinf(draws).sum()), int(np.sum(~np.isnan(draws))))
        if not np.isfinite(central):
            lowest = float(self._frontier_loss(self.params, 10.0 ** LOG10_BUDGET_RANGE[1]))
            reach = f"its loss only falls to {lowest:.4g} {self.loss_unit} at 1e{LOG10_BUDGET_RANGE[1]:.0f} FLOPs"
            if never == size:  # no sample reaches it either (or there are none)
                raise UserError(
                    f"--target-loss {target:g} is not reachable with law {self.name!r}: {reach} (the irreducible "
                    "loss bounds it); give a higher target"
                )
            return self._unreached(target, never, size, f"the fit's own law never reaches the target: {reach}")
        if draws is None:
            allocation = self.allocate(central)
        else:  # each sample at the budget where its own law reaches the target
            loss = self._estimate(self._frontier_loss, central)
            allocation = self._allocation(Estimate(central), *self._at_own_budgets(central, draws), loss=loss)
        allocation.budget, allocation.target_loss = Estimate(central), target
        if draws is not None:
            allocation.budget = self.interval(central, draws)
            if never:  # an unbounded budget: they bound the interval from above
                allocation.notes.append(ident.never_reached_note(never))
            if allocation.budget.unbounded:
                allocation.budget.unidentified = f"{UNBOUNDED} above: {ident.never_reached(never, size)}"
        if allocation.loss is not None and allocation.loss.unidentified == AS_E:
            allocation.budget.unidentified = allocation.loss.unidentified  # the budget that reaches a loss rests on it
        if allocation.budget.unidentified:  # N, D, D/N and the loss are those of a budget the fit cannot give
            ident.as_budget(allocation)  # and no number to place (user23: "4.78e+21 FLOPs is 47.8x ...")
            ranged = ident.range_notes(central, self.fitted_compute_min, self.fitted_compute_max).values()
            allocation.notes = [n for n in allocation.notes if n not in ranged]
            allocation.extrapolation = allocation.below_range = False
        elif allocation.loss is not None:  # the target asked for: no interval (the budget's carries the spread)
            allocation.loss = Estimate(float(target))
        if allocation.below_range:  # a target above the law's optimal loss at its smallest fitted budget
            highest = float(self._frontier_loss(self.params, self.fitted_compute_min))
            allocation.notes.append(ident.above_fitted_losses_note(target, highest, self.loss_unit))
        return allocation

    def _at_own_budgets(self, central: float, draws: np.ndarray) -> tuple[Estimate, Estimate, Estimate]:
        """N_opt, D and D/N at a target's budget, their intervals from each sample at its own budget ``draws``
        (user20: taken at the central budget, they left out the budget's spread and missed the truth in 4 of 20
        ladders). A sample that never reaches the target costs +inf in N and D and has no D/N, as in
        `inference.never_reaching`."""
        never = np.isinf(draws)
        with np.errstate(all="ignore"):
            n = np.where(never, np.inf, np.asarray(self._n_opt(self.samples, np.where(never, 1.0, draws)), float))
            d = np.where(never, np.inf, tokens_6nd(draws, n))
            ratio = np.where(never, np.nan, d / n)  # no value, as `inference.never_reaching` has it
        n_central = float(self._n_opt(self.params, central))
        n_est = self.interval(n_central, n)
        n_est.unidentified = n_est.unidentified or reaches_zero(n_est.lower, n_est.upper)
        d_est = self.interval(tokens_6nd(central, n_central), d)
        for estimate in (n_est, d_est):  # unbounded by the samples that never reach the target, said so
            if estimate.unbounded:
                why = ident.never_reached(int(never.sum()), int(np.sum(~np.isnan(draws))))
                estimate.unidentified = f"{UNBOUNDED} above: {why}"
        return n_est, d_est, self.interval(tokens_6nd(central, n_central**2), ratio)

    def _unreached(self, target: float, never: int, size: int, why: str) -> Allocation:
        """A ``target`` the fit's own law never reaches but some samples do (``never`` of ``size`` do not; its E is above
        it, E's interval is not): the budget is unidentified, and all at it (78 of 200 samples of a 2-budget fit did)."""
        loss = Estimate(np.nan) if self.predicts_loss else None
        allocation = self._allocation(Estimate(np.nan), Estimate(np.nan), loss=loss)
        allocation.budget = Estimate(np.nan, unidentified=f"{UNBOUNDED} above: {ident.never_reached(never, size)}")
        allocation.target_loss = target
        ident.as_budget(allocation)
        allocation.notes += [why, ident.never_reached_note(never)]
        return allocation

    def never_reaches(self, p, target: float) -> np.ndarray:
        """Per bootstrap sample ``p``: whether its compute-optimal loss never reaches ``target`` (its
        budget is unbounded, `_solve_budget`), whatever the cause (E above it, a coefficient beyond
        floating point). Such a sample counts as +inf in every cost of reaching the target."""
        return np.isinf(self._solve_budget(p, np.full(len(next(iter(p.values()))), target)))

    def capped(self, budget: float, max_tokens: float) -> Allocation:
        """Best allocation of ``budget`` when D may not exceed ``max_tokens``."""
        free = self.allocate(budget)
        if free.d.value <= max_tokens:
            free.max_tokens = max_tokens
            free.notes.append(f"the token cap {max_tokens:.4g} does not bind: D_opt = {free.d.value:.4g} is below it")
            return free
        n = params_6nd(budget, max_tokens)
        point = self._loss(self.params, n, max_tokens)
        loss = None if point is None else self.interval(float(point), self._on_samples(self._loss, n, max_tokens))
        allocation = self._allocation(Estimate(budget), Estimate(n), loss=loss)
        allocation.max_tokens = max_tokens
        known = np.isfinite(free.d.value) and not free.d.unidentified  # user23: an unidentified D_opt was printed
        optimum = f"D_opt = {free.d.value:.4g}" if known else "D_opt unidentified: it may not bind"
        allocation.notes.append(
            f"data-limited: D capped at {max_tokens:.4g} tokens (unconstrained optimum {optimum}); "
            f"the budget buys N = C/(6·D) = {n:.4g}"
        )
        if beyond := ident.outside_trained_notes(n, max_tokens, self.trained):  # user23: N 145x the largest, unflagged
            allocation.extrapolation = True
            allocation.notes += beyond
        if loss is None and self.predicts_loss:
            allocation.notes.append("this law predicts loss only on the compute-optimal frontier, not at a capped D")
        elif loss is not None:
            unconstrained = float(self._loss(self.params, free.n.value, free.d.value))
            frontier = free.loss.value if free.loss is not None else unconstrained
            other = (  # Kaplan's L(N, D) (Eq. 1.5) and frontier (Eq. 1.3) are two fits: 1.897 and 1.868 at 1e23
                f"; its compute frontier, a separate fit, gives {frontier:.4g} there"
                if np.isfinite(frontier) and abs(frontier / unconstrained - 1.0) > 1e-3
                else ""
            )
            allocation.notes.append(
                f"loss {loss.value:.4g} against {unconstrained:.4g} {self.loss_unit} at the unconstrained optimum "
                f"(both from the law's L(N, D){other})"
            )
        return allocation

    # ------------------------------------------------------------ helpers
    def _floor_check(self, compute: float, loss: Estimate | None, notes: list[str]) -> None:
        """A loss predicted outside the fitted budgets rests on E: unidentified when E is (a one-budget fit
        with E at 0 gave 3.909 [3.577, 4.118] at 1/100 of its budget, truth 3.51)."""
        if loss is None or not self.rests_on_floor(compute):
            return
        loss.unidentified = AS_E
        notes.append(
            f"the fit's irreducible loss E is unidentified ({self.floor_unidentified}): so is the loss it predicts "
            "outside its fitted budgets"
        )

    def rests_on_floor(self, compute: float) -> bool:
        """Whether a loss this law predicts at ``compute`` rests on an unidentified E: outside the fitted
        budgets (from the smallest fitted run's 6·N·D to the largest: `within_fitted`) of a fit whose E is unidentified."""
        return ident.rests_on_floor(compute, self.floor_unidentified, self.fitted_compute_min, self.fitted_compute_max)

    def _sample_count(self) -> int:
        return len(next(iter(self.samples.values())))

    def _on_samples(self, fn, *args):
        """``fn`` evaluated on every bootstrap sample, or None (no samples, or no answer). A sample that
        overflowed gives inf (an unbounded interval), or NaN (`ParametricLaw`), without a warning."""
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            values = None if self.samples is None else fn(self.samples, *args)
        return None if values is None else np.asarray(values, float)

    def _estimate(self, fn, *args) -> Estimate:
        estimate = self.interval(float(fn(self.params, *args)), self._on_samples(fn, *args))
        estimate.unidentified = estimate.unidentified or identification("", estimate.lower, estimate.upper)  # no width
        return estimate

    def interval(self, value: float, draws) -> Estimate:
        """``value`` with the percentile interval of its per-sample ``draws`` (`Estimate.from_samples`);
        unidentified when more samples than the interval's tail have no value for it (`unknown`): their
        dropping would narrow it."""
        estimate = Estimate.from_samples(value, draws, self.level)
        count, why = self.unknown
        if draws is not None and count > (1.0 - self.level) / 2.0 * len(draws) and not estimate.unidentified:
            estimate.lower = estimate.upper = None
            estimate.unidentified = f"{count} of {len(draws)} resamples {why}"
        return estimate

    def _allocation(
        self, budget: Estimate, n: Estimate, d: Estimate | None = None, ratio: Estimate | None = None, *, loss
    ) -> Allocation:
        """The allocation at ``budget``; D and D/N from N's interval at that budget unless given."""
        c = budget.value
        d = ident.falling(n, lambda x: tokens_6nd(c, x)) if d is None else d  # D = C/(6N)
        ratio = ident.falling(n, lambda x: tokens_6nd(c, x**2)) if ratio is None else ratio  # D/N
        ident.scale_rule(n, d, ratio)
        notes = list(self.notes)
        if self.unidentified:  # the fit's own a is unidentified: so is every allocation it makes
            for estimate in (n, d, ratio):
                estimate.unidentified = AS_A
            if loss is not None and not np.isfinite(loss.value):  # no law at all (`parametric_form`): no loss
                loss.unidentified = AS_A
            notes.append(f"the fit's exponent a is unidentified ({self.unidentified}): so are N, D and D/N")
        if loss is not None and self.loss_unidentified:
            loss.unidentified = AS_LOSS_LAW
            notes.append(f"the fit's loss law is unidentified ({self.loss_unidentified}): so is the loss it predicts")
        else:
            self._floor_check(c, loss, notes)
        ranged = ident.range_notes(c, self.fitted_compute_min, self.fitted_compute_max)
        notes += [note for note in ranged.values() if note]
        return Allocation(
            law=self.name,
            budget=budget,
            n=n,
            d=d,
            tokens_per_parameter=ratio,
            loss=loss,
            n_kind=self.n_kind,
            **{flag: bool(note) for flag, note in ranged.items()},  # extrapolation, below_range
            level=self.level,
            notes=notes,
        )

    def _solve_budget(self, p, targets: np.ndarray) -> np.ndarray:
        """Bisection in log10 C (vectorised over samples): frontier loss falls as C grows. A target not
        reached within `LOG10_BUDGET_RANGE` needs an unbounded budget: inf (NaN where the law has no value)."""
        lo = np.full(targets.shape, LOG10_BUDGET_RANGE[0])
        hi = np.full(targets.shape, LOG10_BUDGET_RANGE[1])
        with np.errstate(all="ignore"):
            farthest = np.asarray(self._frontier_loss(p, 10.0**hi))
            reachable = farthest <= targets
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                above = np.asarray(self._frontier_loss(p, 10.0**mid)) > targets
                lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        return np.where(reachable, 10.0**hi, np.where(farthest > targets, np.inf, np.nan))


class ParametricLaw(Law):
    """L(N, D) = E + A/N^α + B/D^β with its closed-form optimum (`laws.chinchilla_allocation`)."""

    predicts_loss = True

    def __init__(self, *args, **kwargs):
        """As `Law`; a bootstrap sample whose A or B overflowed (beyond floating point: +inf) has no value
        for N_opt or any loss: its law is finite in log space, but the stored number lost it (N_opt = 0,
        inf/inf). Its parameters become NaN, and intervals it would bound say so (`Law.interval`)."""
        super().__init__(*args, **kwargs)
        if self.samples is not None:
            lost = ~(np.isfinite(self.samples["A"]) & np.isfinite(self.samples["B"]))
            if lost.any():
                self.samples = {k: np.where(lost, np.nan, v) for k, v in self.samples.items()}
                self.unknown = (int(lost.sum()), "have A or B beyond floating point: their law has no value here")

    def _n_opt(self, p, compute):
        return laws.chinchilla_allocation(compute, p["A"], p["B"], p["alpha"], p["beta"])[0]

    def _frontier_loss(self, p, compute):
        n, d = laws.chinchilla_allocation(compute, p["A"], p["B"], p["alpha"], p["beta"])
        return self._loss(p, n, d)

    def _loss(self, p, n, d):
        return parametric_loss(p, n, d)


def parametric_loss(p, n, d):
    """L(N, D) of parameters ``p`` (`laws.chinchilla_loss`); NaN for a sample whose A or B overflowed
    (`ParametricLaw` makes its parameters NaN: its law has no value)."""
    return laws.chinchilla_loss(n, d, p["E"], p["A"], p["B"], p["alpha"], p["beta"])


class PowerLawAllocation(Law):
    """N_opt = N_coefficient·C^a; when the law has one, loss on the frontier
    L(C) = loss_E + loss_A·C^(−loss_alpha); ``point_loss`` (N, D) → L for the capped case."""

    def __init__(self, *args, point_loss=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.predicts_loss = "loss_A" in self.params
        self.point_loss = point_loss

    def _n_opt(self, p, compute):
        return laws.power_law(compute, p["N_coefficient"], p["a"])

    def _frontier_loss(self, p, compute):
        return laws.power_law(compute, p["loss_A"], -p["loss_alpha"], p.get("loss_E", 0.0))

    def _loss(self, p, n, d):
        return None if self.point_loss is None or p is not self.params else self.point_loss(n, d)
