"""A loss term's coefficient (A of A/N^α, B of B/D^β) whose interval spans more decades than the runs' sizes (token
counts) can carry it is unidentified (`analysis.fits.bootstrap.coefficient_identification`), and so is its exponent
whose interval is wider than that rule allows (`exponent_identification`): approach 3 and the data-constrained fit.
Clean fits keep theirs (tests/test_narrow_intervals.py checks those too)."""

from __future__ import annotations

import numpy as np

from analysis.describe.numbers import interval_text
from analysis.fits.bootstrap import coefficient_identification, exponent_identification, flag_wide_terms
from analysis.fits.parametric import fit_parametric
from analysis.fits.parametric_form import TERMS
from analysis.fits.results import Estimate
from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW as L
from analysis.synthetic import isoflop_runs


def test_the_rule_reads_a_coefficients_decades_as_the_exponent_they_imply():
    why = coefficient_identification(0.32, 3e242, 1e9, "N")  # an interval that printed as numbers
    assert why.startswith("interval spans 243 orders of magnitude, an exponent uncertain by 27 over the 9 decades")
    assert coefficient_identification(191.0, 604.0, 1.15e10, "N") == ""  # a clean ladder's A: 0.5 decades
    assert coefficient_identification(26.9, 2.4e10, 1e10, "N") == ""  # 8.95 decades over 10: an exponent ± 0.9
    assert coefficient_identification(None, None, 1e9, "N") == coefficient_identification(0.0, 5.0, 1e9, "N") == ""


def test_an_exponent_wider_than_the_coefficients_rule_allows_is_unidentified():
    assert exponent_identification(0.0664, 1.92, "N").startswith("interval 0.066 to 1.9 is wider than 1")
    assert exponent_identification(0.27, 0.37, "N") == exponent_identification(None, None, "N") == ""
    assert exponent_identification(0.2, 1.2, "D") == ""  # exactly MAX_TERM_EXPONENT wide: a coefficient's limit too
    # A follows its exponent when its own decades are within the rule (as k_N follows a: `follows_exponent`)
    estimates = {"alpha": Estimate(0.5, 0.1, 1.3), "A": Estimate(400.0, 100.0, 1e4)}
    flag_wide_terms(estimates, TERMS, {"N": 1e9, "D": 1e11})
    assert estimates["A"].unidentified == f"as alpha's: {estimates['alpha'].unidentified}"


def test_two_budgets_3x_apart_leave_a_and_b_unidentified_and_a_clean_ladder_keeps_them():
    # 2 budgets 3x apart, 5 sizes each, 2% noise: some resamples put the D term's exponent near 3.5, and B's
    # interval spans 30 decades, [5.86, 1.24e31] (A's 12), printed as numbers before; the truth is B = 410.7.
    runs = isoflop_runs(L, [1e18, 3e18], 5, spread_decades=0.5, noise=0.02, seed=2)
    fit = fit_parametric(table_from_frame(runs, "t.csv", ColumnMap()), resamples=100, seed=0)
    b = fit.estimates["B"]
    assert b.unidentified.startswith("interval spans 30.") and np.log10(b.upper / b.lower) > 30, b
    assert "from D = 1 to the largest fitted D" in b.unidentified
    assert fit.estimates["A"].unidentified.startswith("interval spans 12."), fit.estimates["A"]
    # α and β printed 0.51 [0.062, 1.8] and 0.79 [0.028, 3.6] as identified beside them (truth 0.34, 0.28): a term
    # falling as N^-0.06 or as N^-1.8. Their widths are what A's and B's decades imply (`exponent_identification`)
    alpha, beta = fit.estimates["alpha"], fit.estimates["beta"]
    assert alpha.unidentified.startswith("interval 0.062 to 1.8 is wider than 1: a term ∝ N^-0.062"), alpha
    assert beta.unidentified.startswith("interval 0.028 to 3.6 is wider than 1: a term ∝ D^-0.028"), beta
    assert fit.estimates["a"].unidentified.startswith("interval 0.028 to 0.94")  # its own reason, said first
    # G of N_opt = G·(C/6)^a comes from A and B: it printed 0.00266 [4.8e-09, 5.0e+07] as identified beside them
    assert fit.estimates["G"].unidentified.startswith("as A's: interval spans 12."), fit.estimates["G"]
    # E's interval reached the optimizer's stopping point on a flat ln E, 1.3e-13: its bound 0, printed so
    e = fit.estimates["E"]
    assert not e.unidentified and e.lower == 0.0 and interval_text(e) == f"{e.value:.4g} [0 (bound), {e.upper:.4g}]"
    # seven budgets over three decades pin both: their intervals print
    runs = isoflop_runs(L, np.logspace(18, 21, 7), 9, noise=0.005, seed=3)
    fit = fit_parametric(table_from_frame(runs, "t.csv", ColumnMap()), resamples=50, seed=0)
    for name in ("A", "B", "alpha", "beta", "E"):
        e = fit.estimates[name]
        assert not e.unidentified and 0 < e.lower < L[name] < e.upper, (name, e)
    assert not fit.estimates["G"].unidentified and not fit.estimates["a"].unidentified


def test_an_interval_that_leaves_out_its_own_estimate_identifies_nothing():
    # `--bootstrap 20 --level 0.8` printed a = 0.3761 [0.2174, 0.3657], 9 of 20 resamples failed: the 11 refitted
    # were not spread around the fit
    from analysis.fits.bootstrap import estimates_from_samples

    draws = np.linspace(0.2, 0.37, 11)
    away = estimates_from_samples({"a": 0.3761}, {"a": draws}, 0.8, failed=9)["a"]
    assert away.unidentified.startswith("its interval 0.217 to 0.353 leaves out the estimate 0.3761"), away
    assert "the resamples left after 9 failed are not spread around the fit" in away.unidentified
    inside = estimates_from_samples({"a": 0.3}, {"a": draws}, 0.8, failed=9)["a"]
    assert not inside.unidentified and inside.lower < 0.3 < inside.upper
    # none failed: a skewed bootstrap may leave out its estimate at a narrow --level (review15b: 1 seed in 8 at
    # --level 0.5 on a clean ladder): the percentile method's known behaviour, not a failure
    assert not estimates_from_samples({"a": 0.3761}, {"a": draws}, 0.8)["a"].unidentified
