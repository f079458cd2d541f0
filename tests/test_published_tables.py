"""Tables the way labs publish or export them (round three): a recipe column with blanks, a unit in a
column's name that is wrong, budgets spread around their nominal value, ... Each test failed before
its fix; each output is judged as a researcher would (is a number printed that the data cannot
support?). (~10 s: a few CLI processes.)"""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main

from analysis.published import CHINCHILLA_APPROACH3
from analysis.sources.check import table_from_frame
from analysis.sources.groups import MISSING, split_groups
from analysis.sources.schema import ColumnMap
from analysis.synthetic import isoflop_runs
from scaling.errors import DataError

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def ladder(noise=0.005, seed=1, budgets=BUDGETS, sizes=7) -> pd.DataFrame:
    return isoflop_runs(CHINCHILLA_APPROACH3, budgets, sizes, spread_decades=0.8, noise=noise, seed=seed)


def write(frame: pd.DataFrame, tmp_path, name="runs.csv") -> str:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return str(path)


def with_blank_recipes(blanks=6) -> pd.DataFrame:
    """The ladder as recipe "baseline", and ``blanks`` runs of another recipe whose label was lost."""
    base = ladder()
    lost = base.iloc[:blanks].assign(run_id=lambda f: f["run_id"] + "x", val_loss=lambda f: f["val_loss"] * 0.95)
    return pd.concat([base.assign(recipe="baseline"), lost.assign(recipe=np.nan)], ignore_index=True)


def test_rows_with_no_recipe_are_an_experiment_of_their_own_named_by_their_rows():
    # Before: the blank rows were not counted, so one named recipe passed the guard and the 6 unlabelled
    # runs (another recipe, 5% lower loss) were pooled into "baseline" without a word.
    with pytest.raises(DataError) as err:
        table_from_frame(with_blank_recipes(), "runs.csv")
    assert f"'baseline' (35 runs), '{MISSING}' (6 runs: rows 36, 37, 38, 39, 40, and 1 more)" in str(err.value)
    assert "--where recipe==baseline" in str(err.value)
    groups = dict(split_groups(with_blank_recipes().assign(recipe=lambda f: f["recipe"].fillna(" ")), "recipe", "x"))
    assert list(groups) == ["baseline", MISSING] and len(groups[MISSING]) == 6  # a blank is missing too
    assert len(table_from_frame(with_blank_recipes(), "runs.csv", ColumnMap(where=(_where("recipe==baseline"),))))
    # A column with no value at all names no experiment: nothing to refuse.
    assert len(table_from_frame(ladder().assign(recipe=np.nan), "runs.csv")) == 35


def _where(text):
    from analysis.sources.groups import parse_where

    return parse_where(text)


def raw_tokens_named_in_billions() -> pd.DataFrame:
    """A table whose column is called tokens_B but holds tokens (no budget column to say so)."""
    frame = ladder().drop(columns=["budget_flops", "flops"])
    return frame.rename(columns={"tokens": "tokens_B"})


def test_a_wrong_unit_in_a_name_can_be_switched_off_with_the_option_the_note_names(tmp_path, capsys):
    # Before: with no budget column, tokens_B was always x 1e9 (3e10 tokens per parameter, budgets 1e9x
    # too large) and no option read it as given.
    table = table_from_frame(raw_tokens_named_in_billions(), "runs.csv")
    assert any("--as-given tokens_B" in line for line in table.notes + table.warnings)
    given = table_from_frame(raw_tokens_named_in_billions(), "runs.csv", ColumnMap(as_given=("tokens_B",)))
    np.testing.assert_allclose(np.sort(given.budgets), BUDGETS, rtol=1e-6)
    assert not given.lines()[0]
    path = write(raw_tokens_named_in_billions(), tmp_path)
    for verb in ("fit", "compare"):  # the one option of every verb that reads a table
        assert "--as-given" in run_cli(verb, "--help", check=True).stdout
    fitted = json.loads(
        run_main(capsys, "fit", path, "--as-given", "tokens_B", "--bootstrap", "0", "--json", check=True).stdout
    )
    plain = json.loads(
        run_main(capsys, "fit", write(ladder(), tmp_path, "plain.csv"), "--bootstrap", "0", "--json").stdout
    )
    for key in ("a", "alpha", "beta", "E"):  # the same runs, so the same fit, as the table with tokens named so
        assert fitted[key] == plain[key]
    proc = run_main(capsys, "fit", path, "--as-given", "tokens", "--bootstrap", "0")
    assert_one_line_error(proc, "--as-given 'tokens': no such column", "tokens_B")


def wandb_export() -> pd.DataFrame:
    """A wandb runs-table CSV: Name, State (finished, crashed, failed, running) and summary/config keys."""
    runs = ladder(seed=4)
    frame = pd.DataFrame(
        {
            "Name": [f"iso-{i}" for i in range(len(runs))],
            "State": "finished",
            "config.model.d_model": 256,
            "summary/params": runs["params"],
            "summary/tokens": runs["tokens"],
            "summary/val_loss": runs["val_loss"],
        }
    )
    frame.loc[[3, 10, 17], "State"] = ["crashed", "failed", "running"]
    frame.loc[17, ["summary/tokens", "summary/val_loss"]] *= [0.2, 1.3]  # still running: a fifth of its tokens
    return frame


def test_a_wandb_exports_crashed_failed_and_running_runs_are_not_fitted():
    # Before: only a `status` column was read, so the running run (a fifth of its tokens, loss 30% high)
    # and the crashed and failed ones were fitted as results.
    columns = ColumnMap(n="summary/params", d="summary/tokens", loss="summary/val_loss")
    table = table_from_frame(wandb_export(), "export.csv", columns)
    assert len(table.runs) == 32
    assert any("row4 (crashed), row11 (failed), row18 (running)" in w for w in table.warnings)


def pythia_checkpoints() -> pd.DataFrame:
    """8 sizes trained on one D (300B tokens), 8 checkpoints each as rows keyed by model name and step."""
    from analysis.fits import laws

    rows = []
    for n in (7e7, 1.6e8, 4.1e8, 1e9, 1.4e9, 2.8e9, 6.9e9, 1.2e10):
        for step in (1000, 2000, 4000, 8000, 16000, 33000, 66000, 143000):
            tokens = step * 2.097152e6
            loss = laws.chinchilla_loss(n, tokens, **CHINCHILLA_APPROACH3)
            rows.append({"model": f"pythia-{n:.2g}", "step": step, "tokens": tokens, "params": n, "loss": loss})
    return pd.DataFrame(rows)


def test_a_suites_checkpoints_as_rows_keyed_by_model_and_step_are_curves():
    # Before: with no run_id column each checkpoint was a run: 64 "runs" in 19 budgets spanning up to
    # 100% of C, and approach 2 put parabolas through mid-training checkpoints of different models.
    table = table_from_frame(pythia_checkpoints(), "pythia.csv")
    assert len(table.runs) == 8 and len(table.curves) == 64
    assert set(table.runs["run_id"]) == set(pythia_checkpoints()["model"])
    assert any("rows are training curves" in n and "'model'" in n for n in table.notes)
    assert table.runs["D"].nunique() == 1  # one D: approach 3 cannot be fitted, and the fit says so
    from analysis.fits.fit import fit_all

    report = fit_all(table, (1, 2, 3), resamples=10)
    assert "at least 2 distinct token counts" in report.skipped["3"] and "at least 2 budgets" in report.skipped["2"]
    # Without a step column a repeated model name stays rows (one run per token count: approach 3's grid).
    assert len(table_from_frame(pythia_checkpoints().drop(columns="step"), "grid.csv").runs) == 64


def test_a_law_whose_resamples_all_agree_predicts_no_loss_interval():
    # Before: one run per budget (a suite at one D) gave approach 1 resamples that never vary: its a was
    # unidentified, yet `scaling optimal` printed "predicted loss 2.348 [2.348, 2.348]" and the reason given
    # was "pooling two experiments".
    from analysis.fits.fit import fit_all
    from analysis.fits.saved_law import law_from_fit

    # Since user27, budgets of one run each are drawn over all runs: the resamples vary, a is unidentified by its
    # width, and the loss has an interval that is one (not [2.348, 2.348])
    report = fit_all(table_from_frame(pythia_checkpoints(), "pythia.csv"), (1,), resamples=10)
    envelope = report.fits[0]
    # (since user38 N_opt(C) goes through the bracketed envelope points: 2 of 19 here, so a is unidentified as such)
    assert (
        "bracketed by a smaller and a larger size at the same compute at 2 of 19"
        in envelope.estimates["a"].unidentified
    )
    assert "most budgets hold one run or unit, so they are drawn whole, not within budgets" in envelope.bootstrap.notes
    loss = law_from_fit(report, "fit.json").allocate(1e21).loss
    assert loss.unidentified or (loss.interval is not None and loss.upper > loss.lower)


def test_a_run_exported_twice_once_rounded_is_counted_once():
    # Before: the rounded copy (loss to 4 decimals, tokens to thousands) was no exact duplicate, and curve
    # detection said "rows are runs": 10 runs were counted twice (45 runs) and approach 1's a moved 0.51 -> 0.24.
    runs = ladder(seed=11)
    again = runs.iloc[5:15].assign(val_loss=lambda f: f["val_loss"].round(4), tokens=lambda f: f["tokens"].round(-3))
    table = table_from_frame(pd.concat([runs, again], ignore_index=True), "twice.csv")
    assert len(table.runs) == 35 and table.counts["duplicates"] == 10
    assert any("the same run listed twice: row 36 (run r0005) = row 6 (run r0005)" in w for w in table.warnings)
    seeds = pd.concat([runs, runs.iloc[5:15].assign(val_loss=lambda f: f["val_loss"] * 1.01)], ignore_index=True)
    assert len(table_from_frame(seeds, "seeds.csv").runs) == 45  # a 1% different loss under one id: kept


def test_a_budget_column_named_in_pf_days_is_found_and_scaled():
    # Before: budget_pfdays was not found (budgets clustered), and named with --budget-column its PF-days were
    # the budgets: approach 2's N_opt per "1.16e-2 FLOPs", and `optimal --approach 2` gave N_opt 3.3e18, D 51.
    runs = ladder(seed=13).drop(columns="flops")
    runs = runs.assign(budget_pfdays=runs.pop("budget_flops") / 8.64e19)
    table = table_from_frame(runs, "pf.csv")
    np.testing.assert_allclose(table.budgets, BUDGETS, rtol=1e-9)
    assert any(
        "budget column 'budget_pfdays' is in pfdays" in n and "--as-given budget_pfdays" in n for n in table.lines()[1]
    )
    named = table_from_frame(runs, "pf.csv", ColumnMap(budget="budget_pfdays"))
    np.testing.assert_allclose(named.budgets, BUDGETS, rtol=1e-9)
    given = table_from_frame(runs, "pf.csv", ColumnMap(budget="budget_pfdays", as_given=("budget_pfdays",)))
    assert given.budgets.max() < 2 and any("6·N·D is 8.64e+19x the column" in w for w in given.lines()[0])


@pytest.mark.parametrize("header", ["Budget", "BUDGET", "Budget (FLOPs)", "compute_budget [flops]"])
def test_a_budget_column_with_a_spreadsheets_capitals_or_its_unit_is_found(header):
    # Before (user38): a `Budget` or `Budget (FLOPs)` header was passed over unsaid, and C clustered instead: budgets
    # 1.5x apart with C drifting +-15% ran together (4 budgets for 7, the widest spanning 89% of C, no warning).
    runs = ladder(seed=13).drop(columns="flops")
    runs = runs.rename(columns={"budget_flops": header})
    table = table_from_frame(runs, "b.csv")
    np.testing.assert_allclose(table.budgets, BUDGETS, rtol=1e-9)
    assert any(f"budget column {header!r}" in n for n in table.lines()[1]) and not table.budgets_clustered
    assert not any("x 1 " in n or "is in flops" in n.lower() for n in table.lines()[1])  # FLOPs are no unit to apply


def test_deepseek_budgets_of_m_times_d_warn_that_approach_2_profiles_another_compute():
    """User38: IsoFLOP budgets at fixed C = M·D (M = 72·l·d² + 12·l·d·4096, N non-embedding = 12·l·d²): approach 2
    gave N_opt 6.66e8 [6.24e8, 7.94e8] where approach 3 gave 5.52e8 [5.30e8, 5.86e8] (truth under 6·N·D 5.45e8),
    both headlined, nothing said why. Rounded labels (a budget column within +-2% of 6·N·D) warn nothing."""
    from analysis.fits import laws

    rows, rng = [], np.random.default_rng(0)
    for budget in np.geomspace(1e18, 1e20, 5):
        for d_model in np.geomspace(400, 2600, 7):
            layers = d_model / 64
            n, m = 12 * layers * d_model**2, 72 * layers * d_model**2 + 12 * layers * d_model * 4096
            loss = laws.chinchilla_loss(n, budget / m, 1.69, 406.4, 410.7, 0.34, 0.28) * rng.lognormal(0, 0.003)
            rows.append({"budget": budget, "non_embedding_params": n, "tokens": budget / m, "loss": loss})
    deepseek = table_from_frame(pd.DataFrame(rows), "ds.csv", ColumnMap(n_kind="non_embedding"))
    (drift,) = [w for w in deepseek.lines()[0] if "moves with N" in w]
    assert (
        "from 0.39x" in drift and "to 0.84x" in drift and "approach 2's profiles are at fixed column compute" in drift
    ), drift
    runs = ladder(seed=3)
    rounded = runs.assign(budget_flops=runs["flops"] * rng.uniform(0.98, 1.02, len(runs)))
    assert not [w for w in table_from_frame(rounded, "r.csv").lines()[0] if "moves with N" in w]


def test_published_capitalised_headers_are_read_and_a_compute_column_6x_off_is_named_by_its_factor():
    # Before: Parameters, Tokens, Loss were refused ("no column for N"); and DeepSeek's C = M·D beside
    # M named as N was "differs from 6·N·D by up to 83%", read as rounding.
    runs = ladder(seed=15)
    caps = pd.DataFrame({"Parameters": runs["params"], "Tokens": runs["tokens"], "Loss": runs["val_loss"]})
    table = table_from_frame(caps, "caps.csv")
    assert len(table.runs) == 35 and "N = column 'Parameters' (total)" in " ".join(table.notes)
    m = 6.6 * runs["params"]
    deepseek = pd.DataFrame({"M": m, "D": runs["tokens"], "C": m * runs["tokens"], "bpb": runs["val_loss"]})
    notes = table_from_frame(deepseek, "ds.csv", ColumnMap(n="M", loss="bpb")).notes
    assert any("6·N·D is 6x column 'C'" in n for n in notes)


def test_a_budget_column_holding_each_runs_rounded_c_is_clustered_by_the_one_rule():
    # Before: 6 budgets spread +-3% and printed per run (5.8e18 .. 6.2e18) were 20 budgets of 1 to 3 sizes,
    # and approach 2's a was unidentified (0.099 to 0.68); clustering C gives 6 budgets and a = 0.44.
    rng = np.random.default_rng(7)
    runs = ladder(budgets=[6e18, 1e19, 3e19, 6e19, 1e20, 3e20]).drop(columns=["budget_flops"])
    runs["tokens"] *= np.exp(rng.uniform(np.log(0.97), np.log(1.03), len(runs)))
    runs["budget"] = [float(f"{6 * n * d:.2g}") for n, d in zip(runs["params"], runs["tokens"], strict=True)]
    table = table_from_frame(runs, "jitter.csv")
    assert len(table.budgets) == 6 and any("holds 20 values" in n and "into 6 budgets" in n for n in table.lines()[1])
    np.testing.assert_allclose(table.budgets, [6e18, 1e19, 3e19, 6e19, 1e20, 3e20], rtol=0.03)
    assert len(table_from_frame(runs, "jitter.csv", ColumnMap(budget_tolerance=0)).budgets) == 20
    assert len(table_from_frame(ladder(), "ladder.csv").budgets) == 5  # a budget column of ladders: as given


def test_a_one_size_data_scan_is_refused_in_one_line_naming_each_approach_once():
    # Kaplan's L(D) at one N: no approach can give N_opt(C). Before: "approach 1: approach 1: one model size...".
    from analysis.fits import laws
    from analysis.fits.fit import fit_all

    tokens = np.geomspace(1e8, 1e11, 12)
    scan = pd.DataFrame(
        {"params": 1.5e9, "tokens": tokens, "loss": laws.chinchilla_loss(1.5e9, tokens, **CHINCHILLA_APPROACH3)}
    )
    with pytest.raises(DataError) as err:
        fit_all(table_from_frame(scan, "scan.csv"), (1, 2, 3), resamples=0)
    text = str(err.value)
    assert "approach 1: one model size" in text and "approach 3 needs at least 2 distinct model sizes" in text
    assert all(text.count(f"approach {k}") == 1 for k in (1, 3)) and "\n" not in text


def test_a_group_column_splitting_the_runs_into_two_sweeps_is_warned_about():
    # Before: a wandb Group of muP runs (7 sizes per budget) beside one of SP runs (6 other sizes, 5% lower
    # loss) shared no (N, D) point, so nothing was said and approach 3's E came out 1.79 [0.44, 2.0].
    mup = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.005, seed=41)
    sp = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 6, spread_decades=0.7, noise=0.005, seed=42)
    sp = sp.assign(run_id=sp["run_id"] + "b", val_loss=sp["val_loss"] * 0.95)
    both = pd.concat([mup.assign(Group="muP"), sp.assign(Group="SP")], ignore_index=True)
    warned = [w for w in table_from_frame(both, "groups.csv").warnings if "column 'Group' splits the runs" in w]
    assert len(warned) == 1 and "--group-by Group" in warned[0]
    # A model-name column (one N per name) and one group are no such split.
    names = mup.assign(model=[f"m{n:.2g}" for n in mup["params"]], Group="muP")
    assert not table_from_frame(names, "names.csv").lines()[0]
