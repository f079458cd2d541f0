"""`scaling next` on a hyperparameter sweep, and within the table's own tokens per parameter (tester, last session).

Before, on a table of 5 learning rates per (N, budget) point, `next` proposed points costed as one run each: its
plan, swept as the table was, cost 3.7x --flops; and for a store the sweep file it wrote trained one LR a point.
Now each point costs the K settings the table swept per point (said so), the plan's K runs a point fit --flops,
and a store's sweep file carries the axis (`hydra.sweeper.lr_multipliers`) that `scaling sweep` crosses with every
point. And it proposed 1.67e3 tokens per parameter on a table whose runs span 1.6 to 635: candidates now lie within
the table's own D/N range widened `DN_REACH` either way."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli, run_main

from analysis.cli.next_limits import DN_REACH
from analysis.cli.next_out import counted, render
from analysis.fits import laws
from analysis.synthetic import CHINCHILLA_LAW, lr_sweep_runs

MULTIPLIERS = (0.25, 0.5, 1.0, 2.0, 4.0)  # lr_sweep_runs' default: 5 LRs a point
FLOPS = 1e21
QUICK = ("--refits", 0, "--draws", 192, "--bootstrap", 40)


def skewed_sweep(seed: int = 11) -> pd.DataFrame:
    """5 LRs at each of 5 sizes per budget, from N_opt/10^0.25 to N_opt·10^0.8: runs at 0.52 to 101 tokens per
    parameter. Before, `next --flops 1e21` proposed 359 per parameter at 1e19 FLOPs (3.5x past the table's most)
    and 6 points costed as 2.2e20 FLOPs, 1.1e21 swept as the table was."""
    frames = []
    for i, budget in enumerate([1e17, 1e18, 1e19]):
        n_opt, _ = laws.chinchilla_allocation(budget, *(CHINCHILLA_LAW[k] for k in ("A", "B", "alpha", "beta")))
        sizes = np.geomspace(n_opt / 10**0.25, n_opt * 10**0.8, 5)
        frame = lr_sweep_runs(CHINCHILLA_LAW, [budget], sizes, noise=0.005, seed=seed * 100 + i)
        frames.append(frame.assign(run_id="b" + str(i) + frame["run_id"]))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def proposal(tmp_path_factory):
    path = tmp_path_factory.mktemp("next_sweep") / "lr.csv"
    skewed_sweep().to_csv(path, index=False)
    out = path.with_name("runs.csv")
    proc = run_cli("next", path, "--flops", FLOPS, "--out", out, "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    return path, json.loads(proc.stdout), out


def test_an_lr_sweeps_points_each_cost_its_k_runs_within_the_allowance(proposal):
    path, plan, out = proposal
    assert plan["runs"] and plan["runs_per_point"] == len(MULTIPLIERS)
    assert plan["per_point"] == "each point is 5 runs: the table swept 5 learning rates per point"
    assert plan["flops"] == pytest.approx(5 * sum(run["budget_flops"] for run in plan["runs"]))
    assert plan["flops"] <= FLOPS * (1 + 1e-9)
    assert plan["ladder_extension"]["flops"] == pytest.approx(
        5 * 5 * plan["ladder_extension"]["runs"][0]["budget_flops"]
    )
    text = render(plan)
    assert "  runs per point       each point is 5 runs: the table swept 5 learning rates per point" in text
    k = len(plan["runs"])
    assert f"FLOPs in {k} points of 5 runs each ({5 * k} runs)" in text
    rows = pd.read_csv(out)
    assert list(rows["runs_per_point"]) == [5] * k and len(rows) == k


def test_proposed_runs_stay_within_the_tables_own_tokens_per_parameter(proposal):
    path, plan, _ = proposal
    frame = pd.read_csv(path)
    ratio = frame["tokens"] / frame["params"]
    window = plan["tokens_per_param_window"]
    assert window["table"] == pytest.approx([ratio.min(), ratio.max()])
    assert window["reach"] == DN_REACH and window["allowed"][1] == pytest.approx(ratio.max() * DN_REACH)
    for run in plan["runs"]:
        assert ratio.min() / DN_REACH <= run["tokens_per_param"] <= ratio.max() * DN_REACH, run
    assert "widened 2x either way" in render(plan) and "the law is not fitted beyond its runs" in render(plan)


def test_a_table_without_a_sweep_costs_one_run_a_point(tmp_path):
    one = skewed_sweep().iloc[2 :: len(MULTIPLIERS)]  # each point's own best LR (multiplier 1) alone
    assert len(one) == 15 and (one.groupby(["params", "budget_flops"]).size() == 1).all()
    path = tmp_path / "one.csv"
    one.to_csv(path, index=False)
    proc = run_cli("next", path, "--flops", 1e20, "--json", "--refits", 0, "--draws", 8, "--bootstrap", 20)
    plan = json.loads(proc.stdout)
    assert plan["runs_per_point"] == 1 and plan["per_point"] is None
    assert plan["flops"] == pytest.approx(sum(run["budget_flops"] for run in plan["runs"]))


def lr_store(store, multipliers=(0.5, 1.0, 2.0, 4.0), sizes: int = 5) -> None:
    """A results store of an LR sweep around the quick budgets' optimum: every (budget, shape) trained at each of
    ``multipliers`` × 1e-3 (config.yaml: optim.lr_multiplier, as `hydra.sweeper.lr_multipliers` sets it), its
    sweep launched from the command line (no sweep file of that name): the axis is in the runs' configs only."""
    from synthetic_store import QUICK_BUDGETS, SMALL_LAW, _record

    from scaling.store import atomic_write_json, run_id

    rng, plan = np.random.default_rng(0), []
    for budget in QUICK_BUDGETS:
        n_opt, _ = laws.chinchilla_allocation(budget, *(SMALL_LAW[k] for k in ("A", "B", "alpha", "beta")))
        for k, n in enumerate(np.geomspace(n_opt / 10**0.6, n_opt * 10**0.6, sizes)):
            for m in multipliers:
                rec = _record(SMALL_LAW, budget, f"s{k}", float(np.round(n)), rng, 0.005)
                rec.update(lr=1e-3 * m, val_loss=rec["val_loss"] * (1 + 0.02 * np.log(m) ** 2))
                rec["run_id"] = run_id({"budget": budget, "shape": f"s{k}", "lr_multiplier": m})
                atomic_write_json(store / "runs" / rec["run_id"] / "record.json", rec)
                config = {"budget": budget, "seed": 0, "model": {"name": f"s{k}"}, "optim": {"lr_multiplier": m}}
                (store / "runs" / rec["run_id"] / "config.yaml").write_text(yaml.safe_dump(config))
                plan.append({"run_id": rec["run_id"], "overrides": [f"budget={budget:g}", f"model=s{k}"]})
    atomic_write_json(store / "sweep.json", {"sweep": "by-hand", "runs": plan, "dropped": []})


def test_a_stores_lr_sweep_gets_a_sweep_file_that_sweeps_the_same_lrs_per_point(tmp_path, capsys):
    lr_store(tmp_path / "lrs")  # not "store": a directory of that name beside the file is read as a config group
    out = tmp_path / "next.yaml"
    got = run_main(capsys, "next", tmp_path / "lrs", "--flops", 3e13, "--out", out, "--json", *QUICK, check=True)
    plan = json.loads(got.stdout)
    assert plan["runs"] and plan["runs_per_point"] == 4 and plan["flops"] <= 3e13
    assert "the table swept 4 learning rates per point" in plan["per_point"]
    sweep = yaml.safe_load(out.read_text())
    assert sweep["hydra"]["sweeper"]["lr_multipliers"] == [0.5, 1.0, 2.0, 4.0]
    header = out.read_text().splitlines()
    assert f"{counted(len(plan['runs']), 4)}, {plan['flops']:.4g} FLOPs" in header[0]
    assert (
        "hydra.sweeper.lr_multipliers [0.5, 1.0, 2.0, 4.0] (from its runs' configs) sweeps 4 runs a point" in header[3]
    )
    # launched (planned only), each proposed (budget, shape) is 4 runs, one per multiplier
    run_cli(
        "sweep", out, f"store={tmp_path / 'dry'}", "train.allow_repeat=true", "hydra.sweeper.dry_run=true", check=True
    )
    runs = json.loads((tmp_path / "dry" / "sweep.dry-run.json").read_text())["runs"]
    points: dict = {}
    for run in runs:
        key = " ".join(o for o in run["overrides"] if o.startswith(("budget=", "model=")))
        points.setdefault(key, set()).update(o for o in run["overrides"] if o.startswith("optim.lr_multiplier="))
    assert len(points) == len(plan["runs"]) and len(runs) == 4 * len(plan["runs"])
    assert all(len(multipliers) == 4 for multipliers in points.values())


def test_the_axis_is_what_every_point_shares_and_a_missing_one_is_said(tmp_path):
    from analysis.cli.next_limits import PerPoint
    from analysis.cli.next_settings import swept_axes
    from analysis.cli.next_sweep import axes_said

    lr_store(tmp_path / "store", multipliers=(0.5, 1.0, 2.0), sizes=2)
    extra = next((tmp_path / "store" / "runs").iterdir())  # lr_refine's stage 2: a midpoint at one point only
    config = yaml.safe_load((extra / "config.yaml").read_text())
    (extra.with_name("midpoint") / "config.yaml").parent.mkdir()
    config["optim"]["lr_multiplier"] = 0.7071
    (extra.with_name("midpoint") / "config.yaml").write_text(yaml.safe_dump(config))
    assert swept_axes(str(tmp_path / "store"), {}) == {"lr_multipliers": [0.5, 1.0, 2.0]}
    assert swept_axes(str(tmp_path / "store"), {"lr_grid": [1e-3, 2e-3]}) == {}  # the file has an LR axis
    per = PerPoint(3, "each point is 3 runs: the table swept 3 learning rates per point")
    said = axes_said(per, {}, {}, store=False)
    assert said.startswith(per.note + ", but no sweeper axis") and "set hydra.sweeper.lr_multipliers" in said
