"""The one-sentence answer of a comparison (`analysis.compare.result`'s docstring gives its rules): m(C) at the
shared fitted range's low end, middle and high end, whether it changes with scale, and what makes it change."""

from __future__ import annotations

import numpy as np

from analysis.fits.results import Estimate

WIDE_M = 10.0  # an m interval wider than this factor, holding 1, tells nothing of which recipe is better


def holds_one_widely(lower, upper):
    """Where an m interval [lower, upper] (numbers or arrays) holds 1 over more than `WIDE_M`: it tells nothing of
    which recipe is better (the answer's text, `_uninformative`, and the figure's dashes read this one rule)."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    with np.errstate(all="ignore"):
        return (lower <= 1.0) & (upper >= 1.0) & (upper / lower > WIDE_M)


def summary_text(
    at: list[Estimate],
    shared: tuple[float, float],
    scale_dependent: bool | None,
    diffs: dict,
    intervals: bool,
    overlap: bool,
) -> str:
    """The answer, from m at the shared range's low end, middle and high end (``at``)."""
    lo, hi = shared
    where = "across the shared fitted range" if overlap else "in the gap between them,"
    if scale_dependent is not False and vague(at):  # user32: from 0.273 [2.5e-14, 5.1e3] to unidentified
        return (
            f"m is unidentified {where} {lo:.3g}–{hi:.3g} FLOPs: {_m(at[0])} at {lo:.3g}, {_m(at[2])} at {hi:.3g} "
            "(unidentified, or holding 1 over more than 10x): these runs cannot say how much compute the candidate is "
            "worth, nor how that changes with scale"
        )
    if scale_dependent is None:  # review21: Δγ unidentified (a side's α or β), a constant m read from its interval
        return (
            f"m(C) goes from {_m(at[0])} at {lo:.3g} to {_m(at[2])} at {hi:.3g} FLOPs"
            f"{'' if overlap else ' in the gap between them'}; whether it changes with scale cannot be said "
            f"({drift_cause(diffs, intervals)})"
        )
    if not scale_dependent and at[1].unidentified:  # user32: "m ≈ unidentified (...): ... needs 50.3·C for"
        return (
            f"m is unidentified {where} {lo:.3g}–{hi:.3g} FLOPs ({at[1].unidentified}): these runs cannot say "
            "how much compute the candidate is worth"
        )
    if not scale_dependent:
        why = "its drift and the exponent difference are consistent with 0" if intervals else "no intervals"
        text = (
            f"m ≈ {_m(at[1])} {where} {lo:.3g}–{hi:.3g} FLOPs ({why}): the candidate "
            f"reaches with C the loss the baseline needs {at[1].value:.3g}·C for"
        )
    else:
        text = (
            f"m(C) changes with scale: {'in the gap between them, ' * (not overlap)}it goes from {_m(at[0])} at "
            f"{lo:.3g} to {_m(at[2])} at {hi:.3g} FLOPs "
            f"({drift_cause(diffs, intervals)}); no single multiplier describes it"
        )
    mid = at[1]  # a copy of the baseline printed "m ≈ 1 [0.85, 1.19] (m < 1: the candidate is worse ...)"
    holds_one = mid.lower is not None and not mid.unidentified and mid.lower <= 1.0 <= mid.upper
    wide = holds_one and bool(holds_one_widely(mid.lower, mid.upper))  # user29: 0.03 to 15 read "no difference"
    if wide and not scale_dependent:
        text += f" (the interval holds 1 and spans {mid.upper / mid.lower:.0f}x: these runs cannot tell them apart)"
    elif holds_one and not scale_dependent:
        text += " (the interval holds 1: consistent with no difference between them)"
    elif not holds_one and not mid.unidentified and mid.value < 1:
        text += " (m < 1: the candidate is worse, it needs more compute than the baseline)"
    return text


def drift_cause(diffs: dict, intervals: bool) -> str:
    """What makes m(C) change with scale, as far as the intervals say: m is constant only when the frontier exponent
    γ and the floor E agree (`multiplier.DIFFERENCES`), so the differences named are those whose intervals exclude 0
    (a Δγ consistent with 0 beside an E that differs read as the cause: t06, where only E differed). A difference
    that is unidentified (`multiplier.differences` keeps its interval) says nothing: then the cause cannot be said."""
    said = {
        name: f"{what} Δ{symbol} "
        + (
            f"is unidentified ({d['unidentified']})"
            if d.get("unidentified")
            else f"= {_interval(d['value'], d['lower'], d['upper'])}"
        )
        for name, what, symbol, d in (
            ("gamma", "frontier exponent difference", "γ", diffs["gamma"]),
            ("E", "irreducible-loss difference", "E", diffs["E"]),
        )
    }
    if not intervals:
        return f"{said['gamma']}, {said['E']}; no intervals"
    unknown = [name for name in said if diffs[name].get("unidentified")]
    differ = [
        name
        for name in said
        if name not in unknown
        and diffs[name]["lower"] is not None
        and not diffs[name]["lower"] <= 0 <= diffs[name]["upper"]
    ]
    if unknown:
        known = [
            f"; {said[name]} {'excludes' if name in differ else 'is consistent with'} 0"
            for name in said
            if name not in unknown
        ]
        return f"the cause cannot be said: {' and '.join(said[name] for name in unknown)}{''.join(known)}"
    if differ == ["gamma"]:
        return said["gamma"]
    if differ == ["E"]:
        return f"{said['E']}, with {said['gamma']} consistent with 0"
    if differ:
        return f"{said['gamma']} and {said['E']}"
    return f"neither the {said['gamma']} nor the {said['E']} excludes 0 alone; m is constant only when both agree"


def vague(at: list[Estimate]) -> bool:
    """Whether m at both ends of the shared range says nothing of which recipe is better (`_uninformative`)."""
    return all(_uninformative(at[i]) for i in (0, 2))


def _uninformative(e: Estimate) -> bool:
    """An m that says nothing of which recipe is better: unidentified, or an interval holding 1 over `WIDE_M`."""
    return bool(e.unidentified) or (e.lower is not None and bool(holds_one_widely(e.lower, e.upper)))


def _m(e: Estimate) -> str:
    return f"unidentified ({e.unidentified})" if e.unidentified else _interval(e.value, e.lower, e.upper)


def _interval(value: float, lower: float | None, upper: float | None) -> str:
    if lower is None:
        return f"{value:.3g}"
    return f"{value:.3g} [{lower:.3g}, {upper:.3g}]"
