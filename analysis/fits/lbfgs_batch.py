"""L-BFGS on many independent problems at once (one per bootstrap resample), in numpy.

Each iteration evaluates every active problem in one vectorised call, so a thousand small fits
cost about as much as a few dozen single ones. The method is textbook L-BFGS (Nocedal & Wright
2006, Alg. 7.4 two-loop recursion, Alg. 3.1 backtracking line search with the Armijo condition);
a curvature pair is stored only when sᵀy > 0, which keeps every direction a descent direction.
Problems that stop without meeting the gradient tolerance are reported, so the caller can hand
them to scipy's L-BFGS-B.
"""

from __future__ import annotations

import numpy as np

ARMIJO = 1e-4
MAX_HALVINGS = 40


def minimize_batch(fg, x0: np.ndarray, gtol: float, memory: int = 10, max_iter: int = 300):
    """Minimise K problems from the rows of ``x0`` (K, d).

    ``fg(x, rows)`` returns (f (len(rows),), g (len(rows), d)) for problems ``rows`` (an index
    array) at points ``x`` (len(rows), d). A problem is done when max|g| <= ``gtol``; it stalls
    when its line search finds no decrease (then it is left where it is).
    Returns x (K, d), f (K,), g (K, d) and done (K,) — True where the tolerance was met.
    """
    k, d = x0.shape
    x = x0.astype(float).copy()
    f, g = fg(x, np.arange(k))
    s_hist = np.zeros((memory, k, d))
    y_hist = np.zeros((memory, k, d))
    rho = np.zeros((memory, k))  # 1/(sᵀy), 0 where a pair is absent or was rejected
    done = np.max(np.abs(g), axis=1) <= gtol
    active = ~done
    for it in range(max_iter):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        direction = _two_loop(g[rows], s_hist[:, rows], y_hist[:, rows], rho[:, rows], it, memory)
        slope = _dot(direction, g[rows])
        uphill = slope >= 0
        direction[uphill] = -g[rows][uphill]
        slope[uphill] = -_dot(g[rows][uphill], g[rows][uphill])
        step, f_new, g_new, moved = _backtrack(fg, x[rows], f[rows], slope, direction, rows)
        s = step[:, None] * direction
        y = g_new - g[rows]
        sy = _dot(s, y)
        slot = it % memory
        good = moved & (sy > 1e-300)
        s_hist[slot, rows], y_hist[slot, rows] = s, y
        rho[slot, rows] = np.where(good, 1.0 / np.where(good, sy, 1.0), 0.0)
        x[rows] = np.where(moved[:, None], x[rows] + s, x[rows])
        f[rows] = np.where(moved, f_new, f[rows])
        g[rows] = np.where(moved[:, None], g_new, g[rows])
        met = np.max(np.abs(g[rows]), axis=1) <= gtol
        done[rows] = met
        active[rows] = ~met & moved
    return x, f, g, done


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of two (K, d) arrays."""
    return (a * b).sum(axis=1)


def _two_loop(g, s_hist, y_hist, rho, it, memory):
    """−H·g with H the L-BFGS inverse-Hessian estimate of each problem (Nocedal & Wright Alg. 7.4)."""
    order = [(it - 1 - j) % memory for j in range(min(it, memory))]  # newest first
    q = g.copy()
    alphas = []
    for slot in order:
        a = rho[slot] * _dot(s_hist[slot], q)
        q -= a[:, None] * y_hist[slot]
        alphas.append(a)
    gamma, scaled = np.ones(len(g)), np.zeros(len(g), bool)
    for slot in order:  # initial H = (sᵀy/yᵀy)·I from the newest accepted pair
        yy = _dot(y_hist[slot], y_hist[slot])
        fresh = (rho[slot] > 0) & ~scaled & (yy > 0)
        gamma = np.where(fresh, 1.0 / np.where(fresh, rho[slot] * yy, 1.0), gamma)
        scaled |= fresh
    r = gamma[:, None] * q
    for slot, a in zip(reversed(order), reversed(alphas)):
        b = rho[slot] * _dot(y_hist[slot], r)
        r += (a - b)[:, None] * s_hist[slot]
    return -r


def _backtrack(fg, x, f, slope, direction, rows):
    """Steps 1, 1/2, 1/4, ... until f(x + t·p) <= f + ARMIJO·t·slope; per problem."""
    step = np.ones(len(rows))
    f_new = np.full(len(rows), np.inf)
    g_new = np.zeros_like(x)
    pending = np.arange(len(rows))
    for _ in range(MAX_HALVINGS):
        f_try, g_try = fg(x[pending] + step[pending, None] * direction[pending], rows[pending])
        ok = np.isfinite(f_try) & (f_try <= f[pending] + ARMIJO * step[pending] * slope[pending])
        f_new[pending[ok]], g_new[pending[ok]] = f_try[ok], g_try[ok]
        pending = pending[~ok]
        if pending.size == 0:
            break
        step[pending] *= 0.5
    moved = np.isfinite(f_new) & (f_new < f)
    return step, f_new, g_new, moved
