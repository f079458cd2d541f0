"""Whether approach 3's fit keeps its law's form: L = E + A/N^α + B/D^β falls with N and D only
when α, β > 0 (and A, B are positive numbers).

An exponent <= 0 at the best fit means the runs contradict the form (the loss does not fall with N,
or with D, over them) or do not identify it. Example: 12 sizes at one D and one run at a 10x larger
D whose loss is higher. Any β < 0 fits them equally well (B/D^β then trades off against E), so the
optimizer stops anywhere on a flat valley (β = -5.5 on one seed, -19.6 on another). Approach 3 puts no
bounds on its parameters (A, B and E are fitted through their logs, α and β are free), so the only
bound a term can reach is the edge of floating point: a coefficient that overflows to inf or
underflows to 0. That term is contradicted too (`contradicted`).

Best fit (`withhold`): the contradicted term's exponent and coefficient, E (the loss as N, D → ∞,
which a law rising with D does not have), and the allocation a, b, G (and so N_opt, D_opt) are
unidentified and have no value (NaN; null in FIT.json). Their bootstrap samples are dropped.
`analysis.fits.optimal.law_from_fit` refuses the law, and the figures draw no approach-3 curves.

Bootstrap (`resample_reasons`): a resample whose term is contradicted stays in the intervals
(dropping it would narrow them around the full-sample fit), and the notes count it. When more than
the interval's tail, (1 − level)/2, of the refitted resamples contradict a term, the data do not
show at that level that the loss falls with N (or D). Then the exponent, its coefficient, a, b and
G are unidentified (values kept, intervals withheld), and so is every allocation made from them.
"""

from __future__ import annotations

import numpy as np

from analysis.fits.results import Estimate

TERMS = {"alpha": ("A", "N"), "beta": ("B", "D")}  # exponent: coefficient, variable
ALLOCATION = ("a", "b", "G")  # a = β/(α+β), b = α/(α+β), G: each needs both terms


def contradicted(values: dict) -> dict[str, np.ndarray]:
    """Per exponent, elementwise over ``values`` (one fit, or bootstrap samples): whether its term
    contradicts the form (exponent not > 0, or coefficient not a positive finite number)."""
    out = {}
    for exponent, (coefficient, _) in TERMS.items():
        e, c = np.asarray(values[exponent], dtype=float), np.asarray(values[coefficient], dtype=float)
        with np.errstate(invalid="ignore"):
            out[exponent] = ~(e > 0) | ~(c > 0) | ~np.isfinite(c)
    return out


def best_fit_reasons(point: dict[str, float]) -> dict[str, str]:
    """Why each contradicted term of the best fit ``point`` is unidentified ({} when none is)."""
    out = {}
    for exponent, bad in contradicted(point).items():
        if bad:
            coefficient, variable = TERMS[exponent]
            value = point[coefficient]
            out[exponent] = (
                f"{exponent} <= 0 at the best fit: the loss does not fall with {variable} over these runs"
                if not point[exponent] > 0
                else f"{coefficient} {'overflows' if value > 0 else 'underflows'} at the best fit: the runs do "
                f"not identify the {variable} term"
            )
    return out


def withhold(estimates: dict[str, Estimate], boot, reasons: dict[str, str]) -> list[str]:
    """Best-fit case (module docstring): the affected estimates become NaN with the reason, their
    samples are dropped from ``boot``; returns the names withheld."""
    if not reasons:
        return []
    why = "; ".join(reasons.values())
    names = [k for k in estimates if k in {"E", *ALLOCATION, *reasons, *(TERMS[e][0] for e in reasons)}]
    for name in names:
        estimates[name] = Estimate(np.nan, unidentified=why)
    if boot is not None:
        boot.samples = {k: v for k, v in boot.samples.items() if k not in names}
    return names


def resample_reasons(samples: dict[str, np.ndarray], level: float) -> tuple[dict[str, str], list[str]]:
    """Bootstrap case (module docstring): why each term is unidentified by its resamples, and notes
    counting the contradicting resamples of each term."""
    reasons, notes = {}, []
    if not samples:
        return reasons, notes
    tail = (1.0 - level) / 2.0
    for exponent, bad in contradicted(samples).items():
        count = int(bad.sum())
        if count:
            coefficient, variable = TERMS[exponent]
            what = (
                f"{count} of {bad.size} refitted resamples gave {exponent} <= 0 or {coefficient} beyond floating "
                f"point (a loss not falling with {variable})"
            )
            if count > tail * bad.size:
                reasons[exponent] = f"{what}: more than the intervals' {tail:.3g} tail"
                notes.append(f"{reasons[exponent]}, so {exponent}, {coefficient}, a, b and G are unidentified")
            else:
                notes.append(f"{what}: kept in the intervals, inside their {tail:.3g} tail")
    return reasons, notes


def flag_resampled(estimates: dict[str, Estimate], reasons: dict[str, str]) -> None:
    """Mark the exponent, coefficient, a, b and G of each term in ``reasons`` unidentified (values kept),
    with this reason before any other (an interval's width: the sign is what the data do not show)."""
    for name, estimate in estimates.items():
        whys = [why for exponent, why in reasons.items() if name in (exponent, TERMS[exponent][0], *ALLOCATION)]
        if whys:
            estimate.unidentified = "; ".join(whys)


def no_law(fit) -> str:
    """Why approach 3's ``fit`` has no law ("" when it has one): `withhold` left estimates without a value."""
    return next((e.unidentified or "no value" for e in fit.estimates.values() if e.value != e.value), "")
