"""Numbers as people read them: counts (10k, 2.5M, 1B), FLOPs (3e12), losses; shared by the
figures, the report and the CLI text."""

from __future__ import annotations

import math


def count_label(value: float) -> str:
    """A count as 950, 10k, 2.5M, 1B, 3T (k = 1e3, M = 1e6, B = 1e9, T = 1e12); 1e15 and up as `flops_label`."""
    if value >= 1e15:
        return flops_label(value)
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def flops_label(value: float) -> str:
    """FLOPs as 1e15, 3e12, 2.5e11: mantissa (3 significant digits at most) and power of ten."""
    if not (math.isfinite(value) and value > 0):
        return f"{value:g}"
    exponent = math.floor(math.log10(value))
    mantissa = round(value / 10.0**exponent, 2)
    if mantissa >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:g}e{exponent}"


def plain_label(value: float) -> str:
    """A loss as 1.5, 2, 3."""
    return f"{value:.3g}"
