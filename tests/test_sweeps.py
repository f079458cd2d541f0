"""Sweeps end to end, through the real `scaling` CLI (each test in its own temporary store).

- every file in sweeps/ composes and runs in a tiny mode (budgets, shapes and train settings
  overridden to seconds of work), its records landing in the store with D = C / (6N);
- the planned (dry-run) grids of the real sweep files keep the promises in their headers;
- the plain-Hydra forms (`scaling train --multirun --config-name NAME`, `scaling sweep NAME --cfg job`);
- combinations that make no sense are dropped before launch, each listed with its reason; bad sweep
  settings are one `error:` line and exit 2, with nothing written;
- launchers: joblib with 2 workers gives the basic launcher's records (same run ids, same losses up to
  float tolerance), two single-threaded runs at a time; submitit_local never runs more jobs than cores;
- tracking on: one offline wandb run per run dir, grouped by sweep, tagged with sweep, budget, shape and
  the user's tags; `scaling sync` without a login is one line; `scaling status` on a finished sweep.

About 2 minutes on an idle 2-core machine (the joblib comparison ~15 s, submitit_local ~15 s, each
tiny-mode sweep 5-8 s, each dry run or error case 2-4 s).
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, SECONDS_RUNS, assert_one_line_error, run_cli
from conftest import TINY_TRAIN as SHARED_TINY_TRAIN
from omegaconf import OmegaConf

from hydra_plugins.scaling_sweeper.layout import concurrency, launch_chunk_size
from scaling.train_app import compose_config, parse_command_line, run_hydra

SWEEP_NAMES = sorted(p.stem for p in (ROOT / "sweeps").glob("*.yaml"))
CORES = len(os.sched_getaffinity(0))

# Tiny mode: d32 at seq_len 32 has N = 21,984 parameters (vocab 256); 2 x 32 = 64 tokens per step, so
# budget 2e8 buys 24 steps and 4e8 buys 47: well under a second of training each. At these budgets
# D/N is ~0.1, so the sweep files' tokens-per-parameter windows are opened too.
TINY_TRAIN = [*SHARED_TINY_TRAIN, "train.compile=false", "hydra.sweeper.tokens_per_param=[0,1e9]"]
TINY = ["budget=2e8,4e8", "model=d32", *TINY_TRAIN, "tracking=none"]


def nothing_written(store: Path) -> bool:
    """No plan, no run, no store: the directory the CLI made to check it is writable is taken back."""
    return not store.exists()


def records(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]


def manifest(store: Path, filename: str = "sweep.json") -> dict:
    return json.loads((store / filename).read_text())


def sweep(*args, store: Path, check: bool = True, env: dict | None = None):
    return run_cli("sweep", *args, f"store={store}", cwd=store.parent, check=check, env=env)


@pytest.fixture(scope="module")
def tiny_corpora(tmp_path_factory) -> dict[str, Path]:
    """Small inputs for sweeps whose corpus is the user's: a nanoGPT-format directory (uint16
    train.bin / val.bin, byte-valued ids) and a text file, both cut from this repository's source."""
    root = tmp_path_factory.mktemp("corpora")
    text = b"".join(p.read_bytes() for p in sorted((ROOT / "scaling").glob("*.py")))
    ids = np.frombuffer(text, dtype=np.uint8).astype(np.uint16)
    (root / "bin").mkdir()
    ids[:60_000].tofile(root / "bin" / "train.bin")
    ids[60_000:70_000].tofile(root / "bin" / "val.bin")
    (root / "corpus.txt").write_bytes(text)
    return {"bin": root / "bin", "text": root / "corpus.txt"}


def user_inputs(name: str, corpora: dict[str, Path]) -> list[str]:
    """Overrides that supply what a sweep file leaves to its user (data.path for data=bin or text)."""
    data = compose_config([], config_name=name).data
    if data.source not in ("bin", "text") or not OmegaConf.is_missing(data, "path"):
        return []
    return [f"data.path={corpora[data.source]}"] + (["data.vocab_size=256"] if data.source == "bin" else [])


# ---------------------------------------------------------------- every sweep file, tiny mode
@pytest.mark.parametrize("name", SWEEP_NAMES)
def test_every_sweep_file_runs_in_tiny_mode(name, tmp_path, tiny_corpora):
    store = tmp_path / "store"
    cfg = compose_config([], config_name=name, with_hydra=True)
    assert cfg.hydra.sweeper._target_.endswith("ScalingSweeper"), f"{name}: not a scaling sweep"
    assert cfg.sweep == name, f"sweeps/{name}.yaml sets sweep: {cfg.sweep!r}; its store and wandb group take that name"

    # a sweep of learning rates per size: two of them, 1x and 2x the shape's own
    lr_axis = ["hydra.sweeper.lr_multipliers=[1,2]"] if cfg.hydra.sweeper.get("lr_multipliers") else []
    # WSD cooldown branches: the 2e8 run is a branch of the 4e8 trunk, trained in the trunk's job
    branches = ["hydra.sweeper.extra_points_per_decade=0"] if cfg.hydra.sweeper.get("branches") else []
    # the sweep's own axes (`hydra.sweeper.params`, e.g. repeat's unique-token cuts) whole, but a seed
    # axis cut to its first two seeds: the others train the same code (repeat: 20 runs, not 50)
    params = {k: str(v).split(",") for k, v in (cfg.hydra.sweeper.get("params") or {}).items()}
    if len(params.get("seed", [])) > 2:
        params["seed"] = params["seed"][:2]
    seeds = [f"hydra.sweeper.params.seed='{','.join(params['seed'])}'"] if "seed" in params else []
    proc = sweep(name, *TINY, *lr_axis, *branches, *seeds, *user_inputs(name, tiny_corpora), store=store)
    recs = records(store)
    # the final progress line once: the sweeper's, not also the last run's (before: twice, the same)
    finished = [line for line in proc.stdout.splitlines() if re.match(rf"\[{name}\] (\d+)/\1 runs done", line)]
    assert len(finished) == 1, proc.stdout
    # and every value of the sweep's own axes (its seeds: the first two)
    per_budget = (2 if lr_axis else 1) * math.prod(len(v) for v in params.values())
    assert sorted(r["budget_flops"] for r in recs) == [2e8] * per_budget + [4e8] * per_budget
    for key, values in params.items():  # each value trained, as the run's config holds it
        assert sorted({str(OmegaConf.select(OmegaConf.create(r["config"]), key)) for r in recs}) == sorted(values), key
    # the thread layout: runs at once x threads per run fill the cores, never more (CPU sweeps
    # launch through joblib: one single-threaded run per core)
    at_once = concurrency(cfg.hydra.launcher, sum("branch_of" not in r for r in recs))
    assert {r["threads"] for r in recs} == {max(1, CORES // at_once)}
    if name in ("quick", "default"):
        assert "Joblib" in cfg.hydra.launcher._target_ and at_once == min(CORES, 2)
    for r in recs:
        assert r["status"] == "completed" and r["sweep"] == name and r["shape"] == "d32"
        # D = C / (6 N), rounded to whole optimizer steps; the recorded C is 6·N·D of the tokens trained
        tokens_per_step = r["batch_size"] * r["seq_len"]
        assert abs(r["tokens"] - r["budget_flops"] / (6 * r["params"])) <= tokens_per_step / 2
        assert r["flops"] == pytest.approx(6 * r["params"] * r["tokens"])
    table = pd.read_csv(store / "table.csv")
    assert sorted(table.run_id) == sorted(r["run_id"] for r in recs)
    assert len(manifest(store)["runs"]) == 2 * per_budget and manifest(store)["dropped"] == []


# ---------------------------------------------------------------- the real grids (planned, not trained)
def planned(name: str, store: Path, *extra: str) -> pd.DataFrame:
    proc = sweep(name, "hydra.sweeper.dry_run=true", *extra, store=store)
    assert "nothing launched" in proc.stdout and not (store / "runs").exists() and not (store / "sweep.json").exists()
    runs = pd.DataFrame(manifest(store, "sweep.dry-run.json")["runs"])
    assert (runs.flops == 6 * runs.params * runs.tokens).all()  # C = 6·N·D, always
    assert np.allclose(runs.flops, runs.budget_flops, rtol=0.01)  # D = C/(6N) up to whole steps
    return runs


def budgets_and_shapes(runs: pd.DataFrame) -> tuple[list[float], int]:
    budgets = sorted(runs.budget_flops.unique())
    return budgets, runs.groupby("budget_flops").shape.nunique().min()


def test_quick_plans_15_runs_over_a_decade(tmp_path):
    runs = planned("quick", tmp_path / "store")
    budgets, fewest_shapes = budgets_and_shapes(runs)
    assert len(runs) >= 15 and len(budgets) >= 3 and budgets[-1] / budgets[0] >= 10 and fewest_shapes >= 5


def pairs(runs: pd.DataFrame) -> list[tuple[float, str]]:
    return sorted(zip(runs.budget_flops, runs["shape"]))


def test_budgets_and_models_beside_a_grid_cut_it(tmp_path):
    """A mapping can only be added to on the command line; hydra.sweeper.budgets and .models cut a
    sweep file's grid instead (before: models were ignored beside a grid, silently)."""
    runs = planned("quick", tmp_path / "a", "hydra.sweeper.budgets=[1e12,3e12]", "hydra.sweeper.models=[d48,d64,d112]")
    assert pairs(runs) == [(1e12, "d48"), (1e12, "d64"), (3e12, "d112"), (3e12, "d48"), (3e12, "d64")]
    runs = planned("quick", tmp_path / "b", "hydra.sweeper.models=[d16]")  # a row left empty is dropped
    assert pairs(runs) == [(3e11, "d16")]
    # user19: what the cut leaves out of what was asked is named
    cut = ("hydra.sweeper.dry_run=true", "hydra.sweeper.budgets=[3e11,3e12]", "hydra.sweeper.models=[d16]")
    assert (
        "note: budget 3e+12: the grid has none of d16 there; left out"
        in sweep("quick", *cut, store=tmp_path / "n").stderr
    )
    cut = ("hydra.sweeper.dry_run=true", "hydra.sweeper.budgets=[3e11]", "hydra.sweeper.models=[d16,d96]")
    assert (
        "note: model d96: not in the grid at budget(s) 3e+11; left out"
        in sweep("quick", *cut, store=tmp_path / "o").stderr
    )
    # model= replaces the grid, at its budgets unless budgets are given (user19: refused as a bad cut)
    assert pairs(planned("quick", tmp_path / "m", "model=d64")) == [(3e11, "d64"), (1e12, "d64"), (3e12, "d64")]
    assert pairs(planned("quick", tmp_path / "k", "hydra.sweeper.budgets=[1e12]", "model=d64")) == [(1e12, "d64")]
    # a sweep file's own budgets and models yield to a grid given on the command line
    assert pairs(planned("tiny", tmp_path / "t", "+hydra.sweeper.grid={1e11:[d16]}")) == [(1e11, "d16")]
    for bad, names in [
        ("hydra.sweeper.budgets=[2e12]", ["hydra.sweeper.budgets", "2e+12", "3e+11, 1e+12, 3e+12", "budget="]),
        ("hydra.sweeper.models=[d8]", ["hydra.sweeper.models", "d8", "d112", "model="]),
    ]:
        assert_one_line_error(sweep("quick", bad, store=tmp_path / "c", check=False), *names)
        assert nothing_written(tmp_path / "c")


def test_a_budget_keeps_every_digit_in_its_run(tmp_path):
    # user19: 1.2345678e11 was planned as 1.23457e+11 (a run id other than `scaling train`'s), 1.2345699e11 merged into it
    runs = planned(
        "tiny", tmp_path / "s", "hydra.sweeper.budgets=[1.2345678e11,1.2345699e11]", "hydra.sweeper.models=[d16]"
    )
    assert sorted(runs.budget_flops) == [1.2345678e11, 1.2345699e11]
    assert "budget=1.2345678e+11" in manifest(tmp_path / "s", "sweep.dry-run.json")["runs"][0]["overrides"]


def test_default_plans_4_budgets_over_30x_within_the_corpus(tmp_path):
    runs = planned("default", tmp_path / "store")
    budgets, fewest_shapes = budgets_and_shapes(runs)
    assert len(budgets) >= 4 and budgets[-1] / budgets[0] >= 30 and fewest_shapes >= 5
    assert manifest(tmp_path / "store", "sweep.dry-run.json")["dropped"] == [], "every run fits the corpus once"


def test_gpu_plans_1e15_to_1e18_with_shapes_up_to_about_1e8(tmp_path, tiny_corpora):
    # The real vocabulary (50,304) sets the parameter counts; the tiny corpus is repeated so that the
    # plan is complete (a real run needs the user's corpus, see the next test).
    runs = planned("gpu", tmp_path / "store", f"data.path={tiny_corpora['bin']}", "train.allow_repeat=true")
    budgets, fewest_shapes = budgets_and_shapes(runs)
    assert budgets[0] == 1e15 and budgets[-1] == 1e18 and fewest_shapes >= 4
    assert 5e7 < runs.params.max() < 1.5e8
    assert (runs.tokens / runs.params).between(1, 300).all()


def test_gpu_sweep_on_a_small_corpus_drops_every_run_with_its_reason(tmp_path, tiny_corpora):
    proc = sweep("gpu", f"data.path={tiny_corpora['bin']}", store=tmp_path / "store", check=False)
    assert_one_line_error(proc, "all 21 combinations were dropped")
    dropped = [line for line in proc.stderr.splitlines() if line.startswith("  dropped ")]
    assert len(dropped) == 21 and all("tokens but the corpus's training split holds 60,000" in d for d in dropped)
    assert nothing_written(tmp_path / "store")


# ---------------------------------------------------------------- plain Hydra forms
def test_plain_hydra_multirun_of_a_sweep_file_drops_and_lists_what_makes_no_sense(tmp_path):
    # d48 at seq_len 32 has N = 70,464: budget 2e8 buys it 7 steps, fewer than train.min_steps = 10
    store = tmp_path / "store"
    proc = run_cli(
        "train",
        "--multirun",
        "--config-name",
        "quick",
        f"store={store}",
        "budget=2e8",
        "model=d32,d48",
        *TINY_TRAIN,
        "tracking=none",
        cwd=tmp_path,
        check=True,
    )
    assert "1 runs planned" in proc.stdout and "1 dropped" in proc.stdout
    assert "dropped budget=2e+08 model=d48" in proc.stdout and "only 7 optimizer steps" in proc.stdout
    (dropped,) = manifest(store)["dropped"]
    assert dropped["overrides"][:2] == ["budget=2e+08", "model=d48"] and "train.min_steps is 10" in dropped["reason"]
    (rec,) = records(store)
    assert rec["sweep"] == "quick" and rec["shape"] == "d32" and rec["status"] == "completed"


def test_cfg_job_prints_the_sweep_config_and_launches_nothing(tmp_path):
    store = tmp_path / "store"
    job = OmegaConf.create(sweep("quick", "--cfg", "job", store=store).stdout)
    assert job.sweep == "quick" and job.train.batch_size == 8 and job.store == str(store)
    hydra = OmegaConf.create(sweep("quick", "--cfg", "hydra", store=store).stdout).hydra
    assert hydra.sweeper._target_.endswith("ScalingSweeper") and len(hydra.sweeper.grid) == 3
    assert not store.exists()
    proc = run_cli("train", "--multirun", "--config-name", "quick", "--cfg", "job", cwd=tmp_path)
    assert_one_line_error(proc, "--cfg", "--multirun")


@pytest.mark.parametrize(
    "args, names",
    [
        (["hydra.sweeper.budgets=[abc]"], ["hydra.sweeper.budgets", "abc"]),
        (["hydra.sweeper.budgets=[-1e12]"], ["hydra.sweeper.budgets", "-1000000000000.0", "positive"]),
        (["hydra.sweeper.models=[d33]"], ["model/d33", "d32"]),
        (["hydra.sweeper.tokens_per_param=[5,1]"], ["hydra.sweeper.tokens_per_param", "[5.0, 1.0]"]),
        (["hydra/launcher=nope"], ["hydra/launcher/nope", "joblib"]),
        (["hydra.sweeper.budgets=[1e3]"], ["all 2 combinations were dropped", "train.min_steps"]),
        (["hydra/launcher=joblib", "hydra.launcher.n_jobs=0"], ["hydra.launcher.n_jobs", "0", "-1 for one per core"]),
        # before: every run left unlaunched, "3 stopped unrecorded", exit 1
        (["hydra.sweeper.max_batch_size=-3"], ["hydra.sweeper.max_batch_size", "-3", "positive integer"]),
        # before: nan and -1 added no branch, silently; 1e6 planned for hours
        (["hydra.sweeper.extra_points_per_decade=nan"], ["hydra.sweeper.extra_points_per_decade", "[0, 100]"]),
        (["hydra.sweeper.extra_points_per_decade=1e6"], ["hydra.sweeper.extra_points_per_decade", "1000000.0"]),
        (["hydra.sweeper.extra_points_per_decade=5"], ["hydra.sweeper.extra_points_per_decade", "branches=true"]),
        (
            [
                "train.schedule=wsd",
                "hydra.sweeper.branches=true",
                "hydra.sweeper.lr_multipliers=[0.5,2]",
                "hydra.sweeper.lr_refine=true",
            ],
            ["hydra.sweeper.lr_refine with hydra.sweeper.branches=true"],
        ),
        (  # before: the sweeper replaced the given branches, silently
            ["train.schedule=wsd", "hydra.sweeper.branches=true", "train.branches=[1e10]"],
            ["train.branches: [10000000000.0] with hydra.sweeper.branches=true; give one"],
        ),
        (["hydra.sweeper.warmup_fracs=[1.5]"], ["hydra.sweeper.warmup_fracs", "numbers in [0, 1)"]),  # not [0.5, 1, 2]
        # user32: refused by the runs once launched, after the sweep had written (replaced) its sweep.json
        (["train.eval_tokens=100000000"], ["train.eval_tokens: 100000000 needs", "lower train.eval_tokens"]),
        # user19: the law's batch replaced the axis, silently ("3 duplicate combinations merged")
        (
            ["optim.lr_law=step_law", "hydra.sweeper.batch_sizes=[4,8]"],
            ["hydra.sweeper.batch_sizes", "batch_law=false"],
        ),
    ],
)
def test_bad_sweep_settings_are_one_line_and_write_nothing(tmp_path, args, names):
    store = tmp_path / "store"
    assert_one_line_error(sweep("tiny", *args, store=store, check=False), *names)
    assert nothing_written(store)


ODD_GRID = """
defaults: [config, {override hydra/sweeper: scaling}, {override tracking: none}, _self_]
hydra:
  sweeper:
"""


def plan_overrides(plan: dict) -> list[list[str]]:
    return [r["overrides"] for r in plan["runs"]]


def test_a_budget_or_shape_listed_twice_is_planned_once(tmp_path):
    """Before: budgets [4e10, 4.0e10] x models [d32, d32] planned the same run 4 times (4x its FLOPs)."""
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "twice.yaml").write_text(
        ODD_GRID + "    budgets: [4e10, 4.0e10]\n    models: [d32, d32, d16]\n"
    )
    runs = planned(str(tmp_path / "sweeps" / "twice.yaml"), tmp_path / "store", "train.min_steps=10")
    assert sorted(runs["shape"]) == ["d16", "d32"] and runs.run_id.is_unique
    plan = manifest(tmp_path / "store", "sweep.dry-run.json")
    # merged, not dropped (before: 4 "dropped", read as runs lost): each names the combination it is
    assert plan["dropped"] == [] and len(plan["duplicates"]) == 4
    assert {d["same_as"] for d in plan["duplicates"]} == {" ".join(r) for r in plan_overrides(plan)}


def test_a_duplicate_is_merged_apart_from_the_dropped_in_the_launch_line_and_status(tmp_path):
    """A real sweep: model=d32,d48,d32 at 2e8 plans d32 once, merges its repeat and drops d48 (7 steps
    < train.min_steps = 10). Before, the launch line and `scaling status` said "2 dropped"."""
    store = tmp_path / "store"
    proc = sweep("quick", "budget=2e8", "model=d32,d48,d32", *TINY_TRAIN, "tracking=none", store=store)
    plan = manifest(store)
    (kept,) = [" ".join(r) for r in plan_overrides(plan)]
    assert f"1 runs planned in {store}, 1 duplicate combination merged (same run id), 1 dropped;" in proc.stdout
    assert f"  merged {kept}: listed again (trained once)" in proc.stdout, proc.stdout
    (dropped,) = [line for line in proc.stdout.splitlines() if line.startswith("  dropped ")]
    assert dropped.startswith("  dropped budget=2e+08 model=d48") and "only 7 optimizer steps" in dropped
    assert [d["overrides"][:2] for d in plan["dropped"]] == [["budget=2e+08", "model=d48"]]
    assert plan["duplicates"] == [{"overrides": plan_overrides(plan)[0], "same_as": kept}]
    line = "1 duplicate combination merged (same run id), 1 combination dropped at planning (see sweep.json)"
    assert line in run_cli("status", store, check=True).stdout
    progress = json.loads(run_cli("status", store, "--json", check=True).stdout)
    assert (progress["planned"], progress["completed"], progress["dropped"], progress["duplicates"]) == (1, 1, 1, 1)
    # a plan written before the `duplicates` key kept them in `dropped`: still read as merged
    plan["dropped"] += [
        {"overrides": d["overrides"], "reason": f"the same run as {d['same_as']}: planned once"}
        for d in plan.pop("duplicates")
    ]
    (store / "sweep.json").write_text(json.dumps(plan))
    assert line in run_cli("status", store, check=True).stdout


@pytest.mark.parametrize("second", ["4e10", "4.0e10"])
def test_a_grid_budget_written_twice_is_one_line(tmp_path, second):
    """OmegaConf merges duplicate numeric keys (the last list of shapes silently replaced the first)."""
    grid = f"    grid:\n      4e10: [d32, d9]\n      {second}: [d16]\n"
    (tmp_path / "grid.yaml").write_text(ODD_GRID + grid)
    proc = sweep(str(tmp_path / "grid.yaml"), "hydra.sweeper.dry_run=true", store=tmp_path / "store", check=False)
    assert_one_line_error(proc, "hydra.sweeper.grid in", f"the keys 4e10 and {second} (line 7) are the same budget")
    assert nothing_written(tmp_path / "store")


def test_a_budget_alone_beside_a_grid_says_how_to_keep_its_rows(tmp_path):
    # user32: `budget=1e10` on a grid file read "sweep both on the command line ... (either one replaces the grid)"
    store = tmp_path / "store"
    proc = sweep("quick", "budget=1e11", store=store, check=False)
    line = assert_one_line_error(
        proc, "budget=1e+11 on the command line replaces the sweep file's grid and needs model="
    )
    assert "(budgets 3e+11, 1e+12, 3e+12), name them instead: hydra.sweeper.budgets=[3e+11]" in line, line
    assert nothing_written(store)


def test_a_grid_budget_of_one_shape_is_named_as_written(tmp_path):
    """YAML reads the key 4e10 as a float: the message named hydra.sweeper.grid.40000000000.0."""
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "grid.yaml").write_text(ODD_GRID + "    grid:\n      4e10: d32\n")
    proc = sweep(str(tmp_path / "f" / "grid.yaml"), "hydra.sweeper.dry_run=true", store=tmp_path / "store", check=False)
    assert_one_line_error(proc, "hydra.sweeper.grid.4e+10: 'd32' is not a list of model names")
    assert nothing_written(tmp_path / "store")


def test_a_store_directory_beside_the_sweep_file_is_one_line(tmp_path):
    """Hydra reads the sweep file's directory as a config directory: a `store/` made there by the
    store check became a config group, and the launch ended in a traceback (exit 1)."""
    (tmp_path / "mine.yaml").write_text(ODD_GRID + "    budgets: [4e10]\n    models: [d32]\n")
    proc = sweep(str(tmp_path / "mine.yaml"), "hydra.sweeper.dry_run=true", store=tmp_path / "store", check=False)
    assert_one_line_error(proc, "Could not override 'store'", "a directory named 'store' beside the sweep file")
    assert nothing_written(tmp_path / "store")


def test_a_sweep_file_without_the_scaling_sweeper_is_told_to_add_it(tmp_path):
    # user19: "Key 'budgets' not in 'BasicSweeperConf' [did you mean budgets? ...]"
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "plain.yaml").write_text("defaults: [config, _self_]\nhydra:\n  sweeper:\n    budgets: [4e10]\n")
    proc = sweep(str(tmp_path / "sw" / "plain.yaml"), store=tmp_path / "store", check=False)
    assert_one_line_error(
        proc, "hydra.sweeper.budgets is a setting of the scaling sweeper", "override hydra/sweeper: scaling"
    )
    assert "did you mean" not in proc.stderr and nothing_written(tmp_path / "store")


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its kind, bytes and modification time."""
    return {
        str(p.relative_to(root)): (p.is_dir(), None if p.is_dir() else p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    "bad", ["hydra.sweeper.tokens_per_param=[5,1]", "hydra.sweeper.budgets=[1e3]"]
)  # refused by the sweeper (settings), and with every combination dropped: after the store was checked
def test_a_refused_sweep_takes_back_only_the_directories_it_made(tmp_path, bad):
    """The store directory (and its missing parents) made to check it is writable is removed again;
    a store that existed, empty or with runs, is left exactly as it was."""
    from synthetic_store import write_store

    fresh = tmp_path / "new" / "store"
    assert_one_line_error(run_cli("sweep", "tiny", bad, f"store={fresh}", cwd=tmp_path), "hydra.sweeper")
    assert list(tmp_path.iterdir()) == []  # not the store, nor its parent
    empty, kept = tmp_path / "empty", tmp_path / "kept"
    empty.mkdir()
    write_store(kept)
    before = snapshot(tmp_path)
    assert len(list(kept.glob("runs/*/record.json"))) == 20
    for store in (empty, kept):
        assert_one_line_error(run_cli("sweep", "tiny", bad, f"store={store}", cwd=tmp_path), "hydra.sweeper")
    assert snapshot(tmp_path) == before


def test_an_unquoted_non_ascii_value_is_one_line_showing_the_quoting(tmp_path):
    """Hydra's override grammar takes unquoted values in ASCII only: its lexer error is replaced by
    one line that shows the quoted form, which works."""
    proc = run_cli("sweep", "tiny", "store=résultats", cwd=tmp_path)
    assert_one_line_error(proc, "store=résultats", """'store="résultats"'""")
    assert not (tmp_path / "résultats").exists()
    proc = run_cli("sweep", "tiny", 'store="résultats"', "hydra.sweeper.dry_run=true", cwd=tmp_path, check=True)
    assert (tmp_path / "résultats" / "sweep.dry-run.json").is_file()


def test_hydras_command_line_parser_still_reads_the_flags_the_cli_uses():
    """scaling/train_app.py's one private Hydra use (its command-line parser): fails loudly if a
    Hydra release renames or drops a flag that `precheck` and `scaling sweep` read."""
    args = parse_command_line(
        ["--multirun", "--config-name", "quick", "--config-dir", "/x", "--cfg", "job", "a=1", "b=2,3"]
    )
    assert (args.multirun, args.config_name, args.config_dir, args.cfg) == (True, "quick", "/x", "job")
    assert args.overrides == ["a=1", "b=2,3"]
    for flag in ("--info", "--help", "--hydra-help", "--experimental-rerun=f", "--config-path=p", "--shell-completion"):
        args = parse_command_line([flag])
        assert any(vars(args).values()), flag
    assert not any(
        getattr(parse_command_line([]), name)
        for name in ("multirun", "cfg", "info", "help", "hydra_help", "shell_completion", "experimental_rerun")
    )


def test_run_hydra_hands_hydra_its_command_line(capsys, monkeypatch):
    """hydra.main reads sys.argv (no public way to pass arguments): run_hydra sets it for the call
    only. Fails if hydra.main stops reading it."""
    monkeypatch.setattr(sys, "argv", ["pytest", "untouched"])
    run_hydra("scaling train", ["--cfg", "job", "store=/somewhere/else", "seed=7"])
    job = OmegaConf.create(capsys.readouterr().out)
    assert (job.store, job.seed) == ("/somewhere/else", 7)
    assert sys.argv == ["pytest", "untouched"]


def test_unknown_sweep_name_lists_the_sweep_files(tmp_path):
    assert_one_line_error(run_cli("sweep", "nosuch", cwd=tmp_path), "nosuch", *SWEEP_NAMES)


# ---------------------------------------------------------------- launchers
def test_launch_pacing_never_oversubscribes_the_cores():
    joblib = OmegaConf.create(
        {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": -1}
    )
    local = OmegaConf.create({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"})
    basic = OmegaConf.create({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"})
    assert concurrency(joblib, 10) == CORES and concurrency(joblib, 1) == 1
    assert concurrency(OmegaConf.merge(joblib, {"n_jobs": -2}), 10) == max(1, CORES - 1)
    assert concurrency(local, 10) == CORES and launch_chunk_size(local, CORES, None) == CORES
    assert concurrency(basic, 10) == 1 and launch_chunk_size(basic, 1, None) >= 10
    # on one GPU (one run per GPU), local launchers run one job at a time; joblib then gets one job per call
    assert concurrency(joblib, 10, gpus=1) == 1 and launch_chunk_size(joblib, 1, None) == 1
    assert concurrency(local, 10, gpus=1) == 1


# The submitit_local test's train settings: runs of a few seconds, so that their start and finish
# times (whole seconds) show which of them trained at the same moment.
SUBMITIT_TRAIN = SECONDS_RUNS


@pytest.mark.skipif(CORES < 2, reason="needs 2 cores for 2 workers")
def test_joblib_gives_the_basic_launchers_records_two_single_threaded_runs_at_once(tmp_path):
    """4 tiny runs (d32, d48 at 4e8 and 8e8 FLOPs) under each launcher: the same run ids and losses;
    joblib's 2 workers run 2 at a time, each single-threaded, where basic runs 1 at a time on every
    core. Whether that is faster is a benchmark's question (bench/bench_cli.py; README, Benchmarks,
    Layout: two 1-thread runs beat one 2-thread run)."""
    outputs = {}
    for launcher in ("basic", "joblib"):
        outputs[launcher] = sweep(
            "tiny",
            "hydra.sweeper.budgets=[4e8,8e8]",
            "hydra.sweeper.models=[d32,d48]",
            *TINY_TRAIN,
            f"hydra/launcher={launcher}",
            *(["hydra.launcher.n_jobs=2"] * (launcher == "joblib")),
            store=tmp_path / launcher,
        ).stdout
    assert "launching 4 runs, 1 at a time" in outputs["basic"], outputs["basic"]
    assert "launching 4 runs, 2 at a time" in outputs["joblib"], outputs["joblib"]
    basic = {r["run_id"]: r for r in records(tmp_path / "basic")}
    joblib = {r["run_id"]: r for r in records(tmp_path / "joblib")}
    assert len(basic) == 4 and basic.keys() == joblib.keys()
    for run_id, rec in joblib.items():
        assert rec["threads"] == 1 and rec["config"]["train"]["concurrent_runs"] == 2
        assert basic[run_id]["threads"] == CORES
        assert rec["val_loss"] == pytest.approx(basic[run_id]["val_loss"], rel=1e-3)  # thread counts change sums' order


def overlap(recs: list[dict]) -> int:
    """Most runs training at one moment, from the records' start and finish times (whole seconds)."""
    spans = [(pd.Timestamp(r["started_at"]), pd.Timestamp(r["finished_at"])) for r in recs]
    return max(sum(s <= t < e for s, e in spans) for t, _ in spans)


def test_submitit_local_runs_at_most_one_job_per_core(tmp_path):
    # three runs of a few seconds on 2 cores: submitit_local alone would start all three at once
    store = tmp_path / "store"
    n = CORES + 1
    budgets = ",".join(f"{1e10 * (1 + i / 4):g}" for i in range(n))
    sweep("tiny", f"budget={budgets}", "model=d32", *SUBMITIT_TRAIN, "hydra/launcher=submitit_local", store=store)
    recs = records(store)
    assert len(recs) == n and all(r["status"] == "completed" for r in recs)
    assert all(r["threads"] == 1 and r["config"]["train"]["concurrent_runs"] == CORES for r in recs)
    assert overlap(recs) <= CORES
    assert list(store.glob("hydra/*/.submitit/*")), "the jobs ran through submitit"


# ---------------------------------------------------------------- tracking, status, sync
def inspect_wandb_run(run_dir: Path) -> list[dict]:
    """The records of an offline wandb run, through wandb's own CLI (there is no Python reader)."""
    wandb_cli = Path(sys.executable).with_name("wandb")
    out = subprocess.run(
        [str(wandb_cli), "leet", "inspect", "--json", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_tracking_on_writes_tagged_offline_runs_and_sync_needs_a_login(tmp_path):
    store, home = tmp_path / "store", tmp_path / "home"
    home.mkdir()
    no_login = {"HOME": str(home), "WANDB_API_KEY": "", "WANDB_MODE": "offline"}
    sweep(
        "tiny",
        "budget=2e8,4e8",
        "model=d32",
        *TINY_TRAIN,
        "tracking=wandb",
        "tracking.tags=[mine]",
        store=store,
        env=no_login,
    )
    for rec in records(store):
        (run_dir,) = (store / "runs" / rec["run_id"] / "wandb" / "wandb").glob("offline-run-*")
        assert list(run_dir.glob("run-*.wandb"))
        wandb_records = inspect_wandb_run(run_dir)
        (run,) = [r["run"] for r in wandb_records if r["type"] == "run"]
        budget = f"C{rec['budget_flops']:.3g}".replace("e+", "e")
        assert run["run_group"] == "tiny" and run["display_name"] == f"{budget}-d32"
        assert run["tags"] == ["tiny", budget, "d32", "mine"]
        assert run["config"]["update"]["run_id"] == rec["run_id"] and run["config"]["update"]["sweep"] == "tiny"
        summary = {k: v for r in wandb_records if r["type"] == "summary" for k, v in r["summary"]["update"].items()}
        assert summary["val_loss"] == pytest.approx(rec["val_loss"]) and summary["status"] == "completed"
        assert any("val_loss" in r["history"]["item"] for r in wandb_records if r["type"] == "history")
        assert [r["exit"]["exit_code"] for r in wandb_records if r["type"] == "exit"] == [0]

    status = run_cli("status", store, check=True).stdout
    assert "2/2 runs done (2 completed, 0 failed, 0 skipped" in status and "0 pending" in status
    progress = json.loads(run_cli("status", store, "--json", check=True).stdout)
    assert progress["completed"] == 2 and progress["pending"] == progress["running"] == 0
    assert progress["flops_done"] == progress["flops_total"] > 0 and progress["eta_s"] == 0

    assert_one_line_error(run_cli("sync", store, env=no_login), "wandb login", "WANDB_API_KEY")


def test_status_of_a_bad_path_is_one_line(tmp_path):
    assert_one_line_error(run_cli("status", tmp_path / "nowhere"), str(tmp_path / "nowhere"), "not a directory")
    assert_one_line_error(run_cli("status", tmp_path), "sweep.json", "scaling sweep")
    (tmp_path / "sweep.dry-run.json").write_text("{}")  # user19: a dry run's store read "no sweep plan here"
    assert_one_line_error(run_cli("status", tmp_path), "only a dry run's plan", "hydra.sweeper.dry_run=true")


@pytest.mark.parametrize("plan", ["[]", '{"runs": 3}', '{"sweep": "x", "runs": [{"run_id": "a"}], "dropped": []}'])
def test_status_of_a_sweep_json_that_is_not_a_plan_is_one_line(tmp_path, plan):
    """Valid JSON that is not a plan (edited by hand): before, a traceback (TypeError, KeyError)."""
    (tmp_path / "sweep.json").write_text(plan)
    assert_one_line_error(run_cli("status", tmp_path), "sweep.json: not a sweep plan", "relaunching the sweep")


def test_a_setting_some_jobs_read_plans_and_one_only_dropped_jobs_read_is_refused(tmp_path):
    """user18 and review15d: a sweep refuses a setting no job that will train reads (a run refuses it), and plans one
    that some of its jobs read (model=d32,nearest with one target); a dry run plans for another machine (no device
    check)."""
    models = "hydra.sweeper.models=[d32,nearest]"
    read = sweep(
        "tiny",
        "hydra.sweeper.budgets=[2e10]",
        models,
        "model.target_params=3e4",
        "hydra.sweeper.dry_run=true",
        "train.device=cuda",
        store=tmp_path / "a",
    )
    assert "nothing launched" in read.stdout
    # nearest to 3e5 is dropped at 2e10 (too few steps): only d32 trains, and it does not read the target
    unread = sweep(
        "tiny", "hydra.sweeper.budgets=[2e10]", models, "model.target_params=3e5", store=tmp_path / "b", check=False
    )
    assert_one_line_error(unread, "model.target_params: 300000 is read by model=nearest only", "no job of this sweep")


def test_a_closed_stdout_is_not_reported_as_a_full_disk(tmp_path):
    # user26: `scaling sweep ... dry_run=true | head -1` printed "error: cannot write Broken pipe; free space" (exit 1)
    from conftest import SCALING

    args = [SCALING, "sweep", "tiny", "hydra.sweeper.dry_run=true", f"store={tmp_path / 'store'}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # before the sweep writes a line: its first write finds the pipe closed
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141 and "cannot write" not in err and "Traceback" not in err, err


def test_the_plan_names_the_sweep_file_it_came_from_wherever_it_is(tmp_path):
    # `scaling next` reads the source's sweep file for its settings and tokens-per-parameter window: one kept outside
    # sweeps/ was not found (a bare file proposed, its window the default's)
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "mine.yaml").write_text(ODD_GRID + "    budgets: [4e10]\n    models: [d32]\n")
    sweep(str(tmp_path / "f" / "mine.yaml"), "hydra.sweeper.dry_run=true", store=tmp_path / "store", check=True)
    plan = json.loads((tmp_path / "store" / "sweep.dry-run.json").read_text())
    assert plan["sweep_file"] == str((tmp_path / "f" / "mine.yaml").resolve())
    sweep("tiny", "hydra.sweeper.dry_run=true", store=tmp_path / "tiny", check=True)
    assert json.loads((tmp_path / "tiny" / "sweep.dry-run.json").read_text())["sweep_file"].endswith("sweeps/tiny.yaml")


def test_a_sweep_file_named_as_one_of_the_projects_is_refused(tmp_path):
    # review20: `scaling sweep x/tiny.yaml` ran the project's sweeps/tiny.yaml (Hydra finds it first), silently
    (tmp_path / "tiny.yaml").write_text(ODD_GRID + "    budgets: [4e10]\n    models: [d16]\n")
    proc = sweep(str(tmp_path / "tiny.yaml"), "hydra.sweeper.dry_run=true", store=tmp_path / "store", check=False)
    assert_one_line_error(proc, "has the name of the project's", "sweeps/tiny.yaml", "rename your file")
    assert nothing_written(tmp_path / "store")
