"""Approaches 1 and 2 print no confident wrong numbers (helper "appr12", from the user8 review).

Tables drawn from the published Chinchilla law (E = 1.69, true a = 0.4516), as the review's were:
a 5x5 grid of final losses (t06), 4 runs (t10), one run per budget (t05), an IsoFLOP ladder of 4 sizes
(t12), per-run budgets written in the budget column (t13) and a messy ladder whose envelope floor sits
at E = 0 (t01).
"""

import numpy as np
import pandas as pd
import pytest

from analysis.describe.fit import exponent_legend
from analysis.fits import laws
from analysis.fits.bootstrap import AS_A
from analysis.fits.envelope import FLOOR_NAMES, LOSS_NAMES, fit_envelope
from analysis.fits.fit import fit_all, require_headline
from analysis.fits.isoflop import fit_isoflop
from analysis.fits.parametric_form import FLOOR_REASON
from analysis.sources.check import table_from_frame
from analysis.synthetic import CHINCHILLA_LAW as LAW
from analysis.synthetic import isoflop_runs, quick_design
from scaling.cli import main
from scaling.errors import DataError


def _loss(n, d, rng=None, noise=0.01):
    scatter = 1.0 if rng is None else np.exp(noise * rng.standard_normal(np.shape(n)))
    return laws.chinchilla_loss(np.asarray(n, float), np.asarray(d, float), **LAW) * scatter


def _n_opt(c):
    return laws.chinchilla_allocation(c, LAW["A"], LAW["B"], LAW["alpha"], LAW["beta"])[0]


def grid_final_losses() -> pd.DataFrame:
    """t06: 5 sizes x 5 token counts, final losses only, 1% noise."""
    n, d = (a.ravel() for a in np.meshgrid(np.geomspace(5e7, 3e9, 5), np.geomspace(1e9, 2e11, 5)))
    return pd.DataFrame({"params": n, "tokens": d, "val_loss": _loss(n, d, np.random.default_rng(8))})


def one_run_per_budget() -> pd.DataFrame:
    """t05: each budget trained once, at its optimum."""
    c = np.geomspace(1e17, 1e21, 9)
    n = _n_opt(c)
    return pd.DataFrame(
        {"params": n, "tokens": c / (6 * n), "val_loss": _loss(n, c / (6 * n), np.random.default_rng(5))}
    )


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_approach_1_from_unbracketed_final_points_prints_no_loss_law_and_no_coefficients(tmp_path, capsys):
    # Before: t06 printed floor_E 0.9577 [0.6988, 1.245] (truth 1.69), N_coefficient 11.01 [7.927, 44.2]
    # beside an unidentified a, and `optimal --approach 1` predicted 2.347 [2.341, 2.347] at 1e21 (truth 2.329).
    table = table_from_frame(grid_final_losses(), "grid.csv")
    fit = fit_envelope(table, resamples=100, seed=0)
    assert fit.estimates["a"].unidentified.startswith("final points only")
    assert fit.estimates["N_coefficient"].unidentified == fit.estimates["D_coefficient"].unidentified == AS_A
    for name in LOSS_NAMES + FLOOR_NAMES:
        assert fit.estimates[name].unidentified.startswith(f"{AS_A}: N_opt is not bracketed"), name
    # the allocation figure's legend said "N_opt ∝ C^unidentified (final points only ...)"
    assert exponent_legend(fit) == f"approach 1: N_opt ∝ C^a, a unidentified ({fit.estimates['a'].unidentified})"
    path = tmp_path / "grid.csv"
    grid_final_losses().to_csv(path, index=False)
    code, out, _ = _cli(capsys, "fit", path, "--bootstrap", "60", "--out", tmp_path / "fit.json")
    assert code == 0 and "headline: approach 3" in out and "floor_E        unidentified (as the fit's a" in out
    code, out, _ = _cli(capsys, "optimal", "--budget", "1e21", "--law", tmp_path / "fit.json")
    assert code == 0 and "(approach 3)" in out  # the headlined approach
    code, _, err = _cli(capsys, "optimal", "--budget", "1e21", "--law", tmp_path / "fit.json", "--approach", "1")
    assert code == 2 and err.count("\n") == 1 and "not headlined: approach 1 had final points only" in err
    assert "give --approach 3 (the file has a law there)" in err


def test_no_approach_to_headline_exits_as_no_approach_fitted(tmp_path, capsys):
    # Before: t10 (4 runs) printed "headline: approach none" and exited 0, and `optimal` then answered with
    # approach 1's loss law, 2.143 [2.143, 2.149] at 1e21 (truth 2.329); t05 printed "headline: approach 3"
    # though approach 3 had no law, and `optimal` silently used approach 1.
    tiny = pd.DataFrame({"params": [1e8, 3e8, 1e8, 3e8], "tokens": [2e9, 6e9, 6e9, 2e9]})
    tiny["val_loss"] = _loss(tiny["params"], tiny["tokens"])
    for name, frame in (("tiny", tiny), ("kaplan", one_run_per_budget())):
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        report = fit_all(table_from_frame(frame, str(path)), resamples=30, seed=0)  # report and plot show it
        with pytest.raises(DataError, match="^no approach has a law to headline: approach 1 had final"):
            require_headline(report, (1, 2, 3))
        code, out, err = _cli(capsys, "fit", path, "--bootstrap", "30", "--out", tmp_path / f"{name}.json")
        assert code == 2 and out == "" and err.count("error:") == 1, err
        assert not (tmp_path / f"{name}.json").exists()
    assert "; approach 3 has no law (" in err  # one reason per approach
    code, _, err = _cli(capsys, "fit", tmp_path / "tiny.csv", "--approach", "3", "--bootstrap", "30")
    assert code == 2 and err.count("needs at least 6 runs") == 1  # said once
    # asked for alone, approach 1 is described (no headline line: "headline: approach none" before), and
    # `optimal` refuses its law, saying what a law needs (before: loss 2.143 [2.143, 2.149], truth 2.329)
    one = tmp_path / "one.json"
    code, out, _ = _cli(capsys, "fit", tmp_path / "tiny.csv", "--approach", "1", "--bootstrap", "30", "--out", one)
    assert code == 0 and "headline:" not in out and "(not headlined)" in out
    code, out, err = _cli(capsys, "optimal", "--budget", "1e21", "--law", one)
    assert code == 2 and out == "" and err.count("\n") == 1 and "not headlined: approach 1 had final" in err
    assert "a law needs approach 2" in err


def test_approach_2_coefficients_are_unidentified_with_a():
    # Before: t01's approach 2 printed N_coefficient 7.163 [0.001371, 6.084e+09] beside an unidentified a.
    # (seed 6 before budgets with an unbounded N_opt left the law: all four have one there, so no law at all)
    runs = isoflop_runs(LAW, [1e18, 1e19, 1e20, 1e21], 4, spread_decades=0.6, noise=0.02, seed=10)
    fit = fit_isoflop(table_from_frame(runs, "ladder.csv"), resamples=100, seed=0)
    assert fit.estimates["a"].unidentified.startswith("interval")
    assert fit.estimates["N_coefficient"].unidentified == fit.estimates["D_coefficient"].unidentified == AS_A
    clean = fit_isoflop(table_from_frame(isoflop_runs(LAW, [1e18, 1e19, 1e20], 7, seed=0), "c.csv"), resamples=50)
    assert not clean.estimates["N_coefficient"].unidentified  # with a identified, k_N keeps its interval


def test_a_refusal_for_per_run_budgets_says_once_that_budget_column_none_groups_them(tmp_path, capsys):
    # Before: t13's refusal listed 17 budgets and their reasons (twice: as a warning and in the text) and
    # did not repeat the advice of the note above it.
    runs = isoflop_runs(LAW, [1e19, 1e20, 1e21], 6, spread_decades=0.5, noise=0.01, seed=3)
    runs["budget_flops"] = runs["flops"] * np.exp(np.random.default_rng(0).uniform(-0.03, 0.03, len(runs)))
    path = tmp_path / "per_run.csv"
    runs.to_csv(path, index=False)
    code, out, err = _cli(capsys, "fit", path, "--bootstrap", "30", "--budget-tolerance", "0")
    said = [line for line in (out + err).splitlines() if "approach 2 needs" in line]
    assert len(said) == 1 and "--budget-column none groups them so" in said[0], out + err
    assert "3 budgets have 3+ sizes" in said[0] and len(said[0]) < 800


def test_a_floor_on_its_boundary_is_named_in_the_zero_width_reason():
    # Before: t01's envelope floor law, E = 1.5e-14, said "every resample gave 1.491e-14: ... (one run per
    # budget ...; or ... pooling two experiments ...)", neither of which it was.
    rng = np.random.default_rng(8)
    rows = []
    for budget in (6e18, 3e19, 1e20, 3e20, 1e21):
        for n in np.geomspace(_n_opt(budget) / 10**0.8, _n_opt(budget) * 10**0.8, 7):
            n = float(f"{n:.3g}")
            rows.append({"params": n, "tokens": budget / (6 * n), "budget_flops": budget})
    runs = pd.DataFrame(rows)
    runs["val_loss"] = _loss(runs["params"], runs["tokens"], rng, noise=0.02)
    runs.loc[5, "val_loss"] = 9.8  # diverged
    runs.loc[17, "tokens"] /= 2  # stopped at half its tokens
    runs.loc[17, "val_loss"] = _loss(runs.loc[17, "params"], runs.loc[17, "tokens"])
    fit = fit_envelope(table_from_frame(runs, "messy.csv"), resamples=60, seed=0)
    assert fit.loss_law_with_floor.floor < 1e-6
    for name in FLOOR_NAMES:  # since final points are binned by budget, most refits from E ≈ 0 fail instead
        why = fit.estimates[name].unidentified
        assert "on its boundary 0 (the envelope shows no floor)" in why or "from a floor near 0 they do not" in why
        assert "one run per budget" not in why and "pooling" not in why, why


def test_a_table_with_nothing_to_headline_still_gets_its_report(tmp_path, capsys):
    # Before (this session's first rule, in fit_all): `scaling report` of 4 runs said "No scaling law could be
    # fitted" and captioned "approach 1 (not fitted: no fit)" though approach 1 was fitted, not headlined.
    tiny = pd.DataFrame({"params": [1e8, 3e8, 1e8, 3e8], "tokens": [2e9, 6e9, 6e9, 2e9]})
    tiny["val_loss"] = _loss(tiny["params"], tiny["tokens"])
    tiny.to_csv(tmp_path / "tiny.csv", index=False)
    code, _, err = _cli(capsys, "report", tmp_path / "tiny.csv", "--bootstrap", "30", "--out", tmp_path / "r.html")
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "no approach could be fitted" not in html and "not fitted: no fit" not in html
    assert "approach 1 had final points only" in html  # why it is not headlined, said in the report


def test_approach_1_loss_law_at_its_floor_and_too_wide_is_unidentified():
    # Before: on the quick sweep's design the law with a floor printed floor_E 3.979e-13 [2.161e-276, 1.777] (its
    # best E on the bound 0), floor_A 58.99 [54.89, 3.851e+22] and floor_alpha 0.128 [0.1253, 1.974], all as numbers.
    # Now they are judged as approach 3's E, A and α are (`FLOOR_REASON`, `flag_wide_terms`).
    fit = fit_envelope(quick_design(0), resamples=100, seed=0)
    floor_e = fit.estimates["floor_E"]
    assert floor_e.unidentified == FLOOR_REASON and floor_e.lower == 0.0  # its interval reaches the bound: 0
    assert fit.estimates["floor_A"].unidentified.startswith("interval spans 20.8 orders of magnitude, an exponent")
    assert fit.estimates["floor_alpha"].unidentified == "interval 0.13 to 2 is wider than 1: a term ∝ C^-0.13 or ∝ C^-2"
    for name in LOSS_NAMES:  # the law without a floor keeps its intervals
        assert not fit.estimates[name].unidentified, (name, fit.estimates[name])


def test_a_refusal_gives_the_budget_column_advice_only_when_grouping_by_c_changes_the_budgets(tmp_path, capsys):
    # Before: /tmp/user14/t16's refusal (two budgets, one without an upward curve) advised "--budget-column
    # none groups them so", which groups its runs into the same two budgets and refuses the same way.
    rows = []
    for budget, curve in ((1e20, 0.02), (3e20, -0.01)):  # 3e20's loss bends down: no parabola minimum
        for u in np.linspace(-0.5, 0.5, 5):
            n = 7e8 * np.exp(u)
            rows.append(
                {"params": n, "tokens": budget / (6 * n), "budget": budget, "loss": 2.5 + 0.01 * u + curve * u * u}
            )
    path = tmp_path / "same_budgets.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, out, err = _cli(capsys, "fit", path, "--approach", "2", "--bootstrap", "30")
    assert code == 2 and "approach 2 needs" in err and "does not curve upward" in err, out + err
    assert "--budget-column" not in err


def test_approach_1_final_points_are_binned_by_budget_and_a_rising_loss_law_is_unidentified():
    # Before (user15's t4): final points were binned on a 10-per-decade grid of C; runs at 1e21 straddled an edge,
    # and the bin holding only a diverged run (loss 1e6) made it an envelope point: floor_alpha -5.165 [-5.247,
    # -4.84] and floor_E 2.901 (truth 1.69) printed as numbers. Now one bin per budget, and a law whose loss
    # rises with compute (alpha <= 0) is no law.
    runs = isoflop_runs(LAW, [1e18, 1e19, 1e20, 1e21], 7, noise=0.01, seed=0)
    runs["flops"] *= np.where(np.arange(len(runs)) % 2, 1.0004, 0.9996)  # 1e21's runs either side of a grid edge
    assert fit_envelope(table_from_frame(runs, "edge.csv"), resamples=0).diagnostics["envelope_points"] == 4
    runs["val_loss"] *= (runs["flops"] / 1e18) ** 0.08  # the loss rising with compute
    fit = fit_envelope(table_from_frame(runs, "rising.csv"), resamples=100, seed=0)
    assert fit.estimates["loss_alpha"].value < 0 and fit.estimates["floor_alpha"].value < 0
    for name in ("loss_A", "loss_alpha", "floor_E", "floor_A", "floor_alpha"):
        assert (
            "<= 0 at the best fit: the envelope's loss does not fall with compute" in fit.estimates[name].unidentified
        )
