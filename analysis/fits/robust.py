"""The robust scale the fits share: σ̂ = 1.4826·MAD, the median absolute deviation from the median
scaled to the standard deviation of normal noise (by 1/Φ⁻¹(3/4) = 1.482602...: scipy's
`median_abs_deviation` with scale="normal"). A few wild values barely move it, where they would
inflate a standard deviation. The outlier rule (`analysis.fits.outliers`), the narrow-interval rule
(`analysis.fits.bootstrap.residual_widths`) and the design simulator (`analysis.fits.design`) use it.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import median_abs_deviation

SIGMA_TEXT = "1.4826·MAD"  # how the rules' texts write σ̂ (`analysis.fits.outliers.RULE`)


def robust_sigma(values) -> float:
    """σ̂ = 1.4826·MAD of ``values`` (module docstring); NaN when one of them is NaN."""
    return float(median_abs_deviation(np.asarray(values, dtype=float), scale="normal"))


def robust_sigmas(values: np.ndarray) -> np.ndarray:
    """σ̂ along the last axis of ``values``, NaNs left out, kept as a length-1 last axis."""
    return np.expand_dims(median_abs_deviation(values, axis=-1, scale="normal", nan_policy="omit"), -1)
