"""The data-constrained law fitted in two stages, as Muennighoff et al. 2023 do (§3, App. A): first
E, A, B, α, β from the runs that repeat nothing (D <= U: there D' = D and R*_D plays no part), then
R*_D (and R*_N where the runs determine it, `muennighoff_fit._rn_unidentified`) from all runs with
those five held. Stage 1 is the same law and objective as the one-stage fit (`RepeatObjective`),
with R*_N at the published value (it matters there only for runs above N_opt(U)).

A stage holds parameters by zeroing their gradient (`StageObjective`): the optimizers never move
them, and each row of θ carries its own held values. So the bootstrap resamples both stages: each
resample's weights refit stage 1 on its draws of the runs that repeat nothing, then stage 2 on all
its draws with that resample's E, A, B, α, β held; a resample failing either stage is counted failed.

`scaling fit --approach muennighoff --muennighoff-stages auto|1|2`: auto (the default) fits two
stages when at least `MIN_RUNS` runs repeat nothing, at `MIN_DISTINCT` or more distinct N and D each
(five parameters need that spread), and their base law comes out pinned, or one stage pins no more of it
(`base_unpinned`); else one. 2 without such runs is refused.
"""

from __future__ import annotations

import itertools

import numpy as np

from analysis.fits import muennighoff as mf
from analysis.fits.bootstrap import summarize, unit_draws
from analysis.fits.muennighoff_fit import (
    GRID,
    REFINED_STARTS,
    RepeatObjective,
    _best_fit,
    _grid,
    _hessian_basis,
    _rn_unidentified,
    refit,
)
from scaling.errors import DataError

STAGES = ("auto", "1", "2")
MIN_RUNS = 8  # runs that repeat nothing (D <= U) needed for stage 1
MIN_DISTINCT = 3  # distinct N, and distinct D, among them
BASE = 5  # θ's first five columns: ln E, ln A, ln B, α, β


class StageObjective(RepeatObjective):
    """`RepeatObjective` whose θ columns outside ``free`` are held: their gradient is zero."""

    def __init__(self, n, d, u, loss, delta: float, fixed_rn: float | None, free):
        super().__init__(n, d, u, loss, delta, fixed_rn)
        self.free = np.zeros(self.dim, bool)
        self.free[list(free)] = True

    def values_and_grads(self, thetas: np.ndarray, weights: np.ndarray | None = None):
        f, g = super().values_and_grads(thetas, weights)
        return f, g * self.free


def no_repeats(d: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Which runs repeat nothing (D <= U, `muennighoff.repeats`; U is known here)."""
    return ~mf.repeats(d, u)


def _support(d: np.ndarray, u: np.ndarray, n: np.ndarray) -> str:
    """Why the runs that repeat nothing cannot pin stage 1 ("" when they can)."""
    once = no_repeats(d, u)
    sizes = np.unique(n[once]).size
    tokens = np.unique(d[once]).size
    if once.sum() >= MIN_RUNS and tokens >= MIN_DISTINCT and sizes >= MIN_DISTINCT:
        return ""
    return (
        f"{int(once.sum())} runs repeat nothing (D <= U), at {sizes} distinct N and {tokens} distinct D; the first "
        f"stage needs "
        f"{MIN_RUNS} at {MIN_DISTINCT} or more distinct N and D"
    )


def choose(stages: str, d: np.ndarray, u: np.ndarray, n: np.ndarray) -> tuple[bool, str]:
    """(two stages?, why not two): DataError when ``stages`` is "2" and the runs do not support it."""
    if stages not in STAGES:
        raise DataError(f"--muennighoff-stages: {stages!r} is not valid; valid: {', '.join(STAGES)}")
    why = _support(d, u, n)
    if stages == "2" and why:
        raise DataError(f"--muennighoff-stages 2: {why}")
    return (stages != "1" and not why), why


BASE_NAMES = ("E", "A", "B", "alpha", "beta")  # the base law, stage 1's


def base_unpinned(fit) -> str:
    """Why a two-stage `MuennighoffFit` leaves its base law unpinned ("" when it does not, or was fitted in one
    stage): one of E, A, B, α, β unidentified. Then "auto" fits one stage: the runs that repeat nothing were too few
    or too one-sided for five parameters, and stage 2 conditions on what they gave (user36: 12-15 such runs gave
    beta = 0.101 [0.084, 0.152] and B = 23 for 0.353 and 1488, alpha unidentified beside them; one stage: 0.351
    [0.148, 0.523], 1435, alpha 0.342 [0.132, 0.566], for 0.353)."""
    if fit.convergence.get("stages") != 2:
        return ""
    loose = loose_base(fit)
    return (
        f"two stages left the base law's {', '.join(loose)} unidentified ({fit.estimates[loose[0]].unidentified})"
        if loose
        else ""
    )


def loose_base(fit) -> list[str]:
    """The base law's parameters (`BASE_NAMES`) a `MuennighoffFit` leaves unidentified."""
    return [name for name in BASE_NAMES if fit.estimates[name].unidentified]


def stages_note(two: bool, why_not: str, d: np.ndarray, u: np.ndarray) -> str:
    """The line that says which fit was made, and why."""
    if two:
        once = int(no_repeats(d, u).sum())
        return (
            f"two-stage fit (Muennighoff et al. 2023): E, A, B, alpha, beta from the {once} runs that repeat "
            f"nothing (D <= U), then R_D (and R_N) from all {len(d)} runs with those held"
        )
    return "one-stage fit: all parameters at once" + (f" ({why_not})" if why_not else " (--muennighoff-stages 1)")


def fit_two_stages(n, d, u, loss, delta: float):
    """The point fit: (objective, θ, (F, message, max |gradient|), why R_N is held, optimizer), as
    `muennighoff_fit._one_stage` returns them; the objective is stage 2's."""
    published_rn = mf.published_params()["R_N"]
    once = no_repeats(d, u)
    first = StageObjective(n[once], d[once], u[once], loss[once], delta, published_rn, range(BASE))
    grid = np.column_stack([_grid(BASE), np.full(len(_grid(BASE)), np.log(16.0))])
    (theta, *_), grid1, _ = _best_fit(first, grid=grid)
    base = theta[:BASE]
    second = StageObjective(n, d, u, loss, delta, published_rn, [BASE])
    starts = np.array([[*base, r] for r in GRID["log_R_D"]])
    (theta, value, message, grad), _, _ = _best_fit(second, grid=starts)
    why = _rn_unidentified(second, theta)
    if not why:
        second = StageObjective(n, d, u, loss, delta, None, [BASE, BASE + 1])
        starts = np.array([[*base, r, s] for r, s in itertools.product(GRID["log_R_D"], GRID["log_R_N"])])
        (theta, value, message, grad), _, _ = _best_fit(second, grid=starts)
    optimizer = (
        f"two stages: BFGS from the {REFINED_STARTS} best of {len(grid1)} grid points on the runs that repeat "
        "nothing, then from a grid of R_D (and R_N) on all runs; scipy L-BFGS-B polishes each (central differences)"
    )
    return second, theta, (value, message, grad), why, optimizer


def bootstrap_two_stages(second: StageObjective, theta, d, u, units, resamples: int, seed: int, level: float):
    """Both stages refitted on each resample (the module docstring), each drawing ``units``; samples
    and the `Bootstrap`."""
    once = no_repeats(d, u)
    rng = np.random.default_rng(seed)
    weights, unit_notes = unit_draws(rng, units, resamples)
    first = StageObjective(
        second.n[once],
        second.d[once],
        second.u[once],
        np.exp(second.log_loss[once]),
        second.delta,
        second.fixed_rn,
        range(BASE),
    )
    start = theta.copy()  # stage 2 held theta's first five columns: they are stage 1's optimum
    if second.fixed_rn is None:  # stage 1 holds R_N at the published value, as the point fit's did
        start[BASE + 1] = np.log(mf.published_params()["R_N"])
    thetas1, ok1, retried1 = refit(
        first, np.tile(start, (resamples, 1)), weights[:, once], _hessian_basis(first, start)
    )
    starts = np.tile(theta, (resamples, 1))
    starts[:, :BASE] = thetas1[:, :BASE]
    thetas, ok2, retried2 = refit(second, starts, weights, _hessian_basis(second, theta))
    ok = ok1 & ok2
    samples = {k: np.asarray(v, float) for k, v in second.params(thetas[ok]).items()}
    notes = [
        *unit_notes,
        f"both stages refitted on each resample ({retried1} + {retried2} refined again from where they stopped)",
    ]
    return summarize(samples, resamples, resamples - int(ok.sum()), level, seed, notes)
