"""One description of a data-constrained fit (`analysis.fits.results.MuennighoffFit`): the lines `scaling fit
--approach muennighoff` prints and the report's section on it shows, each estimate with its interval."""

from __future__ import annotations

from analysis.describe.numbers import interval_text, num
from analysis.fits.percentiles import level_text
from analysis.fits.results import MuennighoffFit

MEANING = {
    "E": "irreducible loss",
    "A": "parameter term's scale",
    "B": "data term's scale",
    "alpha": "parameter exponent",
    "beta": "data exponent",
    "R_D": "repetitions after which repeated tokens are worth 1/e of fresh ones (R*_D)",
    "R_N": "the same for excess parameters (R*_N)",
}
TITLE = "data-constrained law (Muennighoff et al. 2023)"
HEADING = TITLE[:1].upper() + TITLE[1:]  # the report's
FORM = "L = E + A/N'^alpha + B/D'^beta,  D' = U + U·R_D·(1 - exp(-(D/U - 1)/R_D)),  N' likewise with R_N"


def runs_text(fit: MuennighoffFit) -> str:
    """ "105 runs, 0.5 to 32 epochs"."""
    return f"{len(fit.n)} runs, {num(min(fit.epochs))} to {num(max(fit.epochs))} epochs"


def estimate_rows(fit: MuennighoffFit) -> list[tuple[str, str, str]]:
    """(name, value with its interval or "(fixed: the published value)", meaning) for each estimate."""
    fixed = fit.convergence.get("fixed", {})
    return [
        (name, f"{num(e.value)} (fixed: the published value)" if name in fixed else interval_text(e), MEANING[name])
        for name, e in fit.estimates.items()
    ]


def repetition_text(fit: MuennighoffFit) -> str:
    """ "R*_D = 14.12 [6.868, 27.73], R*_N = 5.32 [4.045, 7.128]": what the law says of repetition, as `estimate_rows`."""
    text = {name: value for name, value, _ in estimate_rows(fit)}
    return f"R*_D = {text['R_D']}, R*_N = {text['R_N']}"


def bootstrap_lines(fit: MuennighoffFit) -> list[str]:
    """What the intervals are (the bootstrap's level, resamples and failures) and the bootstrap's notes; [] without."""
    boot = fit.bootstrap
    if boot is None:
        return []
    return [
        f"intervals: {level_text(boot.level)} bootstrap percentiles, {boot.resamples} resamples, {boot.failed} failed",
        *(f"note: {n}" for n in boot.notes),
    ]
