"""Approach 2: IsoFLOP profiles (Hoffmann et al. 2022, §3.2).

For each compute budget C, fit a parabola of loss against ln N to the runs of that budget:
    L ≈ c0 + c1·u + c2·u²,  u = ln N − (mean ln N of the budget);
its minimum is N_opt(C) = exp(mean ln N − c1/(2·c2)), D_opt(C) = C/(6·N_opt). Then fit
    N_opt = k_N·C^a,  D_opt = k_D·C^b
by least squares on logs. Because every D_opt is C/(6·N_opt), b = 1 − a and k_D = 1/(6·k_N)
exactly: the allocation always satisfies C = 6·N·D. (Published: a = 0.49, b = 0.51.)

C of a budget is the geometric mean of its runs' C = 6·N·D. The bootstrap resamples runs within
each budget (group sizes fixed) and refits everything, vectorised over resamples.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.bootstrap import estimates_from_samples, resample_within_groups, summarize
from analysis.fits.powerlaws import log_linear_fit
from analysis.fits.results import Estimate, IsoFLOPFit, Parabola, PowerLaw
from analysis.sources.schema import RunTable
from scaling.errors import DataError
from scaling.flops import tokens_6nd

MIN_SIZES = 3  # distinct model sizes a parabola needs


def fit_isoflop(table: RunTable, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> IsoFLOPFit:
    """Fit approach 2 to ``table`` and bootstrap it (``resamples`` = 0: no intervals)."""
    runs = table.runs
    log_n, loss = np.log(runs["N"].to_numpy()), runs["loss"].to_numpy()
    groups, profiles, dropped = [], [], []
    for budget in table.budgets:
        idx = np.flatnonzero(runs["budget"].to_numpy() == budget)
        profile, why = _profile(table, budget, idx)
        if profile is None:
            dropped.append(why)
        else:
            profiles.append(profile)
            groups.append(idx)
    if len(profiles) < 2:
        found = ", ".join(
            f"{b:.3g} FLOPs ({runs.loc[runs['budget'] == b, 'N'].nunique()} sizes)" for b in table.budgets
        )
        raise DataError(
            f"approach 2 needs at least 2 budgets, each with >= {MIN_SIZES} distinct model sizes and a loss "
            f"that rises on both sides of its minimum; {table.source!r} has {len(table.budgets)} budget(s): "
            f"{found}" + (f" ({'; '.join(dropped)})" if dropped else "")
        )

    log_c = np.log([p.compute for p in profiles])
    log_n_opt = np.log([p.n_opt for p in profiles])
    intercept, a = log_linear_fit(log_c, log_n_opt)
    n_law = PowerLaw(float(np.exp(intercept)), float(a))
    d_law = PowerLaw(float(tokens_6nd(1.0, n_law.coefficient)), float(1.0 - a))
    point = {
        "a": n_law.exponent,
        "b": d_law.exponent,
        "N_coefficient": n_law.coefficient,
        "D_coefficient": d_law.coefficient,
    }
    diagnostics = {
        "budgets_used": len(profiles),
        "sizes_per_budget": [len(set(p.n)) for p in profiles],
        "minima_outside_sampled_sizes": [p.budget for p in profiles if not p.inside_range],
    }
    boot = None
    if resamples > 0:
        samples, n_opt_samples, boot = _bootstrap(log_n, loss, groups, profiles, log_c, resamples, seed, level)
        estimates = estimates_from_samples(point, samples, level)
        for profile, column in zip(profiles, [] if n_opt_samples is None else n_opt_samples.T):
            profile.n_opt_interval = Estimate.from_samples(profile.n_opt, column[np.isfinite(column)], level).interval
    else:
        estimates = {k: Estimate(v) for k, v in point.items()}
    return IsoFLOPFit(
        profiles=profiles,
        dropped=dropped,
        n_opt_law=n_law,
        d_opt_law=d_law,
        estimates=estimates,
        residuals={"n_opt_law": (log_n_opt - np.log(n_law(np.exp(log_c)))).tolist()},
        diagnostics=diagnostics,
        fitted_compute_max=float(runs["C"].max()),
        bootstrap=boot,
    )


def parabola_coefficients(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares (c0, c1, c2) of y ≈ c0 + c1·u + c2·u² for each row of (K, m) arrays → (K, 3).
    Rows whose normal equations are singular (fewer than 3 distinct u) get NaN."""
    powers = (np.ones_like(u), u, u * u)
    gram = np.stack([np.stack([(p * q).sum(axis=-1) for q in powers], axis=-1) for p in powers], axis=-2)
    rhs = np.stack([(p * y).sum(axis=-1) for p in powers], axis=-1)
    distinct = 1 + (np.diff(np.sort(u, axis=-1), axis=-1) > 1e-12).sum(axis=-1)
    singular = distinct < 3
    gram[singular] = np.eye(3)
    coefficients = np.linalg.solve(gram, rhs[..., None])[..., 0]
    coefficients[singular] = np.nan
    return coefficients


def _profile(table: RunTable, budget: float, idx: np.ndarray) -> tuple[Parabola | None, str]:
    runs = table.runs.iloc[idx]
    n, loss = runs["N"].to_numpy(), runs["loss"].to_numpy()
    sizes = len(np.unique(n))
    if sizes < MIN_SIZES:
        return None, f"budget {budget:.3g}: {sizes} distinct model size(s), a parabola needs {MIN_SIZES}"
    center = float(np.mean(np.log(n)))
    c0, c1, c2 = parabola_coefficients(np.log(n)[None] - center, loss[None])[0]
    if not c2 > 0:
        return None, (
            f"budget {budget:.3g}: loss does not curve upward around a minimum (c2 = {c2:.3g}); "
            "train sizes on both sides of the optimum"
        )
    u_opt = -c1 / (2 * c2)
    compute = float(np.exp(np.mean(np.log(runs["C"].to_numpy()))))
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
        inside_range=bool(n.min() <= n_opt <= n.max()),
        residuals=[],
    )
    profile.residuals = (loss - profile(n)).tolist()
    return profile, ""


def _bootstrap(log_n, loss, groups, profiles, log_c, resamples, seed, level):
    """Resample within each budget; a resample fails when any budget's parabola is degenerate or
    not convex. Returns samples by name, N_opt samples (resamples, budgets) and the summary."""
    rng = np.random.default_rng(seed)
    drawn = resample_within_groups(rng, groups, resamples)
    log_n_opt = np.empty((resamples, len(profiles)))
    for j, (idx, profile) in enumerate(zip(drawn, profiles)):
        u = log_n[idx] - profile.center
        c = parabola_coefficients(u, loss[idx])
        with np.errstate(invalid="ignore", divide="ignore"):
            log_n_opt[:, j] = np.where(c[:, 2] > 0, profile.center - c[:, 1] / (2 * c[:, 2]), np.nan)
    ok = np.all(np.isfinite(log_n_opt), axis=1)
    intercept, a = log_linear_fit(log_c, log_n_opt[ok])
    samples = {
        "a": a,
        "b": 1.0 - a,
        "N_coefficient": np.exp(intercept),
        "D_coefficient": tokens_6nd(1.0, np.exp(intercept)),
    }
    samples, boot = summarize(samples, resamples, int((~ok).sum()), level, seed, ["runs resampled within each budget"])
    return samples, (np.exp(log_n_opt) if samples else None), boot
