"""A loaded FIT.json's numbers checked (a file edited by hand, or damaged): every law it holds has the values it
needs, finite, and > 0 where its form needs it; else one DataError line naming the file, the fit, the key and the
value, never a traceback or a law evaluated from a negative exponent (user17: a deleted R_N, a null LR exponent
ended `optimal` in a KeyError and a TypeError; R_D = -3 printed D_opt outside its own interval and a NaN loss)."""

from __future__ import annotations

import math

from analysis.fits.muennighoff import NAMES as DATA_CONSTRAINED_NAMES
from analysis.fits.results import PARAMETRIC_NAMES, FitReport
from scaling.errors import DataError
from scaling.hplaws import law_problem

# The estimates each approach's law needs, those that must be > 0 for its form to hold, and those that
# may be null (NaN) when flagged unidentified: approach 2 with too few bracketed budgets has no law, nor
# has approach 3 when the runs contradict its form (`analysis.fits.parametric_form`).
REQUIRED_ESTIMATES = {1: ("a", "b", "N_coefficient"), 2: ("a", "b", "N_coefficient"), 3: PARAMETRIC_NAMES + ("a", "b")}
POSITIVE_ESTIMATES = {1: ("N_coefficient",), 2: ("N_coefficient",), 3: ("A", "B", "alpha", "beta", "a", "b")}
NULLABLE_ESTIMATES = {1: (), 2: ("a", "b", "N_coefficient"), 3: PARAMETRIC_NAMES + ("a", "b")}
REDO = "write it again with `scaling fit SOURCE --out FIT.json`"


def check_numbers(report: FitReport, path: str) -> None:
    """`check_estimates`, the data-constrained fit's (`check_data_constrained`) and the hyperparameter laws'."""
    check_estimates(report, path)
    check_data_constrained(report, path)
    for target, law in (report.hyperparameter_laws or {}).items():
        if problem := law_problem(law):
            raise DataError(f"fit file {path!r}, hyperparameter law {target!r}: {problem}; {REDO}")


def check_estimates(report: FitReport, path: str) -> None:
    """A loaded fit (perhaps hand-edited or damaged) has each approach's estimates, finite (or null where
    `NULLABLE_ESTIMATES` allows it and the estimate says why it is unidentified), and > 0 where the law
    needs it; else one DataError line naming the file, approach, key and value."""

    for fit in report.fits:
        where = f"fit file {path!r}, approach {fit.approach}"
        missing = [k for k in REQUIRED_ESTIMATES[fit.approach] if k not in fit.estimates]
        if missing:
            raise DataError(f"{where}: estimates lack {', '.join(map(repr, missing))}; the file is damaged: {REDO}")
        for key in REQUIRED_ESTIMATES[fit.approach]:
            value = fit.estimates[key].value
            if key in NULLABLE_ESTIMATES[fit.approach] and fit.estimates[key].unidentified and value != value:
                continue  # NaN: no value, and the file says why
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DataError(f"{where}: estimate {key!r} = {value!r} is not a finite number; {REDO}")
            if key in POSITIVE_ESTIMATES[fit.approach] and value <= 0:
                raise DataError(f"{where}: estimate {key!r} = {value!r} must be > 0 for the law to hold; {REDO}")


def check_data_constrained(report: FitReport, path: str) -> None:
    """The data-constrained fit has E, A, B, alpha, beta, R_D and R_N, each a finite number, > 0 but E (>= 0)."""
    fit = report.muennighoff
    if fit is None:
        return
    where = f"fit file {path!r}, data-constrained fit"
    missing = [k for k in DATA_CONSTRAINED_NAMES if k not in fit.estimates]
    if missing:
        raise DataError(f"{where}: estimates lack {', '.join(map(repr, missing))}; the file is damaged: {REDO}")
    for key in DATA_CONSTRAINED_NAMES:
        value = fit.estimates[key].value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataError(f"{where}: estimate {key!r} = {value!r} is not a finite number; {REDO}")
        if value < 0 or (value == 0 and key != "E"):
            raise DataError(f"{where}: estimate {key!r} = {value!r} must be > 0{' (E >= 0)' * (key == 'E')}; {REDO}")
