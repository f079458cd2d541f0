"""The data-constrained scaling law (Muennighoff et al. 2023, "Scaling Data-Constrained Language
Models", §3 and App. A), as pure functions, and its allocation under U unique tokens.

Training on D tokens drawn from U unique ones repeats the data R_D = D/U − 1 times. Repeated tokens
are worth less than fresh ones, decaying with a "half-life" R*_D:

    D' = U + U·R*_D·(1 − exp(−R_D/R*_D))      (D' = D when D <= U: nothing repeats),

so D' never exceeds U·(1 + R*_D). Parameters beyond what U tokens can use are discounted alike:
U_N = min(N_opt(U), N), with N_opt(U) the compute-optimal size of the law's own allocation whose
D_opt is U (`unique_params`), R_N = N/U_N − 1 and N' = U_N + U_N·R*_N·(1 − exp(−R_N/R*_N)). Then

    L(N, D, U) = E + A/N'^α + B/D'^β.

With U → ∞ this is Chinchilla's approach-3 law (`analysis.fits.laws.chinchilla_loss`). The
published constants are `analysis.published.MUENNIGHOFF` (`published_params`); with them
L(6.34e9, 242e9, 25e9) = 2.2256440889984477 (tests/test_muennighoff.py).

`analysis.fits.muennighoff_optimal` answers `scaling optimal --unique-tokens U`: the N that minimises L(N, C/(6N), U)
for a budget C (`optimal_n`), or the smallest budget
that reaches a target loss, with the epochs D/U the answer trains for.
"""

from __future__ import annotations

import numpy as np

from analysis.fits import laws
from analysis.published import MUENNIGHOFF
from scaling.flops import tokens_6nd

NAMES = ("E", "A", "B", "alpha", "beta", "R_D", "R_N")
SEARCH_DECADES = 8.0  # the optimum of N is looked for within N_opt(C) x 10^(±this), unconstrained law
GOLDEN_STEPS = 90  # golden-section steps in ln N: the bracket shrinks by 0.618^90 ~ 1e-19


def published_params() -> dict[str, float]:
    """The published fit as E, A, B, alpha, beta, R_D, R_N (`analysis.published.MUENNIGHOFF`)."""
    m = MUENNIGHOFF
    return {
        "E": float(np.exp(m["log_E"])),
        "A": float(np.exp(m["log_A"])),
        "B": float(np.exp(m["log_B"])),
        "alpha": m["alpha"],
        "beta": m["beta"],
        "R_D": m["R_D"],
        "R_N": m["R_N"],
    }


def repeats(tokens, unique_tokens) -> np.ndarray:
    """Which runs repeat their data: D > U beyond rounding (1e-9); False where U is unknown (NaN) and where
    U = D (one epoch repeats nothing). The one rule the fit, its stages, the outlier rule and the figure use."""
    return np.asarray(tokens, dtype=float) > np.asarray(unique_tokens, dtype=float) * (1.0 + 1e-9)


def any_repeats(runs) -> bool:
    """A table's runs (a frame with D and maybe U) hold one that repeats its data."""
    return "U" in runs and bool(repeats(runs["D"], runs["U"]).any())


def effective(amount, unique, r_star):
    """U + U·R*·(1 − exp(−R/R*)) with R = amount/unique − 1, and ``amount`` itself when it is <= unique."""
    amount, unique = np.asarray(amount, float), np.asarray(unique, float)
    repeats = np.maximum(amount / unique - 1.0, 0.0)
    return np.minimum(amount, unique) + unique * r_star * -np.expm1(-repeats / r_star)


def unique_params(unique_tokens, A, B, alpha, beta):
    """N_opt(U): the compute-optimal size of L = E + A/N^α + B/D^β whose optimal D is U tokens.

    From `analysis.fits.laws.chinchilla_allocation`, D_opt = (C/6)^b/G, so C/6 = (G·U)^(1/b) and
    N_opt = G·(C/6)^a = G·(G·U)^(β/α); with α = β this is G²·U."""
    g = np.power(alpha * A / (beta * B), 1.0 / (alpha + beta))
    return g * np.power(g * np.asarray(unique_tokens, float), beta / alpha)


def loss(n, d, unique_tokens, E, A, B, alpha, beta, R_D, R_N):
    """L(N, D, U) = E + A/N'^α + B/D'^β (the module docstring); broadcasts over arrays."""
    n = np.asarray(n, float)
    u_n = np.minimum(unique_params(unique_tokens, A, B, alpha, beta), n)
    n_eff = effective(n, u_n, R_N)
    d_eff = effective(d, unique_tokens, R_D)
    return E + A * np.power(n_eff, -alpha) + B * np.power(d_eff, -beta)


def lowest_loss(unique_tokens, E, A, B, alpha, beta, R_D, R_N, **_):
    """The loss U unique tokens can reach with unbounded compute: D' → U·(1 + R*_D) and
    N' → N_opt(U)·(1 + R*_N)."""
    u_n = unique_params(unique_tokens, A, B, alpha, beta)
    return E + A * np.power(u_n * (1 + R_N), -alpha) + B * np.power(unique_tokens * (1 + R_D), -beta)


def optimal_n(p: dict, compute, unique_tokens):
    """argmin over N of L(N, C/(6N), U), vectorised over arrays in ``p`` (bootstrap samples):
    golden-section search in ln N within `SEARCH_DECADES` of the unconstrained optimum (L along
    the budget falls, then rises: N' saturates as N grows and D' as D does)."""
    p = {k: np.asarray(p[k], float) for k in NAMES}
    centre = laws.chinchilla_allocation(compute, p["A"], p["B"], p["alpha"], p["beta"])[0]
    lo = np.log(centre) - SEARCH_DECADES * np.log(10.0)
    hi = np.log(centre) + SEARCH_DECADES * np.log(10.0)

    def f(log_n):
        n = np.exp(log_n)
        return loss(n, tokens_6nd(compute, n), unique_tokens, **p)

    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(GOLDEN_STEPS):
        left = f1 <= f2  # the minimum lies in [lo, x2]: x1 becomes the new x2; else in [x1, hi]
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        probe = np.where(left, hi - ratio * (hi - lo), lo + ratio * (hi - lo))
        f_probe = f(probe)
        x1, x2 = np.where(left, probe, x2), np.where(left, x1, probe)
        f1, f2 = np.where(left, f_probe, f2), np.where(left, f1, f_probe)
    return np.exp(0.5 * (lo + hi))
