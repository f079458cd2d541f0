"""Packed runs (scaling/packed.py, scaling/packed_train.py) against separate runs of the same configs.

Tolerance: a packed member is not bit-identical to its separate run. Its GEMMs are batched
(``baddbmm``/``bmm`` over K members instead of ``addmm``), its LayerNorm's affine is a separate
``addcmul`` and its loss a per-member mean, so sums are taken in another order: fp32 rounding, about
1e-7 relative per op. Training amplifies it (Adam divides each update by √v, so tiny gradient
differences become weight differences of order lr·1e-6). Measured on 2026-11-25 over these tests'
runs (d16, d32, 19-29 steps, LRs 0.5-2x the ladder's): at most 1.0e-5 nats on any curve point's
training or held-out loss. The tests allow 1e-4 nats: 10x the measured deviation, and still 100x
below the smallest loss difference the analysis resolves between two runs (~1e-2 nats between
neighbouring LRs here). It holds for sane LRs only: at 100x the ladder's LR (d16, lr 0.57) training is
chaotic and the final losses differed by 8e-4 nats (measured the same day); a diverging member is
tested for its status and step instead.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from conftest import assert_one_line_error, run_cli

from scaling.errors import ConfigError
from scaling.packed import PackedAdamW, PackedGPT, build_members, clip_per_member
from scaling.packed_store import train_packed_runs
from scaling.packed_train import train_packed
from scaling.plan import plan_run
from scaling.shapes import shape_for_width
from scaling.store import read_record, read_store
from scaling.train import train
from scaling.train_app import compose_config

LOSS_TOL = 1e-4  # nats; see the module docstring


def _stacked(k: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(k, 5, 3, generator=g), torch.randn(k, 3, generator=g), torch.randn(k, 4, 2, generator=g)]


def test_packed_adamw_is_torch_adamw_per_member_at_its_own_lr():
    k, lrs = 3, [1e-2, 3e-3, 0.0]
    params = [p.requires_grad_() for p in _stacked(k)]
    packed = PackedAdamW(params, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    members = [[p[i].detach().clone().requires_grad_() for p in params] for i in range(k)]
    refs = [
        torch.optim.AdamW(
            [{"params": [m[0], m[2]], "weight_decay": 0.1}, {"params": [m[1]], "weight_decay": 0.0}],
            lr=lr,
            betas=(0.9, 0.99),
            eps=1e-8,
            foreach=False,
        )
        for m, lr in zip(members, lrs)
    ]
    for step in range(5):
        grads = _stacked(k, seed=step + 1)
        for p, g in zip(params, grads):
            p.grad = g.clone()
        packed.step(torch.tensor(lrs))
        for i, (m, opt) in enumerate(zip(members, refs)):
            for p, g in zip(m, grads):
                p.grad = g[i].clone()
            opt.step()
    for i, m in enumerate(members):
        for p, ref in zip(params, m):
            torch.testing.assert_close(p[i].detach(), ref.detach(), rtol=1e-6, atol=1e-7)
    assert torch.equal(params[0][2].detach(), _stacked(k)[0][2]), "a member at lr 0 must not move"


def test_clipping_is_each_members_own_global_norm():
    params = [p.requires_grad_() for p in _stacked(2)]
    grads = _stacked(2, seed=7)
    for g in grads:
        g[1] *= 1e-2  # member 1's global norm is below the threshold: left alone
    for p, g in zip(params, grads):
        p.grad = g.clone()
    norms = clip_per_member(params, max_norm=1.0)
    assert norms[0] > 1 > norms[1]
    for i in range(2):
        ref = [g[i].clone().requires_grad_() for g in grads]
        for r, g in zip(ref, grads):
            r.grad = g[i].clone()
        ref_norm = torch.nn.utils.clip_grad_norm_(ref, 1.0)
        assert math.isclose(norms[i].item(), ref_norm.item(), rel_tol=1e-6)
        for p, r in zip(params, ref):
            torch.testing.assert_close(p.grad[i], r.grad, rtol=1e-6, atol=1e-9)


def test_packed_model_is_the_members_models_in_loss_and_gradient():
    shape = shape_for_width(32, seq_len=16)
    members = build_members(shape, [0, 1, 2])
    packed = PackedGPT(build_members(shape, [0, 1, 2]))
    idx = torch.randint(0, shape.vocab_size, (3, 4, 17), generator=torch.Generator().manual_seed(0))
    losses = packed(idx[..., :-1], idx[..., 1:])
    losses.sum().backward()
    for k, model in enumerate(members):
        _, loss = model(idx[k, :, :-1], idx[k, :, 1:])
        loss.backward()
        assert abs(losses[k].item() - loss.item()) < 1e-6
        for name, p in zip(packed.names, packed.params):
            ref = dict(model.named_parameters())[name]
            assert torch.equal(p[k].detach(), ref.detach()), f"{name}: initialisation differs"
            torch.testing.assert_close(p.grad[k], ref.grad, rtol=1e-4, atol=1e-7, msg=name)


BASE = ["tracking=none", "train.eval_tokens=8192", "train.evals=3", "train.threads=1", "train.min_steps=10"]
# seed, LR and length (budget) all differ between members
MEMBERS = {
    "d16": [
        ["seed=0", "budget=3e9"],
        ["seed=1", "budget=3e9", "optim.lr_multiplier=2"],
        ["seed=2", "budget=2e9", "optim.lr_multiplier=0.5"],
    ],
    "d32": [
        ["seed=0", "budget=9e9"],
        ["seed=1", "budget=9e9", "optim.lr_multiplier=2"],
        ["seed=2", "budget=6e9", "optim.lr_multiplier=0.5"],
    ],
}


LOSS_KEYS = ("val_loss", "val_bpb", "train_loss")
PACKING_KEYS = {"packed_with", "pack_job", "pack_tokens_per_s"}
TIMING_KEYS = ("wall_time_s", "tokens_per_s", "flops_per_s", "started_at", "finished_at", "curve")


@pytest.mark.parametrize("model", sorted(MEMBERS))
def test_packed_runs_write_the_records_of_separate_runs(tmp_path, model):
    overrides = [[f"model={model}", *BASE, *m] for m in MEMBERS[model]]
    cfgs = [compose_config([f"store={tmp_path / 'packed'}", *o]) for o in overrides]
    assert len({plan_run(c).steps for c in cfgs}) == 2 and len({plan_run(c).lr for c in cfgs}) == 3
    packed = train_packed_runs(cfgs, log=lambda *a: None)
    assert train_packed_runs(cfgs, log=lambda *a: None) == [], "finished runs are not trained again"
    for o, ours in zip(overrides, packed):
        theirs = train(compose_config([f"store={tmp_path / 'separate'}", *o]), log=lambda *a: None)
        stored = read_record(tmp_path / "packed" / "runs" / ours["run_id"] / "record.json")
        assert json.dumps(ours, sort_keys=True) == json.dumps(stored, sort_keys=True)
        assert ours["status"] == "completed" and ours.keys() - PACKING_KEYS == theirs.keys()
        assert ours["packed_with"] == [r["run_id"] for r in packed] and ours["pack_job"] == packed[0]["pack_job"]
        # the job's rate over this run's steps: 3 runs' tokens in each of the shorter run's steps, 2 or 3
        # in the longer runs' (the shorter one ended first)
        ratio = ours["pack_tokens_per_s"] / ours["tokens_per_s"]
        assert math.isclose(ratio, 3) if ours["steps"] == min(r["steps"] for r in packed) else 2 < ratio < 3
        assert {**ours["config"], "store": ""} == {**theirs["config"], "store": ""}
        for key in theirs.keys() - {*LOSS_KEYS, *TIMING_KEYS, "config"}:
            assert json.dumps(ours[key]) == json.dumps(theirs[key]), key  # NaN (loss_floor) equal to NaN
        for key in LOSS_KEYS:
            assert abs(ours[key] - theirs[key]) < LOSS_TOL, key
        assert len(ours["curve"]) == len(theirs["curve"])
        for a, b in zip(ours["curve"], theirs["curve"]):
            assert {k: a[k] for k in ("step", "tokens", "flops", "lr")} == {
                k: b[k] for k in ("step", "tokens", "flops", "lr")
            }
            assert abs(a["train_loss"] - b["train_loss"]) < LOSS_TOL
            assert math.isnan(a["val_loss"]) == math.isnan(b["val_loss"])
            if not math.isnan(a["val_loss"]):
                assert abs(a["val_loss"] - b["val_loss"]) < LOSS_TOL


@pytest.mark.parametrize(
    ("override", "key"),
    [("model=d16", "model"), ("train.batch_size=8", "train.batch_size"), ("optim.beta2=0.95", "optim.beta2")],
)
def test_members_that_cannot_share_a_step_are_refused_naming_the_key(override, key):
    cfgs = [
        compose_config(["model=d32", *BASE, "budget=9e9"]),
        compose_config(["model=d32", *BASE, "budget=9e9", override]),
    ]
    with pytest.raises(ConfigError, match=f"^{key}"):
        train_packed(cfgs, log=lambda *a: None)


SWEEP = [
    "sweep",
    "tiny",
    "hydra.sweeper.budgets=[1e10]",
    "hydra.sweeper.models=[d32]",
    "hydra.sweeper.lr_multipliers=[0.5,2]",
    "train.min_steps=10",
]


def test_a_packed_lr_sweep_writes_the_unpacked_sweeps_runs(tmp_path):
    packed = run_cli(*SWEEP, "hydra.sweeper.pack=true", f"store={tmp_path / 'packed'}", check=True)
    assert "launching 2 runs as 1 jobs, 1 of them packed" in packed.stdout and "packed: 2 runs of d32" in packed.stdout
    run_cli(*SWEEP, f"store={tmp_path / 'separate'}", check=True)
    ours = {r["run_id"]: r for r in map(read_record, (tmp_path / "packed").glob("runs/*/record.json"))}
    theirs = {r["run_id"]: r for r in map(read_record, (tmp_path / "separate").glob("runs/*/record.json"))}
    assert len(ours) == 2 and ours.keys() == theirs.keys()
    for run_id, record in ours.items():
        assert record["status"] == "completed" and "pack" not in record["config"]
        assert abs(record["val_loss"] - theirs[run_id]["val_loss"]) < LOSS_TOL
        assert record["lr"] == theirs[run_id]["lr"]
    # table.csv says which runs were packed, and the job's rate beside each run's own
    packed_table, separate_table = (read_store(tmp_path / s).runs for s in ("packed", "separate"))
    assert packed_table.pack_job.nunique() == 1 and (packed_table.pack_tokens_per_s > packed_table.tokens_per_s).all()
    assert (separate_table.pack_job == "").all() and separate_table.pack_tokens_per_s.isna().all()


def test_packing_a_sweep_without_an_lr_axis_is_refused_naming_the_setting(tmp_path):
    proc = run_cli("sweep", "tiny", "hydra.sweeper.pack=true", f"store={tmp_path}")
    assert_one_line_error(proc, "hydra.sweeper.pack")
    assert not (tmp_path / "runs").exists()


def test_packed_runs_refuse_bf16_before_writing_anything(tmp_path):
    cfgs = [
        compose_config(["model=d32", *BASE, "budget=9e9", f"store={tmp_path}", "train.precision=bf16", s])
        for s in ("seed=0", "seed=1")
    ]
    with pytest.raises(ConfigError, match="^train.precision"):
        train_packed_runs(cfgs, log=lambda *a: None)
    assert not (tmp_path / "runs").exists()


def test_a_diverging_member_fails_as_its_separate_run_and_leaves_the_others_alone(tmp_path):
    overrides = [["model=d16", "budget=3e9", *BASE, *m] for m in (["seed=0"], ["seed=1", "optim.lr_multiplier=1000"])]
    packed = train_packed_runs(
        [compose_config([f"store={tmp_path / 'p'}", *o]) for o in overrides], log=lambda *a: None
    )
    separate = [train(compose_config([f"store={tmp_path / 's'}", *o]), log=lambda *a: None) for o in overrides]
    assert [r["status"] for r in packed] == [r["status"] for r in separate] == ["completed", "failed"]
    assert packed[1]["failure"] == separate[1]["failure"] == "diverged"
    assert [re.search(r"at step (\d+)", r["reason"])[1] for r in (packed[1], separate[1])] == ["10", "10"]
    assert abs(packed[0]["val_loss"] - separate[0]["val_loss"]) < LOSS_TOL


def test_a_compiled_pack_trains_as_the_eager_pack(tmp_path):
    """train.compile=true: the packed forward under torch.compile (what pays on a GPU: README,
    Benchmarks 6) gives the eager pack's losses within LOSS_TOL (fused kernels sum in another order).
    In compile_mode reduce-overhead: on a CPU inductor's code is the default mode's (CUDA graphs are
    for GPUs), so this checks the step function's wrapper and the copies of the losses read later."""
    # unequal budgets: the shorter run leaves the pack, and the compiled forward recompiles for K = 1
    overrides = [["model=d16", *BASE, *m] for m in (["seed=0", "budget=3e9"], ["seed=1", "budget=2e9"])]
    mode = ["train.compile_mode=reduce-overhead"]
    runs = {
        c: train_packed_runs(
            [compose_config([f"store={tmp_path / c}", f"train.compile={c}", *mode, *o]) for o in overrides],
            log=lambda *a: None,
        )
        for c in ("false", "true")
    }
    for eager, compiled in zip(runs["false"], runs["true"]):
        assert compiled["status"] == eager["status"] == "completed"
        assert compiled["run_id"] == eager["run_id"]  # compile is not part of a run's identity
        assert len(compiled["curve"]) == len(eager["curve"])
        for a, b in zip(compiled["curve"], eager["curve"]):
            assert abs(a["train_loss"] - b["train_loss"]) < LOSS_TOL
        assert abs(compiled["val_loss"] - eager["val_loss"]) < LOSS_TOL


def test_a_member_diverging_between_points_leaves_before_a_checkpoint(tmp_path):
    """Losses are read at curve points (and before a checkpoint): a member found diverged there leaves
    the pack before it is checkpointed, and the others keep their own losses (review of 2026-11-26: a
    checkpoint every step once gave a healthy member its neighbour's diverged loss)."""
    members = [["seed=1", "optim.lr_multiplier=1000"], ["seed=0"], ["seed=2"]]
    sparse = ["model=d16", "budget=3e9", *BASE, "train.log_points=1", "train.evals=1"]
    runs = {
        interval: train_packed_runs(
            [
                compose_config([f"store={tmp_path / interval}", *sparse, f"train.checkpoint_interval_s={interval}", *m])
                for m in members
            ],
            log=lambda *a: None,
        )
        for interval in ("0", "1e-6")
    }
    for plain, checkpointed in zip(runs["0"], runs["1e-6"]):
        assert (plain["status"], plain["reason"]) == (checkpointed["status"], checkpointed["reason"])
        assert json.dumps(plain["val_loss"]) == json.dumps(checkpointed["val_loss"])
    assert [r["status"] for r in runs["1e-6"]] == ["failed", "completed", "completed"]
