"""Approach 2: IsoFLOP profiles (Hoffmann et al. 2022, §3.2).

For each compute budget C, fit a parabola of loss against ln N to the runs of that budget:
    L ≈ c0 + c1·u + c2·u²,  u = ln N − (mean ln N of the budget);
its minimum is N_opt(C) = exp(mean ln N − c1/(2·c2)), D_opt(C) = C/(6·N_opt). Then fit
    N_opt = k_N·C^a,  D_opt = k_D·C^b
by least squares on logs. Because every D_opt is C/(6·N_opt), b = 1 − a and k_D = 1/(6·k_N)
exactly: the allocation always satisfies C = 6·N·D. (Published: a = 0.49, b = 0.51.)

A budget (`analysis.sources.budgets`) sits at its runs' median 6·N·D where over 2% off its label (`budget_compute`).

Which budgets the law is fitted to (`bracketed`, the one rule): those whose minimum lies within their trained sizes. A
minimum outside them is the parabola's vertex extrapolated, and the loss is not a parabola in ln N (under L = E + A/N^α
+ B/D^β at fixed C it is a sum of two exponentials in ln N, asymmetric unless α = β), so that N_opt is biased by how far
the sizes sit from the optimum; its bootstrap interval shows the noise, not that bias. Such a budget keeps its parabola
and its N_opt (reported unidentified) but is left out of the law and named (`left_out_of_law`), as is one whose minimum
lies within its sizes but whose N_opt interval is unbounded (`in_law`: sizes all on one side of the optimum can put the
vertex just inside them), judged at a fixed 95% from fixed draws, whatever --level, --seed and --bootstrap
(`vertex_intervals.LAW_LEVEL`). With fewer than `MIN_BUDGETS` budgets in the law, a, b and the coefficients are
unidentified and have no value (NaN; null in FIT.json), and there is no law N_opt ∝ C^a (`IsoFLOPFit.n_opt_law` NaN, no
law samples): a law through extrapolated vertices would be a number without meaning. A parabola whose minimum lies more
than `MINIMUM_REACH`× beyond its sizes (or that does not curve upward) has no usable minimum at all (`usable_minimum`):
the budget is listed as dropped.

The bootstrap resamples within each budget (group sizes fixed: the design of an IsoFLOP experiment, how many runs each
budget has, is not random): the runs, or the units of the ``unit`` column when the table has one (repeated seeds of one
(N, D) point, drawn together), as integer weights, and refits everything, vectorised over resamples. Each resample
applies the point estimate's rules: a budget whose parabola has no usable minimum among the sizes drawn (fewer than 3
distinct sizes drawn, no upward curve, a minimum beyond reach) is left out of that resample (counted per budget:
`Parabola.resamples_failed`), and a budget whose minimum lies outside its trained sizes is left out of that resample's
law (`bracketed`, counted in the notes). The trained sizes are the budget's design, the same in every resample, so a
resample is judged as a repeat of the experiment would be: a resample that happens not to draw the largest size does not
turn a bracketed budget into an unbracketed one. A resample fails only when fewer than `MIN_BUDGETS` budgets remain in
its law. The law's a and b come from these resamples; a budget's own N_opt does not (`analysis.fits.vertex_intervals`):
with 4 or 5 runs a budget, most resamples draw 3 distinct sizes, whose parabola passes through them exactly, so the
minima of the resamples showed how the runs disagree, not the noise (40 ladders of 4 sizes, 1% noise: 70 of 139
intervals missed the true N_opt). Each parabola's coefficients are instead drawn from their least-squares distribution,
the residual variance pooled over the budgets (the runs of one sweep share a noise level; 4 runs a budget leave 1 degree
of freedom each; a budget with a wild run is left out of the others' pool: `analysis.fits.pooled_noise`) with its
chi-square spread (Student t), and the vertex taken of each draw (a ratio: its draws keep the skew), the interval then
widened by the parabola's shape error (the loss is not a parabola in ln N: `analysis.fits.parabola_shape`); how often
those intervals cover the truth: README, "Tables you bring" (tests/test_isoflop_coverage.py). N_opt intervals spanning
orders of magnitude, or reaching past `MINIMUM_REACH` (draws without a minimum), are flagged unidentified
(`analysis.fits.bootstrap.scale_identification`), and so is the N_opt of a budget outside its sizes.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bent_profiles import BENT_REASON, bent, is_bent
from analysis.fits.bootstrap import estimates_from_samples, follows_exponent, summarize, unit_weights
from analysis.fits.percentiles import level_text
from analysis.fits.powerlaws import log_linear_fit
from analysis.fits.results import UNBOUNDED, Estimate, IsoFLOPFit, Parabola, PowerLaw
from analysis.fits.vertex_intervals import (
    LAW_LEVEL,
    MINIMUM_REACH,
    VERTEX_DRAWS,
    n_opt_intervals,
    parabola_coefficients,
    usable_minimum,
)
from analysis.sources.budgets import PARABOLA_BUDGETS as MIN_BUDGETS
from analysis.sources.budgets import PARABOLA_SIZES as MIN_SIZES
from analysis.sources.budgets import cluster_budgets
from analysis.sources.rows import listing
from analysis.sources.schema import RunTable
from scaling.errors import DataError
from scaling.flops import tokens_6nd

LAW_KEYS = ("a", "b", "N_coefficient", "D_coefficient")  # the coefficients last: unidentified with a


def bracketed(log_n_opt, log_n_min, log_n_max):
    """The one rule for which budgets enter the law N_opt ∝ C^a, in the fit and in every resample:
    the minimum lies within the budget's trained sizes (module docstring). Arrays broadcast; NaN is
    not bracketed."""
    with np.errstate(invalid="ignore"):
        return (log_n_opt >= log_n_min) & (log_n_opt <= log_n_max)


def in_law(profile: Parabola) -> bool:
    """Whether a budget enters the law N_opt ∝ C^a and its validation: its minimum `bracketed` by its
    sizes and its N_opt bounded by the law's test (`Parabola.law_unbounded`: `LAW_LEVEL`, `VERTEX_DRAWS` of a fixed
    stream, whatever --level, --seed and --bootstrap; a vertex whose draws pass its sizes' reach sits where the
    sizes end, not where the loss turns: t12's 6e20, all sizes above the optimum, put 2.27e9 there; a profile bent by
    a run off it takes `bent_profiles.BENT_REASON` as that test's answer)."""
    return profile.inside_range and not _law_unbounded(profile)


def _law_unbounded(profile: Parabola) -> str:
    """`Parabola.law_unbounded`, or for a fit saved before it the test its law took: the printed interval's."""
    if profile.law_unbounded is not None:
        return profile.law_unbounded
    return profile.n_opt_unidentified if profile.n_opt_unidentified.startswith(UNBOUNDED) else ""


def _law_test(profile: Parabola) -> str:
    """The test `in_law` took: the law's own, or for a fit saved before it the printed interval's."""
    if profile.law_unbounded is None:
        return "in its printed interval, at the fit's --level and --seed (the fit was saved before the law's own test)"
    return f"at the law's fixed {LAW_LEVEL:.0%}, the same whatever --level, --seed and --bootstrap"


def left_out_of_law(profiles: list[Parabola]) -> list[dict]:
    """The budgets left out of the law (`in_law`), each with why."""
    return [
        {
            "budget": p.budget,
            "why": f"its minimum N = {p.n_opt:.3g} lies outside its trained sizes ({min(p.n):.3g} to {max(p.n):.3g}): "
            "the parabola's vertex extrapolated, biased by how far the sizes sit from the optimum"
            if not p.inside_range
            else f"its minimum N = {p.n_opt:.3g} is a run's off the profile, not the loss's ({BENT_REASON})"
            if p.law_unbounded == BENT_REASON
            else f"its minimum N = {p.n_opt:.3g} has no bounded N_opt interval {_law_test(p)} ({_law_unbounded(p)}): a "
            "vertex its runs do not hold within its sizes, which the law would follow instead of the loss",
        }
        for p in profiles
        if not in_law(p)
    ]


def fit_isoflop(table: RunTable, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> IsoFLOPFit:
    """Fit approach 2 to ``table`` and bootstrap it (``resamples`` = 0: no bootstrap, no intervals on the law);
    the per-budget N_opt intervals draw ``resamples`` or `VERTEX_DRAWS`, whichever is more."""
    runs = table.runs
    groups, profiles, dropped = _profiles(table, seed, level)
    # at least the law's VERTEX_DRAWS: at the defaults the printed intervals are the law's test (`in_law`)
    interval_note = n_opt_intervals(profiles, max(resamples, VERTEX_DRAWS), seed, level)
    for p in filter(is_bent, profiles):  # user38: a 3-size budget with a diverged run gave 4.849e8 [4.818e8, 4.869e8]
        p.n_opt_unidentified = p.law_unbounded = BENT_REASON  # for 2.6e8, the law through it
    members = np.array([in_law(p) for p in profiles])
    law_unidentified = _law_unidentified(profiles)
    log_c = np.log([p.compute for p in profiles])
    log_n_opt = np.log([p.n_opt for p in profiles])
    intercept, a = (np.nan, np.nan) if law_unidentified else log_linear_fit(log_c[members], log_n_opt[members])
    n_law = PowerLaw(float(np.exp(intercept)), float(a))
    d_law = PowerLaw(float(tokens_6nd(1.0, n_law.coefficient)), float(1.0 - a))
    point = dict(zip(LAW_KEYS, (n_law.exponent, d_law.exponent, n_law.coefficient, d_law.coefficient)))
    diagnostics = {
        "budgets_used": len(profiles),
        "budgets_in_law": int(members.sum()),
        "sizes_per_budget": [len(set(p.n)) for p in profiles],
        "left_out_of_law": left_out_of_law(profiles),
        "bent": bent(profiles),
    }
    boot = None
    if resamples > 0:
        log_n, loss = np.log(runs["N"].to_numpy()), runs["loss"].to_numpy()
        units = runs["unit"].to_numpy() if "unit" in runs.columns else np.arange(len(runs))
        samples, boot = _bootstrap(
            log_n, loss, [(idx, units[idx]) for idx in groups], profiles, log_c, resamples, seed, level
        )
        estimates = estimates_from_samples(point, samples, level, boot.failed)
        boot.notes += [interval_note] if interval_note else []
    else:  # the per-budget N_opt intervals need no bootstrap (`n_opt_intervals`): kept, their note among the law's
        estimates = {k: Estimate(v) for k, v in point.items()}
        diagnostics["n_opt_per_budget"] = interval_note
    follows_exponent(estimates, LAW_KEYS[2:])
    if law_unidentified:  # no law: no value, no interval, no samples to propagate
        estimates = {key: Estimate(np.nan, unidentified=law_unidentified) for key in LAW_KEYS}
        if boot is not None:
            boot.samples = {k: v for k, v in boot.samples.items() if k not in LAW_KEYS}
    law_range = law_budgets(profiles)
    return IsoFLOPFit(
        profiles=profiles,
        dropped=dropped,
        n_opt_law=n_law,
        d_opt_law=d_law,
        estimates=estimates,
        residuals={"n_opt_law": (log_n_opt - np.log(n_law(np.exp(log_c)))).tolist()},
        diagnostics=diagnostics,
        fitted_compute_max=law_range.max(),
        fitted_compute_min=law_range.min(),
        bootstrap=boot,
    )


def law_budgets(profiles: list[Parabola]) -> np.ndarray:
    """The C of the budgets in the law (`in_law`; all when none is), as the law places them (`Parabola.compute`):
    its fitted range, beyond which it extrapolates."""
    kept = [p.compute for p in profiles if in_law(p)] or [p.compute for p in profiles]
    return np.asarray(kept, float)


def fitted_min(fit: IsoFLOPFit) -> float:
    """The law's fitted range from below; read from the profiles of a fit saved before it was kept (2026-11-27)."""
    return fit.fitted_compute_min if np.isfinite(fit.fitted_compute_min) else float(law_budgets(fit.profiles).min())


def _profiles(table: RunTable, seed: int, level: float) -> tuple[list[np.ndarray], list[Parabola], list[str]]:
    """Each budget's parabola (with its run indices), or why it has none; at least 2 parabolas or a DataError."""
    runs = table.runs
    groups, profiles, dropped = [], [], []
    for budget in table.budgets:
        idx = np.flatnonzero(runs["budget"].to_numpy() == budget)
        profile, why = budget_profile(table, budget, idx)
        if profile is None:
            dropped.append(why)
        else:
            profiles.append(profile)
            groups.append(idx)
    if len(profiles) < 2:
        raise DataError(_refusal(table, dropped) + _lone_minimum(profiles, seed, level))
    return groups, profiles, dropped


def _lone_minimum(profiles: list[Parabola], seed: int, level: float) -> str:
    """What one budget's parabola says without a law across budgets (""; with none): its minimum N with the
    interval `n_opt_intervals` gives at 95% (one IsoFLOP sweep printed every estimate unidentified, no N at all)."""
    if len(profiles) != 1:
        return ""
    (p,) = profiles
    n_opt_intervals(profiles, VERTEX_DRAWS, seed, level)
    where = (
        f"[{p.n_opt_interval[0]:.3g}, {p.n_opt_interval[1]:.3g}] ({level_text(level)})"
        if p.n_opt_interval is not None and not p.n_opt_unidentified
        else f"(unidentified: {p.n_opt_unidentified})"  # outside the trained sizes among the reasons it gives
    )
    return (
        f"; the budget of C = {p.compute:.3g} alone has its least loss at N = {p.n_opt:.3g} {where}, D = {p.d_opt:.3g}"
    )


LISTED = 10  # a refusal lists this many budgets (35 per-run budgets made a line of 4,000 characters, twice)


def _refusal(table: RunTable, dropped: list[str]) -> str:
    """Why approach 2 cannot be fitted, in one line: the budgets with their size counts (`LISTED`), the
    reasons those counts do not say (no upward curve, a minimum beyond reach), and, for a budget column
    that gives runs budgets of their own, that grouping them by C = 6·N·D gives parabolas."""
    runs = table.runs
    sizes = runs.groupby("budget")["N"].nunique()
    found = [f"{b:.3g} FLOPs ({sizes[b]} sizes)" for b in table.budgets]
    other = [why for why in dropped if "distinct model size" not in why]
    clusters = cluster_budgets(runs["C"].to_numpy())
    grouped = runs["N"].groupby(clusters).nunique()
    pairs = len(set(zip(runs["budget"], clusters)))
    regroups = not pairs == runs["budget"].nunique() == len(grouped)  # else the same budgets: no advice
    advice = not table.budgets_clustered and regroups and (grouped >= MIN_SIZES).sum() >= MIN_BUDGETS
    return (
        f"approach 2 needs at least {MIN_BUDGETS} budgets, each with >= {MIN_SIZES} distinct model sizes and a loss "
        f"that rises on both sides of its minimum; {table.source!r} has {len(table.budgets)} budget(s): "
        f"{listing(found, LISTED)}"
        + (f" ({listing(other, LISTED, '; ')})" if other else "")
        + (
            f"; grouped by C = 6·N·D, {(grouped >= MIN_SIZES).sum()} budgets have {MIN_SIZES}+ sizes: "
            "--budget-column none groups them so"
            if advice
            else ""
        )
    )


def _law_unidentified(profiles: list[Parabola]) -> str:
    """Why a, b and the coefficients are unidentified ("" when `MIN_BUDGETS` budgets are `in_law`)."""
    members = sum(in_law(p) for p in profiles)
    if members >= MIN_BUDGETS:
        return ""
    inside = sum(p.inside_range for p in profiles)
    unbounded = f" ({inside - members} of them with an unbounded N_opt)" if inside > members else ""
    return (
        f"{members if not unbounded else inside} of {len(profiles)} budgets have their minimum inside their trained "
        f"sizes{unbounded} and the law needs {MIN_BUDGETS}"
        + (
            " with a bounded N_opt: through vertices the noise does not bound it would follow the noise, not the loss"
            if unbounded
            else ": through extrapolated vertices it would follow where the sizes were put, not the loss"
        )
    )


def budget_profile(table: RunTable, budget: float, idx: np.ndarray) -> tuple[Parabola | None, str]:
    runs = table.runs.iloc[idx]
    n, loss = runs["N"].to_numpy(), runs["loss"].to_numpy()
    sizes = len(np.unique(n))
    if sizes < MIN_SIZES:
        return None, f"budget {budget:.3g}: {sizes} distinct model size(s), a parabola needs {MIN_SIZES}"
    center = float(np.mean(np.log(n)))
    u = np.log(n) - center
    c0, c1, c2 = parabola_coefficients(u[None], loss[None])[0]
    if not c2 > 0:
        return None, (
            f"budget {budget:.3g}: loss does not curve upward around a minimum (c2 = {c2:.3g}); "
            "train sizes on both sides of the optimum"
        )
    u_opt = -c1 / (2 * c2)
    if not usable_minimum(c2, u_opt, u.min(), u.max()):
        return None, (
            f"budget {budget:.3g}: the parabola's minimum (ln N = {center + u_opt:.3g}) lies more than "
            f"{MINIMUM_REACH:g}× beyond the trained sizes ({n.min():.3g} to {n.max():.3g}); "
            "train sizes on both sides of the optimum"
        )
    compute = float(table.budget_compute[np.searchsorted(table.budgets, budget)])  # the runs' 6·N·D: module docstring
    n_opt = float(np.exp(center + u_opt))
    profile = Parabola(
        budget=float(budget),
        compute=compute,
        center=center,
        coefficients=[c0, c1, c2],
        n=n.tolist(),
        loss=loss.tolist(),
        run_id=runs["run_id"].tolist(),
        n_opt=n_opt,
        d_opt=tokens_6nd(compute, n_opt),
        loss_opt=float(c0 - c1 * c1 / (4 * c2)),
        inside_range=bool(bracketed(center + u_opt, np.log(n.min()), np.log(n.max()))),
        residuals=[],
    )
    profile.residuals = (loss - profile(n)).tolist()
    return profile, ""


def _bootstrap(log_n, loss, groups, profiles, log_c, resamples, seed, level):
    """Resample units within each budget (``groups``: (run indices, unit labels) per budget); a
    budget without a usable minimum in a resample is left out of it, and one whose minimum lies
    outside its trained sizes (`bracketed`) out of its law; a budget whose sizes bracket its minimum
    but whose N_opt interval is unbounded (`in_law`: no resample has such an interval to judge by) is
    out of every resample's law. Returns the law's samples by name and the summary."""
    rng = np.random.default_rng(seed)
    weights = unit_weights(rng, [labels for _, labels in groups], resamples)
    log_n_opt = np.empty((resamples, len(profiles)))
    for j, ((idx, _), w, profile) in enumerate(zip(groups, weights, profiles)):
        log_n_opt[:, j] = profile.center + _minima(log_n[idx] - profile.center, loss[idx], w)
    usable = np.isfinite(log_n_opt)
    trained = np.log([[min(p.n) for p in profiles], [max(p.n) for p in profiles]])
    members = np.array([in_law(p) or not p.inside_range for p in profiles])
    in_sizes = bracketed(log_n_opt, trained[0], trained[1])
    for profile, column in zip(profiles, usable.T):
        profile.resamples_failed = int((~column).sum())
    ok = (in_sizes & members).sum(axis=1) >= MIN_BUDGETS
    intercept, a = _masked_log_linear_fit(log_c, log_n_opt[ok], (in_sizes & members)[ok])
    samples = dict(zip(LAW_KEYS, (a, 1.0 - a, np.exp(intercept), tokens_6nd(1.0, np.exp(intercept)))))
    notes = [
        "units resampled within each budget"
        if len(log_n) > sum(len(set(u)) for _, u in groups)
        else "runs resampled within each budget"
    ]
    notes += [
        f"budget {p.budget:.3g} had no usable minimum in {p.resamples_failed} resamples and was left out of those"
        for p in profiles
        if p.resamples_failed
    ]
    notes += [
        f"budget {p.budget:.3g} had its minimum outside its trained sizes in {k} resamples and was left out of "
        "the law in those"
        for p, k, member in zip(profiles, (usable & ~in_sizes).sum(axis=0), members)
        if k and member
    ]
    samples, boot = summarize(samples, resamples, int((~ok).sum()), level, seed, notes)
    return samples, boot


def _minima(u: np.ndarray, loss: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per resample (row of ``weights``) the u of the weighted parabola's minimum; NaN where it has
    no usable minimum among the sizes drawn (`usable_minimum`; < 3 distinct sizes drawn: no parabola)."""
    c = parabola_coefficients(u, loss, weights)
    drawn = np.where(weights > 0, u, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        u_opt = -c[:, 1] / (2 * c[:, 2])
    return np.where(usable_minimum(c[:, 2], u_opt, np.nanmin(drawn, axis=1), np.nanmax(drawn, axis=1)), u_opt, np.nan)


def _masked_log_linear_fit(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``y`` (K, m), least squares y ≈ intercept + slope·x over the points where ``mask``."""
    w = mask.astype(float)
    y = np.where(mask, y, 0.0)
    count = w.sum(axis=1)
    x_mean = (w * x).sum(axis=1) / count
    y_mean = (w * y).sum(axis=1) / count
    dx = x[None, :] - x_mean[:, None]
    slope = (w * dx * (y - y_mean[:, None])).sum(axis=1) / (w * dx * dx).sum(axis=1)
    return y_mean - slope * x_mean, slope
