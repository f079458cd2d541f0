"""Tables as researchers bring them (issue 12), each with a synthetic truth: nominal budgets whose
6·N·D is off by up to 30%, digitised points with 1-3% jitter and no budget column, a NaN loss among
2,000 rows, a table listed twice, repeated seeds, three experiments in one table; and every bad
value of the new source options as one line. All through the real CLI in a subprocess.
(~30 s: about twenty `scaling fit` processes, approach 2 with 200 resamples.)"""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main

from analysis.fits import laws
from analysis.published import CHINCHILLA_APPROACH3
from analysis.sources.load import load_runs
from analysis.synthetic import isoflop_runs

BUDGETS = np.logspace(18, 21, 7)  # 3.2x apart
LADDER = 1e18 * 1.5 ** np.arange(12)  # 1.5x apart: 6·N·D off by 30% reaches the neighbouring budgets
SIZES = 9


def exponent_a(law: dict) -> float:
    """Approach 2's a of a law L = E + A/N^alpha + B/D^beta: N_opt ~ C^(beta/(alpha+beta))."""
    return law["beta"] / (law["alpha"] + law["beta"])


def covers(estimate: dict, truth: float) -> bool:
    """Whether a `--json` estimate's interval holds the truth."""
    lower, upper = estimate["interval"]
    return lower <= truth <= upper


def write(frame: pd.DataFrame, tmp_path, name="runs.csv") -> str:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return str(path)


def fit_json(*args) -> dict:
    proc = run_cli("fit", *args, "--json", check=True)
    return json.loads(proc.stdout)


def nominal_ladder(seed=1, off=0.3, budgets=LADDER) -> pd.DataFrame:
    """A ladder whose budget column is nominal: each run's tokens are off from C/(6N) by a factor
    log-uniform in [1/(1+off), 1+off] (6·N·D off from the budget by up to 30%), its loss that of the
    tokens it saw. Columns: run_id, budget, params, tokens, val_loss (no flops, no budget_flops)."""
    rng = np.random.default_rng(seed)
    runs = isoflop_runs(CHINCHILLA_APPROACH3, budgets, SIZES, noise=0.005, seed=seed)
    runs["tokens"] = runs["tokens"] * np.exp(rng.uniform(-np.log1p(off), np.log1p(off), len(runs)))
    runs["val_loss"] = laws.chinchilla_loss(runs["params"], runs["tokens"], **CHINCHILLA_APPROACH3) * np.exp(
        0.005 * rng.standard_normal(len(runs))
    )
    return runs.rename(columns={"budget_flops": "budget"})[["run_id", "budget", "params", "tokens", "val_loss"]]


# ---------------------------------------------------------------- the options are discoverable
@pytest.mark.parametrize("verb", ["fit", "plot", "report"])
def test_the_source_options_are_in_help(verb):
    text = run_cli(verb, "--help", check=True).stdout
    for option in ("--budget-column", "--budget-tolerance", "--where", "--strict", "--experiment-column"):
        assert option in text, (verb, option)
    assert "--allow-mixed" in text and "budget_flops, else budget, else compute_budget" in " ".join(text.split())
    if verb == "fit":
        assert "--group-by" in text and "--show-budgets" in text


# ---------------------------------------------------------------- budgets made explicit
def test_a_nominal_budget_column_is_used_and_its_disagreement_with_6nd_quantified(tmp_path, capsys):
    path = write(nominal_ladder(), tmp_path)
    proc = run_main(capsys, "fit", path, "--approach", "2", "--bootstrap", "200", "--json", check=True)
    (note,) = [line for line in proc.stderr.splitlines() if "budget column 'budget'" in line]
    worst, median = (float(x) / 100 for x in re.findall(r"by up to (\d+)% \(median (\d+)%\)", note)[0])
    assert (
        0.2 <= worst <= 0.3
        and 0.05 <= median <= 0.2
        and note.endswith("the column groups the runs, each budget at its runs' 6·N·D")
    )
    got = json.loads(proc.stdout)
    assert len(got["budgets"]) == len(LADDER) == len(got["table"]["budgets"])
    assert covers(got["a"], exponent_a(CHINCHILLA_APPROACH3))
    # the same table clustered from C = 6·N·D instead goes wrong: neighbouring budgets merge, and a
    # comes out far off, its interval missing the truth
    wrong = fit_json(path, "--approach", "2", "--bootstrap", "200", "--budget-column", "none")
    assert len(wrong["table"]["budgets"]) < len(LADDER)
    assert wrong["a"]["interval"][1] < exponent_a(CHINCHILLA_APPROACH3) - 0.05


def test_a_budget_column_can_be_named_and_its_rows_are_listed(tmp_path, capsys):
    frame = nominal_ladder().rename(columns={"budget": "planned"})
    proc = run_main(
        capsys, "fit", write(frame, tmp_path), "--approach", "2", "--bootstrap", "0", "--budget-column", "planned"
    )
    assert proc.returncode == 0 and f"budget column 'planned': {len(LADDER)} budgets" in proc.stderr
    shown = run_main(capsys,
        "fit", write(frame, tmp_path), "--approach", "2", "--bootstrap", "0", "--budget-column", "planned",
        "--show-budgets",
    ).stdout  # fmt: skip
    lines = shown[shown.index("budgets of") :].splitlines()
    assert len(lines) == 2 + len(LADDER) and lines[2].split()[:3] == ["1e+18", str(SIZES), str(SIZES)]
    rows = fit_json(write(frame, tmp_path), "--approach", "2", "--bootstrap", "0", "--budget-column", "planned")
    assert {r["budget"] for r in rows["table"]["rows"]} == set(frame["planned"])


def test_digitised_points_without_a_budget_column_cluster_into_the_right_budgets(tmp_path, capsys):
    rng = np.random.default_rng(3)
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, SIZES, noise=0.005, seed=3)
    jitter = rng.choice([-1, 1], (len(runs), 2)) * rng.uniform(0.01, 0.03, (len(runs), 2))  # 1-3% on N and D
    frame = pd.DataFrame(
        {"N": runs["params"] * (1 + jitter[:, 0]), "D": runs["tokens"] * (1 + jitter[:, 1]), "loss": runs["val_loss"]}
    )
    got = fit_json(write(frame, tmp_path), "--approach", "2", "--bootstrap", "200")
    assert len(got["table"]["budgets"]) == len(BUDGETS) and len(got["budgets"]) == len(BUDGETS)
    assert [b["runs"] for b in got["table"]["budgets"]] == [SIZES] * len(BUDGETS)
    assert covers(got["a"], exponent_a(CHINCHILLA_APPROACH3))
    # a tolerance of 0 makes every distinct C its own budget: the setting is what decides
    split = run_main(
        capsys, "fit", write(frame, tmp_path), "--approach", "2", "--bootstrap", "0", "--budget-tolerance", "0"
    )
    assert split.returncode == 2 and f"{len(frame)} budget(s)" in split.stderr


def test_epochs_release_of_chinchillas_points_is_read_by_its_own_headers(tmp_path, capsys):
    """Epoch's CSV of Chinchilla's points (Besiroglu et al. 2024) names its columns "Model Size", "Training
    Tokens", "Training FLOP" and "loss": read as they are (before: no column for N, name it)."""
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, SIZES, noise=0.005, seed=3)
    frame = pd.DataFrame(
        {
            "Model Size": runs["params"],
            "Training Tokens": runs["tokens"],
            "Training FLOP": 6 * runs["params"] * runs["tokens"],
            "loss": runs["val_loss"],
        }
    )
    got = fit_json(write(frame, tmp_path), "--approach", "2", "--bootstrap", "200")
    assert len(got["table"]["budgets"]) == len(BUDGETS) and covers(got["a"], exponent_a(CHINCHILLA_APPROACH3))
    # a model_size column of labels is not N: the error names --n-column, not the labels' rows (review5)
    labels = frame.rename(columns={"Model Size": "nparams"}).assign(model_size=[f"s{i}" for i in range(len(frame))])
    refused = run_main(capsys, "fit", write(labels, tmp_path), "--bootstrap", "0")
    assert_one_line_error(refused, "has no column for N", "--n-column")


# ---------------------------------------------------------------- bad rows, duplicates, seeds
def test_one_nan_loss_among_2000_rows_is_excluded_and_listed_and_strict_refuses(tmp_path, capsys):
    runs = isoflop_runs(CHINCHILLA_APPROACH3, np.logspace(18, 21, 8), 250, noise=0.005, seed=5)
    runs.loc[16, "val_loss"] = np.nan
    path = write(runs, tmp_path)
    proc = run_main(capsys, "fit", path, "--approach", "2", "--bootstrap", "0", "--json", check=True)
    assert "warning: excluded 1 of 2000 rows whose params/val_loss/tokens is not a finite number > 0: " in proc.stderr
    assert "row 17 (run r0016): val_loss nan" in proc.stderr
    got = json.loads(proc.stdout)
    assert got["runs"] == 1999 and got["table"]["counts"] == {
        "read": 2000,
        "incomplete": 0,
        "curve_rows": 0,
        "excluded": 1,
        "duplicates": 0,
        "reduced": 0,
        "kept": 1999,
    }
    # user28: a run marked failed and one diverged were in no count; every row read is now in one ("done", "ok" and
    # "success" are a run that completed, as "completed" and wandb's "finished" are)
    marked = runs.assign(status=["done", "ok", "success", "COMPLETED"] * 500)
    marked.loc[[3, 40], "status"] = ["failed", "diverged"]
    counts = fit_json(write(marked, tmp_path, "marked.csv"), "--approach", "2", "--bootstrap", "0")["table"]["counts"]
    assert counts["incomplete"] == 2 and counts["excluded"] == 1 and counts["kept"] == 1997
    assert sum(v for k, v in counts.items() if k != "read") == counts["read"] == 2000
    assert abs(got["a"]["estimate"] - exponent_a(CHINCHILLA_APPROACH3)) < 0.02
    assert_one_line_error(
        run_main(capsys, "fit", path, "--strict"), "column 'val_loss', row 17 (run r0016): value nan is not usable"
    )


def test_a_table_listed_twice_counts_its_runs_once(tmp_path, capsys):
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, SIZES, noise=0.01, seed=7)
    once = fit_json(write(runs, tmp_path, "once.csv"), "--approach", "2", "--bootstrap", "200")
    proc = run_main(
        capsys,
        "fit",
        write(pd.concat([runs, runs]), tmp_path, "twice.csv"),
        "--approach",
        "2",
        "--bootstrap",
        "200",
        "--json",
    )
    twice = json.loads(proc.stdout)
    assert f"counted once {len(runs)} exact duplicate rows" in proc.stderr
    assert f"row {len(runs) + 1} (run r0000) = row 1 (run r0000)" in proc.stderr
    assert twice["runs"] == once["runs"] == len(runs) and twice["table"]["counts"]["duplicates"] == len(runs)
    width = {k: f["a"]["interval"][1] - f["a"]["interval"][0] for k, f in (("once", once), ("twice", twice))}
    assert width["twice"] == pytest.approx(width["once"], rel=1e-9)


def test_repeated_seeds_of_one_point_are_kept_and_share_a_unit(tmp_path):
    runs = pd.concat(
        [isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, SIZES, noise=0.01, seed=s).assign(seed=s) for s in range(3)]
    )
    runs["run_id"] = [f"{r}-s{s}" for r, s in zip(runs["run_id"], runs["seed"])]
    table = load_runs(write(runs, tmp_path))
    assert len(table) == 3 * len(BUDGETS) * SIZES and table.counts["duplicates"] == 0
    assert table.runs["unit"].nunique() == len(BUDGETS) * SIZES
    assert (table.runs.groupby("unit")[["N", "D"]].nunique() == 1).all().all()
    assert (table.runs.groupby("unit").size() == 3).all()


# ---------------------------------------------------------------- groups
LAWS = {
    "web": CHINCHILLA_APPROACH3,
    "code": {**CHINCHILLA_APPROACH3, "alpha": 0.30, "beta": 0.30},
    "books": {**CHINCHILLA_APPROACH3, "alpha": 0.40, "beta": 0.25},
}


def three_datasets() -> pd.DataFrame:
    frames = [
        isoflop_runs(law, BUDGETS, SIZES, noise=0.005, seed=i).assign(dataset=name)
        for i, (name, law) in enumerate(LAWS.items())
    ]
    frame = pd.concat(frames, ignore_index=True)
    frame["run_id"] = [f"{d}-{r}" for d, r in zip(frame["dataset"], frame["run_id"])]
    return frame


def test_three_datasets_in_one_table_are_refused_unless_grouped(tmp_path, capsys):
    path = write(three_datasets(), tmp_path)
    n = len(BUDGETS) * SIZES
    for verb, extra in (("fit", []), ("plot", ["--out", str(tmp_path / "figs")])):
        line = assert_one_line_error(
            run_cli(verb, path, *extra), "3 experiments", f"dataset: 'web' ({n} runs), 'code' ({n} runs)", "--group-by dataset"
        )  # fmt: skip
        assert "--allow-mixed" in line
    assert not (tmp_path / "figs").exists()
    got = fit_json(path, "--approach", "2", "--bootstrap", "200", "--group-by", "dataset")
    assert got["group_by"] == "dataset" and [g["source"] for g in got["groups"]] == [
        f"{path} [dataset={name}]" for name in LAWS
    ]
    for name, fit in zip(LAWS, got["groups"]):
        assert fit["runs"] == n
        assert covers(fit["a"], exponent_a(LAWS[name])), name
    one = fit_json(path, "--approach", "2", "--bootstrap", "0", "--where", "dataset==books")
    assert one["runs"] == n and abs(one["a"]["estimate"] - exponent_a(LAWS["books"])) < 0.03
    pooled = run_main(capsys, "fit", path, "--approach", "2", "--bootstrap", "0", "--allow-mixed")
    assert pooled.returncode == 0 and "pooling runs from 3 experiments as asked" in pooled.stderr


def test_an_experiment_column_is_found_in_any_case(tmp_path):
    # user31: `recipe` was refused as two experiments, `Recipe` or `Dataset` only warned of and pooled
    path = write(three_datasets().rename(columns={"dataset": " Dataset"}), tmp_path)
    n = len(BUDGETS) * SIZES
    assert_one_line_error(run_cli("fit", path), "3 experiments", f"Dataset: 'web' ({n} runs)", "--group-by Dataset")
    corpora = write(three_datasets().rename(columns={"dataset": "Corpus"}), tmp_path, "corpora.csv")  # review21
    assert_one_line_error(run_cli("fit", corpora), "3 corpora", f"Corpus: 'web' ({n} runs)", "--allow-mixed-corpora")


def test_group_by_prints_each_group(tmp_path, capsys):
    proc = run_main(
        capsys, "fit", write(three_datasets(), tmp_path), "--approach", "2", "--bootstrap", "0", "--group-by", "dataset"
    )
    assert proc.returncode == 0
    assert [line for line in proc.stdout.splitlines() if line.startswith("==")] == [
        f"== dataset = {name} ==" for name in LAWS
    ]


# ---------------------------------------------------------------- bad option values: one line each
@pytest.mark.parametrize(
    "args, must_contain",
    [
        (
            ["--where", "dataset==web", "--budget-column", "nope"],
            ["--budget-column 'nope'", "no such column", "columns present: run_id"],
        ),
        (["--budget-tolerance", "1.5"], ["--budget-tolerance", "'1.5' is not valid", ">= 0 and < 1"]),
        (["--budget-tolerance", "abc"], ["--budget-tolerance", "'abc' is not valid"]),
        (["--where", "dataset=web"], ["--where", "'dataset=web'", "COLUMN OP VALUE", "==, !=, <=, >=, <, >"]),
        (["--where", "colour==red"], ["--where 'colour==red'", "no column 'colour'", "columns present"]),
        (["--where", "dataset==moon"], ["--where 'dataset==moon' keeps none", "web, code, books"]),
        (["--where", "dataset>3"], ["column 'dataset' is not numeric", "== or !="]),
        (["--group-by", "colour"], ["--group-by 'colour'", "no column 'colour'"]),
        (["--experiment-column", "colour"], ["--experiment-column 'colour'", "no column 'colour'"]),
        (["--group-by", "dataset", "--out", "fit.json"], ["--out saves one fit", "--where dataset==VALUE"]),
    ],
)
def test_bad_source_option_values_are_one_line(tmp_path, args, must_contain):
    path = write(three_datasets(), tmp_path)
    proc = run_cli("fit", path, "--approach", "2", "--bootstrap", "0", *args, cwd=tmp_path)
    assert_one_line_error(proc, *must_contain)
    assert not (tmp_path / "fit.json").exists()


def test_a_named_budget_column_with_a_gap_is_one_line(tmp_path, capsys):
    frame = nominal_ladder()
    frame.loc[4, "budget"] = np.nan
    proc = run_main(capsys, "fit", write(frame, tmp_path), "--budget-column", "budget")
    assert_one_line_error(proc, "--budget-column 'budget', row 5", "finite numbers > 0", "--budget-column none")
    # found by name rather than named, the gap is noted and C is clustered
    quiet = run_main(capsys, "fit", write(frame, tmp_path), "--approach", "2", "--bootstrap", "0")
    assert quiet.returncode == 0 and "column 'budget' has 1 missing budget value(s)" in quiet.stderr


def test_where_reads_counts_as_the_n_column_does():
    # Before (user15): --where params>=50M said "column 'params' is numeric; give a number", though the N column
    # itself reads '50M'; a column of model names '70M', '1.4B' took == and != only.
    from analysis.sources.groups import Where, apply_where

    frame = pd.DataFrame({"params": [3e7, 7e7, 1.4e9], "model": ["30M", "70M", "1.4B"], "loss": [3.5, 3.2, 2.6]})
    assert apply_where(frame, [Where("params", ">=", "50M")], "t.csv", [])["loss"].tolist() == [3.2, 2.6]
    assert apply_where(frame, [Where("model", "<", "1B")], "t.csv", [])["loss"].tolist() == [3.5, 3.2]
    assert apply_where(frame, [Where("model", "==", "70M")], "t.csv", [])["loss"].tolist() == [3.2]
