"""Approach 1: the envelope of the training curves (Hoffmann et al. 2022, §3.1).

Every curve point (compute C = 6·N·tokens so far, loss) of every run is placed on a log-compute
grid of `BINS_PER_DECADE` bins per decade; in each bin the lowest loss over all runs is an
envelope point, and the run that reached it gives N_opt and D_opt = C/(6·N_opt) at that compute.
Fitted through the envelope (least squares on logs):
    L(C) = A·C^(−α)          (no irreducible term)
    L(C) = E + A·C^(−α)      (with one)
    N_opt = k_N·C^a,  D_opt = k_D·C^b  with b = 1 − a, k_D = 1/(6·k_N) (C = 6·N·D exactly).
(Published: a = 0.50, b = 0.50.) Only the compute range the runs' final points span is used (below it: warm-up points
of the smallest runs). A WSD run (schedule wsd) gives its final point only: before its cooldown its loss is no run's
end (user23: such points set the loss at 1e21 at 2.353 [2.348, 2.381] for 2.329).
An envelope point's N_opt is a measurement only where its compute bin holds a smaller and a larger size than the
winner (bracketed): N_opt(C) is fitted through those (`_through`); with fewer than `MIN_POINTS`, through all, and a
and b are unidentified: N_opt(C) then follows the sizes trained, not the loss. Without curves (final losses only),
each run's final point is its only point, and the loss laws are then unidentified too. With curves this matters
where sizes stop at one D (a Pythia-style ladder of checkpoints: above the small sizes' last compute only the
large ones compete; user38: a = 0.771 [0.463, 0.908] for 0.452, now 0.568, unidentified, 0.15 to 0.91).

The bootstrap draws runs, with their whole curves, within each budget: each budget keeps as many
units (runs; repeated seeds of one (N, D) drawn together) as it has. This is a stratified bootstrap
(several samples, each resampled on its own: Davison & Hinkley 1997, ch. 3), as approach 2 draws.
The budgets and the runs per budget of an IsoFLOP sweep are its design, fixed before any loss is
seen. An unstratified draw varies them (a resample may hold no run of some budget, and the
envelope then loses that budget's compute), so its spread adds to the noise design changes that no
repeat of the experiment would make. On the Chinchilla law without its floor (E = 0), 3 budgets ×
6 sizes, over 20 seeds (tests/test_isoflop_bracketing.py), the median width of a's 95% interval
fell from 0.39 to 0.24, every interval still covering the truth (a's spread over the seeds: sd 0.019). Units that
span budgets (a WSD trunk with cooldown branches at several budgets) are drawn over all runs, and a note says so.
Keeping the runs and redrawing their losses (a residual bootstrap) is narrower on that ladder and about calibrated,
but blind to the envelope's own bias from the sizes trained: on the quick sweep's design it covered the true a in 0
of 40 seeds, where drawing runs covers it and calls a unidentified (README, "Approach 1's bootstrap").
A resample fails only when its envelope cannot give a and b (fewer than `MIN_POINTS` points, or one size lowest
everywhere). The law with a floor is refitted in the others and may fail alone: its refits start from the fit's
floor and do not converge when that floor is near 0 (a flat ln E). Its failures are counted apart and withhold only
its own intervals (`_floor_samples`). Before, such a failure failed the whole resample: on the demo's quick sweep
627 of 1,000 resamples failed, 625 of them for the floor alone (its E = 7e-12), and every estimate lost its interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.fits.bootstrap import (
    AS_A,
    MIN_SUCCESS,
    ZERO_WIDTH_REASON,
    estimates_from_samples,
    flag_wide_terms,
    follows_exponent,
    lower_at_bound,
    one_blas_thread,
    summarize,
    unit_draws,
    unit_weights,
)
from analysis.fits.envelope_grid import EnvelopeGrid
from analysis.fits.huber_objective import E_FLOOR_FRACTION
from analysis.fits.parametric_form import FLOOR_REASON
from analysis.fits.powerlaws import fit_power_law_with_floor, log_linear_fit
from analysis.fits.results import EnvelopeFit, Estimate, PowerLaw
from analysis.sources.schema import RunTable
from scaling.errors import DataError
from scaling.flops import tokens_6nd

BINS_PER_DECADE = 10
MIN_POINTS = 3  # envelope points for the two-parameter laws (the law with a floor needs 4)
CHUNK = 64  # resamples processed at once (bounds memory: CHUNK × runs × bins)
FLOOR_NAMES = ("floor_E", "floor_A", "floor_alpha")
LOSS_NAMES = ("loss_A", "loss_alpha")
COEFFICIENTS = ("N_coefficient", "D_coefficient")  # of N_opt = k_N·C^a, D_opt = k_D·C^b: unidentified with a
# the loss laws' terms A·C^(−α), exponent: coefficient, variable; judged as approach 3's A/N^α (`flag_wide_terms`)
LOSS_TERMS = {"loss_alpha": ("loss_A", "C"), "floor_alpha": ("floor_A", "C")}


@dataclass
class EnvelopeLaw:
    """Approach 1's loss law as the figures draw it and `scaling optimal` predicts with (`envelope_law`)."""

    law: PowerLaw
    with_floor: bool
    unidentified: str  # why the law drawn is unidentified ("": it is not): drawn dotted, without a band
    floor_unidentified: str  # why the law with a floor is, when the law without one is drawn in its place


def envelope_law(env) -> EnvelopeLaw:
    """The law with a floor when fitted and identified; else the law without one when that is identified; else the
    law with a floor (when fitted), flagged unidentified. A law is unidentified when one of its estimates is."""

    def why(keys, named: bool = False) -> str:  # ``named``: which term (user26: E "unidentified" for floor_A's)
        found = ((k, env.estimates.get(k)) for k in keys)
        return next((f"{k}: " * named + e.unidentified for k, e in found if e and e.unidentified), "")

    floor, terms = env.loss_law_with_floor is not None, ("floor_E", "floor_A", "floor_alpha")
    if floor and not (floor_why := why(terms)):
        return EnvelopeLaw(env.loss_law_with_floor, True, "", "")
    if not (plain_why := why(("loss_A", "loss_alpha"))) or not floor:
        return EnvelopeLaw(env.loss_law, False, plain_why, why(terms, True) if floor else "")
    return EnvelopeLaw(env.loss_law_with_floor, True, floor_why, "")


def fit_envelope(
    table: RunTable,
    *,
    bins_per_decade: int = BINS_PER_DECADE,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> EnvelopeFit:
    """Fit approach 1 to ``table`` and bootstrap it over runs (``resamples`` = 0: no intervals)."""
    if bins_per_decade < 1:
        raise DataError(f"--bins-per-decade {bins_per_decade} is not valid; give an integer >= 1")
    grid = EnvelopeGrid(table, bins_per_decade)
    present = np.ones((1, grid.n_runs), bool)
    compute, loss, winner = (v[0] for v in grid.envelope(present))
    keep = np.isfinite(loss)
    if keep.sum() < MIN_POINTS:
        raise DataError(
            f"approach 1 needs at least {MIN_POINTS} envelope points (compute bins with a curve point); "
            f"{table.source!r} gives {int(keep.sum())}: the runs span too little compute"
        )
    bracketed = grid.bracketed(present, winner[None])[0][keep]
    compute, loss, winner = compute[keep], loss[keep], winner[keep].astype(int)
    n = grid.run_n[winner]
    if len(np.unique(n)) < 2:
        raise DataError(
            f"approach 1: one model size (N = {n[0]:.4g}) is lowest at every compute, so N_opt(C) cannot "
            "be fitted; train sizes that win at different budgets"
        )
    laws = _fit_laws(compute, loss, n, _through(bracketed, n))
    with_floor = fit_power_law_with_floor(compute, loss) if len(compute) > MIN_POINTS else None
    point = _named(laws, with_floor)
    boot = None
    if resamples > 0:
        with one_blas_thread():
            samples, boot, floor_why = _bootstrap(grid, with_floor, resamples, seed, level)
        estimates = estimates_from_samples(point, samples, level, boot.failed)
        for name in FLOOR_NAMES if floor_why and samples else ():
            estimates[name].unidentified = floor_why
    else:
        estimates = {k: Estimate(v) for k, v in point.items()}
    _floor_on_boundary(estimates, with_floor, float(loss.min()))
    _identification(estimates, bracketed, n, compute, grid.from_curves)
    return EnvelopeFit(
        compute=compute.tolist(),
        loss=loss.tolist(),
        n=n.tolist(),
        d=tokens_6nd(compute, n).tolist(),
        run_id=[grid.run_ids[i] for i in winner],
        loss_law=laws["loss"],
        loss_law_with_floor=with_floor,
        n_opt_law=laws["n_opt"],
        d_opt_law=laws["d_opt"],
        estimates=estimates,
        residuals=_residuals(laws, with_floor, compute, loss, n),
        diagnostics=_diagnostics(grid, bins_per_decade, len(compute), with_floor, int(bracketed.sum())),
        fitted_compute_max=float(table.runs["C"].max()),
        bootstrap=boot,
    )


def _residuals(laws: dict[str, PowerLaw], with_floor: PowerLaw | None, compute, loss, n) -> dict[str, list[float]]:
    residuals = {
        "loss_law": _log_residuals(laws["loss"], compute, loss),
        "n_opt_law": _log_residuals(laws["n_opt"], compute, n),
    }
    if with_floor is not None:
        residuals["loss_law_with_floor"] = _log_residuals(with_floor, compute, loss)
    return residuals


def _identification(estimates: dict[str, Estimate], bracketed, n, compute: np.ndarray, curves: bool) -> None:
    """The rules after the bootstrap's: `_unidentified_unless_bracketed` (``bracketed``: how many envelope points
    are); the loss laws' terms as approach 3's (`flag_wide_terms`, over the envelope's ``compute``); the
    coefficients with a (`follows_exponent`)."""
    _unidentified_unless_bracketed(estimates, bracketed, n, curves)
    _unidentified_if_rising(estimates)
    flag_wide_terms(estimates, LOSS_TERMS, {"C": float(compute.max())})
    follows_exponent(estimates, COEFFICIENTS)


def _unidentified_if_rising(estimates: dict[str, Estimate]) -> None:
    """A loss law whose best fit has α <= 0 has its loss rising (or flat) with compute along the envelope, against
    the form L = A·C^-α: no law, its estimates unidentified (a diverged run as an envelope point printed floor_alpha
    -5.165 [-5.247, -4.84], floor_E 2.901 for a true 1.69, all as numbers; user15's t4)."""
    for names, alpha in ((LOSS_NAMES, "loss_alpha"), (FLOOR_NAMES, "floor_alpha")):
        value = estimates[alpha].value if alpha in estimates else np.nan
        if not value > 0 and np.isfinite(value):
            for name in names:
                estimates[name].unidentified = (
                    f"alpha = {value:.3g} <= 0 at the best fit: the envelope's loss does not fall with compute (a "
                    "diverged or mislabelled run among its lowest points?)"
                )


def _unidentified_unless_bracketed(estimates: dict[str, Estimate], bracketed, n, curves: bool) -> None:
    """a and b are unidentified unless N_opt(C) goes through the ``bracketed`` points (`_enough`); from final
    points only, so are the loss laws: the envelope is then the loss of the sizes trained at each budget, above
    the lowest loss there (t06, a 5x5 grid: 2.347 [2.341, 2.347] at 1e21 FLOPs, truth 2.329; t10, 4 runs: 1.301
    at 1e24, below the true floor 1.69)."""
    if _enough(bracketed, n):
        return
    one_size = " (all won by one size)" * bool(bracketed.sum() >= MIN_POINTS)  # review24: a fit through all, called a
    for name in ("a", "b"):
        estimates[name].unidentified = (
            f"{'curves' if curves else 'final points only'}, and N_opt is bracketed by a smaller and a larger size at "
            f"the same compute at {int(bracketed.sum())} of {len(n)} envelope points{one_size}: N_opt(C) follows the "
            "sizes trained, not the loss"
        )
    for name in (LOSS_NAMES + FLOOR_NAMES) * (not curves):
        if name in estimates:
            estimates[name].unidentified = (
                f"{AS_A}: N_opt is not bracketed, so the envelope is the loss of the sizes trained, not the lowest "
                "loss at each compute"
            )


def _floor_on_boundary(estimates: dict[str, Estimate], with_floor: PowerLaw | None, lowest: float) -> None:
    """The law with a floor whose E lies on its boundary 0 (below `E_FLOOR_FRACTION` of the lowest loss, as
    approach 3's E ≈ 0): the refits start there, where ln E has no slope, and none moves, so its estimates'
    zero-width reason names that, not one run per budget or pooled experiments (t01: E = 1.5e-14); with an interval,
    E is unidentified as approach 3's at 0 (`FLOOR_REASON`: the quick sweep's design printed 4e-13 [2.2e-276, 1.78]).
    An E interval reaching below that bound reaches 0 and says so (`lower_at_bound`)."""
    lower_at_bound(estimates.get("floor_E"), E_FLOOR_FRACTION * lowest)
    if with_floor is None or not with_floor.floor < E_FLOOR_FRACTION * lowest:
        return
    for name in FLOOR_NAMES:
        if estimates.get(name) and estimates[name].unidentified.startswith(ZERO_WIDTH_REASON):
            estimates[name].unidentified = (
                f"{ZERO_WIDTH_REASON} {estimates[name].lower:.4g}: the fit puts E at {with_floor.floor:.3g}, on its "
                "boundary 0 (the envelope shows no floor), and the refits, started there, do not move"
            )
    if estimates.get("floor_E") and not estimates["floor_E"].unidentified:
        estimates["floor_E"].unidentified = FLOOR_REASON


def _diagnostics(grid, bins_per_decade: int, points: int, with_floor, bracketed: int) -> dict:
    return {
        "bracketed": bracketed,
        "bins_per_decade": bins_per_decade,
        "envelope_points": int(points),
        "curve_points": grid.n_points,
        "from_curves": grid.from_curves,
        "points_used": f"training curves{grid.wsd}"
        if grid.from_curves
        else "final points only (the source has no loss curves)",
        "compute_range": [grid.lowest, grid.highest],
        "loss_law_with_floor": "fitted"
        if with_floor is not None
        else f"not fitted (needs more than {MIN_POINTS} envelope points, or did not converge)",
    }


def _enough(bracketed: np.ndarray, n: np.ndarray) -> bool:
    """Whether N_opt(C) can go through the ``bracketed`` envelope points: `MIN_POINTS` of them, won by 2+ sizes."""
    return bool(bracketed.sum() >= MIN_POINTS and len(np.unique(n[bracketed])) > 1)


def _through(bracketed: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The envelope points N_opt(C) is fitted through: the ``bracketed`` ones where `_enough`, else every one (a and b
    then unidentified: `_unidentified_unless_bracketed`)."""
    return bracketed if _enough(bracketed, n) else np.ones(len(n), bool)


def _fit_laws(compute, loss, n, through) -> dict[str, PowerLaw]:
    """The loss law through every envelope point; N_opt(C) through those of ``through`` (`_through`)."""
    k_loss, p_loss = log_linear_fit(np.log(compute), np.log(loss))
    k_n, a = log_linear_fit(np.log(compute[through]), np.log(n[through]))
    n_law = PowerLaw(float(np.exp(k_n)), float(a))
    d_law = PowerLaw(tokens_6nd(1.0, n_law.coefficient), 1.0 - n_law.exponent)
    return {"loss": PowerLaw(float(np.exp(k_loss)), float(p_loss)), "n_opt": n_law, "d_opt": d_law}


def _named(laws: dict[str, PowerLaw], with_floor: PowerLaw | None) -> dict[str, float]:
    out = {
        "a": laws["n_opt"].exponent,
        "b": laws["d_opt"].exponent,
        "N_coefficient": laws["n_opt"].coefficient,
        "D_coefficient": laws["d_opt"].coefficient,
        "loss_A": laws["loss"].coefficient,
        "loss_alpha": -laws["loss"].exponent,
    }
    if with_floor is not None:
        out.update(_floor_named(with_floor))
    return out


def _floor_named(law: PowerLaw) -> dict[str, float]:
    return dict(zip(FLOOR_NAMES, (law.floor, law.coefficient, -law.exponent)))


def _log_residuals(law: PowerLaw, x, y) -> list[float]:
    return (np.log(y) - np.log(law(x))).tolist()


def _bootstrap(grid: EnvelopeGrid, with_floor: PowerLaw | None, resamples: int, seed: int, level: float):
    """Resample runs (their whole curves) within each budget (`_draws`), rebuild the envelope and
    refit every law. A resample fails when its envelope cannot give a and b; one in which only the
    law with a floor does not converge keeps its other laws and has NaN floor samples (`_floor_samples`)."""
    rng = np.random.default_rng(seed)
    weights, notes = _draws(grid, rng, resamples)
    present = weights > 0
    kept: dict[str, list[float]] = {}
    failed = 0
    for lo in range(0, resamples, CHUNK):
        compute, loss, winner = grid.envelope(present[lo : lo + CHUNK])
        bracketed = grid.bracketed(present[lo : lo + CHUNK], winner)
        for c_row, l_row, w_row, b_row in zip(compute, loss, winner, bracketed):
            keep = np.isfinite(l_row)
            compute, loss, n = c_row[keep], l_row[keep], grid.run_n[w_row[keep]]
            if keep.sum() < MIN_POINTS or len(np.unique(n)) < 2:
                failed += 1
                continue
            values = _named(_fit_laws(compute, loss, n, _through(b_row[keep], n)), None)  # as the point fit's
            if with_floor is not None:  # NaN where it alone gives no fit
                floor_law = fit_power_law_with_floor(compute, loss, start=with_floor)
                values.update(_floor_named(floor_law) if floor_law else dict.fromkeys(FLOOR_NAMES, np.nan))
            for name, value in values.items():
                kept.setdefault(name, []).append(value)
    samples = {k: np.array(v) for k, v in kept.items()}
    floor_why = _floor_samples(samples, resamples, notes, with_floor)
    samples, boot = summarize(samples, resamples, failed, level, seed, notes)
    return samples, boot, floor_why


def _floor_samples(samples: dict[str, np.ndarray], resamples: int, notes: list[str], with_floor) -> str:
    """The law with a floor, refitted in each resample that gives a and b, may fail alone (NaN
    samples). When more than half of all resamples give no floor law, its samples are withheld (as
    `summarize` does for a fit) and the reason is returned, else "". Notes say how many failed."""
    if "floor_E" not in samples:
        return ""
    lost = resamples - int(np.isfinite(samples["floor_E"]).sum())
    if lost <= resamples * (1 - MIN_SUCCESS):
        notes += [f"the law with a floor gave no fit in {lost} resamples (left out of its intervals only)"] * bool(lost)
        return ""
    for name in FLOOR_NAMES:
        samples[name] = np.full_like(samples[name], np.nan)
    why = (
        f"the law with a floor gave no fit in {lost} of {resamples} resamples: no interval (refits start "
        f"from the fit's E = {with_floor.floor:.3g}; from a floor near 0 they do not converge)"
    )
    notes.append(why)
    return why


def _draws(grid: EnvelopeGrid, rng: np.random.Generator, resamples: int) -> tuple[np.ndarray, list[str]]:
    """(resamples, runs) integer weights: units drawn with replacement within each budget, as many as
    it holds (stratified, module docstring); units spanning budgets (a WSD trunk with branches at
    several), or budgets mostly of one unit (no IsoFLOP design), are drawn over all runs instead, said in a note."""
    units, budgets = pd.Series(grid.units), pd.Series(grid.budgets)
    spans = (budgets.groupby(units).nunique() > 1).any()  # user27: budgets of one run (runs of 5 lengths) never moved
    if spans or units.groupby(budgets).nunique().median() < 2:
        why = "units span budgets (a WSD trunk with its branches)" if spans else "most budgets hold one run or unit"
        weights, notes = unit_draws(rng, grid.units, resamples)
        return weights, [*notes, f"{why}, so they are drawn whole, not within budgets"]
    groups = [np.flatnonzero(grid.budgets == b) for b in np.unique(grid.budgets)]
    weights = np.zeros((resamples, grid.n_runs))
    for idx, w in zip(groups, unit_weights(rng, [grid.units[idx] for idx in groups], resamples)):
        weights[:, idx] = w
    drawn = "units" if len(pd.unique(grid.units)) < grid.n_runs else "runs"
    return weights, [f"{drawn} resampled within each budget, with their whole loss curves"]
