"""`scaling next` on a table that is not a results store: someone else's ladder, N from 2e7 to 7e9 at
1e18-1e21 FLOPs, drawn from Chinchilla's law. Before, it proposed this project's shapes (d448: 3.4e7
parameters at 1e18 FLOPs) and wrote them as a sweep file; now the runs are (C, N, D) in the table's own
terms -- sizes on a log grid near its own, C = 6·N·D, tokens per parameter and a reason each -- and a
sweep file is refused in one line (--out RUNS.csv writes the rows)."""

import json
import math
import re

import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main

from analysis.fits import laws
from analysis.fits.next_runs import GRID_PER_DECADE, ladder_shapes
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs, loss_curves
from scaling.flops import TOKENS_PER_PARAM
from scaling.shapes import CONF_DIR

BUDGETS = [1e18, 1e19, 1e20, 1e21]
FLOPS = 1e22  # the allowance; the target is the default, 10x the largest budget (1e22)
QUICK = ("--bootstrap", 100, "--draws", 192, "--refits", 0)  # no test here reads the expected width


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("next_table") / "ladder.csv"
    isoflop_runs(CHINCHILLA_LAW, BUDGETS, 5, spread_decades=0.6, noise=0.01, seed=1).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def proposal(table):
    out = table.with_name("next.csv")
    proc = run_cli("next", table, "--flops", FLOPS, "--out", out, "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), out


def test_a_foreign_tables_proposals_are_sizes_near_its_own_ladder_with_c_equal_6nd(table, proposal):
    plan, _ = proposal
    n = pd.read_csv(table)["params"]
    assert plan["runs"] and "not this project's shapes" in plan["sizes"]
    for run in plan["runs"]:
        assert run["shape"] is None
        assert n.min() / 10 <= run["params"] <= n.max() * 10**1.5  # near the table's own range (2e7..7e9)
        k = math.log10(run["params"]) * GRID_PER_DECADE
        assert abs(k - round(k)) < 0.01  # on the grid 10^(k/6), to 3 figures
        assert run["budget_flops"] == pytest.approx(6 * run["params"] * run["tokens"], rel=1e-12)
        assert run["tokens_per_param"] == pytest.approx(run["tokens"] / run["params"], rel=1e-12)
        assert run["budget_flops"] in BUDGETS or BUDGETS[-1] < run["budget_flops"] <= FLOPS
        assert "today's N_opt there" in run["reason"] and "pick " in run["reason"]
    assert plan["flops"] <= FLOPS
    assert max(r["params"] for r in plan["runs"]) > max(ladder_shapes().values())  # beyond this project's d768


def test_each_proposed_budget_gets_a_pair_bracketing_the_true_n_opt_at_sane_tokens_per_parameter(proposal):
    """Before, the simulation's taste for leverage bought runs 3-5x off N_opt (1.7 tokens per parameter
    against an optimum of 26-50), several at a budget all on one side of it. Now each budget's runs come
    in pairs around the fitted N_opt's interval there, within 10^0.5 of N_opt: they bracket the truth's
    N_opt, and their tokens per parameter lie within a factor 10 (and the fit's error) of the truth's
    optimum; each reason gives the interval and the run's side of it."""
    plan, _ = proposal
    assert plan["runs"]
    law = {k: CHINCHILLA_LAW[k] for k in ("A", "B", "alpha", "beta")}
    for budget in {run["budget_flops"] for run in plan["runs"]}:
        n_opt, d_opt = laws.chinchilla_allocation(budget, **law)
        at = [run for run in plan["runs"] if run["budget_flops"] == budget]
        assert len(at) % 2 == 0 and min(r["params"] for r in at) < n_opt < max(r["params"] for r in at), (budget, at)
        for run in at:
            assert 1 / 12 <= run["tokens_per_param"] / (d_opt / n_opt) <= 12, (budget, run, d_opt / n_opt)
            why = re.search(
                r"N_opt there \(\S+ \[(\S+), (\S+)\]\), the run (below|above) its interval in a pair", run["reason"]
            )
            lower, upper = float(why[1]), float(why[2])
            assert run["params"] <= lower if why[3] == "below" else run["params"] >= upper, run


def test_brackets_pair_a_run_below_the_interval_with_one_above_it_at_the_same_budget():
    from analysis.fits.next_runs import Candidate, brackets

    pool = [Candidate(f"{n:g}", budget, n) for budget in (1e18, 1e19) for n in (1e7, 3e7, 1e8, 3e8)]
    bounds = {1e18: (2e7, 5e7), 1e19: (3e7, 3e8)}  # at 1e19 the interval's ends are sizes of the pool
    pairs = {(lo.budget, lo.n, hi.n) for lo, hi in brackets(pool, bounds)}
    assert pairs == {(1e18, 1e7, 1e8), (1e18, 1e7, 3e8), (1e19, 1e7, 3e8), (1e19, 3e7, 3e8)}


def test_out_csv_writes_the_proposed_runs_one_row_each(proposal):
    plan, out = proposal
    rows = pd.read_csv(out)
    assert list(rows.columns) == ["budget_flops", "params", "tokens", "tokens_per_param", "reason"]
    want = pd.DataFrame(plan["runs"])[list(rows.columns)]
    pd.testing.assert_frame_equal(rows, want, check_exact=False, rtol=1e-12)


def test_a_target_below_the_fitted_range_is_said_and_too_few_resamples_are_refused(table, capsys):
    # Before: --target-budget 1e15, 1000x below the smallest budget, planned for an N_opt extrapolated downwards
    # and did not say so; --bootstrap 0 (or 5) fitted 20 resamples and did not say so either.
    proc = run_main(
        capsys, "next", table, "--flops", FLOPS, "--target-budget", 1e15, "--bootstrap", 20, "--draws", 8, "--refits", 0
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "  target               below the fitted range: 1e+15 FLOPs is 1e+03x below the smallest fitted" in proc.stdout
    )
    answer = json.loads(
        run_main(
            capsys, "next", table, "--flops", FLOPS, "--bootstrap", 20, "--draws", 8, "--refits", 0, "--json"
        ).stdout
    )
    assert answer["target_below_range"] is None  # the default target, 10x the largest budget
    for k in (0, 5):
        proc = run_main(capsys, "next", table, "--flops", FLOPS, "--bootstrap", k)
        assert_one_line_error(proc, f"--bootstrap {k} is too few", "at least 20")
        assert proc.stdout == ""


def test_a_sweep_file_for_a_foreign_table_is_refused_in_one_line_and_nothing_is_written(table, capsys):
    out = table.with_name("next.yaml")
    proc = run_main(capsys, "next", table, "--flops", FLOPS, "--out", out, *QUICK)
    assert_one_line_error(proc, "not a results store", "no sweep file is written", "--out RUNS.csv", "--ladder-shapes")
    assert not out.exists() and proc.stdout == ""


def test_the_first_lines_say_how_the_rows_were_read_and_what_sizes_are_proposed(table, capsys):
    lines = run_main(capsys, "next", table, "--flops", FLOPS, *QUICK).stdout.splitlines()
    assert lines[1] == "  reading              each row a run: 20 runs"
    assert lines[2].startswith("  proposed sizes       N on a log grid, 6 per decade")
    assert any(line.startswith("  + C = ") and "per parameter)" in line for line in lines)
    assert any(line.startswith("      why: ") for line in lines)


def test_a_table_of_checkpoints_keyed_by_model_and_step_says_it_was_read_as_curves(tmp_path, capsys):
    runs = isoflop_runs(CHINCHILLA_LAW, BUDGETS, 5, spread_decades=0.6, noise=0.01, seed=1)
    curves = loss_curves(runs, CHINCHILLA_LAW, points_per_run=6, noise=0.01, seed=1)
    curves = curves.merge(runs[["run_id", "params"]], on="run_id").rename(columns={"run_id": "model"})
    path = tmp_path / "checkpoints.csv"
    curves[["model", "step", "params", "tokens", "val_loss"]].to_csv(path, index=False)
    proc = run_main(capsys, "next", path, "--flops", FLOPS, *QUICK)
    assert proc.returncode == 0, proc.stderr
    reading = proc.stdout.splitlines()[1]
    assert reading.startswith("  reading              rows are training curves: 120 rows of 20 runs")
    assert "--rows-are-runs reads them so" in reading


def test_a_store_still_gets_this_projects_shapes_and_out_csv_writes_them_as_rows(tmp_path, capsys):
    from synthetic_store import write_store

    write_store(tmp_path / "store", with_failures=False)
    out = tmp_path / "next.csv"
    proc = run_main(capsys, "next", tmp_path / "store", "--flops", 3e13, "--out", out, "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["runs"] and "reading" not in plan and "sizes" not in plan  # a store's output is as it was
    assert all(run["shape"] in ladder_shapes() for run in plan["runs"])
    rows = pd.read_csv(out)
    assert list(rows.columns) == ["shape", "budget_flops", "params", "tokens", "tokens_per_param"]
    assert list(rows["shape"]) == [run["shape"] for run in plan["runs"]]


@pytest.mark.parametrize(
    "source, options, words",
    [
        ("table", ("--flops", 1e10), ("--flops 1e10 is below the cost of a pair of runs", "1e18 FLOPs", "least 2e18")),
        (
            "table",
            ("--flops", FLOPS, "--max-tokens", 10),
            ("--max-tokens 10 is below the fewest tokens any run can have: 3.67e+08", "give at least 3.67e+08"),
        ),
        ("store", ("--flops", 1e11), ("--flops 1e11 is below the cost of one run", "3e11 FLOPs; give at least 3e11")),
    ],
)
def test_limits_no_run_can_meet_are_refused_in_one_line_before_the_fit(
    table, tmp_path, capsys, monkeypatch, source, options, words
):
    """An allowance below the cheapest run (a pair, for a table) at the smallest budget, or a token cap below the
    fewest tokens any run inside the tokens-per-parameter window has there, was refused only after approach 3
    and its bootstrap were fitted (seconds to minutes); now before the fit, which must not run."""
    from synthetic_store import write_store

    def no_fit(*_, **__):
        raise AssertionError("approach 3 was fitted before the options were checked")

    if source == "store":
        write_store(tmp_path / "store", with_failures=False)
    path = table if source == "table" else tmp_path / "store"
    monkeypatch.setattr("analysis.fits.parametric.fit_parametric", no_fit)
    assert_one_line_error(run_main(capsys, "next", path, *options, *QUICK), *words)


def test_a_nominal_columns_budgets_are_placed_at_their_runs_6nd(tmp_path, capsys):
    # review17: labels 1.3x below 6·N·D set the default target at 10x the largest label (7.7e20) and proposed runs
    # at "a budget of the table" 1.3x below that budget's own runs
    runs = isoflop_runs(CHINCHILLA_LAW, BUDGETS, 5, spread_decades=0.6, noise=0.01, seed=1)
    path = tmp_path / "low.csv"
    runs.drop(columns=["flops"]).assign(budget_flops=lambda f: f["budget_flops"] / 1.3).to_csv(path, index=False)
    out = json.loads(
        run_main(
            capsys, "next", path, "--flops", FLOPS, "--json", "--bootstrap", 40, "--draws", 16, "--refits", 0
        ).stdout
    )
    assert out["target_budget"] == pytest.approx(10 * max(BUDGETS))
    assert all(math.isclose(r["budget_flops"], 6 * r["params"] * r["tokens"], rel_tol=1e-6) for r in out["runs"])


def test_a_stores_proposal_sweep_file_names_the_store(tmp_path, capsys):
    # user24: the file's runs went to results/next (no store:), under a header saying they would join the source's
    import yaml
    from synthetic_store import write_store

    write_store(tmp_path / "store", with_failures=False)
    out = tmp_path / "next.yaml"
    run_main(capsys, "next", tmp_path / "store", "--flops", 3e13, "--out", out, *QUICK, check=True)
    assert yaml.safe_load(out.read_text())["store"] == str((tmp_path / "store").resolve())
    assert "no run's config.yaml was found, so its runs' settings are unknown" in out.read_text()  # review18: "none"


def test_a_stores_proposal_carries_the_settings_its_runs_share(tmp_path, capsys):
    # user26: a llama store's sweep file was the bare sweep's: its run trained GPT-2 into the store, and next counted
    # its candidates' parameters as GPT-2's
    import yaml
    from synthetic_store import write_store

    from scaling.shapes import param_counts, shape_for_width

    write_store(tmp_path / "store", with_failures=False)
    for k, run in enumerate(sorted(p for p in (tmp_path / "store" / "runs").iterdir() if p.is_dir())):
        config = {"budget": 1e12, "seed": k % 2, "model": {"name": "d40", "arch": "llama"}}  # a fine/ shape: review18
        config |= {"train": {"evals": 3, "branches": [1e11]}, "optim": {"warmup_steps": 7}}  # a trunk's, not carried
        (run / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "next.yaml"
    got = json.loads(
        run_main(capsys, "next", tmp_path / "store", "--flops", 3e13, "--out", out, "--json", *QUICK).stdout
    )
    sweep = yaml.safe_load(out.read_text())
    assert sweep["model"] == {"arch": "llama"} and sweep["train"] == {"evals": 3} and "optim" not in sweep
    assert "seed" not in sweep  # it varies: an axis
    assert "model.arch=llama, train.evals=3" in out.read_text().splitlines()[2]
    for run in got["runs"]:
        llama = shape_for_width(int(run["shape"][1:]), arch="llama")
        assert run["params"] == pytest.approx(param_counts(llama)["total"])


def test_a_proposal_of_no_runs_is_a_sweep_file_that_launches_nothing(tmp_path):
    # user26: an empty grid let the base sweep file's budgets x models train 3 runs nobody proposed
    from types import SimpleNamespace

    import yaml

    from analysis.cli.next_limits import PerPoint
    from analysis.cli.next_sweep import sweep_yaml

    base = {"defaults": ["config"], "sweep": "tiny", "hydra": {"sweeper": {"budgets": [4e10], "models": ["d32"]}}}
    plan, args = SimpleNamespace(runs=[], flops=0.0), SimpleNamespace(source="t.csv", flops=1e12)
    text = sweep_yaml(base, plan, args, (1e13, "x1 (no runs)"), PerPoint())
    sweeper = yaml.safe_load(text)["hydra"]["sweeper"]
    assert (sweeper["grid"], sweeper["budgets"], sweeper["models"]) == ({}, [], [])
    # launched, it says so and exits 0 (user29: exit 2, "no budgets x models to sweep", broke `next && sweep`)
    (tmp_path / "next.yaml").write_text(text.replace("- config", "- config\n- override hydra/sweeper: scaling"))
    proc = run_cli("sweep", tmp_path / "next.yaml", f"store={tmp_path / 'store'}")
    assert proc.returncode == 0 and "no runs to launch" in proc.stderr and not (tmp_path / "store").exists()
    given = run_cli("sweep", tmp_path / "next.yaml", "hydra.sweeper.budgets=[4e10]", "hydra.sweeper.dry_run=true")
    assert "no runs to launch" not in given.stderr  # the command line's own grid is planned
    shown = run_cli("sweep", tmp_path / "next.yaml", "--cfg", "job")  # review20: --cfg was answered "no runs"
    assert "no runs to launch" not in shown.stderr and "sweep:" in shown.stdout


def test_a_stores_own_sweep_file_kept_outside_sweeps_is_the_proposals_base(tmp_path, capsys):
    # a store swept from /elsewhere/mine.yaml got a bare file: its tokens_per_param window (and settings) were lost
    import yaml
    from synthetic_store import write_store

    write_store(tmp_path / "store", with_failures=False)
    mine = tmp_path / "elsewhere" / "mine.yaml"
    mine.parent.mkdir()
    sweeper = {"budgets": [1e12], "models": ["d32"], "tokens_per_param": [0.5, 400]}
    mine.write_text(
        yaml.safe_dump(
            {
                "defaults": ["config", {"override hydra/sweeper": "scaling"}, "_self_"],
                "sweep": "mine",
                "train": {"evals": 3},
                "hydra": {"sweeper": sweeper},
            }
        )
    )
    plan = json.loads((tmp_path / "store" / "sweep.json").read_text())
    (tmp_path / "store" / "sweep.json").write_text(json.dumps({**plan, "sweep": "mine", "sweep_file": str(mine)}))
    out = tmp_path / "next.yaml"
    run_main(capsys, "next", tmp_path / "store", "--flops", 3e13, "--out", out, *QUICK, check=True)
    proposal = yaml.safe_load(out.read_text())
    assert proposal["hydra"]["sweeper"]["tokens_per_param"] == [0.5, 400] and proposal["train"] == {"evals": 3}
    assert f"The source's sweep file ({mine})" in out.read_text()
    # review20: a file whose grid came from the command line (no hydra: key), or a `scaling train --multirun` sweep
    # (its file the project's config.yaml), crashed with a KeyError
    from analysis.cli.next import tokens_window
    from analysis.cli.next_settings import base_sweep

    for recorded, text in ((mine, "defaults: [config]\nsweep: mine\n"), (CONF_DIR / "config.yaml", None)):
        if text is not None:
            recorded.write_text(text)
        (tmp_path / "store" / "sweep.json").write_text(json.dumps({**plan, "sweep_file": str(recorded)}))
        assert tokens_window(base_sweep(str(tmp_path / "store"), "next")) == tuple(TOKENS_PER_PARAM)
