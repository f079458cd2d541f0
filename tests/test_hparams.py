"""Hyperparameter sweeps in the analysis: a sweep is one point per (N, D), not independent runs
(`analysis.sources.hparams`); the LR and batch-size laws fitted with intervals (`analysis.fits.hplaws`);
`scaling optimal` recommends them; the LR-sweep figure. All on synthetic tables (no training)."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main

from analysis.describe.hparams import value_text
from analysis.fits.fit import fit_all
from analysis.fits.hplaws import fit_hyperparameter_laws, value_interval
from analysis.fits.results import FitReport
from analysis.report.hparams import hyperparameter_blocks
from analysis.report.sweep import summary_blocks
from analysis.sources.load import load_runs, read_source
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW, SYNTHETIC_LR_LAW, lr_sweep_runs
from scaling import hplaws

BUDGETS = np.geomspace(1e17, 1e19, 5)
SIZES = np.geomspace(1e7, 3e8, 6)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """An LR × batch grid: 5 budgets × 6 sizes × 7 LRs × 4 batch sizes = 840 rows, 30 (N, D) points;
    and the same rows with the hyperparameter columns renamed (read as 840 independent runs)."""
    runs = lr_sweep_runs(
        CHINCHILLA_LAW, BUDGETS, SIZES, lr_multipliers=np.geomspace(1 / 8, 8, 7), batch_sizes=(4, 8, 16, 32), noise=0.01
    )
    folder = tmp_path_factory.mktemp("hp")
    runs.to_csv(folder / "grid.csv", index=False)
    runs.rename(columns={"lr": "eta", "batch_size": "bsz"}).to_csv(folder / "unmarked.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small LR × batch grid for the CLI: 3 budgets × 4 sizes × 5 LRs × 2 batch sizes = 120 rows."""
    runs = lr_sweep_runs(CHINCHILLA_LAW, BUDGETS[::2], SIZES[1:5], batch_sizes=(8, 16), noise=0.005)
    path = tmp_path_factory.mktemp("small") / "small.csv"
    runs.to_csv(path, index=False)
    return path


def test_grid_is_reduced_to_one_point_per_size_and_budget(grid):
    table = load_runs(str(grid / "grid.csv"))
    assert len(table) == 30 and table.hparams.swept == ["lr", "batch_size"]
    assert any("840 runs reduced to 30 runs at 30 (N, budget) points" in note for note in table.notes)
    assert table.runs.groupby(["N", "budget"]).size().max() == 1
    # every point is the lowest-loss run of its (N, budget)
    rows = table.hparams.rows
    assert np.allclose(table.runs.sort_values(["N", "budget"])["loss"], rows.groupby(["N", "budget"])["loss"].min())
    # the unmarked table is read as 840 runs; --hp-columns names its columns
    assert len(load_runs(str(grid / "unmarked.csv"))) == 840
    assert len(load_runs(str(grid / "unmarked.csv"), ColumnMap(hp_columns=("eta", "bsz")))) == 30


def test_approach1_interval_of_a_grid_has_width(grid):
    """The issue: an LR × batch grid read as independent runs gave approach 1 an interval (nearly)
    pinned to its estimate: the envelope found the same best runs in every resample. Reduced to the
    best run per (N, D) it has width; read unmarked, the grid's rows at one (N, D) are one bootstrap
    unit, drawn together, so approach 1 draws exactly what it draws from the reduced table."""
    reduced = fit_all(load_runs(str(grid / "grid.csv")), (1,), resamples=60).envelope.estimates["a"]
    unmarked = fit_all(load_runs(str(grid / "unmarked.csv")), (1,), resamples=60).envelope.estimates["a"]
    width = reduced.upper - reduced.lower
    assert width > 0.1 and reduced.lower < reduced.value < reduced.upper
    assert unmarked.interval == pytest.approx(reduced.interval, rel=1e-9)


def test_recovers_known_lr_law(tmp_path):
    """η*(N, D) = 2·N^-0.5·D^0.1 (N non-embedding) from a loss convex in log LR, within its intervals."""
    runs = lr_sweep_runs(CHINCHILLA_LAW, BUDGETS, SIZES, lr_multipliers=(0.3, 0.55, 1.0, 1.8, 3.3), noise=0.002)
    runs.to_csv(tmp_path / "lr.csv", index=False)
    table = load_runs(str(tmp_path / "lr.csv"), ColumnMap(hp_reduce="interpolate"))
    assert table.hparams.n_hp == "non-embedding" and not table.hparams.optima["edge"].any()
    fit = fit_hyperparameter_laws(table.hparams, resamples=300, seed=0)
    law = fit["laws"]["lr"]
    for key in ("n_exponent", "d_exponent"):
        lo, hi = law[key]["interval"]
        assert lo <= SYNTHETIC_LR_LAW[key] <= hi and abs(law[key]["estimate"] - SYNTHETIC_LR_LAW[key]) < 0.03, law
    # the recommended LR's interval (`scaling optimal`): the law refitted per resample, evaluated where asked, within
    # the grid and 30x beyond its largest size, covers the true η* and widens as the law extrapolates
    widths = []
    for n, d in ((SIZES[2], 1e9), (SIZES[-1] * 30, 1e12)):
        lo, hi = value_interval(fit, "lr", {"N_hp": n, "D": d})
        truth = hplaws.evaluate(SYNTHETIC_LR_LAW, n_non_embedding=n, tokens=d, flops=6 * n * d)
        assert lo < truth < hi, (lo, truth, hi)
        widths.append(hi / lo)
    assert widths[0] < 1.2 < widths[1] < 2, widths
    lo, hi = law["coefficient"]["interval"]
    assert lo <= SYNTHETIC_LR_LAW["coefficient"] <= hi
    # the law evaluates as `scaling.hplaws` evaluates a sweep's LR
    point = table.hparams.optima.iloc[0]
    truth = hplaws.evaluate(SYNTHETIC_LR_LAW, n_non_embedding=point.N_hp, tokens=point.D, flops=point.C)
    assert hplaws.evaluate(law, n_non_embedding=point.N_hp, tokens=point.D, flops=point.C) == pytest.approx(
        truth, rel=0.05
    )


def test_each_size_at_one_budget_of_a_grid_still_fits_the_d_exponent(tmp_path):
    """user17: an IsoFLOP grid whose sizes differ per budget (no size at two budgets) had D's exponent left out
    as "a single D per N", and N's took its share (-0.63 [-0.71, -0.54] for a true -0.713): ln D is not a linear
    function of ln N there, so both exponents are fitted and recovered."""
    parts = [
        lr_sweep_runs(CHINCHILLA_LAW, [c], np.geomspace(1e7, 3e8, 4) * (c / 1e17) ** 0.5, noise=0.002, seed=i)
        for i, c in enumerate(BUDGETS)
    ]
    runs = pd.concat(parts, ignore_index=True).assign(run_id=lambda f: [f"r{i}" for i in range(len(f))])
    runs.to_csv(tmp_path / "grid.csv", index=False)
    table = load_runs(str(tmp_path / "grid.csv"), ColumnMap(hp_reduce="interpolate"))
    assert table.hparams.optima["N"].nunique() == len(table.hparams.optima)  # every size at one budget
    law = fit_hyperparameter_laws(table.hparams, resamples=200, seed=0)["laws"]["lr"]
    for key in ("n_exponent", "d_exponent"):
        lo, hi = law[key]["interval"]
        assert not law[key].get("unidentified") and lo <= SYNTHETIC_LR_LAW[key] <= hi, (key, law[key])


def test_one_budget_leaves_the_d_exponent_unidentified(tmp_path):
    """Every point at one budget (ln D = ln(C/6) - ln N): D's exponent cannot be told from N's."""
    runs = lr_sweep_runs(CHINCHILLA_LAW, [1e18], SIZES)
    runs.to_csv(tmp_path / "one.csv", index=False)
    fit = fit_hyperparameter_laws(load_runs(str(tmp_path / "one.csv")).hparams, resamples=50)
    law = fit["laws"]["lr"]
    assert (
        "ln D a linear function of ln N" in law["d_exponent"]["unidentified"] and law["d_exponent"]["estimate"] == 0.0
    )
    # N's exponent is then η*'s along the budget's line D = C/(6N), a - b (user36: read as N's alone)
    assert law["n_exponent"]["unidentified"].startswith("ln D = -1·ln N + const over the points: ")
    assert "a single C" in fit["deepseek"]["lr"]["c_exponent"]["unidentified"]
    few = lr_sweep_runs(CHINCHILLA_LAW, [1e18], SIZES[:2])
    few.to_csv(tmp_path / "few.csv", index=False)
    fit = fit_hyperparameter_laws(load_runs(str(tmp_path / "few.csv")).hparams, resamples=50)
    assert "points, fewer than" in fit["step_law"]["lr"]["unidentified"] and "lr" not in fit["laws"]


def test_fit_writes_laws_optimal_recommends_plot_draws(small, tmp_path, capsys):
    """`scaling fit --out` writes hyperparameter_laws in `scaling.hplaws`' schema and prints them;
    `scaling optimal` prints LR and batch size from them or from a preset; `scaling plot` draws the
    LR sweep; the report states the laws."""
    out = tmp_path / "fit.json"
    proc = run_main(capsys, "fit", small, "--approach", "2", "--bootstrap", "20", "--out", out, check=True)
    assert "hyperparameter laws (95% intervals)" in proc.stdout and "η* = c·N^a·D^b" in proc.stdout
    assert "120 runs reduced to 12 runs" in proc.stderr
    laws = hplaws.load(str(out))
    assert laws["lr"]["form"] == "step_law" and len(laws["lr"]["n_exponent"]["interval"]) == 2
    assert laws["batch_tokens"]["form"] == "step_law"
    proc = run_main(capsys, "optimal", "--budget", "1e20", "--law", out, "--json", check=True)
    got = json.loads(proc.stdout)
    hp = got["hyperparameters"]
    assert hp["lr"] > 0 and hp["batch_tokens"] > 0 and "fitted" in hp["source"]
    assert hp["lr_interval"][0] < hp["lr"] < hp["lr_interval"][1]
    # user33: laws of non-embedding N (the table's params_non_embedding, 0.8·N) were evaluated at the total N_opt
    assert hp["n_for_laws"] == pytest.approx(0.8 * got["N"]["estimate"], rel=1e-6)
    at = {"n_non_embedding": hp["n_for_laws"], "tokens": got["D"]["estimate"], "flops": 1e20}
    assert hp["lr"] == pytest.approx(hplaws.evaluate(laws["lr"], **at))
    proc = run_main(capsys, "optimal", "--budget", "1e20", "--hp-law", "deepseek", check=True)
    assert "DeepSeek LLM 2024" in proc.stdout and "lr" in proc.stdout
    assert "hyperparameters" not in run_main(capsys, "optimal", "--budget", "1e20", check=True).stdout
    assert_one_line_error(run_main(capsys, "optimal", "--budget", "1e20", "--hp-law", "fit"), "--hp-law fit")
    proc = run_main(capsys, "plot", small, "--fit", out, "--out", tmp_path / "fig", check=True)
    assert (tmp_path / "fig" / "lr_sweep.png").stat().st_size > 10_000
    assert "Loss against learning rate" in (tmp_path / "fig" / "captions.md").read_text()
    summary = summary_blocks(read_source(str(small)), None, [])[1].items
    assert any("120 runs reduced to 12 runs" in item for item in summary)
    blocks = hyperparameter_blocks(FitReport.load(out))
    assert blocks[0].text == "Hyperparameter laws" and [row[:2] for row in blocks[2].rows][:2] == [
        ["lr", "Step Law"],
        ["batch_tokens", "Step Law"],
    ]


def test_bad_hp_options(grid, small):
    proc = run_cli("fit", small, "--hp-columns", "lr,beta3")
    assert_one_line_error(proc, "--hp-columns", "'beta3'")
    proc = run_cli("fit", grid / "unmarked.csv", "--hp-reduce", "interpolate", "--hp-columns", "bsz")
    assert_one_line_error(proc, "--hp-reduce interpolate", "'lr'")
    bad = grid / "text_lr.csv"
    frame = pd.read_csv(grid / "grid.csv")
    frame.assign(lr=frame["lr"].astype(str) + "x").to_csv(bad, index=False)
    assert_one_line_error(run_cli("fit", bad, "--approach", "2"), "column 'lr'", "not numbers > 0")


@pytest.mark.parametrize("batches, at_edge", [((8, 16, 32), False), ((16, 32, 64), True)])
def test_a_batch_optimum_at_the_grids_edge_leaves_the_batch_law_unidentified(tmp_path, batches, at_edge):
    """user17: 11 of 20 best batch sizes at the grid's ends printed b = 0.446 [0.38, 0.51] for a true 0.571, no
    word of the edge. The loss's batch term is least at 16 sequences: (8, 16, 32) brackets it, (16, 32, 64) not."""
    runs = lr_sweep_runs(CHINCHILLA_LAW, BUDGETS[:3], SIZES[:4], batch_sizes=batches, noise=0.001)
    runs.to_csv(tmp_path / "b.csv", index=False)
    sweep = load_runs(str(tmp_path / "b.csv")).hparams
    assert sweep.optima["batch_edge"].all() == at_edge and sweep.optima["batch_edge"].any() == at_edge
    law = fit_hyperparameter_laws(sweep, resamples=50)["step_law"]["batch_tokens"]
    why = law["d_exponent"].get("unidentified", "")
    assert (why == "best batch size at the grid's edge at 12 of 12 points") == at_edge, why
    assert ("12 of 12 points have their best batch size at the grid's edge" in law.get("at_edge", "")) == at_edge
    # user22: a coefficient beside unidentified exponents printed [1.6e-12, inf]; saved as null, it crashed the report
    assert law["coefficient"].get("unidentified", "").startswith("as its exponent") == at_edge
    law["coefficient"] = {"estimate": 0.3, "interval": [1e-12, None]}  # a fit file saved before: an end of null
    assert value_text(law["coefficient"]) == "0.3 [1e-12, unbounded]"
    runs.loc[5, "batch_size"] = None  # review15c: a blank cell made the column text, and "16" > 32.0 raised
    runs.to_csv(tmp_path / "blank.csv", index=False)
    assert load_runs(str(tmp_path / "blank.csv")).hparams.optima["batch_edge"].any() == at_edge


def test_a_batch_sweep_in_tokens_is_fitted_and_one_in_sequences_without_seq_len_says_why(tmp_path):
    """user27: a batch sweep whose table had no seq_len printed the laws' header, no law and no reason, and "η* is the
    optimum interpolated" with no LR swept; one in a batch_tokens column was pooled as seeds of each point."""
    runs = lr_sweep_runs(CHINCHILLA_LAW, BUDGETS[:3], SIZES[:4], batch_sizes=(8, 16, 32), noise=0.001)
    runs = runs[runs["lr"] == runs.groupby(["params", "tokens"])["lr"].transform("min")]  # one LR: a batch sweep
    tokens = runs.assign(batch_tokens=runs["batch_size"] * runs["seq_len"]).drop(columns=["batch_size", "seq_len"])
    for name, frame in (("seq", runs), ("tok", tokens), ("none", runs.drop(columns="seq_len"))):
        frame.drop(columns="lr").to_csv(tmp_path / f"{name}.csv", index=False)
    laws = {
        name: fit_hyperparameter_laws(load_runs(str(tmp_path / f"{name}.csv")).hparams, resamples=50)
        for name in ("seq", "tok", "none")
    }
    assert laws["tok"]["step_law"]["batch_tokens"] == laws["seq"]["step_law"]["batch_tokens"]
    assert "η*" not in " ".join(laws["tok"]["notes"]) and "lr" not in laws["tok"]["step_law"]
    # review19: batch sizes in tokens written as counts ("0.5M") were NaN, and a missing one crashed the reduction
    text = tokens.assign(batch_tokens=(tokens["batch_tokens"] / 1e6).map(lambda v: f"{v:g}M"))
    text.loc[text.index[0], "batch_tokens"] = None
    text.drop(columns="lr").to_csv(tmp_path / "text.csv", index=False)
    counted = load_runs(str(tmp_path / "text.csv")).hparams
    assert counted.batch_swept and counted.optima["batch_tokens"].notna().all()
    (note,) = laws["none"]["notes"]
    assert laws["none"]["step_law"] == {} and note.startswith(
        "no batch-size law: 'batch_size' counts sequences and the table has no 'seq_len' column (tokens per sequence, "
        "or seq_length, sequence_length, context_length"
    )
    assert note.endswith("to make B* a count of tokens; add one, or give the batch size in tokens as 'batch_tokens'")


def test_an_lr_is_not_recommended_at_an_n_opt_that_is_unidentified(tmp_path, capsys):
    # user29: "lr 0.002401" printed (and --json's lr a number) beside an N_opt the output called unidentified
    runs = lr_sweep_runs(CHINCHILLA_LAW, [1e18], SIZES, noise=0.002)  # one budget: a is unidentified
    runs.to_csv(tmp_path / "one.csv", index=False)
    out = tmp_path / "one.json"
    run_main(capsys, "fit", tmp_path / "one.csv", "--bootstrap", "50", "--out", out, check=True)
    proc = run_main(capsys, "optimal", "--budget", "1e20", "--law", out, "--json", check=True)
    got = json.loads(proc.stdout)
    assert got["hyperparameters"]["lr"] is None and "lr_interval" not in got["hyperparameters"]
    text = run_main(capsys, "optimal", "--budget", "1e20", "--law", out, check=True).stdout
    assert "lr                 unidentified (as N_opt and D_opt, where it is evaluated)" in text
    # a published law of C alone (DeepSeek's) needs no N_opt (review19: withheld for that reason)
    deepseek = run_main(capsys, "optimal", "--budget", "1e20", "--law", out, "--hp-law", "deepseek", "--json")
    assert json.loads(deepseek.stdout)["hyperparameters"]["lr"] == pytest.approx(0.3118 * 1e20**-0.125)


def test_next_on_a_sweep_says_its_rows_were_reduced(small, capsys):
    # user30: `next` on an 84-row LR sweep said "each row a run: 12 runs"
    args = ("next", small, "--flops", "1e21", "--json", "--bootstrap", "40", "--draws", "16", "--refits", "0")
    got = json.loads(run_main(capsys, *args, check=True).stdout)
    assert got["reading"].startswith("hyperparameter sweep over lr, batch_size: 120 runs reduced to 12 runs")
