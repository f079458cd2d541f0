"""Approach 2's per-budget N_opt intervals (`analysis.fits.isoflop`, module docstring): each parabola's
coefficients drawn from their least-squares distribution, the noise pooled over the budgets
(`analysis.fits.pooled_noise`), the vertex taken of each draw, and the interval widened by the
parabola's shape error (`analysis.fits.parabola_shape`).

Whether a budget's N_opt is bounded enough for the law N_opt ∝ C^a (`analysis.fits.isoflop.in_law`) is
decided apart from the printed interval: from `VERTEX_DRAWS` draws of a fixed stream at `LAW_LEVEL`
(`Parabola.law_unbounded`), so the law's budgets, and its a, do not hang on --level, --seed or --bootstrap
(t12's 6e20, 70 of 1000 draws past the reach, entered the law at --level 0.8 and pulled a from 0.47 to
0.53; --seed alone changed the law's budgets on 8 of 40 synthetic ladders). The stream is the one the
printed intervals draw at the defaults (seed 0, 95%, 1000 draws for --bootstrap up to 1000), so there the two
agree; where they do not, the budget's line says which the law took (`analysis.describe.fit.law_test_text`)."""

from __future__ import annotations

import numpy as np

from analysis.fits.bootstrap import scale_identification
from analysis.fits.parabola_shape import pooled_skew, shape_shift
from analysis.fits.percentiles import percentile_bounds
from analysis.fits.pooled_noise import design_matrix, noisy_runs, pool
from analysis.fits.results import UNBOUNDED, Parabola

MINIMUM_REACH = 10.0  # a minimum beyond this factor of the sizes is no minimum
VERTEX_DRAWS = 1000  # draws of each parabola: the law's test (`LAW_LEVEL`), and the fewest the printed intervals take
LAW_LEVEL = 0.95  # the level at which a budget's N_opt must be bounded to enter the law (module docstring)
LAW_SEED = 0  # the law's test draws the stream the printed intervals draw with --seed 0


def usable_minimum(c2, u_opt, lo, hi):
    """Whether a parabola with curvature ``c2`` and vertex ``u_opt`` has a minimum the fit can use:
    c2 > 0 and the vertex within `MINIMUM_REACH`× of the sizes [lo, hi] (all in ln N, or all in u)."""
    reach = np.log(MINIMUM_REACH)
    with np.errstate(invalid="ignore"):
        return (c2 > 0) & (u_opt >= lo - reach) & (u_opt <= hi + reach)


def n_opt_intervals(profiles: list[Parabola], resamples: int, seed: int, level: float) -> str:
    """Each budget's N_opt interval from its parabola's least-squares fit (`_vertex_draws`), widened by the
    parabola's shape error (`analysis.fits.parabola_shape`), flagged
    unidentified (it spans over a decade, or reaches past `MINIMUM_REACH`: `_vertex_interval`); none
    when no budget has more runs than a parabola's 3 coefficients. Returns the note on how they were made."""
    dof = sum(len(p.n) - 3 for p in profiles)
    if dof < 1:
        for profile in profiles:
            profile.n_opt_interval, profile.law_unbounded = None, ""
            profile.n_opt_unidentified = (
                "no interval: every budget has 3 runs, which its parabola passes through, so no scatter is left to "
                "measure the noise by"
            )
        return ""
    everyone = list(range(len(profiles)))
    noisy = noisy_runs(profiles)
    quiet = [k for k in everyone if k not in noisy]
    if noisy and pool(profiles, quiet)[1] < 1:
        noisy, quiet = {}, everyone  # no scatter left without them: pool them all, as before
    skew = pooled_skew([profiles[k] for k in quiet])  # a wild run bends its cubic as it does its parabola
    shifts = [shape_shift(p, skew[0], np.log(MINIMUM_REACH)) if skew else 0.0 for p in profiles]
    law_draws = _all_draws(profiles, noisy, quiet, VERTEX_DRAWS, LAW_SEED)
    for profile, draws, law, shift in zip(
        profiles, _all_draws(profiles, noisy, quiet, resamples, seed), law_draws, shifts
    ):
        profile.law_unbounded = _unbounded(law, LAW_LEVEL, shift)
        why = _vertex_interval(profile, draws, level, shift)
        if not profile.inside_range and (not why or why.startswith("no interval")):  # the more telling reason
            why = (
                f"its minimum lies outside the trained sizes ({min(profile.n):.3g} to {max(profile.n):.3g}): the "
                "interval of an extrapolated vertex shows the noise, not where the loss turns"
            )
        profile.n_opt_unidentified = why
    return _note(profiles, resamples, dof, noisy, pool(profiles, quiet)[1], skew)


def _all_draws(profiles: list[Parabola], noisy: dict, quiet: list[int], count: int, seed: int) -> list[np.ndarray]:
    """``count`` draws of ln N_opt of each profile (`_vertex_draws`), from the stream ``seed`` (one of its own:
    the run resamples stay as they were); the noisy budgets (`noisy_runs`) draw from the pool of all."""
    rng = np.random.default_rng([seed, 2])
    pools = {}  # σ̂² and σ/σ̂ per draw of the quiet budgets' pool (False) and of all budgets' (True)
    for with_noisy, members in [(False, quiet)] + ([(True, list(range(len(profiles))))] if noisy else []):
        variance, members_dof = pool(profiles, members)
        pools[with_noisy] = variance, np.sqrt(members_dof / rng.chisquare(members_dof, count))
    return [_vertex_draws(p, *pools[k in noisy], rng) for k, p in enumerate(profiles)]


def _note(profiles, resamples, dof, noisy, quiet_dof, skew) -> str:
    """How the N_opt intervals were made: the draws, the pool (and who was left out of it: `noisy`, budget
    index → its flagged runs), the shape term (``skew``: `pooled_skew`)."""
    left_out = ", ".join(
        f"{profiles[k].budget:.3g} (run {run}" + (f", the farthest of {count} flagged)" if count > 1 else ")")
        for k, (run, count) in noisy.items()
    )
    return (
        f"N_opt per budget: {resamples} draws of each parabola from its least-squares fit, the residual variance "
        f"pooled over the budgets ({dof} degrees of freedom)"
        + (
            f"; budget(s) {left_out} FLOPs hold run(s) far off their parabola (the residual test run on the "
            f"parabolas' residuals, apart from the outlier rule's flags): left out of the others' pool ({quiet_dof} degrees of freedom), their own intervals keep it"
            if noisy
            else ""
        )
        + (
            f"; each widened by its parabola's shape error (the shift of its minimum under the loss's skew in ln N, "
            f"d3/d2 = {skew[0]:.3g} pooled over the {skew[1]} budget(s) of 5+ sizes)"
            if skew
            else ""
        )
    )


def _vertex_draws(profile: Parabola, variance: float, scale: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """ln N_opt of draws of the parabola's coefficients from their least-squares distribution:
    c ~ ĉ + t·L·z (L·Lᵀ = σ̂²·(XᵀX)⁻¹; ``scale`` = σ/σ̂ = sqrt(dof/χ²_dof), making each coefficient
    Student-t, as a regression's interval is); the vertex is a ratio, so its draws show the skew a
    standard error would hide (Fieller). A draw without a usable minimum (`usable_minimum`) has its
    N_opt beyond the sizes: ±inf on the side the loss falls towards."""
    design = design_matrix(profile)
    u = design[:, 1]
    root = np.linalg.cholesky(variance * np.linalg.inv(design.T @ design) + 1e-300 * np.eye(3))
    c = np.asarray(profile.coefficients) + scale[:, None] * (rng.standard_normal((len(scale), 3)) @ root.T)
    with np.errstate(invalid="ignore", divide="ignore"):
        u_opt = -c[:, 1] / (2 * c[:, 2])
    downhill = np.where(c[:, 2] > 0, np.sign(u_opt), -np.sign(c[:, 1]))
    usable = usable_minimum(c[:, 2], u_opt, u.min(), u.max())
    return np.where(usable, profile.center + u_opt, np.where(downhill >= 0, np.inf, -np.inf))


def _vertex_interval(profile: Parabola, log_n_opt: np.ndarray, level: float, shift: float) -> str:
    """Set ``profile.n_opt_interval`` from the draws of ln N_opt, its end on the side of ``shift`` (the
    parabola's shape error in ln N: `analysis.fits.parabola_shape`) moved out by it; why it does not
    identify N_opt ("" when it does)."""
    why = _unbounded(log_n_opt, level, shift)
    if why:
        profile.n_opt_interval = None
        return why
    lower, upper = percentile_bounds(log_n_opt, level)
    profile.n_opt_interval = [float(np.exp(lower + min(shift, 0.0))), float(np.exp(upper + max(shift, 0.0)))]
    return scale_identification(*profile.n_opt_interval)


def _unbounded(log_n_opt: np.ndarray, level: float, shift: float) -> str:
    """Why the ``level`` interval of the draws of ln N_opt, its shape error ``shift`` added, is unbounded
    ("" when it is bounded)."""
    lower, upper = percentile_bounds(log_n_opt, level)
    if not (np.isfinite(lower) and np.isfinite(upper)):
        beyond = int(np.isinf(log_n_opt).sum())
        return (
            f"{UNBOUNDED}: {beyond} of {len(log_n_opt)} draws of its parabola have no minimum within "
            f"{MINIMUM_REACH:g}x of its sizes"
        )
    if not np.isfinite(shift):
        return (
            f"{UNBOUNDED}: under the loss's skew in ln N pooled over the budgets, its runs have no minimum within "
            f"{MINIMUM_REACH:g}x of its sizes, so the parabola's shape error is not measured"
        )
    return ""


def parabola_coefficients(u: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Least-squares (c0, c1, c2) of y ≈ c0 + c1·u + c2·u² for each row of (K, m) arrays → (K, 3),
    each point weighted by ``weights`` (K, m) (None: 1). Rows whose normal equations are singular
    (fewer than 3 distinct u of positive weight) get NaN."""
    w = np.ones(np.broadcast_shapes(np.shape(u), np.shape(y))) if weights is None else weights
    u = np.broadcast_to(u, w.shape)
    powers = (np.ones_like(u), u, u * u)
    gram = np.stack([np.stack([(w * p * q).sum(axis=-1) for q in powers], axis=-1) for p in powers], axis=-2)
    rhs = np.stack([(w * p * y).sum(axis=-1) for p in powers], axis=-1)
    drawn = np.sort(np.where(w > 0, u, np.nan), axis=-1)  # NaNs sort last; their differences never count
    distinct = 1 + (np.diff(drawn, axis=-1) > 1e-12).sum(axis=-1)
    singular = distinct < 3
    gram[singular] = np.eye(3)
    coefficients = np.linalg.solve(gram, rhs[..., None])[..., 0]
    coefficients[singular] = np.nan
    return coefficients
