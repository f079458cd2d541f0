"""Approach 3 when the runs contradict its law's form or do not identify it
(`analysis.fits.parametric_form`): an exponent <= 0, at the best fit or in the resamples, or a variable
with fewer than 3 distinct values (in the runs or in a resample), leaves the quantities that depend on
it unidentified and says why. It never prints a wrong number with confidence. Clean tables keep their
numbers exactly."""

import json

import numpy as np
import pandas as pd
import pytest

from analysis.fits.fit import fit_all
from analysis.fits.laws import chinchilla_allocation, chinchilla_loss
from analysis.fits.parametric import fit_parametric
from analysis.sources.check import table_from_frame
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs
from tests.conftest import assert_one_line_error, run_main
from tests.test_outliers import lone_run_ladder, quick_ladder

D_TERM = ("E", "B", "beta", "a", "b", "G")  # what an unidentified data term leaves without a value
WHY = "beta <= 0 at the best fit: the loss does not fall with D over these runs"
TWO_D = "beta, B: only 2 distinct D values (need 3 with E)"


def d_ladder(seed: int, rise: float) -> pd.DataFrame:
    """12 sizes at each of D = 2e10, 4e10 and 8e10 (36 runs) on the Chinchilla law with 1% noise, the
    loss at the k-th D multiplied by ``rise``^k (> 1: more data, higher loss)."""
    rng = np.random.default_rng(seed)
    sizes, ds = np.geomspace(2e7, 2e9, 12), (2e10, 4e10, 8e10)
    frame = pd.DataFrame(
        [{"run_id": f"d{k}n{i:02d}", "N": n, "D": d} for k, d in enumerate(ds) for i, n in enumerate(sizes)]
    )
    frame["loss"] = chinchilla_loss(frame["N"].to_numpy(), frame["D"].to_numpy(), **CHINCHILLA_LAW)
    frame["loss"] *= np.exp(0.01 * rng.standard_normal(len(frame))) * rise ** np.repeat(np.arange(3), 12)
    return frame


def _assert_data_term_withheld(fit, why):
    for name in D_TERM:
        assert np.isnan(fit.estimates[name].value) and fit.estimates[name].unidentified == why, name
        assert name not in fit.bootstrap.samples
    for name in ("A", "alpha"):  # fixed by the sizes at one D: keep their intervals
        e = fit.estimates[name]
        assert e.value > 0 and 0 < e.lower < e.value < e.upper and not e.unidentified, (name, e)
    assert "E, B, beta, a, b, G are unidentified" in fit.convergence["warning"]


@pytest.mark.parametrize("lone, why", [(1.08, TWO_D), (1.5, f"{TWO_D}; {WHY}")])
def test_two_token_counts_leave_the_data_term_unidentified(lone, why):
    """12 sizes at D = 2e10 and one run at D = 2e11: the runs learn E + B/D^beta at two D only, two
    equations for three unknowns. With the lone run's loss x1.08 the fit gave beta = 1.55 [1.51, 1.62]
    for a true 0.28 (a confident wrong interval); now beta, B, E, a, b, G have no value, with the reason
    (and, x1.5, the loss also rising with D). Every refitted resample is counted in the notes."""
    fit = fit_parametric(table_from_frame(lone_run_ladder(0, lone, 1.0), "lone"), resamples=200, seed=0)
    _assert_data_term_withheld(fit, why)
    assert "141 of 141 refitted resamples" in " ".join(fit.bootstrap.notes)
    assert "drew fewer than 3 distinct D values" in " ".join(fit.bootstrap.notes)


@pytest.mark.parametrize("seed", [0, 1])
def test_more_data_with_higher_loss_leaves_the_data_term_unidentified(seed):
    """3 distinct D (identified by design), the loss x1.1 at each larger D: no beta, B, E, a, b or G
    (NaN, with the reason), no samples of them; A and alpha keep their intervals. The resamples all give
    beta <= 0 too, and the notes count them."""
    fit = fit_parametric(table_from_frame(d_ladder(seed, 1.1), "rise"), resamples=200, seed=0)
    _assert_data_term_withheld(fit, WHY)
    assert "200 of 200 refitted resamples gave beta <= 0" in " ".join(fit.bootstrap.notes)
    report = fit_all(table_from_frame(d_ladder(seed, 1.1), "rise"), (3,), resamples=0)
    assert f"outlier residual test not applied: approach 3's law is unidentified ({WHY})" in report.notes


def test_resamples_that_contradict_the_form_widen_nothing_silently_and_flag_the_estimates():
    """The same design with the loss x1.025 at each larger D (about level): the best fit has beta > 0,
    but more resamples than the interval's 2.5% tail give beta <= 0 or B beyond floating point (30 of
    183, measured: B overflows on a flat valley towards large beta). They stay in
    the samples; beta, B, a, b and G keep their values and are unidentified, counted in the notes."""
    fit = fit_parametric(table_from_frame(d_ladder(0, 1.025), "level"), resamples=200, seed=0)
    beta = fit.estimates["beta"]
    count, refitted = (int(x) for x in beta.unidentified.split(" refitted")[0].split(" of "))
    samples_beta, samples_b = (np.array(fit.bootstrap.samples[k], float) for k in ("beta", "B"))
    assert beta.value > 0 and len(samples_beta) == refitted
    assert np.sum((samples_beta <= 0) | ~np.isfinite(samples_b) | (samples_b <= 0)) == count  # kept in the samples
    assert count > 0.025 * refitted and "gave beta <= 0 or B beyond floating point" in beta.unidentified
    assert "distinct" not in beta.unidentified
    for name in ("B", "a", "b", "G"):
        assert fit.estimates[name].unidentified == beta.unidentified and np.isfinite(fit.estimates[name].value)
    assert not fit.estimates["alpha"].unidentified and not fit.estimates["E"].unidentified
    assert any("so beta, B, a, b and G are unidentified" in n for n in fit.bootstrap.notes)


def test_three_token_counts_identify_the_data_term():
    """The same design on the law itself: 3 distinct D and 12 N pass the design rule (nothing withheld); the
    intervals cover the true exponents (alpha 0.34, beta 0.28) and no resample lacks a D value. D spans only 4x:
    beta's interval, [0.052, 1.08], is wider than an exponent's rule allows (`exponent_identification`; it printed
    as identified beside an unidentified a and b), and B, the term at D = 1, is unidentified with it."""
    fit = fit_parametric(table_from_frame(d_ladder(0, 1.0), "clean"), resamples=200, seed=0)
    for name, true in (("alpha", CHINCHILLA_LAW["alpha"]), ("beta", CHINCHILLA_LAW["beta"])):
        e = fit.estimates[name]
        assert e.lower < true < e.upper and (name == "beta") == bool(e.unidentified), (name, e)
    assert fit.estimates["beta"].unidentified.startswith("interval 0.052 to 1.1 is wider than 1")
    assert fit.estimates["B"].unidentified == f"as beta's: {fit.estimates['beta'].unidentified}"
    assert fit.estimates["G"].unidentified == fit.estimates["B"].unidentified  # not "as B's: as beta's: ..."
    for name in ("E", "A", "B"):
        assert np.isfinite(fit.estimates[name].value) and (name == "B") == bool(fit.estimates[name].unidentified)
    assert "warning" not in fit.convergence and not any("distinct" in n for n in fit.bootstrap.notes)


def test_resamples_that_drop_a_token_count_cannot_narrow_the_intervals():
    """3 distinct D, but one run alone at the largest: a resample that leaves it out (83 of 200,
    about 1 − (16/17)^17) has 2 distinct D, where beta sits anywhere on a flat valley (the refit stays
    near its start, the full-sample optimum). Counted as failing identification, like beta <= 0: beta,
    B, E, a, b and G keep their values and are unidentified; A and alpha are not."""
    fit = fit_parametric(table_from_frame(lone_run_ladder(0, 1.0, 1.0, middle=4), "lone"), resamples=200, seed=0)
    why = "83 of 200 refitted resamples drew fewer than 3 distinct D values: more than the intervals' 0.025 tail"
    for name in D_TERM:
        e = fit.estimates[name]
        assert np.isfinite(e.value) and e.unidentified == why, (name, e)
    assert not fit.estimates["alpha"].unidentified and not fit.estimates["A"].unidentified
    assert fit.bootstrap.notes == [f"{why}, so beta, B, E, a, b and G are unidentified"]


# Recorded with the code before this rule (commit 472ecdf), 100 resamples, seed 0: unchanged to 1e-9 until the batched
# refits' optimizer changed (L-BFGS to BFGS, 2026-11-28: 1e-7 apart), now to 1e-5, the fits' convergence tolerance.
BEFORE = {
    "chinchilla": {
        "E": (1.6642135078473268, 1.5676673801183763, 1.8204970159114884),
        "alpha": (0.33008168875821564, 0.3026882816243724, 0.3801056728739249),
        "beta": (0.2818905861462328, 0.25718983172539517, 0.33038675688143315),
        "a": (0.46062640042025815, 0.4319514829983409, 0.4969875382746975),
        "G": (0.935449622215857, 0.1916066959765583, 3.1414425039116836),
    },
    "quick": {
        "E": (1.2204546086403596, 0.4034837085195765, 1.6144998345999315),
        "alpha": (0.3671684187957093, 0.17839711133270297, 0.6256472241257292),
        "beta": (0.2868913708291247, 0.19511742330196832, 0.5776203694653801),
        "a": (0.4386317204940613, 0.3109409458455124, 0.6864982232279813),
        "G": (0.769636071593458, 0.0016082053251060037, 20.675049763815107),
    },
}


@pytest.mark.parametrize("name", BEFORE)
def test_clean_tables_keep_their_numbers(name):
    """A Chinchilla-law IsoFLOP table (4 budgets x 15 sizes, 1% noise) and a quick-sweep-like one (the
    demo's design, 16 runs): nothing contradicts the form, so every value and interval is as before."""
    frame = (
        isoflop_runs(CHINCHILLA_LAW, np.logspace(18, 21, 4), 15, noise=0.01, seed=100)
        if name == "chinchilla"
        else quick_ladder(0)
    )
    fit = fit_parametric(table_from_frame(frame, name), resamples=100, seed=0)
    for key, expected in BEFORE[name].items():
        e = fit.estimates[key]
        assert (e.value, e.lower, e.upper) == pytest.approx(expected, rel=1e-5), key
        assert not e.unidentified
    assert fit.bootstrap.notes == [] and "warning" not in fit.convergence


def test_fit_json_optimal_report_and_plot_say_unidentified(tmp_path, capsys):
    """Two distinct D: `fit --json` and FIT.json hold null for the data term (with the reason); `optimal` (and with
    --inference-tokens) and `compare` refuse the law in one error line; `report` and `plot` draw no
    approach-3 law and print no nan."""
    source = tmp_path / "lone.csv"
    lone_run_ladder(1, 1.08, 1.0).to_csv(source, index=False)  # 2 distinct D
    fit_json = tmp_path / "fit.json"
    proc = run_main(
        capsys, "fit", source, "--approach", "3", "--bootstrap", "100", "--json", "--out", fit_json, check=True
    )
    answer = json.loads(proc.stdout)
    assert answer["beta"] == {"estimate": None, "interval": None, "unidentified": TWO_D}
    assert answer["alpha"]["estimate"] > 0
    saved = json.loads(fit_json.read_text())["parametric"]["estimates"]
    assert all(saved[k]["value"] is None and saved[k]["unidentified"] == TWO_D for k in D_TERM)
    for extra in ((), ("--inference-tokens", "1e12")):
        refused = run_main(capsys, "optimal", "--law", fit_json, "--budget", "1e21", *extra)
        assert_one_line_error(refused, "approach 3's law is unidentified", TWO_D)
    clean = tmp_path / "clean.csv"
    quick_ladder(0).to_csv(clean, index=False)
    compared = run_main(capsys, "compare", clean, source, "--bootstrap", "0")
    assert_one_line_error(compared, "cannot compare", "approach 3's law is unidentified", TWO_D)
    run_main(capsys, "report", source, "--fit", fit_json, "--out", tmp_path / "r" / "r.html", check=True)
    markdown = (tmp_path / "r" / "r.md").read_text()
    assert f"| beta | unidentified ({TWO_D})" in markdown and "L(N, D): approach 3's law is unidentified" in markdown
    assert "nan" not in markdown.lower().replace("nanmedian", "")
    run_main(capsys, "plot", source, "--fit", fit_json, "--out", tmp_path / "figures", check=True)
    captions = (tmp_path / "figures" / "captions.md").read_text()
    said = "approach 3's loss at the compute-optimal N and D (not drawn: no law, a unidentified)"
    assert said in captions and "nan" not in captions.lower()


def test_two_model_sizes_leave_the_size_term_unidentified():
    """Sizes 1e8, 1e8·(1 + 1e-7) and 1e9 at 6 token counts each: the first two are one N (relative
    tolerance 1e-6), so A, alpha (and E, a, b, G) have no value; B and beta, fixed by the 6 D, keep theirs."""
    n = np.repeat([1e8, 1e8 * (1 + 1e-7), 1e9], 6)
    d = np.tile(np.geomspace(2e9, 2e11, 6), 3)
    loss = chinchilla_loss(n, d, **CHINCHILLA_LAW) * np.exp(0.01 * np.random.default_rng(0).standard_normal(18))
    frame = pd.DataFrame({"run_id": [f"r{i:02d}" for i in range(18)], "N": n, "D": d, "loss": loss})
    fit = fit_parametric(table_from_frame(frame, "two sizes"), resamples=0)
    for name in ("E", "A", "alpha", "a", "b", "G"):
        e = fit.estimates[name]
        assert np.isnan(e.value) and e.unidentified == "alpha, A: only 2 distinct N values (need 3 with E)", name
    assert fit.estimates["beta"].value > 0 and np.isfinite(fit.estimates["B"].value)


def test_one_budget_leaves_e_unidentified_and_optimal_says_so_beyond_it(tmp_path, capsys):
    # user21: 9 sizes at one budget (1e20) printed E = 2.612 [2.598, 2.645] for a true 1.69, alpha and beta
    # unidentified beside it, and `optimal --budget 1e21` that same loss as the prediction (truth 2.329)
    from analysis.fits.parametric_form import ONE_BUDGET

    one = isoflop_runs(CHINCHILLA_LAW, [1e20], 9, spread_decades=0.6, noise=0.01, seed=4)
    fit = fit_parametric(table_from_frame(one, "one.csv"), resamples=100, seed=0)
    assert fit.estimates["E"].unidentified == ONE_BUDGET and np.isfinite(fit.estimates["E"].value)
    two = isoflop_runs(CHINCHILLA_LAW, [1e19, 1e20], 9, spread_decades=0.6, noise=0.01, seed=4)
    assert fit_parametric(table_from_frame(two, "two.csv"), resamples=0).estimates["E"].unidentified != ONE_BUDGET
    path, out = tmp_path / "one.csv", tmp_path / "one.json"
    one.to_csv(path, index=False)
    run_main(capsys, "fit", path, "--approach", "3", "--bootstrap", "100", "--out", out, check=True)
    said = run_main(capsys, "optimal", "--law", out, "--budget", "1e21", "--json", check=True).stdout
    assert json.loads(said)["loss"]["unidentified"] == "as the fit's E", said


def kaplan_joint(seed: int) -> pd.DataFrame:
    """Kaplan et al.'s joint law L = ((Nc/N)^(αN/αD) + Dc/D)^αD on an IsoFLOP grid (4 budgets x 7 sizes, 0.5% noise):
    not of approach 3's form."""
    rng, rows = np.random.default_rng(seed), []
    for c in (1e18, 1e19, 1e20, 1e21):
        grid = np.logspace(5, 14, 9001)
        law = ((8.8e13 / grid) ** 0.8 + 5.4e13 / (c / 6 / grid)) ** 0.095
        for n in grid[law.argmin()] * np.logspace(-0.8, 0.8, 7):
            loss = ((8.8e13 / n) ** 0.8 + 5.4e13 / (c / 6 / n)) ** 0.095
            rows.append(
                {"budget": c, "params": n, "tokens": c / 6 / n, "loss": loss * np.exp(0.005 * rng.standard_normal())}
            )
    return pd.DataFrame(rows)


def test_a_law_of_another_form_is_warned_about_by_its_residuals_against_the_parabolas():
    # user23: Kaplan's joint law fitted without a word: residuals 4x the parabolas', the held-out budget missed by 5.6%
    # and optimal's loss intervals at 1e22 missing in 2 of 3 seeds
    misfit = fit_all(table_from_frame(kaplan_joint(0), "kaplan.csv"), (2, 3), resamples=0).parametric.convergence
    assert "the loss does not follow L = E + A/N^α + B/D^β" in misfit.get("misfit", ""), misfit
    for seed in range(3):  # runs drawn from approach 3's own form: no such warning
        runs = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20, 1e21], 7, spread_decades=0.8, noise=0.005, seed=seed)
        assert "misfit" not in fit_all(table_from_frame(runs, "c.csv"), (2, 3), resamples=0).parametric.convergence
    # user37: one run 15% high, flagged by the outlier rule, read as the law's misfit (2.56x; on 3 of 6 such ladders
    # some single run did it): the test compares the runs approach 2's parabolas hold, less the flagged, on both sides
    rng, rows = np.random.default_rng(1), []
    for c in (1e18, 3e18, 1e19, 3e19, 1e20):
        n_opt = chinchilla_allocation(c, *(CHINCHILLA_LAW[k] for k in ("A", "B", "alpha", "beta")))[0]
        for n in n_opt * np.logspace(-0.6, 0.6, 6):
            d = c * rng.uniform(0.75, 0.9) / (6 * n)  # labels 10-25% above 6·N·D
            loss = chinchilla_loss(n, d, **CHINCHILLA_LAW) * np.exp(rng.normal(0, 0.02))
            rows.append({"params": n, "tokens": d, "budget": c, "loss": loss})
    rows[15]["loss"] *= 1.15
    report = fit_all(table_from_frame(pd.DataFrame(rows), "one_high.csv"), (2, 3), resamples=0)
    assert [o.run_id for o in report.outliers] == ["row16"] and "misfit" not in report.parametric.convergence


def test_optimal_from_a_misfit_approach_3_repeats_the_warning(tmp_path, capsys):
    # user25: optimal printed a loss 0.09 nats off at the largest fitted budget, the fit's warning dropped
    fit = tmp_path / "fit.json"
    fit_all(table_from_frame(kaplan_joint(0), "kaplan.csv"), (2, 3), resamples=0).save(fit)
    notes = json.loads(run_main(capsys, "optimal", "--budget", "1e20", "--law", str(fit), "--json").stdout)["notes"]
    (warned,) = [n for n in notes if "the loss does not follow" in n]
    assert warned.startswith("the fit warned: approach 3's residuals") and "--approach 2 allocates" in warned


def one_run_per_budget(seed: int) -> pd.DataFrame:
    """user31's design: 11 budgets from 1e17 to 1e22, one run each within 10^±0.2 of N_opt, 1% noise."""
    law = CHINCHILLA_LAW
    rng = np.random.default_rng(seed)
    g = (law["alpha"] * law["A"] / (law["beta"] * law["B"])) ** (1 / (law["alpha"] + law["beta"]))
    a = law["beta"] / (law["alpha"] + law["beta"])
    rows = []
    for c in np.geomspace(1e17, 1e22, 11):
        n = g * (c / 6) ** a * 10 ** rng.uniform(-0.2, 0.2)
        loss = chinchilla_loss(n, c / 6 / n, **law) * np.exp(0.01 * rng.standard_normal())
        rows.append({"params": n, "tokens": c / 6 / n, "val_loss": loss})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [9, 12])
def test_exponents_fitted_at_e_zero_that_a_floor_fits_as_well_are_unidentified(tmp_path, capsys, seed):
    # user31 (seed 9): E = 0 at the best fit, a = 0.854 [0.828, 0.880] for a true 0.452 (its resamples all stayed in
    # the E = 0 corner), and `optimal --budget 1e21` N_opt 8.95e9 [2.3e9, 1.8e10] at 2 tokens per parameter (truth
    # 1.8e9, ~50); review21 (seed 12): beta = 0.0628 [0.0539, 0.258] for 0.28, the floors that fit as well (0.8 of the
    # lowest loss) lying between the fixed fractions tried
    path = tmp_path / "runs.csv"
    one_run_per_budget(seed).to_csv(path, index=False)
    fit = fit_parametric(table_from_frame(pd.read_csv(path), "runs"), resamples=200, seed=0)
    assert fit.estimates["E"].unidentified.startswith("the best fit puts E at 0")
    for name in ("alpha", "beta", "A", "B", "a", "b", "G"):
        assert "not 0, fits as well (not rejected at 95%)" in fit.estimates[name].unidentified, name
    saved = tmp_path / "fit.json"
    run_main(capsys, "fit", path, "--approach", "3", "--bootstrap", "200", "--out", saved, check=True)
    got = json.loads(run_main(capsys, "optimal", "--law", saved, "--budget", "1e21", "--json", check=True).stdout)
    assert got["N"].get("unidentified"), got["N"]
    # a law without a floor, E = 0 truly, keeps its exponents: the profile rejects every floor held
    no_floor = isoflop_runs({**CHINCHILLA_LAW, "E": 0.0}, [1e18, 1e19, 1e20], 5, noise=0.01, seed=1)
    kept = fit_parametric(table_from_frame(no_floor, "no floor"), resamples=100, seed=0)
    assert kept.estimates["E"].unidentified.startswith("the best fit puts E at 0")
    assert not kept.estimates["a"].unidentified and abs(kept.estimates["a"].value - 0.4516) < 0.02


def test_a_narrow_ladder_reaches_its_optimum_and_no_identified_value_lies_outside_its_interval():
    # user31: 4 budgets x 7 sizes within 10^±0.1 printed A = 8.994 [9.248, 1063] and alpha = 0.0699 [0.0751, 0.404]
    # (`flag_held_floors` then called them unidentified). That best fit at E = 0 was the batched L-BFGS stopping short
    # (objective 1.614e-4): BFGS reaches 1.503e-4 at E = 1.24 (truth 1.69), its values inside their intervals
    runs = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20, 1e21], 7, spread_decades=0.1, noise=0.01, seed=8)
    fit = fit_parametric(table_from_frame(runs, "narrow"), resamples=200, seed=0)
    assert fit.objective < 1.51e-4 and fit.estimates["E"].value == pytest.approx(1.24, abs=0.01)
    noisier = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20, 1e21], 7, spread_decades=0.1, noise=0.02, seed=8)
    at_zero = fit_parametric(table_from_frame(noisier, "narrow"), resamples=200, seed=0)
    assert at_zero.estimates["E"].unidentified.startswith("the best fit puts E at 0")
    for estimate in [*fit.estimates.values(), *at_zero.estimates.values()]:
        if estimate.lower is not None and not estimate.unidentified:
            assert estimate.lower <= estimate.value <= estimate.upper
