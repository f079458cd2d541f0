"""Hyperparameter sweeps and LR laws, through the real `scaling` CLI (issue 14, the sweep side).

- a sweep with no hyperparameter axes plans the run ids it always did (the identity as it was before
  the axes existed, frozen below); an LR sweep's 1x run is the plain sweep's run;
- lr_multipliers x batch_sizes x warmup_fracs: each run's values in its config and record, the cost
  printed before launching;
- lr_refine: stage 2's LRs are the geometric midpoints around each (shape, budget)'s best coarse LR
  by val_loss, in the same invocation; a relaunch plans the same runs and trains nothing;
- optim.lr_law=FIT.json: every record's lr is the law's at its N (non-embedding), D and C = 6ND,
  and its batch the law's batch_tokens in whole sequences; presets by name; bad laws and bad sweep
  settings are one `error:` line, exit 2, nothing written;
- sweeps/lr-quick.yaml plans what its header promises.

About 40 s on an idle 2-core machine (tiny models at budgets of 1e8-4e8 FLOPs, a few dozen steps).
"""

import json
import math
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from conftest import TINY_TRAIN as SHARED_TINY_TRAIN
from conftest import assert_one_line_error, run_cli
from omegaconf import OmegaConf

from scaling import hplaws
from scaling.flops import flops_6nd, tokens_6nd
from scaling.plan import NOT_IDENTITY, NOT_IDENTITY_TRAIN, plan_run
from scaling.shapes import ARCHITECTURE, default_lr
from scaling.store import run_id
from scaling.train_app import compose_config

# d32 at seq_len 32 (N = 21,984): 2 x 32 = 64 tokens per step; 2e8 FLOPs buys 24 steps.
TINY_TRAIN = [*SHARED_TINY_TRAIN, "hydra.sweeper.tokens_per_param=[0,1e9]", "tracking=none"]
# with a law that sets the batch, train.batch_size is refused (user19: ignored, silently)
LAW_TRAIN = [o for o in TINY_TRAIN if not o.startswith("train.batch_size=")]


def sweep(*args, store: Path, check: bool = True):
    return run_cli("sweep", *args, f"store={store}", cwd=store.parent, check=check)


def records(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]


def dry_run_ids(store: Path, *args) -> dict[str, str]:
    """overrides (budget, model) -> run id of a dry run's plan."""
    sweep(*args, "hydra.sweeper.dry_run=true", store=store)
    runs = json.loads((store / "sweep.dry-run.json").read_text())["runs"]
    return {" ".join(o for o in r["overrides"] if o.startswith(("budget=", "model="))): r["run_id"] for r in runs}


def identity_before_hp_axes(cfg, gates_at_defaults: bool = False) -> str:
    """The run id as scaling.plan computed it before optim.lr_multiplier/lr_law/batch_law existed
    (frozen copy): the resolved config minus the non-identity sections, the model as its shape and LR;
    ``gates_at_defaults``: with train.min_steps, train.allow_repeat and optim.lr at their defaults."""
    plan = plan_run(cfg)
    c = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in cfg.items()}
    c = {k: v for k, v in c.items() if k not in NOT_IDENTITY}
    if gates_at_defaults:
        c["train"].update(min_steps=100, allow_repeat=False)
        c["optim"]["lr"] = None
    for key in NOT_IDENTITY_TRAIN:
        c["train"].pop(key, None)
    for key in ("lr_multiplier", "lr_law", "batch_law", "warmup_steps"):  # the keys that did not exist
        c["optim"].pop(key)
    for key in ("schedule", "cooldown_frac", "branches"):  # nor did WSD's (scaling.schedule)
        c["train"].pop(key)
    c.pop("eval")  # nor did evaluation sets (scaling.evalsets: unconfigured, not in the identity)
    for key in ("max_train_tokens", "cut", "cut_seed"):  # nor the data cut's keys in the schema (null)
        c["data"].pop(key)
    s = plan.shape
    c["model"] = {"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head, "lr": plan.lr}
    c["model"]["architecture"] = ARCHITECTURE
    c["budget"] = float(c["budget"])
    from scaling import data as data_lib

    return run_id({**c, "corpus_fingerprint": data_lib.load_corpus(cfg.data).fingerprint})


# ---------------------------------------------------------------- run ids without axes
def test_no_hp_axes_plans_the_run_ids_of_before(tmp_path):
    """A fresh store's ids are those of before with train.min_steps at its default (scaling.plan.SPELLINGS:
    tiny sets 20); a store holding the runs under their ids of before keeps them (not trained again)."""
    ids = dry_run_ids(tmp_path / "a", "tiny")
    assert len(ids) == 3
    before = {}
    for label, rid in ids.items():
        overrides = [*label.split(), "sweep=tiny", f"store={tmp_path / 'a'}", "tracking=none"]
        cfg = compose_config(overrides, config_name="tiny")
        before[label] = identity_before_hp_axes(cfg)
        assert rid == identity_before_hp_axes(cfg, gates_at_defaults=True), label
        assert rid != before[label]  # tiny's min_steps is 20
        (tmp_path / "old" / "runs" / before[label]).mkdir(parents=True)
    assert dry_run_ids(tmp_path / "old", "tiny") == before
    # user26: an LR grid's optim.lr=0.004 where the stored run had none (d32's own LR): that run, not a new one
    old_d32 = {label: rid for label, rid in before.items() if "model=d32" in label}
    assert dry_run_ids(tmp_path / "old", "tiny", "model=d32", "hydra.sweeper.lr_grid=[0.004]") == old_d32
    # another spelling of the same runs (a gate, an LR given as optim.lr): the same ids
    assert dry_run_ids(tmp_path / "b", "tiny", "train.min_steps=10", "train.allow_repeat=true") == ids
    d32 = {label: rid for label, rid in ids.items() if "model=d32" in label}  # tiny's d32 trains at the ladder's 0.004
    assert dry_run_ids(tmp_path / "c", "tiny", "model=d32", "optim.lr=0.004") == d32
    # the 1x point of an LR sweep is the plain sweep's run (same store: skipped, not retrained)
    lr_ids = dry_run_ids(tmp_path / "b", "tiny", "hydra.sweeper.lr_multipliers=[1]")
    assert lr_ids == ids


# ---------------------------------------------------------------- axes, records, cost
@pytest.fixture(scope="module")
def axes_store(tmp_path_factory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("axes") / "store"
    proc = sweep(
        "tiny",
        "budget=2e8",
        "model=d32",
        "hydra.sweeper.lr_multipliers=[0.5,2]",
        "hydra.sweeper.batch_sizes=[2,4]",
        "hydra.sweeper.warmup_fracs=[0.1]",
        *TINY_TRAIN,
        store=store,
    )
    return store, proc.stdout


def test_each_run_records_its_lr_batch_and_warmup(axes_store):
    store, stdout = axes_store
    recs = records(store)
    got = sorted((r["config"]["optim"]["lr_multiplier"], r["batch_size"], r["warmup_frac"]) for r in recs)
    assert got == [(0.5, 2, 0.1), (0.5, 4, 0.1), (2.0, 2, 0.1), (2.0, 4, 0.1)]
    for r in recs:
        assert r["status"] == "completed"
        assert r["lr"] == default_lr(32) * r["config"]["optim"]["lr_multiplier"]
        assert r["tokens"] == r["steps"] * r["batch_size"] * 32
    table = pd.read_csv(store / "table.csv")
    assert set(table.warmup_frac) == {0.1} and set(table.batch_size) == {2, 4}
    # the cost before launching: 4 runs against the 1 run of the same sweep without the axes
    cost = next(line for line in stdout.splitlines() if "cost:" in line)
    assert "4 runs" in cost and "the 1 runs" in cost and "4.00x" in cost, cost


# ---------------------------------------------------------------- coarse, then refined
def test_lr_refine_adds_midpoints_around_the_best_and_resumes(tmp_path):
    store = tmp_path / "store"
    args = (
        "tiny",
        "budget=2e8",
        "model=d32",
        "hydra.sweeper.lr_multipliers=[0.25,1,4]",
        "hydra.sweeper.lr_refine=true",
    )
    proc = sweep(*args, *TINY_TRAIN, store=store)
    assert "lr_refine: stage 2" in proc.stdout
    recs = records(store)
    mult = {r["config"]["optim"]["lr_multiplier"]: r["val_loss"] for r in recs}
    coarse = {m: loss for m, loss in mult.items() if m in (0.25, 1.0, 4.0)}
    best = min(coarse, key=coarse.get)
    grid = [0.25, 1.0, 4.0]
    i = grid.index(best)
    expected = {math.sqrt(grid[k] * best) for k in (i - 1, i + 1) if 0 <= k < 3}
    assert set(mult) - set(grid) == expected
    assert len(recs) == 3 + len(expected)
    # the manifest holds both stages, as launched once (user22: stage 1's runs read "skipped as already done" and
    # the launch time was stage 2's); a relaunch plans the same runs and trains none
    manifest = json.loads((store / "sweep.json").read_text())
    assert len(manifest["runs"]) == len(recs) and {r["state_at_launch"] for r in manifest["runs"]} == {"new"}
    first = min(datetime.fromisoformat(r["started_at"]) for r in recs)
    assert datetime.fromisoformat(manifest["launched_at"]) <= first
    assert f"{len(recs)} completed, 0 failed, 0 skipped as already done" in proc.stdout.splitlines()[-1]
    again = sweep(*args, *TINY_TRAIN, store=store)
    assert "launching" not in again.stdout and len(records(store)) == len(recs)


# ---------------------------------------------------------------- LR and batch from a law
LAW = {
    "lr": {
        "form": "step_law",
        "coefficient": {"estimate": 0.9, "interval": [0.5, 1.2]},
        "n_exponent": -0.4,
        "d_exponent": 0.05,
    },
    "batch_tokens": {"form": "step_law", "coefficient": 1.5, "d_exponent": 0.4},
}


def test_a_sweep_from_a_fitted_lr_law_trains_at_its_rates(tmp_path):
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"approach3": {}, "hyperparameter_laws": LAW}))
    store = tmp_path / "store"
    proc = sweep("tiny", "budget=2e8,4e8", "model=d32", f"optim.lr_law={fit}", *LAW_TRAIN, store=store)
    assert f"peak LR from optim.lr_law={fit}: " in proc.stdout
    recs = records(store)
    assert len(recs) == 2
    for r in recs:
        law_lr = hplaws.evaluate(
            LAW["lr"],
            n_non_embedding=r["params_non_embedding"],
            tokens=r["tokens"],
            flops=flops_6nd(r["params"], r["tokens"]),
        )
        assert r["lr"] == pytest.approx(law_lr, rel=1e-12, abs=0)
        b_tokens = hplaws.evaluate(
            LAW["batch_tokens"],
            n_non_embedding=r["params_non_embedding"],
            tokens=tokens_6nd(r["budget_flops"], r["params"]),
            flops=r["budget_flops"],
        )
        assert r["batch_size"] == max(1, round(b_tokens / 32)) and r["batch_size"] != 2
    # optim.batch_law=false keeps train.batch_size; the LR still from the law
    dry = tmp_path / "dry"
    sweep(
        "tiny",
        "budget=2e8",
        "model=d32",
        f"optim.lr_law={fit}",
        "optim.batch_law=false",
        "hydra.sweeper.dry_run=true",
        *TINY_TRAIN,
        store=dry,
    )
    runs = json.loads((dry / "sweep.dry-run.json").read_text())["runs"]
    assert runs[0]["tokens"] % (2 * 32) == 0


def test_a_law_whose_fit_left_a_value_unidentified_is_trained_with_a_warning(tmp_path):
    """review15c: `optimal` marks a recommendation from an unidentified exponent; a run trained with it said
    nothing. A term the fit left out (exponent 0, `hplaws.WITHOUT_TERM`) is not warned about."""
    law = json.loads(json.dumps(LAW))
    law["batch_tokens"]["d_exponent"] = {"estimate": 0.4, "unidentified": "best batch size at the grid's edge"}
    law["lr"]["d_exponent"] = {
        "estimate": 0.0,
        "unidentified": f"ln D a linear function of ln N; {hplaws.WITHOUT_TERM}",
    }
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"approach3": {}, "hyperparameter_laws": law}))
    args = ("tiny", "budget=2e8", "model=d32", f"optim.lr_law={fit}", "hydra.sweeper.dry_run=true", *LAW_TRAIN)
    said = sweep(*args, store=tmp_path / "s").stderr
    assert said.count("warning: optim.lr_law:") == 1, said
    assert "the batch_tokens law's d_exponent unidentified by its fit (best batch size at the grid's edge)" in said
    quiet = sweep(*args, "optim.batch_law=false", "train.batch_size=2", store=tmp_path / "q").stderr
    assert "warning: optim.lr_law" not in quiet


def test_a_preset_law_by_name(tmp_path):
    proc = sweep(
        "tiny",
        "budget=1e9",
        "model=d32",
        "optim.lr_law=deepseek",
        "hydra.sweeper.dry_run=true",
        *LAW_TRAIN,
        store=tmp_path / "store",
    )
    assert "peak LR from optim.lr_law=deepseek: " in proc.stdout


@pytest.mark.parametrize(
    "override, named",
    [
        ("optim.lr_law=no-such-law", "optim.lr_law"),
        ("optim.lr_law=BAD", "optim.lr_law"),  # a file without hyperparameter_laws
        ("hydra.sweeper.lr_multipliers=[0,1]", "hydra.sweeper.lr_multipliers"),
        ("hydra.sweeper.lr_refine=true", "hydra.sweeper.lr_refine"),
        ("hydra.sweeper.warmup_fracs=[1.5]", "hydra.sweeper.warmup_fracs"),
        ("hydra.sweeper.batch_sizes=[2.5]", "hydra.sweeper.batch_sizes"),
    ],
)
def test_bad_hp_settings_are_one_line(tmp_path, override, named):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"approach3": {}}))
    store = tmp_path / "store"
    proc = sweep("tiny", override.replace("BAD", str(bad)), *TINY_TRAIN, store=store, check=False)
    assert_one_line_error(proc, named)
    assert not store.exists()  # not even the directory made to check it is writable


def test_a_warmup_axis_may_hold_no_warmup(tmp_path):
    """warmup_fracs=[0, ...] as optim.warmup_frac=0 is (user: it was refused, 'numbers in (0, 1)')."""
    sweep("tiny", "hydra.sweeper.warmup_fracs=[0,0.05]", "hydra.sweeper.dry_run=true", store=tmp_path)
    runs = json.loads((tmp_path / "sweep.dry-run.json").read_text())["runs"]
    fracs = sorted({o for r in runs for o in r["overrides"] if o.startswith("optim.warmup_frac=")})
    assert fracs == ["optim.warmup_frac=0.0", "optim.warmup_frac=0.05"]


# ---------------------------------------------------------------- the sweep file
def test_lr_quick_plans_lrs_per_size_over_a_decade(tmp_path):
    store = tmp_path / "store"
    proc = sweep("lr-quick", "hydra.sweeper.dry_run=true", store=store)
    runs = pd.DataFrame(json.loads((store / "sweep.dry-run.json").read_text())["runs"])
    runs["mult"] = [
        next(float(o.split("=")[1]) for o in ov if o.startswith("optim.lr_multiplier=")) for ov in runs.overrides
    ]
    per_size = runs.groupby(["budget_flops", "shape"]).mult.nunique()
    assert len(per_size) >= 12 and (per_size >= 5).all()
    assert runs.budget_flops.max() / runs.budget_flops.min() >= 10
    assert json.loads((store / "sweep.dry-run.json").read_text())["dropped"] == []
    assert "6.00x" in proc.stdout
