"""The next runs to buy: the (shape, budget) runs, costing at most X FLOPs in all, that most narrow
the interval of N_opt at a target budget (`scaling next`).

Candidates are ladder shapes (`scaling.shapes`) for a results store, or sizes on a log grid
(`grid_sizes`) for someone else's table, at the source's budgets and at the ladder's next
budgets up to the target (the budget step of the source, snapped to 1-2-3-5 × 10^k), each within
`WINDOW_DECADES` of the current fit's N_opt at its budget, inside the tokens-per-parameter window
and the token cap, and not already run; a table's sizes lie within `BRACKET_DECADES` of N_opt or a grid
step (`BRACKET_STEP_DECADES`) of its bootstrap interval, however wide, and are bought in pairs bracketing
that interval at their budget (`brackets`). Each design is scored by the simulated spread of
ln N_opt(target) after refitting approach 3 (`analysis.fits.design`). The search is greedy twice
over — by narrowing per FLOP, and by narrowing alone — and the better of the two plans is kept
(the classic guard of cost-aware greedy selection: per-FLOP greed can spend the allowance on
cheap runs that a single dearer run beats).

Why pairs, in a narrower window, for a table: the simulation takes the law to hold at every N and
D, so the runs with the most leverage on α and β apart are those at the window's edges (a run with
few tokens per parameter is mostly B/D^β), and on its own the search bought them: sizes 3-5x off
N_opt, 1.7 tokens per parameter, several at one budget all on one side of N_opt. Those are the
runs whose losses the law fits worst and which place no IsoFLOP minimum; researchers narrow N_opt
by runs around it at each budget, as Chinchilla's IsoFLOP profiles do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from analysis.fits.design import DesignSimulator
from analysis.fits.laws import chinchilla_allocation
from analysis.fits.refits import NoRatio, Refits
from scaling.flops import TOKENS_PER_PARAM, tokens_6nd
from scaling.shapes import CONF_DIR, param_counts, shape_for_width

WINDOW_DECADES = 0.75  # candidate shapes lie within N_opt(C)·10^(±this) under the current fit
# A table's sizes (`grid_sizes`): within N_opt(C)·10^(±this), so tokens per parameter within 10x of N_opt's
# either way, and bought in pairs that bracket N_opt(C)'s interval (`brackets`); where the interval is wider,
# the window is the interval widened by `BRACKET_STEP_DECADES` either side (a pair must lie outside it).
BRACKET_DECADES = 0.5
BRACKET_STEP_DECADES = 0.25
GRID_PER_DECADE = 6  # a table that is not a results store: candidate sizes N = 10^(k/6) (`grid_sizes`)
NICE_MANTISSAS = (1.0, 2.0, 3.0, 5.0, 10.0)
# A pick must narrow the simulated spread by more than this many standard errors of its simulation
# noise (`DesignSimulator.gain_noise`): a smaller gain (2% of the spread was seen) may be noise alone.
NOISE_Z = 2.0
# The simulated spread of the runs done stands for the fit's own bootstrap spread within this factor
# (1.25 on seeded synthetic ladders, `tests/test_next.py`); beyond it no width ratio is printed.
AGREEMENT = 2.0
NOMINAL_RTOL = 0.01  # a budget's nominal value (`nominal`) is the shortest decimal this close to it
SAME_RUN_RTOL = 0.005  # a candidate whose N and budget match a run done within this is that run


@dataclass(frozen=True)
class Candidate:
    shape: str
    budget: float
    n: float  # parameters, counted as the fit counts them

    @property
    def tokens(self) -> float:
        return tokens_6nd(self.budget, self.n)

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.n

    @property
    def point(self) -> tuple[float, float]:
        return (self.n, self.tokens)


@dataclass
class Plan:
    """A chosen set of runs and its simulated spread of ln N_opt(target), against the runs done."""

    runs: list[Candidate]
    spread: float
    spread_done: float
    rule: str = ""
    trail: list[str] = field(default_factory=list)
    steps: dict = field(default_factory=dict)  # candidate -> (pick order from 1, spread before, spread after)

    @property
    def flops(self) -> float:
        return float(sum(c.budget for c in self.runs))

    @property
    def ratio(self) -> float:
        """Expected interval width after / now (log scale): 1 = no narrowing."""
        return self.spread / self.spread_done


def nice(value: float) -> float:
    """``value`` snapped (in log space) to the nearest 1, 2, 3 or 5 × 10^k."""
    exponent = math.floor(math.log10(value))
    mantissa = min(NICE_MANTISSAS, key=lambda m: abs(math.log(value / (m * 10.0**exponent))))
    return float(f"{mantissa * 10.0**exponent:.3g}")


def nominal(budget: float) -> float:
    """The budget as a label writes it: the shortest decimal (1 to 3 significant figures) within
    `NOMINAL_RTOL` of it: 1e22 for a budget clustered from C at 9.919e21; a given 3e19 unchanged."""
    for digits in range(3):
        value = float(f"{budget:.{digits}e}")
        if abs(value / budget - 1) <= NOMINAL_RTOL:
            return value
    return budget


def budget_step(budgets: list[float]) -> float:
    """The source's budget ladder step: the geometric mean ratio of its budgets (√10 for one)."""
    budgets = sorted(set(budgets))
    if len(budgets) < 2:
        return math.sqrt(10.0)
    return (budgets[-1] / budgets[0]) ** (1.0 / (len(budgets) - 1))


def next_budgets(budgets: list[float], up_to: float) -> list[float]:
    """The ladder's budgets beyond the largest, up to ``up_to`` (snapped with `nice`)."""
    step, out, c = budget_step(budgets), [], max(budgets)
    while True:
        c = nice(c * step)
        if c > up_to * (1 + 1e-9) or (out and c <= out[-1]):
            return out
        out.append(c)


def grid_sizes(lo: float, hi: float, per_decade: int = GRID_PER_DECADE) -> dict[str, float]:
    """Sizes N = 10^(k/per_decade) in [lo, hi], rounded to 3 significant figures, labelled by themselves:
    the candidates for a table of someone else's runs, whose models are not this project's shapes."""
    ks = range(math.ceil(math.log10(lo) * per_decade - 1e-9), math.floor(math.log10(hi) * per_decade + 1e-9) + 1)
    sizes = [float(f"{10.0 ** (k / per_decade):.3g}") for k in ks]
    return {f"{n:.3g}": n for n in sizes}


def ladder_shapes(
    n_kind: str = "total", vocab_size: int = 256, seq_len: int = 128, arch: str = "gpt2", tied_head: bool = True
) -> dict[str, float]:
    """The shapes of the ladder files (conf/model/d*.yaml) → parameter counts of ``n_kind`` (of ``arch``)."""
    names = sorted((p.stem for p in (CONF_DIR / "model").glob("d*.yaml")), key=lambda n: int(n[1:]))
    shapes = {name: shape_for_width(int(name[1:]), vocab_size, seq_len, arch, tied_head) for name in names}
    return {name: float(param_counts(shape)[n_kind]) for name, shape in shapes.items()}


@dataclass
class CandidateRules:
    """Which (shape, budget) runs may be proposed."""

    shapes: dict[str, float]
    tokens_per_param: tuple[float, float] = TOKENS_PER_PARAM  # the sweeper's window, unless its file sets one
    max_tokens: float | None = None
    window_decades: float = WINDOW_DECADES
    bracket: bool = False  # runs are bought in pairs bracketing N_opt at their budget (`brackets`)

    def allowed(self, n: float, budget: float, n_opt: float, interval: tuple[float, float] | None = None) -> bool:
        return not self.refusal(n, budget, n_opt, interval)

    def refusal(self, n: float, budget: float, n_opt: float, interval: tuple[float, float] | None = None) -> str:
        """The first rule a run of ``n`` at ``budget`` fails ("" when it is allowed; `REFUSALS`): within
        `window_decades` of ``n_opt`` or, for pairs bracketing N_opt's ``interval`` there, within the interval
        widened by `BRACKET_STEP_DECADES` (a wide interval is bracketed, not refused); inside the tokens-per-parameter
        window and the token cap either way."""
        d = tokens_6nd(budget, n)
        lo, hi = self.tokens_per_param
        near = abs(math.log10(n / n_opt)) <= self.window_decades
        if interval is not None:
            step = 10**BRACKET_STEP_DECADES
            near = near or interval[0] / step * (1 - 1e-9) <= n <= interval[1] * step * (1 + 1e-9)
        rules = (near, lo <= d / n <= hi, self.max_tokens is None or d <= self.max_tokens)
        return next((why for why, ok in zip(REFUSALS, rules) if not ok), "")


REFUSALS = ("far from N_opt", "outside the tokens-per-parameter window", "above --max-tokens")


def n_opt_at(params: dict, budget):
    """N_opt at ``budget`` (a number or an array) of the point fit's L(N, D) (``params``: A, B, alpha, beta)."""
    return chinchilla_allocation(budget, params["A"], params["B"], params["alpha"], params["beta"])[0]


def candidates(params: dict, done: list[tuple[float, float]], budgets: list[float], rules: CandidateRules, bounds=None):
    """Every allowed run at ``budgets`` not in ``done`` ((N, budget) pairs), cheapest first; with ``bounds``
    (`Bounds`), sizes bracketing N_opt's interval at a budget are allowed however wide it is."""
    out = []
    for budget in sorted(budgets):
        n_opt = float(n_opt_at(params, budget))
        interval = (bounds or {}).get(budget)
        for name, n in rules.shapes.items():
            ran = any(_same(n, dn) and _same(budget, db) for dn, db in done)
            if not ran and rules.allowed(n, budget, n_opt, interval):
                out.append(Candidate(name, budget, n))
    return out


def no_shape(params: dict, done: list[tuple[float, float]], budgets: list[float], rules: CandidateRules) -> str:
    """Why `candidates` found no shape at any of ``budgets``: the (shape, budget) pairs counted by the first rule
    each fails (`CandidateRules.refusal`; user22: "loosen --max-tokens", never given, when the ladder's shapes all
    lay over `window_decades` from the fit's N_opt)."""
    n_opt = [float(n_opt_at(params, b)) for b in budgets]
    counts = dict.fromkeys(("already run", *REFUSALS), 0)
    for budget, best in zip(budgets, n_opt):
        for n in rules.shapes.values():
            ran = any(_same(n, dn) and _same(budget, db) for dn, db in done)
            why = "already run" if ran else rules.refusal(n, budget, best)
            counts[why] = counts.get(why, 0) + bool(why)  # an allowed pair ("") is a candidate: none when called
    sizes = sorted(rules.shapes.values())
    said = ", ".join(f"{k} {why}" for why, k in counts.items() if k)
    return (
        f"of {len(budgets) * len(sizes)} (shape, budget) pairs: {said} (N_opt {min(n_opt):.3g} to {max(n_opt):.3g} at "
        f"these budgets, {rules.window_decades:g} decades either side allowed; the ladder's shapes {sizes[0]:.3g} to "
        f"{sizes[-1]:.3g}; {rules.tokens_per_param[0]:g} to {rules.tokens_per_param[1]:g} tokens per parameter)"
    )


# budget -> (lower, upper): N_opt's interval there (lower 0 where it reaches 0: unbounded below, no pair brackets
# it), or the point fit's N_opt twice where it has none
Bounds = dict


def brackets(pool: list[Candidate], bounds: Bounds) -> list[tuple[Candidate, Candidate]]:
    """Every pair of candidates at one budget, one at or below the lower end of N_opt's interval there
    and one at or above its upper end: an IsoFLOP profile's minimum is placed only by runs on both of
    its sides, and a pair that brackets the interval brackets the true N_opt as often as the interval
    holds it (one that brackets the point alone, one size step either side, missed a truth 18% off)."""
    out = []
    for budget in sorted({c.budget for c in pool}):
        lower, upper = bounds[budget]
        at = [c for c in pool if c.budget == budget]
        out += [(lo, hi) for lo in at if lo.n <= lower for hi in at if hi.n >= upper and hi.n > lo.n]
    return out


def units(pool: list[Candidate], rules: CandidateRules, bounds: Bounds) -> list[tuple[Candidate, ...]]:
    """What the search buys at a time: a pair bracketing N_opt's interval (``rules.bracket``) or one run."""
    return brackets(pool, bounds) if rules.bracket else [(c,) for c in pool]


def cost(unit: tuple[Candidate, ...]) -> float:
    return float(sum(c.budget for c in unit))


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_RUN_RTOL * max(abs(a), abs(b))


def ladder_extension(params: dict, done, budgets: list[float], rules: CandidateRules, runs: int) -> list[Candidate]:
    """The usual next step: the ladder's next budget with ``runs`` shapes nearest its N_opt."""
    budget = nice(max(budgets) * budget_step(budgets))
    n_opt = float(n_opt_at(params, budget))
    pool = [c for c in candidates(params, done, [budget], rules)]
    return sorted(sorted(pool, key=lambda c: abs(math.log(c.n / n_opt)))[:runs], key=lambda c: c.n)


def greedy(sim: DesignSimulator, pool: list[tuple[Candidate, ...]], allowance: float, per_flop: bool) -> Plan:
    """Add the unit (`units`) with the largest narrowing (per FLOP when ``per_flop``) until nothing
    affordable narrows the spread further by more than `NOISE_Z` standard errors of simulation noise
    (`DesignSimulator.gain_noise`; a narrower gain scores 0); a unit sharing a run with the chosen
    ones is out. Lazy (Minoux 1978): a unit's narrowing only shrinks as runs are added, so stale
    scores bound fresh ones and only the leader is rescored."""
    start = sim.spread()
    chosen, current, trail, steps = [], start, [], {}
    stale = {u: math.inf for u in pool}
    while True:
        left = allowance - sum(c.budget for c in chosen)
        options = {u: g for u, g in stale.items() if not set(u) & set(chosen) and cost(u) <= left * (1 + 1e-9)}
        best = None
        while options:
            leader = max(options, key=options.get)
            before, after = [x.point for x in chosen], [x.point for x in chosen + list(leader)]
            gain = current - sim.spread(after)
            fresh = (
                gain / (cost(leader) if per_flop else 1.0) if gain > NOISE_Z * sim.gain_noise(before, after) else 0.0
            )
            stale[leader] = options[leader] = fresh
            if fresh >= max(options.values()):
                best = leader
                break
        if best is None or not stale[best] > 0:
            break
        chosen += best
        before, current = current, sim.spread([x.point for x in chosen])
        steps.update({c: (len(trail) + 1, before, current) for c in best})
        trail.append(f"+ {' + '.join(c.shape for c in best)} at {best[0].budget:.3g} FLOPs: spread {current:.4g}")
    rule = "narrowing per FLOP" if per_flop else "narrowing"
    return Plan(sorted(chosen, key=lambda c: (c.budget, c.n)), current, start, rule, trail, steps)


def plan_runs(sim: DesignSimulator, pool: list[tuple[Candidate, ...]], allowance: float) -> Plan:
    """The better of the two greedy plans (`greedy`), by simulated spread."""
    plans = [greedy(sim, pool, allowance, per_flop) for per_flop in (True, False)]
    return min(plans, key=lambda p: (p.spread, p.flops))


def unknown_ratio(now, spread_done: float, fit_spread: float) -> str:
    """Why no width ratio can be known ("" when one can): N_opt at the target is unidentified today
    (``now``, an `Estimate` with `scaling optimal`'s verdict), or the simulated spread of the runs
    done (``spread_done``) is more than `AGREEMENT`x off the fit's own bootstrap spread
    (``fit_spread``): the simulation then does not stand for today's interval."""
    if now.unidentified:
        return f"N_opt at the target is unidentified today ({now.unidentified}): a narrowing of it cannot be known"
    if not 1 / AGREEMENT <= spread_done / fit_spread <= AGREEMENT:
        return (
            f"the simulated spread of ln N_opt for the runs done ({spread_done:.3g}) is over {AGREEMENT:g}x off the "
            f"fit's own bootstrap spread ({fit_spread:.3g}): the simulation does not stand for today's interval"
        )
    return ""


@dataclass
class Outlook:
    """What can be said of a plan, decided before anything is written (`outlook`): the spread of ln N_opt(target)
    in the fit's own bootstrap (what the simulated spread of the runs done stands for), why no width ratio can be
    known ("" when one can, `unknown_ratio`), and, where it can, the simulated refits of the table with the plan's
    runs and with one more ladder budget's (`ladder_extension`; `analysis.fits.refits`: None where the ratio is
    unknown, or for the ladder where there is no such budget)."""

    fit_spread: float
    why_unknown: str
    plan: Refits | None = None
    ladder: Refits | None = None

    @property
    def known(self) -> bool:
        return not self.why_unknown


def outlook(plan: Plan, ladder: list[Candidate], now, fit_spread: float, refits) -> Outlook:
    """The `Outlook` of ``plan`` against N_opt at the target today (``now``, an `Estimate`) and the fit's bootstrap
    spread ``fit_spread``; where the ratio can be known, ``refits(designs)`` (`refits.refit_ratios` bound to the
    table) refits the plan's runs and the ladder's next budget (``ladder``) with the same draws."""
    why = unknown_ratio(now, plan.spread_done, fit_spread)
    if why:
        return Outlook(fit_spread, why)
    designs = [[(c.n, c.budget) for c in runs] for runs in (plan.runs, ladder)]
    try:
        planned, extended = refits(designs if ladder else designs[:1]) + [None] * (not ladder)
    except NoRatio as err:
        return Outlook(fit_spread, str(err))
    return Outlook(fit_spread, why, planned, extended)


def no_pair(bounds: Bounds, rules: CandidateRules) -> str:
    """Why no pair of sizes was proposed: at every budget the sizes allowed (`CandidateRules`: N_opt's
    interval widened by a grid step, inside the tokens-per-parameter window and the token cap) lie on one
    side of N_opt's interval at most, so no pair brackets it; or the interval reaches 0 everywhere."""
    bounded = {budget: bound for budget, bound in bounds.items() if bound[0] > 0}
    if not bounded:
        budget, (_, upper) = min(bounds.items())
        return (
            "no pair of sizes brackets N_opt's interval at any budget: it reaches 0 at every one, unbounded below "
            f"(at {budget:.3g} FLOPs: up to {upper:.3g}); fit more runs near N_opt first"
        )
    budget, (lower, upper) = min(bounded.items(), key=lambda item: item[1][1] / item[1][0])
    lo, hi = rules.tokens_per_param
    cap = "" if rules.max_tokens is None else f" and --max-tokens {rules.max_tokens:.3g}"
    return (
        f"no pair of sizes brackets N_opt's interval at any budget: at {budget:.3g} FLOPs, where it is narrowest "
        f"([{lower:.3g}, {upper:.3g}], {math.log10(upper / lower):.2g} decades), the tokens-per-parameter window "
        f"[{lo:g}, {hi:g}]{cap} leave{'s' if not cap else ''} no size on one side of it: loosen those limits, or "
        "fit more runs near N_opt first"
    )


def expected_interval(value: float, lower: float, upper: float, ratio: float) -> tuple[float, float]:
    """The interval [lower, upper] around ``value`` with its log-width scaled by ``ratio``."""
    return value * (lower / value) ** ratio, value * (upper / value) ** ratio
