"""The loss frontier of a fitted law L(N, D) = E + A/N^α + B/D^β and its inverse, over arrays of
parameters (one bootstrap sample per element) and of compute.

The frontier is the lowest loss a budget C can buy: L*(C) = min over N of L(N, C/(6N)), reached at
the allocation of `analysis.fits.laws.chinchilla_allocation`. Put in, both terms fall as the same
power of C, so the frontier is itself a power law with the law's floor:

    L*(C) = E + K·C^(−γ),   γ = α·β/(α + β),   K = L*(1) − E,

which `Frontier` holds (K is taken from the allocation at C = 1, so the formula stays in `laws`),
and whose inverse, the compute that reaches a loss L > E, is C = (K/(L − E))^(1/γ); a loss at or
below E is never reached (C = ∞).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.fits import laws


@dataclass
class Frontier:
    """L*(C) = E + K·C^(−γ) for arrays E, K, γ of one shape (one element per parameter set)."""

    E: np.ndarray
    K: np.ndarray
    gamma: np.ndarray

    @classmethod
    def of_law(cls, E, A, B, alpha, beta) -> Frontier:
        """The frontier of L(N, D) = E + A/N^α + B/D^β (parameters: floats or arrays of one shape)."""
        E, A, B, alpha, beta = (np.asarray(v, dtype=float) for v in (E, A, B, alpha, beta))
        with np.errstate(all="ignore"):  # wild bootstrap samples overflow; `finite` says which
            n, d = laws.chinchilla_allocation(1.0, A, B, alpha, beta)
            excess = laws.chinchilla_loss(n, d, 0.0, A, B, alpha, beta)
        return cls(E, excess, alpha * beta / (alpha + beta))

    @property
    def finite(self) -> np.ndarray:
        """Where the parameters give a usable frontier (finite, K > 0, γ > 0)."""
        return np.isfinite(self.E) & np.isfinite(self.K) & (self.K > 0) & np.isfinite(self.gamma) & (self.gamma > 0)

    def loss(self, compute) -> np.ndarray:
        """L*(C): shape (*params, *compute) (each parameter set along the leading axes)."""
        compute = np.asarray(compute, dtype=float)
        expand = (...,) + (None,) * compute.ndim
        with np.errstate(all="ignore"):
            return laws.power_law(compute, self.K[expand], -self.gamma[expand], self.E[expand])

    def compute_for(self, loss) -> np.ndarray:
        """The compute whose frontier loss is ``loss`` (an array shaped like `loss`'s output: the
        parameter axes first); ∞ where the loss is at or below the floor E."""
        loss = np.asarray(loss, dtype=float)
        extra = loss.ndim - self.E.ndim
        expand = (...,) + (None,) * extra
        E, K, gamma = self.E[expand], self.K[expand], self.gamma[expand]
        with np.errstate(all="ignore"):
            reached = np.power(K / (loss - E), 1.0 / gamma)
        return np.where(loss > E, reached, np.inf)
