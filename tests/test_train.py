"""The trainer end to end: a real run on the default corpus, the schedule, determinism, bad input."""

import json
import math

import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli

from scaling.plan import plan_run
from scaling.schedule import lr_at
from scaling.store import read_store
from scaling.train_app import compose_config

FAST = ["tracking=none", "train.eval_tokens=8192", "train.evals=2"]


def records(store):
    return [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]


def test_smallest_shape_trains_on_the_default_corpus_and_its_record_describes_itself(tmp_path):
    """d16, the smallest ladder shape, on the default corpus: it learns (loss under uniform) and its
    record holds every field the analysis reads. 2e10 FLOPs (352k tokens, 172 steps); how long the
    default budget (1e11) takes is a benchmark's question: bench/bench_cli.py."""
    run_cli("train", "model=d16", "budget=2e10", f"store={tmp_path}", "tracking=none", check=True)
    (rec,) = records(tmp_path)
    assert rec["status"] == "completed" and rec["corpus"] == "stdlib"
    assert rec["val_loss"] < math.log(256), rec["val_loss"]
    # the record describes itself: counts, D, C = 6ND, the attention-inclusive FLOPs, throughput
    assert rec["flops"] == pytest.approx(6 * rec["params"] * rec["tokens"])
    assert rec["flops_attention"] > rec["flops"]
    assert rec["tokens"] == rec["steps"] * rec["batch_size"] * rec["seq_len"]
    assert rec["flops"] == pytest.approx(rec["budget_flops"], rel=0.01)
    # the unique tokens it drew from (the training split) and the epochs D/U it trained
    assert rec["unique_tokens"] > 1e7 and rec["epochs"] == pytest.approx(rec["tokens"] / rec["unique_tokens"])
    for key in (
        "params_non_embedding",
        "val_bpb",
        "train_loss",
        "wall_time_s",
        "tokens_per_s",
        "flops_per_s",
        "corpus_fingerprint",
        "code_version",
        "seed",
        "config",
        "curve",
    ):
        assert key in rec
    assert rec["curve"][-1]["step"] == rec["steps"] and math.isfinite(rec["curve"][-1]["val_loss"])
    table = read_store(tmp_path)
    assert len(table.runs) == 1 and not table.problems
    row = table.runs.iloc[0]  # a cosine run, not a WSD branch: its branch columns empty
    assert (row.schedule, row.branch_of, row.branch_start_step is pd.NA) == ("cosine", "", True)


def test_schedule_length_equals_run_length():
    cfg = compose_config(["budget=1e11", "model=d32"])
    plan = plan_run(cfg)
    lrs = [lr_at(s, plan, cfg.optim.min_lr_ratio) for s in range(plan.steps)]
    assert max(lrs) == pytest.approx(plan.lr)
    assert lrs[plan.warmup_steps - 1] == pytest.approx(plan.lr)  # warmup ends at the peak
    assert lrs[-1] == pytest.approx(plan.lr * cfg.optim.min_lr_ratio)  # decay ends exactly at the last step
    assert all(a >= b for a, b in zip(lrs[plan.warmup_steps :], lrs[plan.warmup_steps + 1 :]))
    assert plan.tokens == plan.steps * cfg.train.batch_size * cfg.train.seq_len


def test_budget_defines_tokens_by_the_chosen_parameter_count():
    total = plan_run(compose_config(["budget=1e12", "model=d64"]))
    kaplan = plan_run(compose_config(["budget=1e12", "model=d64", "param_count=non_embedding"]))
    assert total.n_budget == total.params and kaplan.n_budget == kaplan.params_non_embedding
    assert kaplan.tokens > total.tokens
    for p in (total, kaplan):
        assert p.flops == pytest.approx(6 * p.n_budget * p.tokens)
        assert p.flops == pytest.approx(1e12, rel=0.01)


# d32 at 1e10 FLOPs: 65k tokens, 32 steps of 2,048 tokens (min_steps 10)
SMALL_RUN = ["model=d32", "budget=1e10", "train.min_steps=10", *FAST]


@pytest.fixture(scope="module")
def seed_0_store(tmp_path_factory):
    """One small run with seed 0, trained once for the module (the determinism and rerun tests)."""
    store = tmp_path_factory.mktemp("seed-0")
    run_cli("train", *SMALL_RUN, "seed=0", f"store={store}", check=True)
    return store


def test_same_seed_same_loss_different_seed_different_loss(tmp_path, seed_0_store):
    for store, seed in (("b", 0), ("c", 1)):
        run_cli("train", *SMALL_RUN, f"seed={seed}", f"store={tmp_path / store}", check=True)
    (a,), (b,), (c,) = records(seed_0_store), records(tmp_path / "b"), records(tmp_path / "c")
    assert a["val_loss"] == b["val_loss"] and a["curve"] == b["curve"]
    assert a["run_id"] == b["run_id"] != c["run_id"]
    assert c["val_loss"] != a["val_loss"]


def test_rerun_is_a_no_op(seed_0_store):
    (record,) = seed_0_store.glob("runs/*/record.json")
    first = record.read_bytes()
    proc = run_cli("train", *SMALL_RUN, "seed=0", f"store={seed_0_store}", check=True)
    assert "nothing to do" in proc.stdout
    assert list(seed_0_store.glob("runs/*/record.json")) == [record] and record.read_bytes() == first


@pytest.mark.parametrize(
    "args, names",
    [
        (["model=d33"], ["model/d33", "d32"]),  # unknown model name, lists valid ones
        (["budget=1e8"], ["budget", "1e+08", "min_steps"]),  # too small for min_steps
        (["data=text", "data.path=/no/such/file.txt"], ["data.path", "/no/such/file.txt"]),
        (["budget=-5"], ["budget", "-5", "positive"]),
        (["budget=lots"], ["budget", "lots"]),  # non-numeric
        (["learning_rate=3"], ["learning_rate"]),  # unknown key
        (["train.batch_size=0"], ["train.batch_size", "0", "positive"]),
        (["optim.lr=-1e-3"], ["optim.lr", "-0.001"]),
        (["param_count=embedding"], ["param_count", "embedding", "non_embedding"]),
        (["model=nearest"], ["model.target_params"]),
        (["model.target_params=1e5"], ["model.target_params", "model=nearest only, not model=d32"]),  # was unused
        # user19: the law's batch replaced the one asked for, silently
        (["optim.lr_law=step_law", "train.batch_size=4"], ["train.batch_size", "optim.batch_law=false"]),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, args, names):
    proc = run_cli("train", *args, f"store={tmp_path}", "tracking=none", timeout=120)
    assert_one_line_error(proc, *names)
    assert not (tmp_path / "runs").exists(), "nothing may be written before the config is valid"


def test_the_default_store_is_results_single_or_the_sweeps_name():
    """conf/config.yaml's store: a plain `scaling train` (sweep "") writes to results/single, not to
    results/ itself; a sweep named quick to results/quick."""
    from scaling.train_app import compose_config

    assert compose_config([]).store == "results/single"
    assert compose_config(["sweep=quick"]).store == "results/quick"
    assert compose_config(["sweep=quick", "store=elsewhere"]).store == "elsewhere"


def test_status_of_a_store_of_single_runs_reports_its_runs(tmp_path, seed_0_store):
    """A store of `scaling train` runs has no sweep plan: `scaling status` reports the runs it holds
    (before, "no sweep plan here"), in a sweep's line, with a failed run's reason and a running run."""
    import shutil

    from scaling.store import RunPaths, run_lock

    store = shutil.copytree(seed_0_store, tmp_path / "store")
    diverged = run_cli("train", *SMALL_RUN, "optim.lr=1e30", f"store={store}")
    assert diverged.returncode == 3, diverged.stderr
    (completed,), (failed,) = ([r for r in records(store) if r["status"] == s] for s in ("completed", "failed"))
    with run_lock(RunPaths(store, "0123456789ab")) as mine:  # a run another process trains now
        assert mine
        status = run_cli("status", store, check=True).stdout
        progress = json.loads(run_cli("status", store, "--json", check=True).stdout)
    assert status.splitlines() == [
        f"[{store}] 2/3 runs done (no sweep plan: runs of `scaling train`) (1 completed, 1 failed), 1 running, "
        f"0 pending; {completed['flops'] + failed['flops']:.3g} FLOPs trained",
        f"  failed: {failed['run_id']} ({failed['reason']})",
        "  running: 0123456789ab",
    ]
    assert progress["sweep"] is None and progress["planned"] == 3 and progress["eta_s"] is None
    assert (progress["completed"], progress["failed"], progress["running"]) == (1, 1, 1)
    documented = (
        "sweep planned dropped duplicates completed failed errored running pending resumable skipped flops_total"
        " flops_done"
    )
    documented += " failed_runs running_runs elapsed_s eta_s"  # docs/CONTRACTS.md, `scaling status --json`
    assert sorted(progress) == sorted(documented.split())
