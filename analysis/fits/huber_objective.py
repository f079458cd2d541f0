"""Approach 3's objective: the Huber loss of log-loss residuals of L(N, D) = E + A/N^α + B/D^β, with its analytic
gradient, per-run terms over a grid of starts and Jacobian (`analysis.fits.parametric` fits with it; the module
docstring there gives the formula and its sources)."""

from __future__ import annotations

import numpy as np

HUBER_DELTA = 1e-3  # Hoffmann et al. 2022, App. D.2
# When the data show no irreducible loss the optimum runs off to E → 0 (e → −∞), where ∂F/∂e
# vanishes. Bootstrap refits start with e no lower than ln(this fraction × smallest loss), so a
# resample that does show a floor can still climb to it; estimates below it are reported as E ≈ 0.
E_FLOOR_FRACTION = 1e-4


class HuberLogLoss:
    """F(θ) = Σ_i w_i·Huber_δ(LSE(a − α·ln N_i, b − β·ln D_i, e) − ln L_i), for fixed data.

    ``value_and_grad`` works in centred coordinates θc = (e, a − α·x̄, b − β·ȳ, α, β) with
    x̄ = mean ln N, ȳ = mean ln D; `to_centered` / `from_centered` convert. ``weights`` are
    per-run multiplicities (bootstrap draws); None means each run once.
    """

    def __init__(self, n, d, loss, delta: float = HUBER_DELTA):
        self.delta = delta
        x, y = np.log(n), np.log(d)
        self.log_loss = np.log(loss)
        self.x_mean, self.y_mean = float(x.mean()), float(y.mean())
        self.xc, self.yc = x - self.x_mean, y - self.y_mean
        self.e_floor = float(self.log_loss.min() + np.log(E_FLOOR_FRACTION))  # below: E indistinguishable from 0

    def to_centered(self, theta: np.ndarray) -> np.ndarray:
        theta = np.array(theta, dtype=float)
        theta[..., 1] = theta[..., 1] - theta[..., 3] * self.x_mean
        theta[..., 2] = theta[..., 2] - theta[..., 4] * self.y_mean
        return theta

    def from_centered(self, theta_c: np.ndarray) -> np.ndarray:
        theta = np.array(theta_c, dtype=float)
        theta[..., 1] = theta[..., 1] + theta[..., 3] * self.x_mean
        theta[..., 2] = theta[..., 2] + theta[..., 4] * self.y_mean
        return theta

    def _predicted(self, thetas_c: np.ndarray):
        """For rows θc (K, 5): the softmax weights p1, p2, p3 of the three LSE terms, their
        normaliser and the predicted log-loss, each (K, runs)."""
        e, a, b, alpha, beta = (col[:, None] for col in thetas_c.T)
        u1 = a - alpha * self.xc
        u2 = b - beta * self.yc
        top = np.maximum(np.maximum(u1, u2), e)
        p1, p2, p3 = np.exp(u1 - top), np.exp(u2 - top), np.exp(e - top)
        total = p1 + p2 + p3
        return p1, p2, p3, total, top + np.log(total)

    def _huber(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Huber_δ(r) and its derivative clip(r, −δ, δ)."""
        size = np.abs(r)
        clipped = np.minimum(size, self.delta)
        return clipped * (size - 0.5 * clipped), np.copysign(clipped, r)

    def values_and_grads(self, thetas_c: np.ndarray, weights: np.ndarray | None = None):
        """F and ∂F/∂θc for rows θc (K, 5), with per-row weights (K, runs) or None: (K,), (K, 5).

        With p_k the softmax weights of the three LSE terms and h' = clip(r, −δ, δ):
        ∂F/∂(e, a', b', α, β) = Σ_i w_i·h'(r_i)·(p3, p1, p2, −p1·xc, −p2·yc)_i / (p1 + p2 + p3)_i.
        """
        p1, p2, p3, total, predicted = self._predicted(thetas_c)
        h, dh = self._huber(predicted - self.log_loss)
        slope = dh / total
        if weights is not None:
            h, slope = h * weights, slope * weights
        g1, g2 = slope * p1, slope * p2
        grad = np.stack(
            [(slope * p3).sum(axis=1), g1.sum(axis=1), g2.sum(axis=1), -(g1 @ self.xc), -(g2 @ self.yc)], axis=1
        )
        return h.sum(axis=1), grad

    def value_and_grad(self, theta_c: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """F and ∂F/∂θc at one θc (the form scipy's minimize takes)."""
        f, g = self.values_and_grads(np.asarray(theta_c, float)[None], None if weights is None else weights[None])
        return float(f[0]), g[0]

    def grid_values(self, thetas: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """F at many θ (rows, original coordinates): shape (len(thetas),), or (len(thetas), len(weights)) for a
        stack of weight vectors (one per bootstrap resample)."""
        parts = [t.sum(axis=1) if weights is None else t @ weights.T for t in self.grid_terms(thetas)]
        return np.concatenate(parts)

    def grid_terms(self, thetas: np.ndarray, chunk: int = 256):
        """Each run's Huber_δ term at many θ (rows, original coordinates), vectorised in chunks of rows: yields
        arrays (rows of the chunk, runs)."""
        thetas_c = self.to_centered(np.atleast_2d(thetas))
        for lo in range(0, len(thetas_c), chunk):
            yield self._huber(self._predicted(thetas_c[lo : lo + chunk])[4] - self.log_loss)[0]

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        """Predicted minus observed log-loss per run, at θ (original coordinates)."""
        return self._predicted(self.to_centered(np.asarray(theta, float)[None]))[4][0] - self.log_loss

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """∂(predicted log-loss)/∂θc per run at θ (original coordinates), shape (runs, 5): the rows
        (p3, p1, p2, −p1·xc, −p2·yc)/(p1 + p2 + p3) of `values_and_grads`. Taken in the centred
        coordinates θc, a linear change of θ: the span of its columns (and so any hat matrix) is the same."""
        p1, p2, p3, total, _ = (v[0] for v in self._predicted(self.to_centered(np.asarray(theta, float)[None])))
        return np.stack([p3, p1, p2, -p1 * self.xc, -p2 * self.yc], axis=1) / total[:, None]
