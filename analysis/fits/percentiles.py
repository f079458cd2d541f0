"""Percentile intervals of bootstrap samples that may hold overflowed (±inf) values.

A resample whose value overflowed (approach 3's A or B beyond floating point, N_opt of a law with a
tiny exponent) is a sample at the edge of what floating point holds: it is the largest (or smallest)
order statistic, and a percentile that lands on it is unbounded (`analysis.fits.results.Estimate.from_samples`
says so). `np.percentile` cannot take such samples: its interpolation gives inf − inf = NaN.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.codec import BEYOND_FLOAT


def level_text(level: float) -> str:
    """An interval's level as people read it: 0.95 -> "95%", 0.999 -> "99.9%", 0.9999999 -> "99.99999%" (a level
    below 1 never reads "100%")."""
    text = f"{level * 100:g}"
    return f"{level * 100:.12g}%" if text == "100" and level < 1 else f"{text}%"


def percentile_bounds(samples: np.ndarray, level: float) -> tuple[float, float]:
    """The (1 − level)/2 and (1 + level)/2 percentiles of ``samples`` (no NaN), as `np.percentile`'s
    linear interpolation between order statistics; a bound whose order statistics include ±inf is
    that infinity (numpy would give NaN, inf − inf, or move it onto a finite sample). The one
    percentile rule: the comparisons' intervals (`analysis.compare.multiplier.percentile_interval`)
    are this, column by column."""
    tail = 50.0 * (1.0 - level)
    if np.isfinite(samples).all():
        return tuple(float(b) for b in np.percentile(samples, [tail, 100.0 - tail]))
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf as the extreme order statistics, restored below
        bounds = np.percentile(np.clip(samples, -BEYOND_FLOAT, BEYOND_FLOAT), [tail, 100.0 - tail])
    ordered = np.sort(samples)
    for k, q in enumerate((tail, 100.0 - tail)):
        position = (samples.size - 1) * (q / 100.0)
        neighbours = ordered[[int(np.floor(position)), int(np.ceil(position))]]
        if np.isinf(neighbours).any():
            bounds[k] = neighbours[0] if neighbours[0] == -np.inf else neighbours[1]
    return float(bounds[0]), float(bounds[1])
