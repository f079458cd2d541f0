"""train.schedule=wsd and cooldown branches: the schedule's values; cosine run ids unchanged; a
branch's record equal to the standalone WSD run of its budget (bit for bit: the same steps on the
same batches at the same LR, in one thread); a trunk killed inside a branch resumes to the same
records; the sweeper's branched plan, its saving, and fits that read the branch points."""

import json
import math
import os
import re
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest
from conftest import built_once, run_cli
from faults_support import HOOKS, RESUMED, fault_env

from hydra_plugins.scaling_sweeper.branching import extra_budgets
from scaling.branch_plan import plan_branches
from scaling.plan import plan_run
from scaling.schedule import lr_at
from scaling.store import TABLE_COLUMNS, write_tables
from scaling.train_app import compose_config

# d32 at seq_len 32, 2 sequences a step: the trunk (8e8) takes 94 steps, its branches 24 (2e8) and
# 47 (4e8), forking at steps 19 and 38 (cooldown_frac 0.2). One thread: runs are deterministic.
TINY = [
    "model=d32",
    "train.seq_len=32",
    "train.batch_size=2",
    "train.min_steps=10",
    "train.eval_tokens=256",
    "train.evals=2",
    "train.checkpoint_interval_s=0",
    "train.threads=1",
    "train.schedule=wsd",
    "optim.warmup_steps=2",
    "tracking=none",
]
TRUNK = ["budget=8e8", "train.branches=[2e8,4e8]"]
# What differs between two runs of one config: where and when they ran, how fast; a branch names its trunk.
NOT_COMPARED = {"wall_time_s", "tokens_per_s", "flops_per_s", "started_at", "finished_at", "branch_of"}
NOT_COMPARED |= {"branch_start_step", "config", "code_version"}  # (-dirty while this checkout changes)


def records(store) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))}


def same_run(a: dict, b: dict) -> None:
    """Two records of one run: every key equal but the machine's timings and the store's path."""
    kept = [json.dumps({k: v for k, v in r.items() if k not in NOT_COMPARED}, sort_keys=True) for r in (a, b)]
    assert kept[0] == kept[1]  # as JSON: NaN (entropy_rate of a corpus without one) equals NaN
    assert {**a["config"], "store": ""} == {**b["config"], "store": ""}


def train(store, *args, env=None):
    return run_cli("train", *TINY, *args, f"store={store}", env=env, timeout=900)


# ---------------------------------------------------------------- the schedule and the identity
def test_wsd_schedule_warms_up_holds_the_peak_and_cools_down_to_min_lr_at_the_last_step():
    cfg = compose_config(["budget=1e11", "model=d32", "train.schedule=wsd", "optim.warmup_steps=10"])
    plan = plan_run(cfg)
    lrs = [lr_at(s, plan, cfg.optim.min_lr_ratio) for s in range(plan.steps)]
    cooldown = round(0.2 * plan.steps)
    assert plan.cooldown_steps == cooldown and plan.warmup_steps == 10
    assert lrs[:10] == pytest.approx([plan.lr * (s + 1) / 10 for s in range(10)])  # linear warmup
    assert set(lrs[9 : plan.steps - cooldown]) == {plan.lr}  # constant at the peak until the cooldown
    tail = lrs[plan.steps - cooldown :]
    assert all(a > b for a, b in zip(tail, tail[1:])) and tail[0] < plan.lr
    assert lrs[-1] == pytest.approx(plan.lr * cfg.optim.min_lr_ratio)  # min_lr exactly at the last step
    # 1-sqrt: halfway through the cooldown the LR has dropped by 1 - sqrt(1/2) of its range
    half = plan.steps - cooldown + cooldown // 2 - 1
    progress = (cooldown // 2) / cooldown
    assert lrs[half] == pytest.approx(plan.lr * (0.1 + 0.9 * (1 - math.sqrt(progress))))


def test_the_cosine_schedule_is_bit_for_bit_the_one_before_wsd():
    """Cosine runs must train as before (their records' curves hold each step's LR): the formula as it was."""
    cfg = compose_config(["budget=1e11", "model=d32"])
    plan, r = plan_run(cfg), cfg.optim.min_lr_ratio

    def before(step: int) -> float:
        if step < plan.warmup_steps:
            return plan.lr * (step + 1) / plan.warmup_steps
        progress = min(1.0, (step - plan.warmup_steps) / max(1, plan.steps - 1 - plan.warmup_steps))
        return plan.lr * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * progress)))

    assert [lr_at(s, plan, r) for s in range(plan.steps)] == [before(s) for s in range(plan.steps)]


def test_cosine_run_ids_are_unchanged_and_wsd_keys_enter_only_wsd_ids():
    base = ["budget=1e11", "model=d32"]
    default = plan_run(compose_config(base))
    assert default.run_id == plan_run(compose_config([*base, "train.schedule=cosine"])).run_id
    assert default.run_id == plan_run(compose_config([*base, "train.cooldown_frac=0.1"])).run_id
    wsd = plan_run(compose_config([*base, "train.schedule=wsd"]))
    assert wsd.run_id != default.run_id
    assert wsd.run_id != plan_run(compose_config([*base, "train.schedule=wsd", "train.cooldown_frac=0.1"])).run_id
    # a trunk's own run does not depend on its branches
    assert wsd.run_id == plan_run(compose_config([*base, "train.schedule=wsd", "train.branches=[5e10]"])).run_id
    # nor on their order: [8e10,5e10] and [5e10,8e10] are one trunk with the same two branches
    # (train.branches is never in a run id: schedule.drop_from_identity; branches are planned sorted)
    ids = set()
    for listed in ("[8e10,5e10]", "[5e10,8e10]"):
        cfg = compose_config([*base, "train.schedule=wsd", f"train.branches={listed}"])
        trunk = plan_run(cfg)
        ids.add((trunk.run_id, tuple(b.plan.run_id for b in plan_branches(cfg, trunk)[0])))
    ((trunk_id, branch_ids),) = ids
    assert trunk_id == wsd.run_id and len(set(branch_ids)) == 2


def test_bad_branches_are_one_clear_line(tmp_path):
    proc = train(tmp_path / "s", "budget=8e8", "train.schedule=cosine", "train.branches=[2e8]")
    assert proc.returncode == 2 and "train.branches" in proc.stderr and "wsd" in proc.stderr, proc.stderr
    proc = train(tmp_path / "s", "budget=8e8", "train.branches=[9e8]")
    assert proc.returncode == 2 and "below the run's budget" in proc.stderr, proc.stderr
    assert not (tmp_path / "s" / "runs").exists()


def test_extra_budgets_are_log_spaced_below_the_largest_and_away_from_the_grid():
    got = extra_budgets([3e11, 1e12], 2)
    assert got == pytest.approx([1e11])  # 1e12 / 10^0.5 is too near the grid's 3e11; 1e11 is a tenth of the top
    assert extra_budgets([3e12], 4) == pytest.approx([3e12 * 10 ** (-k / 4) for k in (1, 2, 3, 4)])


# ---------------------------------------------------------------- branches train and resume
def trained_store(tmp_path_factory, name: str, args) -> Path:
    """A store holding the trunk of ``args`` trained once, uninterrupted (`built_once`: read, never written)."""

    def build(directory: Path) -> None:
        proc = train(directory / "store", *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    return built_once(tmp_path_factory, f"wsd-{name}", build) / "store"


@pytest.fixture(scope="module")
def trunk_store(tmp_path_factory):
    return trained_store(tmp_path_factory, "trunk", TRUNK)


def test_each_branch_equals_the_standalone_wsd_run_of_its_budget(trunk_store, tmp_path):
    got = records(trunk_store)
    assert len(got) == 3
    trunk = next(r for r in got.values() if "branch_of" not in r)
    branches = {r["budget_flops"]: r for r in got.values() if "branch_of" in r}
    assert sorted(branches) == [2e8, 4e8] and trunk["budget_flops"] == 8e8 and trunk["schedule"] == "wsd"
    assert {r["branch_of"] for r in branches.values()} == {trunk["run_id"]}
    assert {b: r["branch_start_step"] for b, r in branches.items()} == {2e8: 19, 4e8: 38}
    alone = tmp_path / "alone"
    for budget in ("2e8", "4e8", "8e8"):
        assert train(alone, f"budget={budget}").returncode == 0
    for run_id, rec in records(alone).items():  # the same run ids, losses, curves: bit for bit
        same_run(got[run_id], {**rec, "config": {**rec["config"], "train": got[run_id]["config"]["train"]}})


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGTERM"])
def test_a_trunk_stopped_inside_a_branch_resumes_to_the_same_records(trunk_store, tmp_path, fault):
    """SIGKILL or SIGTERM (a preemption) at the 2e8 branch's step 22 of 24 (tests/fault_hooks).
    Killed, nothing of the branch is kept but the trunk's checkpoint at the fork (step 19): the
    relaunch resumes there and trains the branch again. Preempted, the branch saves its own
    checkpoint too, and resumes from it. Then the rest, to the uninterrupted trunk's records."""
    store = tmp_path / "store"
    path = os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")])  # the hooks, before this checkout
    env = fault_env(PYTHONPATH=path, **{f"SCALING_FAULT_{fault}_AT_STEP": "22"})
    stopped = train(store, *TRUNK, env=env)
    expected = -signal.SIGKILL if fault == "SIGKILL" else 128 + signal.SIGTERM
    assert stopped.returncode == expected, stopped.stdout + stopped.stderr
    assert records(store) == {} and len(list(store.glob("runs/*/ckpt.pt"))) == (1 if fault == "SIGKILL" else 2)
    resumed = train(store, *TRUNK)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [int(step) for _, step in RESUMED.findall(resumed.stdout)] == [19]
    assert ("resuming from its checkpoint at step 22/24" in resumed.stdout) == (fault == "SIGTERM")
    want = records(trunk_store)
    got = records(store)
    assert set(got) == set(want)
    for run_id in want:
        same_run(got[run_id], want[run_id])
    assert not list(store.glob("runs/*/ckpt.pt"))
    again = train(store, *TRUNK)  # a finished trunk: a no-op
    assert again.returncode == 0 and records(store) == got


# A curve point every 11 steps of the 4e8 branch (47 steps, evaluations after 24 and 47): its
# training-loss window holds steps not yet logged when the trunk stops between two of its points.
COARSE = [*TRUNK, "train.log_points=4"]


@pytest.fixture(scope="module")
def coarse_store(tmp_path_factory):
    return trained_store(tmp_path_factory, "coarse", COARSE)


@pytest.mark.parametrize(("fault", "resumed_at"), [("SIGTERM", 23), ("SIGKILL", 19)])
def test_a_trunk_stopped_between_a_branchs_curve_points_resumes_to_the_same_branch_curve(
    coarse_store, tmp_path, fault, resumed_at
):
    """user22: a trunk preempted at step 309, relaunched, gave its 2e11 branch's curve point at step
    320 another train_loss (2.368889 for 2.365607): the branch's losses since its last point, not yet
    read, were not in the trunk's checkpoint. Here the trunk stops at step 23, between the 4e8
    branch's points after 22 and 24, before that branch forks (38): preempted, it resumes from its
    checkpoint at 23; killed, from the one at the 2e8 branch's fork (19)."""
    want = records(coarse_store)
    branch = next(r for r in want.values() if r["budget_flops"] == 4e8)
    assert [p["step"] for p in branch["curve"]][1:3] == [22, 24] and branch["branch_start_step"] == 38
    store = tmp_path / "store"
    path = os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")])
    stopped = train(store, *COARSE, env=fault_env(PYTHONPATH=path, **{f"SCALING_FAULT_{fault}_AT_STEP": "23"}))
    expected = -signal.SIGKILL if fault == "SIGKILL" else 128 + signal.SIGTERM
    assert stopped.returncode == expected, stopped.stdout + stopped.stderr
    assert branch["run_id"] not in records(store)
    resumed = train(store, *COARSE)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [int(step) for _, step in RESUMED.findall(resumed.stdout)] == [resumed_at]
    got = records(store)
    assert set(got) == set(want)
    for run_id in want:
        same_run(got[run_id], want[run_id])


# ---------------------------------------------------------------- the sweeper
def test_the_quick_wsd_plan_branches_9_per_decade_with_10pct_cooldowns_for_fewer_flops_than_quick(tmp_path):
    proc = run_cli("sweep", "quick-wsd", "hydra.sweeper.dry_run=true", f"store={tmp_path / 's'}", check=True)
    runs = json.loads((tmp_path / "s" / "sweep.dry-run.json").read_text())["runs"]
    line = next(x for x in proc.stdout.splitlines() if "cooldown branches" in x)
    run_cli("sweep", "quick", "hydra.sweeper.dry_run=true", f"store={tmp_path / 'q'}", check=True)
    grid = json.loads((tmp_path / "q" / "sweep.dry-run.json").read_text())["runs"]
    trunks = {r["shape"]: r for r in runs if any(o.startswith("train.branches=") for o in r["overrides"])}
    branches = [r for r in runs if r["shape"] in trunks and r is not trunks[r["shape"]]]
    assert (len(trunks), len(branches)) == (8, 68) and len(runs) >= 4 * len(grid)
    # each trunk at its shape's largest budget of quick, a branch at its other budgets and 9 per decade below
    for shape, trunk in trunks.items():
        budgets = sorted(r["budget_flops"] for r in grid if r["shape"] == shape)
        assert trunk["budget_flops"] == budgets[-1]
        wanted = set(budgets[:-1]) | set(extra_budgets(budgets, 9))
        got = {r["budget_flops"] for r in branches if r["shape"] == shape}
        assert got <= wanted and (shape == "d112" or got == wanted)  # d112: the smallest ones fall below 0.3 D/N
    # what it spends: every trunk, and of each branch only its cooldown, 10% of its steps (of 1,024 tokens)
    cooldowns = sum(6 * r["params"] * round(0.1 * r["tokens"] / 1024) * 1024 for r in branches)
    spent = float(line.split(" points for ")[1].split(" FLOPs")[0])
    assert spent == float(f"{sum(t['flops'] for t in trunks.values()) + cooldowns:.3g}")
    assert spent <= sum(r["flops"] for r in grid)
    assert f"the grid's {len(grid)} points as separate runs" in line


def test_the_cost_of_a_branched_warmup_axis_counts_grid_points_and_cooldowns(tmp_path):
    # user19: "1.00x the 6 runs (8.6e+12 FLOPs)" (each trunk's warmup in steps read as another run; the
    # branches counted whole, though they train only their cooldowns): 2 fracs x 3 points is 2x the 3 runs
    axis = (
        "hydra.sweeper.models=[d48]",
        "hydra.sweeper.extra_points_per_decade=0",
        "hydra.sweeper.warmup_fracs=[0.02,0.1]",
    )
    proc = run_cli("sweep", "quick-wsd", *axis, "hydra.sweeper.dry_run=true", f"store={tmp_path / 's'}", check=True)
    cost = next(line for line in proc.stdout.splitlines() if "cost:" in line)
    spent = next(line for line in proc.stdout.splitlines() if "cooldown branches" in line).split(" points for ")[1]
    assert "6 runs" in cost and "2.00x the 3 runs" in cost and f"runs, {spent.split(' FLOPs')[0]} FLOPs" in cost, cost


def test_a_sweep_files_own_warmup_steps_are_kept_for_trunks_and_branches(tmp_path):
    # user19: a file's optim.warmup_steps: 10 was rescaled to 1 on every run, silently (the command line's was kept)
    (tmp_path / "sw").mkdir()
    sweep = tmp_path / "sw" / "w.yaml"
    sweep.write_text("defaults: [quick-wsd, _self_]\nsweep: w\noptim:\n  warmup_steps: 10\n")
    run_cli("sweep", str(sweep), "hydra.sweeper.dry_run=true", f"store={tmp_path / 's'}", check=True)
    runs = json.loads((tmp_path / "s" / "sweep.dry-run.json").read_text())["runs"]
    assert len(runs) > 8 and not [o for r in runs for o in r["overrides"] if o.startswith("optim.warmup_steps")]


USER22_SWEEP = """defaults: [config, {override hydra/sweeper: scaling}, _self_]
sweep: u22
train: {batch_size: 8, schedule: wsd}
hydra:
  sweeper:
    branches: true
    extra_points_per_decade: 3
    grid: {3e10: [d16, d24, d32], 1e11: [d24, d32, d48]}
"""


@pytest.mark.parametrize(
    ("settings", "d48_dropped"),
    [
        # user22's: d48's 1e10 has 0.3 tokens per parameter, its smallest branch kept (2.15e10) 47 steps
        (["train.min_steps=20", "hydra.sweeper.tokens_per_param=[0.31,2000]"], [1e10]),
        # too few steps: d48's 1e10 (22 steps) and 2.15e10 (47), d24's and d32's 1e10
        (["hydra.sweeper.tokens_per_param=[0.3,2000]"], [1e10, 21544346900.31884]),
    ],
)
def test_a_trunks_warmup_is_warmup_frac_of_its_smallest_branch_kept(tmp_path, settings, d48_dropped):
    """user22: the d48 trunk got optim.warmup_steps=1, warmup_frac (5%) of its 1e10 branch's 22 steps,
    a branch then dropped; its smallest branch kept has 47 steps: 2."""
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "u22.yaml").write_text(USER22_SWEEP)
    store = tmp_path / "s"
    proc = run_cli("sweep", tmp_path / "sw" / "u22.yaml", *settings, "hydra.sweeper.dry_run=true", f"store={store}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dropped = [line for line in proc.stdout.splitlines() if line.startswith("  dropped") and "model=d48" in line]
    assert [float(line.split("budget=")[1].split()[0]) for line in dropped] == pytest.approx(d48_dropped)
    runs = json.loads((store / "sweep.dry-run.json").read_text())["runs"]
    warmups = {}
    for trunk in [r for r in runs if any(o.startswith("train.branches=") for o in r["overrides"])]:
        listed = next(o for o in trunk["overrides"] if o.startswith("train.branches="))
        smallest = min(float(b) for b in listed.split("=[")[1].rstrip("]").split(","))
        steps = next(r["tokens"] for r in runs if (r["shape"], r["budget_flops"]) == (trunk["shape"], smallest)) // 1024
        warmups[trunk["shape"]] = max(1, round(0.05 * steps))
    assert len(warmups) == 4 and warmups["d48"] == (2 if len(d48_dropped) == 1 else 5)
    for r in runs:  # each trunk and its branches: warmup_frac of the smallest branch's steps
        assert f"optim.warmup_steps={warmups[r['shape']]}" in r["overrides"], r


def test_the_quick_wsd16_plan_has_a_trunk_per_distinct_shape_within_quicks_flops(tmp_path):
    """quick-wsd16: 15 trunks, each its own shape (the bootstrap's unit), within quick's 2.25e13 FLOPs."""
    proc = run_cli("sweep", "quick-wsd16", "hydra.sweeper.dry_run=true", f"store={tmp_path / 's'}", check=True)
    runs = json.loads((tmp_path / "s" / "sweep.dry-run.json").read_text())["runs"]
    trunks = [r for r in runs if any(o.startswith("train.branches=") for o in r["overrides"])]
    assert len(trunks) == len({t["shape"] for t in trunks}) == 15 and len(runs) == 82
    assert {t["budget_flops"] for t in trunks} == {3e11, 1e12, 3e12}
    line = next(x for x in proc.stdout.splitlines() if "cooldown branches" in x)
    assert "15 trunks and 67 cooldown branches" in line
    assert float(line.split(" points for ")[1].split(" FLOPs")[0]) <= 2.25e13  # quick's 16 runs


def test_a_branched_sweep_trains_every_planned_point_and_the_fit_reads_them(tmp_path):
    store = tmp_path / "store"
    args = ["budget=2e8,4e8,8e8", "model=d24,d32", *TINY[1:-2], "train.min_steps=8", "tracking=none"]
    proc = run_cli(
        "sweep",
        "quick-wsd",
        *args,
        "hydra.sweeper.extra_points_per_decade=0",
        "hydra.sweeper.tokens_per_param=[0,1e9]",
        f"store={store}",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 trunks and 4 cooldown branches, 6 (N, D, loss) points" in proc.stdout
    planned = {r["run_id"] for r in json.loads((store / "sweep.json").read_text())["runs"]}
    recs = records(store)
    assert set(recs) == planned and all(r["status"] == "completed" for r in recs.values())
    assert sum("branch_of" in r for r in recs.values()) == 4
    # table.csv says which runs are branches, of which trunk, forked at which step
    table = pd.read_csv(store / "table.csv", keep_default_na=False).set_index("run_id")
    assert set(table.index) == planned and (table.schedule == "wsd").all()
    for run_id, rec in recs.items():
        row = table.loc[run_id]
        want = (rec["branch_of"], str(rec["branch_start_step"])) if "branch_of" in rec else ("", "")
        assert (row.branch_of, str(row.branch_start_step)) == want
    status = run_cli("status", store)
    assert status.returncode == 0 and "6/6 runs done (6 completed" in status.stdout, status.stderr
    # user32: one total for the plan, the launch and the progress (the launch left the cooldowns out, the progress
    # counted each branch as its own run)
    spent = re.search(r"points for ([0-9.e+]+) FLOPs \(trunks \+ cooldowns\)", proc.stdout).group(1)
    assert f"({spent} FLOPs to train)" in proc.stdout and f"{spent}/{spent} FLOPs (100%)" in status.stdout
    fit = run_cli("fit", store, "--approach", "3", "--bootstrap", "0", "--json")
    assert fit.returncode == 0, fit.stderr
    assert json.loads(fit.stdout)["runs"] == 6  # every branch point is a run of the fit
    # review21: a branch whose trunk is done trains alone, as its own run, and is counted so (its cooldown, before)
    lost = min((r for r in recs.values() if "branch_of" in r), key=lambda r: r["flops"])
    shutil.rmtree(store / "runs" / lost["run_id"])
    again = run_cli("sweep", "quick-wsd", *args, "hydra.sweeper.extra_points_per_decade=0",
                    "hydra.sweeper.tokens_per_param=[0,1e9]", f"store={store}", timeout=900)  # fmt: skip
    assert again.returncode == 0 and "launching 1 runs" in again.stdout, again.stdout[-2000:]
    assert f"({lost['flops']:.3g} FLOPs to train)" in again.stdout, again.stdout[-2000:]


def test_the_table_leaves_the_schedule_and_branch_columns_empty_for_records_without_them(tmp_path):
    """Records written before WSD have no schedule, and no run but a branch has branch_of."""
    from synthetic_store import write_store

    write_store(tmp_path, with_failures=False)
    assert not any("schedule" in r for r in records(tmp_path).values())
    runs = write_tables(tmp_path).runs
    assert (runs.schedule == "").all() and (runs.branch_of == "").all() and runs.branch_start_step.isna().all()
    table = pd.read_csv(tmp_path / "table.csv", keep_default_na=False)
    assert list(table.columns[: len(TABLE_COLUMNS)]) == TABLE_COLUMNS and len(table) == 18
    assert (table[["schedule", "branch_of", "branch_start_step"]] == "").all().all()
