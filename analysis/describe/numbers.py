"""Numbers as people read them: counts (10k, 2.5M, 1B), FLOPs (3e12), losses; shared by the
figures, the report and the CLI text."""

from __future__ import annotations

import math

from analysis.fits.results import Estimate

FLAG = "⚠"  # marks an extrapolation, a warning, a row to look at
AT_BOUND = "0 (bound)"  # how an interval reads whose lower end is a positive parameter's bound 0 (lower_at_bound)


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


def num(x: float) -> str:
    """A value to 4 significant digits."""
    return f"{x:.4g}"


def two(x: float) -> str:
    """A value to 2 decimals (exponents)."""
    return f"{x:.2f}"


def interval_text(e: Estimate | None, fmt=num, unit: str = "") -> str:
    """An estimate as "value [lower, upper] unit" (just the value without an interval; – without an
    estimate; "unidentified (why)", no unit, when its interval does not pin it down: `Estimate.unidentified`); a
    lower end at the parameter's bound 0 reads `AT_BOUND`."""
    if e is None:
        return "–"
    if getattr(e, "unidentified", ""):
        return f"unidentified ({e.unidentified})"
    if e.interval is None:
        text = fmt(e.value)
    else:  # a lower end at 0 exactly: `analysis.fits.bootstrap.lower_at_bound`
        text = f"{fmt(e.value)} [{AT_BOUND if e.lower == 0.0 < e.upper else fmt(e.lower)}, {fmt(e.upper)}]"
    return f"{text} {unit}" if unit else text


def times(factor: float) -> str:
    """A ratio as 99.9×, 1,000×, 3.33e8×."""
    return f"{factor:.3g}×" if factor < 100 else f"{factor:,.0f}×" if factor < 1e6 else f"{flops_label(factor)}×"
