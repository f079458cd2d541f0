"""A table of runs that repeat their data (a `unique_tokens` column, D > U), as a user brings it: the fits of
L(N, D) warn that they count every token as fresh and name the data-constrained fit; that fit, which uses no
budgets, says nothing of how runs were grouped into them; and `optimal` with its FIT.json but no
--unique-tokens says what is missing. Truth: Muennighoff et al. 2023's law. (~20 s: two small fits.)"""

import json
import shlex

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_main

from analysis.fits import muennighoff as mf
from analysis.sources.check import table_from_frame
from analysis.synthetic import repeated_runs

TRUTH = mf.published_params()
SIZES, UNIQUE = np.geomspace(1e8, 3e9, 5), [1e9, 4e9, 1.6e10]
BUDGET_LINES = ("two budgets run together", "Stopped early", "clustered from C", "budget(s)", "budgets:")
SECTIONS = ("Summary", "Fitted laws", "Compute-optimal allocation")


def table(epochs):
    """A user's table: N, D, U, epochs and the loss, no budget column (runs at many epochs form no budgets)."""
    runs = repeated_runs(TRUTH, SIZES, UNIQUE, epochs, noise=0.01, seed=1)
    return runs[["params", "tokens", "unique_tokens", "epochs", "val_loss"]]


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("repeated")
    table([0.5, 1, 2, 4, 8, 16, 32]).to_csv(tmp / "repeated.csv", index=False)
    return tmp


def test_the_plain_fits_warn_in_one_line_that_runs_repeat_data_and_name_the_data_constrained_fit(repeated, capsys):
    # before: approach 3 gave alpha 0.58 [0.43, 0.73] (truth 0.353) and nothing said D > U
    path = repeated / "repeated.csv"
    proc = run_main(capsys, "fit", path, "--approach", "3", "--bootstrap", "0", check=True)
    (line,) = [x for x in proc.stderr.splitlines() if "repeat their unique tokens" in x]
    assert line.startswith("warning: 75 of 105 runs repeat their unique tokens (D > U), 45 of them for more than 4 ")
    assert "(up to 32)" in line and f"`scaling fit {path} --approach muennighoff --bootstrap 0`" in line, line
    # a table's warnings, as `report`, `plot`, `compare` and `next` read it too
    (first, *_) = table_from_frame(table([0.5, 1, 8]), "t.csv").plain_warnings  # for approaches 1-3 only
    assert first.startswith(
        "15 of 45 runs repeat their unique tokens (D > U), 15 of them for more than 4 epochs (up to 8)"
    )
    # up to 4 epochs (negligible, Muennighoff et al.), or without unique tokens: nothing said
    for quiet in (table([0.5, 1, 2, 4]), table([0.5, 1, 8, 32]).drop(columns=["unique_tokens", "epochs"])):
        assert not any("repeat their unique tokens" in w for w in table_from_frame(quiet, "q.csv").lines()[0])


def test_the_data_constrained_fit_says_nothing_of_budgets_and_optimal_without_u_answers_for_unlimited_data(
    repeated, capsys
):
    path, fit = repeated / "repeated.csv", repeated / "fit.json"
    plain = run_main(capsys, "fit", path, "--approach", "3", "--bootstrap", "0", check=True).stderr
    assert "two budgets run together" in plain and "Stopped early" in plain  # the outlier rule uses budgets
    args = ("--approach", "muennighoff", "--bootstrap", "10", "--out", fit)
    proc = run_main(capsys, "fit", path, *args, check=True)
    said = proc.stderr + proc.stdout
    assert not [x for x in said.splitlines() if any(k in x for k in BUDGET_LINES)], said  # nor "repeat": it fits it
    assert "repeat their unique tokens" not in said
    # its FIT.json without --unique-tokens: the law with unlimited unique data (U → ∞), labelled so; before, "error:
    # fit.json holds no fit", then "give --unique-tokens U"
    fresh = json.loads(run_main(capsys, "optimal", "--budget", "1e21", "--law", fit, "--json", check=True).stdout)
    assert fresh["law"] == f"{fit} (data-constrained fit, unlimited unique data)"
    assert any(note.startswith("unlimited unique data (U → ∞: no token repeats)") for note in fresh["notes"])
    # it is the limit of the law under U: at U = 1e15 (D/U ~ 1e-4) the same N, D and loss, intervals included
    vast = json.loads(
        run_main(capsys, "optimal", "--budget", "1e21", "--law", fit, "--unique-tokens", "1e15", "--json").stdout
    )
    for key in ("N", "D", "loss"):
        assert np.allclose(
            [fresh[key]["estimate"], *fresh[key]["interval"]],
            [vast[key]["estimate"], *vast[key]["interval"]],
            rtol=1e-3,
        )
    limited = json.loads(
        run_main(capsys, "optimal", "--budget", "1e21", "--law", fit, "--unique-tokens", "4e9", "--json").stdout
    )
    assert limited["loss"]["estimate"] > fresh["loss"]["estimate"]  # 4e9 unique tokens repeat 15 times here: they cost
    error = assert_one_line_error(
        run_main(capsys, "optimal", "--budget", "1e21", "--law", fit, "--max-tokens", "1e10"), str(fit)
    )
    assert "give --unique-tokens U" in error, error
    # user17: a FIT.json edited by hand (R_N deleted, R_D = -3) ended `optimal` in a KeyError, or printed a NaN loss
    saved = json.loads(fit.read_text())
    for edit, said in (
        (lambda e: e.pop("R_N"), "estimates lack 'R_N'"),
        (lambda e: e["R_D"].update(value=-3.0), "'R_D' = -3.0 must be > 0"),
    ):
        data = json.loads(json.dumps(saved))
        edit(data["muennighoff"]["estimates"])
        edited = repeated / "edited.json"
        edited.write_text(json.dumps(data))
        args = ("optimal", "--budget", "1e21", "--law", edited, "--unique-tokens", "4e9")
        assert_one_line_error(run_main(capsys, *args), "edited.json", "data-constrained fit", said)


def test_the_warnings_command_keeps_this_commands_options_and_runs_as_printed(repeated, capsys):
    # before: `scaling fit my runs.csv --approach muennighoff`, unquoted, without the column options and --where
    # the rows need (it could not read the table), and with --group-by the group's label as a file name
    path = repeated / "my runs.csv"
    runs = table([0.5, 1, 8, 32]).rename(columns={"params": "P", "tokens": "toks", "unique_tokens": "uniq"})
    other = runs.assign(val_loss=runs["val_loss"] + 0.05)  # another corpus, in the same file
    pd.concat([runs.assign(corpus="a"), other.assign(corpus="b")]).to_csv(path, index=False)
    options = ("--n-col", "P", "--d-column=toks", "--unique", "uniq", "--bootstrap", "0")  # abbreviated, joined
    for how in (("--where", "corpus==b"), ("--group-by", "corpus")):
        said = run_main(capsys, "fit", path, *options, *how, "--approach", "3", check=True).stderr
        commands = [line.split("`")[1] for line in said.splitlines() if "repeat their unique tokens" in line]
        assert commands[-1] == (
            f"scaling fit '{path}' --approach muennighoff --n-column P --d-column toks --unique-column uniq "
            "--bootstrap 0 --where corpus==b"
        ), commands
        fitted = run_main(capsys, *shlex.split(commands[-1])[1:], "--json", check=True)
        assert json.loads(fitted.stdout)["runs"] == len(other)


def test_report_and_plot_show_a_saved_data_constrained_fit_its_law_and_intervals(repeated, capsys, tmp_path):
    # before: the report's "Fitted laws" held no law, "no bootstrap", and "No fitted approach has a law to allocate
    # with (), so none is given."
    from analysis.describe.numbers import interval_text
    from analysis.fits.results import FitReport

    path, fit = repeated / "repeated.csv", tmp_path / "fit.json"
    run_main(capsys, "fit", path, "--approach", "muennighoff", "--bootstrap", "10", "--out", fit, check=True)
    r_d = FitReport.load(fit).muennighoff.estimates["R_D"]
    run_main(capsys, "report", path, "--fit", fit, "--out", tmp_path / "report.html", check=True)
    report = (tmp_path / "report.md").read_text()
    summary, laws, allocation = (report.split(f"## {part}")[1].split("\n## ")[0] for part in SECTIONS)
    assert (
        f"Data-constrained law (Muennighoff et al. 2023), 105 runs, 0.5 to 32 epochs: R*_D = {interval_text(r_d)}"
        in summary
    )
    assert "Estimates with 95% bootstrap percentile intervals" in laws and "### Data-constrained law" in laws
    assert f"| R_D | {interval_text(r_d)} | repetitions after which" in laws and r_d.interval is not None
    assert "--unique-tokens U" in allocation and "()" not in allocation, allocation
    assert "10 bootstrap resamples, seed 0" in report
    assert "repeat their unique tokens" not in report and "clustered from C" not in report  # approaches 1-3's lines
    # `plot` drew the law where it can: loss against epochs
    run_main(capsys, "plot", path, "--fit", fit, "--out", tmp_path / "figures", check=True)
    captions = (tmp_path / "figures" / "captions.md").read_text()
    assert "Grey dashes: the data-constrained law of Muennighoff et al. 2023 fitted to these runs (R*_D = " in captions


def test_a_unique_tokens_value_that_is_no_count_is_named_by_row():
    # user17: U = -5 or "lots" left the run out of the data-constrained fit with only "left out 1 runs"
    runs = table([0.5, 1, 2, 4]).astype({"unique_tokens": object})
    runs.loc[3, "unique_tokens"], runs.loc[7, "unique_tokens"] = -5.0, "lots"
    said = [w for w in table_from_frame(runs, "u.csv").warnings if "column 'unique_tokens'" in w]
    assert len(said) == 1 and "2 values are not a count of unique tokens > 0 (row 4: -5.0, row 8: 'lots')" in said[0]
    assert not [w for w in table_from_frame(table([0.5, 1]), "ok.csv").warnings if "not a count" in w]


def test_unique_tokens_under_other_names_or_as_epochs_are_read():
    # user27: "Unique Tokens", n_unique_tokens were not found; an epochs column beside D (no U) went unseen, so the
    # repeats were never warned about and approaches 1-3 were headlined
    runs = table([0.5, 1, 8])
    for name in ("Unique Tokens", "n_unique_tokens", "num_unique_tokens"):
        read = table_from_frame(runs.rename(columns={"unique_tokens": name}), "t.csv")
        assert np.allclose(read.runs["U"], runs["unique_tokens"]), name
    derived = table_from_frame(runs.drop(columns="unique_tokens"), "t.csv")
    assert np.allclose(derived.runs["U"], runs["unique_tokens"])
    assert "no unique-tokens column: each run's U read as D / 'epochs'" in " ".join(derived.lines()[0])
    assert any("repeat their unique tokens" in w for w in derived.plain_warnings)


def test_an_epochs_column_under_another_name_gives_u():
    # user30: `Epochs` and `num_epochs` were not found (only `epochs`): no run had unique tokens
    from analysis.sources.unique import unique_tokens_of

    frame = pd.DataFrame({"D": [1e9, 4e9], "Num Epochs": [1.0, 4.0]})
    warnings = []
    assert list(unique_tokens_of(frame, None, frame["D"].to_numpy(), warnings)) == [1e9, 1e9]
    assert "U read as D / 'Num Epochs'" in warnings[0]


def test_a_repetition_table_of_two_experiments_is_refused_as_the_other_fits_refuse_it(tmp_path, capsys):
    # user36: `fit --approach muennighoff` pooled a baseline and an ablation (0.1 higher) without a word, and
    # `optimal` then printed 2.528 [2.476, 2.583] for the baseline's true 2.462
    runs = table([0.5, 1, 2, 4, 8, 16])
    both = pd.concat([runs.assign(experiment="main"), runs.assign(experiment="ablation", val_loss=runs.val_loss + 0.1)])
    both.to_csv(tmp_path / "both.csv", index=False)
    args = ("fit", tmp_path / "both.csv", "--approach", "muennighoff", "--bootstrap", "0")
    assert_one_line_error(run_main(capsys, *args), "mixes runs from 2 experiments (experiment: 'main'")
    one = run_main(capsys, *args, "--where", "experiment==main", "--json", check=True)
    assert json.loads(one.stdout)["runs"] == len(runs)
    pooled = run_main(capsys, *args, "--allow-mixed", "--json", check=True)  # said, and pooled
    said = json.loads(pooled.stdout)
    assert said["runs"] == 2 * len(runs) and any(n.startswith("pooling runs from 2 experiments") for n in said["notes"])


def test_repeated_runs_at_one_budget_leave_e_unidentified_as_approach_3_does():
    # user36: 7 sizes at one budget, 0.5 to 64 epochs, printed E = 2.597 [2.52, 2.662] for a true 1.87
    from analysis.fits.muennighoff_fit import fit_muennighoff
    from analysis.fits.parametric_form import ONE_BUDGET

    rows, rng = [], np.random.default_rng(3)
    for n in np.geomspace(3e8, 5e9, 7):
        d = 1e20 / (6 * n)
        for epochs in (0.5, 2, 8, 64):
            loss = mf.loss(n, d, d / epochs, **TRUTH) * np.exp(0.01 * rng.standard_normal())
            rows.append({"params": n, "tokens": d, "unique_tokens": d / epochs, "val_loss": float(loss)})
    fit = fit_muennighoff(table_from_frame(pd.DataFrame(rows), "one.csv"), resamples=40)
    assert fit.estimates["E"].unidentified == ONE_BUDGET
    # review23: one budget by its column, as approach 3 counts budgets, D rounded up 5% a size (C spans 34%)
    labelled = pd.DataFrame(rows).assign(budget_flops=1e20)
    labelled["tokens"] *= 1.05 ** np.repeat(np.arange(7), 4)
    fit = fit_muennighoff(table_from_frame(labelled, "labelled.csv"), resamples=0)
    assert fit.estimates["E"].unidentified == ONE_BUDGET


def test_sizes_at_several_unique_token_counts_are_no_near_duplicates():
    # user36: a budget's sizes at 4 U each (D off by a few % between them) had 73 runs flagged "near duplicate
    # size", and --exclude-outliers kept only the most repeated runs
    from analysis.fits.outliers import near_duplicate_sizes

    runs = table([2]).assign(budget_flops=1e19)  # each size at 3 U, 2 epochs of each: D differs with U
    assert near_duplicate_sizes(table_from_frame(runs, "u.csv")) == []
    twice = runs.assign(tokens=runs.tokens * 1.02)  # the same sizes and U again, D 2% off: those are flagged
    flagged = near_duplicate_sizes(table_from_frame(pd.concat([runs, twice], ignore_index=True), "twice.csv"))
    assert len(flagged) == len(runs)
    # review23: where no run repeats (U = D, an epochs column of 1), U follows D and says nothing: sizes 0.5% apart
    fresh = pd.DataFrame({"params": [1e8, 1.005e8], "tokens": [2e10, 2e10 / 1.005], "val_loss": [3.0, 3.01]})
    for u in ({"unique_tokens": fresh.tokens}, {"epochs": 1.0}):
        assert near_duplicate_sizes(table_from_frame(fresh.assign(budget_flops=1.2e19, **u), "fresh.csv")) == [(1, 0)]


def test_exclude_outliers_with_the_data_constrained_fit_is_one_line(repeated, capsys):
    # user36: accepted, and nothing left out nor said (the outlier rule is approaches 1-3's)
    args = ("fit", repeated / "repeated.csv", "--approach", "muennighoff", "--exclude-outliers")
    assert_one_line_error(run_main(capsys, *args), "--exclude-outliers: the outlier rule is approaches 1-3's")
