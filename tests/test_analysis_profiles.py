"""Approaches 1 (envelope of loss curves) and 2 (IsoFLOP parabolas) against known truth. (~3 s)"""

import numpy as np
import pytest

from analysis.fits.envelope import BINS_PER_DECADE, fit_envelope
from analysis.fits.isoflop import fit_isoflop, parabola_coefficients
from analysis.fits.laws import chinchilla_allocation
from analysis.fits.validation import validate_envelope, validate_isoflop
from analysis.sources.check import table_from_frame
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs, loss_curves
from scaling.errors import DataError

A_TRUE = 0.28 / 0.62  # beta/(alpha+beta) of the published law: N_opt ~ C^0.4516


def _runs(sizes=15, budgets=5, spread=1.0, noise=0.005, seed=0):
    return isoflop_runs(
        CHINCHILLA_LAW, np.logspace(18, 22, budgets), sizes, spread_decades=spread, noise=noise, seed=seed
    )


def test_parabola_coefficients_are_exact_on_a_parabola_and_nan_when_degenerate():
    u = np.array([[-1.0, 0.0, 1.0, 2.0], [0.5, 0.5, 0.5, 1.0]])
    y = 2.0 - 0.5 * u + 0.25 * u * u
    coefficients = parabola_coefficients(u, y)
    np.testing.assert_allclose(coefficients[0], [2.0, -0.5, 0.25], atol=1e-12)
    assert np.isnan(coefficients[1]).all()  # two distinct sizes cannot make a parabola


def test_approach_2_recovers_the_allocation_exponents():
    # 75 runs, 0.5% noise, sizes over N_opt x 10^(+-1). Over seeds 0-19 the worst |a - 0.4516| was 0.012.
    fit = fit_isoflop(table_from_frame(_runs(), "synthetic"), resamples=300, seed=0)
    a, b = fit.estimates["a"], fit.estimates["b"]
    assert a.value == pytest.approx(A_TRUE, abs=0.02)
    assert b.value == pytest.approx(1 - A_TRUE, abs=0.02)
    assert a.lower < A_TRUE < a.upper and b.lower < 1 - A_TRUE < b.upper
    assert fit.bootstrap.failed == 0 and len(fit.profiles) == 5
    # Each budget's minimum sits near the law's N_opt: the parabola itself is 3.7% off on noise-free
    # data (loss is not exactly quadratic in ln N over +-1 decade), the 0.5% noise moves it ~10% more.
    for p in fit.profiles:
        n_true = chinchilla_allocation(p.compute, *(CHINCHILLA_LAW[k] for k in ("A", "B", "alpha", "beta")))[0]
        assert p.n_opt == pytest.approx(n_true, rel=0.15)
        assert p.inside_range and 6 * p.n_opt * p.d_opt == pytest.approx(p.compute)
        assert p.n_opt_interval[0] < p.n_opt < p.n_opt_interval[1]
        assert p(p.n_opt) == pytest.approx(p.loss_opt)


def test_approach_2_validation_predicts_the_held_out_budget():
    table = table_from_frame(_runs(), "synthetic")
    fit = fit_isoflop(table, resamples=0)
    check = validate_isoflop(table, {p.budget: p for p in fit.profiles})
    assert check["held_out_budget"] == pytest.approx(1e22) and check["fitted_budgets"] == 4
    assert abs(check["n_opt_relative_error"]) < 0.1


def test_approach_2_needs_two_budgets_and_says_what_it_found():
    one_budget = _runs(budgets=1)
    with pytest.raises(DataError, match=r"at least 2 budgets.*has 1 budget\(s\): 1e\+18 FLOPs \(15 sizes\)"):
        fit_isoflop(table_from_frame(one_budget, "one.csv"), resamples=0)


def test_approach_1_recovers_the_frontier_from_loss_curves():
    runs = _runs(sizes=15)
    table = table_from_frame(runs, "synthetic", curves=loss_curves(runs, CHINCHILLA_LAW, 30, noise=0.005, seed=1))
    fit = fit_envelope(table, resamples=200, seed=0)
    # The envelope of these curves is exactly the law's compute-optimal frontier, so the frontier's
    # N_opt exponent (0.4516) and its loss floor E = 1.69 come back.
    assert fit.diagnostics["from_curves"] and fit.diagnostics["envelope_points"] >= 30
    assert fit.estimates["a"].value == pytest.approx(A_TRUE, abs=0.03)
    assert fit.estimates["floor_E"].value == pytest.approx(CHINCHILLA_LAW["E"], rel=0.03)
    assert fit.estimates["a"].value + fit.estimates["b"].value == pytest.approx(1.0)
    e = fit.estimates["floor_E"]
    assert e.lower < CHINCHILLA_LAW["E"] < e.upper
    np.testing.assert_allclose(6 * np.array(fit.n) * np.array(fit.d), fit.compute)
    assert max(abs(r) for r in fit.residuals["loss_law_with_floor"]) < 0.02


def test_approach_1_validation_predicts_the_held_out_budgets_lowest_loss():
    runs = _runs(sizes=15)
    table = table_from_frame(runs, "synthetic", curves=loss_curves(runs, CHINCHILLA_LAW, 30, noise=0.005, seed=1))
    check = validate_envelope(table, BINS_PER_DECADE, True)
    assert check["held_out_budget"] == pytest.approx(1e22) and check["fitted_runs"] == 60
    assert check["extrapolation_factor"] == pytest.approx(10.0) and not check["extrapolation"]
    assert check["loss_law"] == "L = E + A·C^-alpha"
    # Fitted on 1e18..1e21 and asked for 1e22, the frontier predicts the best held-out run's loss
    # within 1.4% over seeds 0-5. The best run's N is a noisy mark (the loss is flat near the
    # optimum, 0.5% noise picks among neighbours): -58%..+67% over those seeds, so it is reported, not tested.
    assert abs(check["loss_relative_error"]) < 0.03
    assert check["loss_observed"] == pytest.approx(table.runs[table.runs["budget"] == 1e22]["loss"].min())
    assert validate_envelope(table_from_frame(_runs(budgets=1), "one"), BINS_PER_DECADE, True) == {
        "skipped": "needs at least 2 budgets"
    }


def test_approach_1_validation_checks_the_loss_law_the_figure_draws():
    # Before: with the law with a floor unidentified (it gave no fit in most resamples), the figure and
    # `scaling optimal` used the law without one, and the held-out check tested the floor law all the same
    from analysis.fits.envelope import envelope_law
    from analysis.fits.fit import fit_all
    from analysis.synthetic import no_floor_ladder

    envelope = fit_all(no_floor_ladder(1), (1,), resamples=200, seed=0).envelope
    drawn = envelope_law(envelope)
    assert not drawn.with_floor and envelope.validation["loss_law"] == "L = A·C^-alpha"
    # the floor law's reason names its term (user26: `optimal` said E unidentified for floor_A's interval)
    term = next(k for k in ("floor_E", "floor_A", "floor_alpha") if envelope.estimates[k].unidentified)
    assert drawn.floor_unidentified == f"{term}: {envelope.estimates[term].unidentified}"


def test_approach_1_without_curves_uses_final_points_and_says_so():
    fit = fit_envelope(table_from_frame(_runs(), "final.csv"), resamples=0)
    assert fit.diagnostics["points_used"] == "final points only (the source has no loss curves)"
    assert fit.diagnostics["envelope_points"] == 5  # one per budget: its best run
    assert fit.estimates["a"].value == pytest.approx(A_TRUE, abs=0.05)


def test_every_approach_says_one_distance_of_the_held_out_budget_beyond_the_fitted_ones():
    """user8's t02: one held-out budget was 8.66x, 10.2x ("an EXTRAPOLATION") and 9.1x beyond the fitted
    ones, by approaches 1, 2 and 3, each dividing something else; now the held-out budget over the largest
    budget the refit drew on, for all three."""
    from analysis.fits.validation import validate_parametric

    runs = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20, 5e20], 7, spread_decades=0.8, noise=0.005, seed=2)
    runs["tokens"] *= np.random.default_rng(0).uniform(0.8, 1.2, len(runs))  # C drifts off the column's budgets
    table = table_from_frame(runs.drop(columns="flops"), "drift.csv")
    checks = [
        validate_envelope(table, BINS_PER_DECADE, True),
        validate_isoflop(table, {p.budget: p for p in fit_isoflop(table, resamples=0).profiles}),
        validate_parametric(table),
    ]
    assert [c["extrapolation_factor"] for c in checks] == [pytest.approx(5.0)] * 3


def test_approach_1_on_runs_of_several_lengths_draws_runs_over_all_budgets():
    # user27: 9 sizes x 5 run lengths, curves, no budget column (approach 1's own design): each run its own budget,
    # drawn within it, never moved: a "unidentified (every resample gave 0.4396 ... one run per budget)"
    import pandas as pd

    from analysis.fits.fit import fit_all
    from analysis.synthetic import CHINCHILLA_LAW, loss_curves

    sizes = np.geomspace(5e7, 2e9, 9)
    runs = pd.DataFrame(
        [
            {"run_id": f"n{i}l{k}", "params": n, "tokens": 20 * n * f}
            for i, n in enumerate(sizes)
            for k, f in enumerate([0.25, 0.5, 1, 2, 4])
        ]
    )
    envelope = fit_all(
        table_from_frame(loss_curves(runs, CHINCHILLA_LAW, 12, seed=0).merge(runs[["run_id", "params"]]), "c"),
        (1,),
        resamples=200,
    ).envelope
    a = envelope.estimates["a"]
    assert not a.unidentified and a.lower <= 0.4516 <= a.upper, a
    assert any("so they are drawn whole, not within budgets" in n for n in envelope.bootstrap.notes)


def test_a_held_out_budget_a_hair_beyond_10x_reads_more_than_10x(tmp_path, capsys):
    # user31: 10.0x beyond was printed "10×, an EXTRAPOLATION" where another table's 10× read without the word
    from conftest import run_main

    runs = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1.0004e20], 7, noise=0.005, seed=1)
    runs.to_csv(tmp_path / "runs.csv", index=False)
    said = run_main(capsys, "fit", tmp_path / "runs.csv", "--bootstrap", "0", check=True).stdout
    assert "(1e20 FLOPs, more than 10× beyond the budgets fitted, an EXTRAPOLATION)" in said
