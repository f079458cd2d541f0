"""Approaches 1 and 2 on IsoFLOP ladders whose budgets are not all bracketed (helper "isoflop").

Approach 2: a budget whose parabola minimum lies outside its trained sizes is left out of the law
N_opt ∝ C^a, in the fit and in every resample by one rule (`analysis.fits.isoflop.bracketed`), and
named. Approach 1: the bootstrap keeps every budget (stratified) and counts a resample in which only
the law with a floor fails against that law alone. Tables drawn from the published Chinchilla law
(true a = β/(α+β) = 0.4516), read back through `load_runs` as a user's CSV would be.
"""

import numpy as np
import pandas as pd
import pytest

import analysis.fits.envelope as envelope
import analysis.fits.isoflop as isoflop
from analysis.cli.fit import fit_summary, render_fit
from analysis.describe.fit import describe_fit
from analysis.fits.bent_profiles import bent
from analysis.fits.bootstrap import AS_E, AS_LOSS_LAW, unit_draws
from analysis.fits.codec import to_jsonable
from analysis.fits.envelope import fit_envelope
from analysis.fits.fit import fit_all
from analysis.fits.isoflop import fit_isoflop
from analysis.fits.parametric import fit_parametric
from analysis.fits.powerlaws import log_linear_fit
from analysis.fits.results import FitReport
from analysis.fits.saved_law import law_from_fit
from analysis.synthetic import QUICK_LAW, no_floor_ladder, quick_design
from scaling.errors import UserError
from tests.test_real_fits import LAW, TRUE_A, _runs, _table, final_points

BUDGETS = np.logspace(18, 22, 5)


def one_sided(seed: int) -> pd.DataFrame:
    """The ladder of test_real_fits (9 sizes over N_opt·10^(±1), 1% noise) at 1e18..1e21, and at 1e22
    9 sizes over 5·N_opt·10^(±0.6): 1.26 to 20 times its optimum, all on one side."""
    rng = np.random.default_rng(seed)
    return pd.concat([_runs(rng, budgets=BUDGETS[:4]), _runs(rng, budgets=BUDGETS[4:], spread=0.6, centre=5.0)])


def _covers(e) -> bool:
    return e.lower <= TRUE_A <= e.upper


def _law_through_every_minimum(fit) -> float:
    """a fitted through every budget's minimum, extrapolated or not (what approach 2 did before)."""
    return float(log_linear_fit(np.log([p.compute for p in fit.profiles]), np.log([p.n_opt for p in fit.profiles]))[1])


def test_a_budget_trained_on_one_side_is_left_out_of_the_law_and_named(tmp_path):
    # Before (a1a46c2) this table gave a = 0.317 [0.300, 0.525]: the 1e22 vertex, extrapolated below
    # its sizes, pulled a 0.13 under the truth. Over the 20 seeds below, |a - 0.4516| averaged 0.12
    # (0.87 at worst), while every interval covered the truth: resamples left the budget out when its
    # vertex fell more than 10x beyond the sizes drawn; the point estimate never did.
    fit = fit_isoflop(_table(one_sided(0), tmp_path), resamples=1000, seed=0)
    edge = [p for p in fit.profiles if p.budget == 1e22][0]
    assert not edge.inside_range and edge.n_opt < min(edge.n)
    assert abs(_law_through_every_minimum(fit) - TRUE_A) > 0.1  # the biased law, had it entered
    a = fit.estimates["a"]
    assert a.value == pytest.approx(TRUE_A, abs=0.02) and _covers(a) and not a.unidentified, a
    assert fit.estimates["b"].value == pytest.approx(1 - a.value)
    assert fit.diagnostics["budgets_in_law"] == 4
    assert [x["budget"] for x in fit.diagnostics["left_out_of_law"]] == [1e22]
    assert "lies outside its trained sizes" in fit.diagnostics["left_out_of_law"][0]["why"]
    assert any("1e+22" in n and "left out of the law in those" in n for n in fit.bootstrap.notes), fit.bootstrap.notes
    report = FitReport(source="one_sided.csv", n_kind="total", runs=45, warnings=[], notes=[], isoflop=fit)
    text = render_fit(report)
    assert "budget left out of the law N_opt ∝ C^a: C = 1e22: its minimum N = " in text, text
    assert "through the 4 whose minimum lies inside their trained sizes" in text
    assert fit_summary(report, single=True)["left_out_of_law"] == fit.diagnostics["left_out_of_law"]
    report.save(tmp_path / "fit.json")
    assert FitReport.load(tmp_path / "fit.json").isoflop.diagnostics["left_out_of_law"][0]["budget"] == 1e22

    covered, errors = 0, []
    for rep in range(20):
        rep_fit = fit_isoflop(_table(one_sided(100 + rep), tmp_path), resamples=200, seed=rep)
        covered += _covers(rep_fit.estimates["a"])
        errors.append(abs(rep_fit.estimates["a"].value - TRUE_A))
    assert covered >= 18 and np.mean(errors) < 0.03, (covered, errors)  # measured: 20 of 20, 0.022


def test_a_left_out_budget_is_outside_the_laws_fitted_range(tmp_path):
    # The law N_opt ∝ C^a is fitted through 1e18..1e21: an allocation at 3e22 is flagged as beyond 10x its
    # largest budget (`EXTRAPOLATION_FACTOR`), as `scaling optimal` and the report say, though the table's largest
    # runs sit at 1e22 (before, the range counted them: no flag below 1e23).
    fit = fit_isoflop(_table(one_sided(0), tmp_path), resamples=100, seed=0)
    assert fit.diagnostics["budgets_in_law"] == 4
    assert 1e21 <= fit.fitted_compute_max < 1.5e21, fit.fitted_compute_max
    report = FitReport(source="one_sided.csv", n_kind="total", runs=45, warnings=[], notes=[], isoflop=fit)
    law = law_from_fit(report, "one_sided", approach=2)
    assert law.fitted_compute_min == pytest.approx(1e18, rel=0.01)  # its smallest budget in the law
    assert law.allocate(3e22).extrapolation and not law.allocate(5e21).extrapolation
    # review15b: the smallest budget left out moves the other end (`isoflop.law_budgets`)
    rng = np.random.default_rng(3)
    low_side = pd.concat([_runs(rng, budgets=BUDGETS[:1], spread=0.6, centre=0.12), _runs(rng, budgets=BUDGETS[1:])])
    fit = fit_isoflop(_table(low_side, tmp_path), resamples=100, seed=0)
    assert [x["budget"] for x in fit.diagnostics["left_out_of_law"]] == [1e18]
    report = FitReport(source="low.csv", n_kind="total", runs=45, warnings=[], notes=[], isoflop=fit)
    law = law_from_fit(report, "low", approach=2)
    assert law.fitted_compute_min == pytest.approx(1e19, rel=0.01) and law.allocate(3e18).below_range


def test_a_profile_bent_by_a_diverged_run_with_a_finite_loss_is_warned_about(tmp_path):
    # user20: a loss of 7.5 among 2.3s put 1e21's minimum at 1.585, below every run, and said nothing
    runs = _runs(np.random.default_rng(1), budgets=BUDGETS[:4])
    assert bent(fit_isoflop(_table(runs, tmp_path), resamples=0).profiles) == []
    runs.loc[runs.index[-1], "loss"] = 7.5  # the largest size at 1e21
    said = bent(fit_isoflop(_table(runs, tmp_path), resamples=0).profiles)
    assert len(said) == 1 and said[0].startswith("budget 1e+21: its parabola's minimum loss") and "bends it" in said[0]
    assert "(most, " in said[0] and ", loss 7.5;" in said[0], said  # review16: the run named
    # user38: the bent budget's N_opt is no measurement: unidentified and out of the law (it printed a confident one)
    bent_fit = fit_isoflop(_table(runs, tmp_path), resamples=0)
    last = bent_fit.profiles[-1]
    assert last.n_opt_unidentified.startswith("bent") and not isoflop.in_law(last), last.n_opt_unidentified
    assert bent_fit.diagnostics["budgets_in_law"] == 3


def test_a_three_size_budget_with_a_diverged_run_names_that_run_and_leaves_its_n_opt_unidentified(tmp_path):
    """User38: a 3-size budget holding a diverged loss (7.5 among 2.9s at its largest N): the parabola through the
    three printed N_opt 4.849e8 [4.818e8, 4.869e8] for a true 2.6e8, the warning named the first run (with 3 sizes
    no run can be left out with a parabola remaining); now it names the run the outlier rule flagged, else the run
    of the highest loss, and the N_opt is unidentified."""
    runs = _runs(np.random.default_rng(2), budgets=BUDGETS[:4])
    first = runs.index[runs["budget_flops"] == BUDGETS[0]]
    runs = runs.drop(index=first[[0, 1, 2]])  # 3 sizes left at 1e18 (of 6)
    runs.loc[first[-1], "loss"] *= 2.4
    report = fit_all(_table(runs, tmp_path), (2, 3), resamples=50)
    (said,) = [w for d in describe_fit(report) for w in d.warnings if "bends it" in w]
    diverged = str(report.isoflop.profiles[0].run_id[-1])
    assert f"({diverged}, loss" in said and "flagged by the outlier rule" in said, said
    assert report.isoflop.profiles[0].n_opt_unidentified.startswith("bent")
    assert "(most, " + diverged in bent(report.isoflop.profiles)[0]  # unflagged, of 3 sizes: the highest loss


def test_the_fitted_range_is_where_the_law_places_its_budgets(tmp_path):
    # user20: budgets labelled 1.4x their runs' 6·N·D; the law's C was the column's but its range 6·N·D's. Since
    # 2026-11-27 the law places each budget at its runs' 6·N·D (a nominal label's D_opt was 1.4x off), and so
    # does its range: the labels move neither.
    rng = np.random.default_rng(0)
    runs = _runs(rng, budgets=BUDGETS[:4])
    labelled = runs.assign(budget_flops=lambda f: 1.4 * f["budget_flops"])
    fit = fit_isoflop(_table(labelled, tmp_path), resamples=50, seed=0)
    assert (fit.fitted_compute_min, fit.fitted_compute_max) == pytest.approx((1e18, 1e21))
    law = law_from_fit(FitReport(source="x", n_kind="total", runs=36, warnings=[], notes=[], isoflop=fit), "x", 2)
    assert not law.allocate(9e21).extrapolation and law.allocate(1.2e22).extrapolation
    same = fit_isoflop(_table(runs, tmp_path), resamples=50, seed=0)
    assert law.allocate(1e22).n.value == pytest.approx(float(same.n_opt_law(1e22)), rel=1e-9)


def test_a_fit_saved_before_the_laws_smaller_end_was_kept_still_loads(tmp_path, capsys):
    # user20: a FIT.json of a few minutes before (no isoflop.fitted_compute_min) ended in "incomplete or damaged"
    import json

    from analysis.fits.results import FitReport

    fit = fit_isoflop(_table(one_sided(0), tmp_path), resamples=50, seed=0)
    path = tmp_path / "old.json"
    FitReport(source="one_sided.csv", n_kind="total", runs=45, warnings=[], notes=[], isoflop=fit).save(path)
    data = json.loads(path.read_text())
    del data["isoflop"]["fitted_compute_min"]
    path.write_text(json.dumps(data))
    law = law_from_fit(FitReport.load(path), "old", approach=2)
    assert law.fitted_compute_min == 1e18  # its smallest budget in the law, as such fits were read then
    # a damaged fit file is told to be fitted again, not fitted as a table (user20, review16)
    from scaling.cli import main

    path.write_text(path.read_text()[:500])
    assert main(["optimal", "--law", str(path), "--budget", "1e21"]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "fit its source again: `scaling fit SOURCE" in err and "first" not in err


def test_the_allocation_figure_shows_the_budget_left_out_hollow_without_an_interval(tmp_path):
    from analysis.figures.allocation import optimal_allocation

    fit = fit_isoflop(_table(one_sided(0), tmp_path), resamples=200, seed=0)
    figure = optimal_allocation(FitReport(source="x", n_kind="total", runs=45, warnings=[], notes=[], isoflop=fit))
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert "approach 2: parabola minima outside the trained sizes (not in its law)" in labels
    outside = [line for line in figure.axes[0].lines if line.get_gid() == "minima:outside"][0]
    assert list(outside.get_xdata()) == [1e22]
    bars = [c for c in figure.axes[0].containers if c.lines[0] is outside][0]
    segments = bars.lines[2][0].get_segments()
    assert all(seg[0][1] == pytest.approx(seg[1][1]) for seg in segments)  # zero length: no interval drawn


def test_one_function_decides_for_the_fit_and_every_resample(tmp_path, monkeypatch):
    """With `bracketed` (and `in_law`, which adds the unbounded-N_opt rule to it) made to pass every budget,
    the fit is the law through every minimum and no resample leaves a budget out of its law: the one rule
    governs the point estimate and the resamples."""
    table = _table(one_sided(0), tmp_path)
    monkeypatch.setattr(isoflop, "bracketed", lambda log_n_opt, lo, hi: np.isfinite(log_n_opt))
    monkeypatch.setattr(isoflop, "in_law", lambda profile: profile.inside_range)
    fit = fit_isoflop(table, resamples=300, seed=0)
    assert fit.diagnostics["left_out_of_law"] == []
    assert fit.estimates["a"].value == pytest.approx(_law_through_every_minimum(fit), rel=1e-12)
    assert not any("left out of the law" in n for n in fit.bootstrap.notes)
    monkeypatch.undo()
    assert fit_isoflop(table, resamples=300, seed=0).estimates["a"].interval != fit.estimates["a"].interval


def one_bracketed(tmp_path):
    """1e18 bracketed; 1e19 and 1e20 trained 1.3-20x above their optimum: 1 of 3 budgets in the law."""
    rng = np.random.default_rng(0)
    frame = pd.concat([_runs(rng, budgets=BUDGETS[:1]), _runs(rng, budgets=BUDGETS[1:3], spread=0.6, centre=5.0)])
    return _table(frame, tmp_path)


def test_fewer_than_two_bracketed_budgets_leave_the_law_unidentified(tmp_path):
    fit = fit_isoflop(one_bracketed(tmp_path), resamples=200, seed=0)
    assert [p.inside_range for p in fit.profiles] == [True, False, False]
    for key in ("a", "b", "N_coefficient", "D_coefficient"):
        assert fit.estimates[key].unidentified.startswith("1 of 3 budgets have their minimum inside"), key
        # Before: the law through every minimum (a = 0.42) was kept "for the record", with an interval
        # from other resamples' laws ([0.50, 0.73] at 100 resamples) that did not even contain it.
        assert np.isnan(fit.estimates[key].value) and fit.estimates[key].interval is None, key
    assert np.isnan([fit.n_opt_law.exponent, fit.n_opt_law.coefficient, fit.d_opt_law.exponent]).all()
    assert not set(fit.bootstrap.samples) & set(isoflop.LAW_KEYS)  # no law, no law samples
    assert fit.profiles[0].n_opt_interval is not None  # the bracketed budget's own N_opt keeps its interval
    text = render_fit(FitReport(source="x", n_kind="total", runs=27, warnings=[], notes=[], isoflop=fit))
    a_line = next(line for line in text.splitlines() if line.split()[:1] == ["a"])
    assert "unidentified (1 of 3 budgets" in a_line and not any(c.isdigit() for c in a_line.split("(")[0]), a_line


def test_a_minimum_far_beyond_the_sizes_is_dropped_not_a_crash(tmp_path):
    # Before: a parabola at 1e22 curving up so weakly that its vertex lay at N = e^-1450 made
    # fit_isoflop raise ZeroDivisionError (D_opt = C/(6·0)).
    rng = np.random.default_rng(0)
    frame = pd.concat([_runs(rng, budgets=BUDGETS[:4]), _runs(rng, budgets=BUDGETS[4:], spread=0.4, centre=5.0)])
    fit = fit_isoflop(_table(frame, tmp_path), resamples=100, seed=0)
    assert len(fit.profiles) == 4 and "1e+22" in fit.dropped[0] and "more than 10× beyond" in fit.dropped[0]
    assert _covers(fit.estimates["a"])


def test_an_all_bracketed_ladder_gives_the_old_numbers(tmp_path):
    """Nothing is left out, in the fit or in any resample, so every number is the one a1a46c2 gave
    (pinned here from that commit)."""
    fit = fit_isoflop(_table(final_points(np.random.default_rng(0)), tmp_path), resamples=300, seed=0)
    assert fit.diagnostics["left_out_of_law"] == [] and fit.diagnostics["budgets_in_law"] == 5
    assert not any("left out of the law" in n for n in fit.bootstrap.notes)
    a, k = fit.estimates["a"], fit.estimates["N_coefficient"]
    assert a.value == pytest.approx(0.43855466291629175, rel=1e-12)
    assert a.interval == pytest.approx([0.42110377033611746, 0.45897073036448277], rel=1e-12)
    assert k.interval == pytest.approx([0.40918463823815043, 2.426478678934387], rel=1e-12)
    assert fit.bootstrap.failed == 0 and [p.resamples_failed for p in fit.profiles] == [0, 0, 1, 0, 2]


# ---------------------------------------------------------------- approach 1
def test_approach1_keeps_a_when_only_the_law_with_a_floor_fails(tmp_path):
    # Before (a1a46c2): 736 of 1000 resamples failed, 722 of them for the floor alone, so every
    # estimate read "unidentified (no interval: too few resamples could be refitted)", as on the demo.
    fit = fit_envelope(no_floor_ladder(1), resamples=1000, seed=0)
    a = fit.estimates["a"]
    assert fit.bootstrap.failed <= 10 and not a.unidentified and _covers(a), (fit.bootstrap, a)  # measured: 0
    assert fit.estimates["loss_alpha"].interval is not None and not fit.estimates["loss_alpha"].unidentified
    for name in ("floor_E", "floor_A", "floor_alpha"):
        assert fit.estimates[name].unidentified.startswith("the law with a floor gave no fit in 722 of 1000"), name
        assert fit.estimates[name].interval is None
    assert fit.bootstrap.notes[0] == "runs resampled within each budget, with their whole loss curves"
    assert any("from a floor near 0 they do not converge" in n for n in fit.bootstrap.notes)
    report = FitReport(source="x", n_kind="total", runs=18, warnings=[], notes=[], envelope=fit)
    report.save(tmp_path / "fit.json")  # NaN floor samples: saved as null, read back
    law = law_from_fit(FitReport.load(tmp_path / "fit.json"), "x", 1)
    # the loss comes from the identified law without a floor, as the figure draws (it came from the unidentified
    # law with one: a bare 0.642, no interval, not flagged); within the fitted budgets (1e18 to 1e22) it stands
    allocation = law.allocate(1e21)
    assert "loss_E" not in law.params and allocation.n.interval is not None and allocation.loss.interval is not None
    assert not allocation.loss.unidentified
    # beyond them it rests on a floor the fit cannot identify
    assert law.allocate(1e24).loss.unidentified == AS_E and law.allocate(1e24).loss.interval is not None
    # when neither law is identified (as the figure test plants it), no loss it predicts is a finding, nor a budget
    for name in ("loss_A", "loss_alpha"):
        fit.estimates[name].unidentified = "planted: interval spans 3 orders of magnitude"
    law = law_from_fit(report, "x", 1)
    assert law.allocate(1e21).loss.unidentified == AS_LOSS_LAW and not law.allocate(1e21).n.unidentified
    with pytest.raises(UserError, match="--target-loss cannot be answered .* its loss law is unidentified"):
        law.budget_for_loss(0.7)


def test_approach1_within_budgets_covers_the_truth_with_narrower_intervals(monkeypatch):
    """Over 20 seeds a is identified and covered every time, with (nearly) no resample failed; drawn
    within budgets its intervals are narrower than drawn over all runs (the design held fixed)."""
    widths = {}
    for draws in ("within budgets", "over all runs"):
        if draws == "over all runs":
            monkeypatch.setattr(envelope, "_draws", lambda grid, rng, k: unit_draws(rng, grid.units, k))
        covered = identified = failed = 0
        widths[draws], values = [], []
        for seed in range(20):
            fit = fit_envelope(no_floor_ladder(seed), resamples=200, seed=seed)
            a = fit.estimates["a"]
            values.append(a.value)
            covered += _covers(a)
            identified += not a.unidentified
            failed += fit.bootstrap.failed
            widths[draws].append(a.upper - a.lower)
        assert covered == 20 and identified >= 19 and failed <= 40, (draws, covered, identified, failed)
    # 0.29 vs 0.33 (N_opt through the bracketed envelope points; through all of them 0.24 vs 0.39)
    assert np.median(widths["within budgets"]) < 0.9 * np.median(widths["over all runs"]), widths
    # Still conservative: a calibrated 95% interval is about 4 seed-to-seed spreads wide (4 × 0.018 =
    # 0.072); within budgets it is 4.0 times that (3.1 through every envelope point, not only the bracketed ones;
    # README, Approach 1's bootstrap, for why it stays).
    assert np.median(widths["within budgets"]) < 4.5 * 4 * np.std(values, ddof=1), (widths, np.std(values, ddof=1))


def test_approach1_draws_units_spanning_budgets_whole(tmp_path):
    """A WSD trunk and its branches sit at several budgets: no stratum holds the whole unit, so the
    units are drawn over all runs, and the notes say so."""
    rng = np.random.default_rng(1)
    rows = []
    for i, n in enumerate(np.geomspace(2e7, 2e9, 6)):
        for j, d in enumerate(np.geomspace(2e8, 2e11, 6)):
            loss = float(LAW["E"] + LAW["A"] / n ** LAW["alpha"] + LAW["B"] / d ** LAW["beta"])
            loss *= np.exp(0.003 * rng.standard_normal())
            rows.append({"run_id": f"t{i}b{j}", "N": n, "D": d, "loss": loss, "branch_of": "" if j == 5 else f"t{i}b5"})
    table = _table(pd.DataFrame(rows), tmp_path, "branched.csv")
    assert table.runs.groupby("unit")["budget"].nunique().max() > 1
    fit = fit_envelope(table, resamples=50, seed=0)
    assert any("drawn whole, not within budgets" in n for n in fit.bootstrap.notes), fit.bootstrap.notes


def test_a_law_that_is_not_there_is_null_in_fit_json_and_unidentified_everywhere(tmp_path, capsys):
    """FIT.json holds null for a, b and the coefficients (NaN in memory); `fit --json`, `report` and
    `plot` say "unidentified", never a number or nan; `optimal` (text, --json, --hp-law, --max-tokens)
    refuses in one line, as for approach 3's law (one rule for a fit without a law).
    (`compare` fits approach 3 only: approach 2 has no part in it.) Old files, which kept the law
    through every minimum flagged unidentified, still load and read as before."""
    import json

    from conftest import assert_one_line_error, run_main
    from matplotlib.collections import PolyCollection

    from analysis.cli.optimal import optimal_main
    from analysis.figures.allocation import optimal_allocation

    table = one_bracketed(tmp_path)
    report = FitReport(
        source="x", n_kind="total", runs=27, warnings=[], notes=[], isoflop=fit_isoflop(table, resamples=100, seed=0)
    )
    summary = json.loads(json.dumps(to_jsonable(fit_summary(report, single=True))))
    assert summary["a"]["estimate"] is None and summary["a"]["unidentified"].startswith("1 of 3 budgets")
    fit_json = tmp_path / "fit.json"
    report.save(fit_json)
    saved = json.loads(fit_json.read_text())["isoflop"]
    assert saved["estimates"]["a"]["value"] is None and saved["n_opt_law"]["exponent"] is None
    loaded = FitReport.load(fit_json)
    assert np.isnan(loaded.isoflop.estimates["a"].value) and loaded.isoflop.estimates["a"].unidentified

    for extra in (), ("--hp-law", "step_law"), ("--max-tokens", "1e9"), ("--json",):  # no law: no allocation
        refused = run_main(capsys, "optimal", "--law", fit_json, "--budget", "1e21", *extra)
        assert_one_line_error(refused, "approach 2's law is unidentified (1 of 3 budgets", "fit more runs")
    # as approach 3's (tests/test_parametric_form.py); a file with a law elsewhere says where
    both = FitReport(source="x", n_kind="total", runs=27, warnings=[], notes=[], isoflop=report.isoflop)
    both.envelope = fit_envelope(table, resamples=20, seed=0)
    both.save(tmp_path / "both.json")
    refused = run_main(capsys, "optimal", "--law", tmp_path / "both.json", "--budget", "1e21", "--approach", "2")
    assert_one_line_error(refused, "approach 2's law is unidentified", "fit more runs")
    # approach 1 from final points only is not headlined, so not allocated with either (helper appr12)
    refused = run_main(capsys, "optimal", "--law", tmp_path / "both.json", "--budget", "1e21", "--approach", "1")
    assert_one_line_error(refused, "not headlined: approach 1 had final points only", "fit more runs")
    both.parametric = fit_parametric(table, resamples=20, seed=0)
    both.save(tmp_path / "both.json")
    refused = run_main(capsys, "optimal", "--law", tmp_path / "both.json", "--budget", "1e21", "--approach", "2")
    assert_one_line_error(refused, "approach 2's law is unidentified", "give --approach 3 (the file has a law there)")
    # not asked for one, `optimal` (as the report) takes the highest headlined approach, and says why
    chosen = run_main(capsys, "optimal", "--law", tmp_path / "both.json", "--budget", "1e21", check=True).stdout
    assert "both.json (approach 3)" in chosen and "note: approach 2 has no law (1 of 3 budgets" in chosen, chosen

    figure = optimal_allocation(loaded)
    assert "approach 2: no law N_opt ∝ C^a (a unidentified)" in figure.axes[0].get_legend_handles_labels()[1]
    drawn = [line for line in figure.axes[0].lines if line.get_gid() == "fit:approach2"]
    assert drawn and all(np.isnan(line.get_ydata()).all() for line in drawn)
    assert not [c for c in figure.axes[0].collections if isinstance(c, PolyCollection)]  # no band
    source = tmp_path / "runs.csv"
    run_main(capsys, "report", source, "--fit", fit_json, "--out", tmp_path / "r" / "r.html", check=True)
    markdown = (tmp_path / "r" / "r.md").read_text()
    assert "| a | unidentified (1 of 3 budgets" in markdown and "not drawn: no law, a unidentified" in markdown
    assert "95% percentile intervals" in markdown and "nan" not in markdown.lower().replace("nanmedian", "")
    run_main(capsys, "plot", source, "--fit", fit_json, "--out", tmp_path / "figures", check=True)
    assert "not drawn: no law, a unidentified" in (tmp_path / "figures" / "captions.md").read_text()

    # An old file: the law through every minimum, flagged unidentified, loads and reads unidentified.
    old = json.loads(fit_json.read_text())
    old["isoflop"]["estimates"]["a"].update(value=0.423, lower=0.498, upper=0.729)
    old["isoflop"]["estimates"]["b"].update(value=0.577)
    old["isoflop"]["estimates"]["N_coefficient"].update(value=2.14)
    old["isoflop"]["n_opt_law"].update(coefficient=2.14, exponent=0.423)
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert optimal_main(["--law", str(tmp_path / "old.json"), "--budget", "1e21"]) == 0
    assert "N_opt              unidentified (as the fit's a)" in capsys.readouterr().out
    # null only where the fit says why: a hand-edited null without the reason is one error line
    old["isoflop"]["estimates"]["a"].update(value=None, unidentified="")
    (tmp_path / "bad.json").write_text(json.dumps(old))
    proc = run_main(capsys, "optimal", "--law", tmp_path / "bad.json", "--budget", "1e21")
    assert_one_line_error(proc, "bad.json", "approach 2", "'a' = nan is not a finite number")


def test_approach1_on_the_quick_sweeps_design_is_biased_and_says_unidentified():
    """With these sizes (none between 25k and 75k) over one decade of compute, the envelope's a is
    0.235 without any noise, against the law's 0.490 (through its bracketed points; through all of them it was
    0.723, as the demo read 0.72): a bias no redraw of the noise can see. Drawing the runs, the intervals
    still cover the truth in 20 of 20 seeds and are wider than 0.5 in 19, so a is printed unidentified. A bootstrap that kept the runs and
    redrew their losses (a residual bootstrap; README) gave intervals 0.43 wide that covered the truth
    in 0 of 40 seeds (200 resamples), a printed as identified in 32."""
    true_a = QUICK_LAW["beta"] / (QUICK_LAW["alpha"] + QUICK_LAW["beta"])
    noiseless = fit_envelope(quick_design(0, noise=0.0, shift=0.0), resamples=0).estimates["a"].value
    assert noiseless == pytest.approx(0.235, abs=0.001) and abs(noiseless - true_a) > 0.2
    covered = unidentified = 0
    for seed in range(20):
        a = fit_envelope(quick_design(seed), resamples=100, seed=seed).estimates["a"]
        covered += a.lower <= true_a <= a.upper
        unidentified += a.unidentified.startswith("interval") and "wider than 0.5" in a.unidentified
    assert covered >= 18 and unidentified >= 18, (covered, unidentified)  # measured: 20 and 19 (20 and 20 before)


def test_a_budget_with_an_unbounded_n_opt_is_left_out_of_the_law_and_its_validation(tmp_path):
    """/tmp/user14/t12: 6e20's sizes all sit above the optimum; its vertex fell just inside them, its N_opt
    interval unbounded, yet it entered the law (pulling a up) and the validation as an observation.
    Here 1e21's 5 sizes span 1.0 to 10 times its optimum (1% noise): the same."""
    rng = np.random.default_rng(1)
    frame = pd.concat(
        [
            _runs(rng, budgets=BUDGETS[:3], sizes=6),
            _runs(rng, budgets=BUDGETS[3:4], sizes=5, spread=0.5, centre=3.2),
        ],
        ignore_index=True,
    )
    report = fit_all(_table(frame, tmp_path), [2], resamples=200)
    fit = report.isoflop
    last = fit.profiles[-1]
    assert last.inside_range and last.n_opt_unidentified.startswith("interval unbounded")
    assert fit.diagnostics["budgets_in_law"] == 3 and not isoflop.in_law(last)
    assert [x["budget"] for x in isoflop.left_out_of_law(fit.profiles)] == [1e21]
    assert (
        "has no bounded N_opt interval at the law's fixed 95%, the same whatever --level, --seed and --bootstrap (interval unbounded"
        in isoflop.left_out_of_law(fit.profiles)[0]["why"]
    )
    others = fit.profiles[:3]
    _, a = log_linear_fit(np.log([p.compute for p in others]), np.log([p.n_opt for p in others]))
    assert fit.estimates["a"].value == pytest.approx(a)  # the law through the other three alone
    assert "skipped" in fit.validation and "left out of the law" in fit.validation["skipped"]
    from analysis.figures.allocation import optimal_allocation

    figure = optimal_allocation(report)
    assert (
        "approach 2: parabola minima outside the trained sizes or unbounded (not in its law)"
        in (figure.axes[0].get_legend_handles_labels()[1])
    )
    hollow = [line for line in figure.axes[0].lines if line.get_gid() == "minima:outside"][0]
    assert list(hollow.get_xdata()) == [1e21]


def test_approach1_on_a_pythia_style_ladder_fits_n_opt_through_bracketed_points_and_says_a_is_unidentified():
    """User38: 8 sizes, each stopped at the same 300B tokens, checkpoints as rows. Above the small sizes' last
    compute only the large ones compete, so the envelope's winner there is the smallest size left, not the optimum:
    a = 0.771 [0.463, 0.908] for a true 0.452, headlined. Only 4 of 20 envelope points are bracketed by a smaller and a
    larger size: N_opt(C) goes through them, and a's interval, which now holds the truth, is too wide to be a finding."""
    from analysis.sources.check import table_from_frame

    law = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    sizes, steps = (
        [70e6, 160e6, 410e6, 1e9, 1.4e9, 2.8e9, 6.9e9, 12e9],
        [1000, 5000, 13000, 33000, 71000, 100000, 143000],
    )
    rng = np.random.default_rng(0)
    rows = [
        {"model": f"pythia-{n:.3g}", "params": n, "step": s, "tokens": s * 2.097152e6}
        | {
            "loss": (law["E"] + law["A"] / n ** law["alpha"] + law["B"] / (s * 2.097152e6) ** law["beta"])
            * rng.lognormal(0, 0.002)
        }
        for n in sizes
        for s in steps
    ]
    table = table_from_frame(pd.DataFrame(rows), "pythia")
    assert table.curves is not None and len(table.runs) == 8
    fit = fit_envelope(table, resamples=200)
    a, true_a = fit.estimates["a"], law["beta"] / (law["alpha"] + law["beta"])
    assert fit.diagnostics["bracketed"] == 4 and len(fit.compute) == 20
    assert a.unidentified.startswith("interval") and a.lower <= true_a <= a.upper, a
    assert abs(a.value - true_a) < abs(0.771 - true_a)  # through the bracketed points: 0.568 (0.771 through all)
