"""Architectures (model.arch=gpt2|llama) and bring-your-own models (model._target_): exact counts
against the built modules, run ids, a real llama run, a factory's model swept end to end, bad input."""

import json
import math
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, assert_one_line_error, run_cli
from conftest import TINY_TRAIN as SHARED_TINY_TRAIN
from omegaconf import OmegaConf

from scaling.byo import build_model, module_counts
from scaling.flops import flops_per_token_with_attention
from scaling.llama import NORM_EPS, Llama, RMSNorm, _RMSNormFunction, _RopeQKV, apply_rope, rope_table
from scaling.model import GPT
from scaling.shapes import (
    ARCHITECTURES,
    CONF_DIR,
    ModelShape,
    lookup_only_params,
    model_flops_per_token,
    param_counts,
    shape_for_width,
    swiglu_hidden,
)
from scaling.store import read_store

LADDER = sorted(p.stem for p in (CONF_DIR / "model").glob("d*.yaml"))
TINY_TRAIN = [*SHARED_TINY_TRAIN, "tracking=none"]
sys.path.insert(0, str(ROOT))  # examples/, as PYTHONPATH=. gives the CLI
WITH_EXAMPLES = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


# ---------------------------------------------------------------- exact counts, every ladder shape
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("name", LADDER)
def test_llama_closed_form_counts_equal_built_model(name, tied):
    m = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")
    shape = ModelShape(m.n_layer, m.d_model, m.n_head, name=m.name, arch="llama", tied_head=tied)
    with torch.device("meta"):  # no memory for the large GPU shapes
        model = Llama(shape)
    counts = param_counts(shape)
    assert counts["total"] == sum(p.numel() for p in model.parameters())  # a tied head once
    assert counts["non_embedding"] == counts["total"] - model.wte.weight.numel()  # no position table
    assert counts == module_counts(model) == {"total": model.num_params(), "non_embedding": model.num_params(True)}
    assert not any(n.endswith("bias") for n, _ in model.named_parameters())  # no biases anywhere
    assert (model.head.weight is model.wte.weight) == tied


@pytest.mark.parametrize("arch,tied", [("gpt2", True), ("llama", True), ("llama", False)])
@pytest.mark.parametrize("d", [16, 64, 128])
def test_model_flops_count_the_weights_that_multiply(arch, tied, d):
    """MFU's FLOPs per token: 6 per weight of every nn.Linear (a tied embedding is the head's), plus
    attention's 12·L·d·T; a table that is only looked up (gpt2's positions, an untied llama's token
    embedding) does no matmul, so it is not counted."""
    shape = shape_for_width(d, arch=arch, tied_head=tied)
    model = build_model(shape)
    linear = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)}
    lookup = [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding) and id(m.weight) not in linear]
    assert lookup_only_params(shape) == sum(w.numel() for w in lookup)
    # every parameter but the lookups, biases and norm gains is a Linear's weight
    small = sum(p.numel() for p in model.parameters() if p.dim() == 1)
    assert param_counts(shape)["total"] - lookup_only_params(shape) == sum(linear.values()) + small
    attention = 12 * shape.n_layer * d * shape.seq_len
    assert model_flops_per_token(shape) == 6 * (sum(linear.values()) + small) + attention


@pytest.mark.parametrize("name", LADDER)
def test_swiglu_keeps_the_mlp_and_the_flops_of_gpt2_at_the_same_width(name):
    d = int(name[1:])
    h = swiglu_hidden(d)
    assert h % 8 == 0 and abs(h - 8 * d / 3) <= 4
    assert abs(3 * d * h / (8 * d * d) - 1) < 0.07  # SwiGLU's 3·d·h against GPT-2's 8·d²
    gpt2, llama = shape_for_width(d), shape_for_width(d, arch="llama")
    n_gpt2, n_llama = param_counts(gpt2)["non_embedding"], param_counts(llama)["non_embedding"]
    # the blocks' weights (GPT-2's biases, 13·d a layer, weigh only at the smallest widths)
    assert abs(n_llama / n_gpt2 - 1) < (0.1 if d < 48 else 0.03)
    f = [flops_per_token_with_attention(n, s.n_layer, d, s.seq_len) for n, s in ((n_gpt2, gpt2), (n_llama, llama))]
    assert abs(f[1] / f[0] - 1) < (0.1 if d < 48 else 0.03)


def test_gpt2_counts_and_the_generic_counter_agree():
    shape = shape_for_width(48, vocab_size=300, seq_len=64)
    model = build_model(shape)
    assert isinstance(model, GPT)
    assert (
        module_counts(model)
        == param_counts(shape)
        == {"total": model.num_params(), "non_embedding": model.num_params(True)}
    )


def test_rope_is_a_rotation_that_depends_only_on_relative_position():
    rotations = rope_table(16, 8)
    q, k = torch.randn(8), torch.randn(8)
    rq = apply_rope(q.expand(1, 16, 1, 8), rotations)[0, :, 0]  # [B, T, H, hd]: q at every position
    rk = apply_rope(k.expand(1, 16, 1, 8), rotations)[0, :, 0]
    assert torch.allclose(rq.norm(dim=-1), q.norm().expand(16), atol=1e-5)
    dots = rq @ rk.T  # <R_i q, R_j k> depends on i − j only
    assert torch.allclose(dots[3, 1], dots[10, 8], atol=1e-4) and torch.allclose(dots[5, 5], q @ k, atol=1e-4)
    assert not torch.allclose(dots[3, 1], dots[3, 2], atol=1e-3)


def test_rmsnorm_backward_is_autograds_of_f_rms_norm():
    """The hand-written backward (scaling.llama._RMSNormFunction) against autograd through
    F.rms_norm: the same values to fp32 rounding, and a float64 gradcheck."""
    torch.manual_seed(0)
    x = (torch.randn(4, 16, 32) * 3).requires_grad_()
    norm = RMSNorm(32)
    with torch.no_grad():
        norm.weight.mul_(torch.rand(32) + 0.5)
    grad = torch.randn(4, 16, 32)
    y = norm(x)
    dx, dw = torch.autograd.grad(y, (x, norm.weight), grad)
    ref = F.rms_norm(x, (32,), norm.weight, NORM_EPS)
    ref_dx, ref_dw = torch.autograd.grad(ref, (x, norm.weight), grad)
    for a, b in ((y, ref), (dx, ref_dx), (dw, ref_dw)):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())
    with torch.no_grad():
        assert torch.equal(norm(x), ref)  # without autograd: F.rms_norm itself
    x64 = torch.randn(3, 5, 8, dtype=torch.float64, requires_grad=True)
    w64 = torch.rand(8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: _RMSNormFunction.apply(a, b, 1e-6), (x64, w64))


def test_rope_qkv_backward_is_autograds():
    """q, k rotated and v out of the qkv projection (scaling.llama._RopeQKV) against apply_rope and
    the same views under autograd, forward and backward: the same complex products (a vectorised and
    a scalar complex multiply may round the last bit differently)."""
    torch.manual_seed(0)
    for B, T, H, hd in ((3, 16, 2, 8), (4, 32, 4, 16)):
        rotations = rope_table(T, hd)
        qkv = torch.randn(B, T, 3, H, hd, requires_grad=True)
        grads = [torch.randn(B, H, T, hd) for _ in range(3)]
        ours = _RopeQKV.apply(qkv, rotations)
        qk, v = qkv.split([2, 1], dim=2)
        ref = (*apply_rope(qk, rotations).permute(2, 0, 3, 1, 4), v.squeeze(2).transpose(1, 2))
        (d_ours,) = torch.autograd.grad(ours, qkv, grads)
        (d_ref,) = torch.autograd.grad(ref, qkv, grads)
        for a, b in (*zip(ours, ref), (d_ours, d_ref)):
            assert a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-6)


def test_llama_is_causal():
    torch.manual_seed(0)
    model = Llama(ModelShape(2, 32, 2, seq_len=16, arch="llama"))
    idx = torch.randint(0, 256, (1, 16))
    changed = idx.clone()
    changed[0, 10] = (idx[0, 10] + 1) % 256
    a, _ = model(idx)
    b, _ = model(changed)
    assert torch.allclose(a[0, :10], b[0, :10], atol=1e-6) and not torch.allclose(a[0, 10:], b[0, 10:])


# ---------------------------------------------------------------- the CLI
def test_shapes_lists_the_ladder_with_llama_counts():
    out = run_cli("shapes", "model.arch=llama", "model.tied_head=false", check=True).stdout
    assert ARCHITECTURES["llama"] in out and "untied" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("d64 "))
    shape = shape_for_width(64, arch="llama", tied_head=False)
    counts = param_counts(shape)
    assert [int(x.replace(",", "")) for x in row[4:6]] == [counts["non_embedding"], counts["total"]]
    d80 = param_counts(shape_for_width(80, arch="llama"))
    nearest = run_cli("shapes", "model.arch=llama", "--nearest", str(d80["total"]), "--kind", "total").stdout
    assert nearest.splitlines()[-1].split()[::5] == ["d80", f"{d80['total']:,}"]


def _train(tmp_path, *overrides, env=None):
    return run_cli("train", "budget=1e9", "model=d16", *TINY_TRAIN, f"store={tmp_path / 'store'}", *overrides, env=env)


def test_llama_trains_on_the_built_in_data_with_its_own_run_ids(tmp_path):
    proc = _train(tmp_path, "model.arch=llama")
    assert proc.returncode == 0, proc.stderr
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "store").glob("runs/*/record.json")]
    shape = shape_for_width(16, seq_len=32, arch="llama")
    assert rec["status"] == "completed" and rec["arch"] == "llama" and rec["architecture"] == "llama-v1"
    assert (rec["params"], rec["params_non_embedding"]) == tuple(param_counts(shape).values())
    assert rec["val_loss"] < math.log(256) - 1.0  # learned well beyond the uniform guess in ~100 steps
    assert rec["curve"][-1]["train_loss"] < rec["curve"][0]["train_loss"]
    # gpt2 by default or by name is one run; llama tied and untied are two others
    archs = (["model.arch=gpt2"], [], ["model.arch=llama"], ["model.arch=llama", "model.tied_head=false"])
    ids = [_run_id(arch) for arch in archs]
    assert ids[0] == ids[1] and len(set(ids)) == 3 and rec["run_id"] == ids[2]


def _run_id(overrides, budget=1e9):
    """The run id `scaling train budget=BUDGET model=d16 TINY_TRAIN OVERRIDES` plans (in this process)."""
    from hydra import compose, initialize_config_dir

    from scaling.plan import plan_run

    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = compose("config", [f"budget={budget}", "model=d16", *TINY_TRAIN, *overrides])
    return plan_run(cfg).run_id


def test_gpt2_identity_is_what_it_was_before_model_arch():
    from hydra import compose, initialize_config_dir

    from scaling.plan import identity, resolve_shape

    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = compose("config", ["budget=1e9", "model=d64"])
    shape, lr = resolve_shape(cfg)
    assert identity(cfg, shape, lr)["model"] == {
        "n_layer": 2,
        "d_model": 64,
        "n_head": 4,
        "lr": 0.0028,
        "architecture": "gpt2-v2",
    }


# ---------------------------------------------------------------- bring your own model, end to end
@pytest.fixture(scope="module")
def byo_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("byo") / "store"
    sweep = [
        "tiny",
        "budget=2e8,4e8",
        "model=d16",
        "model._target_=examples.byo_model.build",
        "+model.kwargs.expansion=3",
        *TINY_TRAIN,
        "hydra.sweeper.tokens_per_param=[0,1e9]",
        f"store={store}",
    ]
    run_cli("sweep", *sweep, cwd=store.parent, env=WITH_EXAMPLES, check=True)
    return store


def test_a_factorys_model_sweeps_end_to_end(byo_store):
    from examples.byo_model import build

    recs = [json.loads(p.read_text()) for p in sorted(byo_store.glob("runs/*/record.json"))]
    assert sorted(r["budget_flops"] for r in recs) == [2e8, 4e8]
    model = build(ModelShape(1, 16, 2, seq_len=32), expansion=3)
    counts = model.param_counts()
    assert counts["total"] == sum(p.numel() for p in model.parameters())  # its closed form is its numel
    assert counts["non_embedding"] == counts["total"] - model.wte.weight.numel()
    for r in recs:
        assert r["status"] == "completed" and r["arch"] == "custom"
        assert r["model_target"] == "examples.byo_model.build"
        assert r["architecture"] == "custom:examples.byo_model.build"
        assert (r["params"], r["params_non_embedding"]) == (counts["total"], counts["non_embedding"])
        assert r["flops_attention"] == pytest.approx(model.flops_per_token() * r["tokens"])
        assert r["flops"] == pytest.approx(6 * r["params"] * r["tokens"])
    table = pd.read_csv(byo_store / "table.csv")
    assert set(table.architecture) == {"custom:examples.byo_model.build"}
    # the analysis reads the store with the factory's counts; two runs of one size fit no law, and
    # `scaling fit` says so having read both of them
    assert set(read_store(byo_store).runs.params) == {counts["total"]}
    assert_one_line_error(run_cli("fit", byo_store, "--approach", "3", "--bootstrap", "0"), "needs at least 6", "has 2")


def test_the_factory_and_its_kwargs_are_part_of_the_run_id(byo_store):
    ids = {r.name for r in (byo_store / "runs").iterdir()}
    byo = "model._target_=examples.byo_model.build"
    assert _run_id([byo, "+model.kwargs.expansion=3"], 2e8) in ids
    others = [_run_id([byo, "+model.kwargs.expansion=2"], 2e8), _run_id([], 2e8), _run_id(["model.arch=llama"], 2e8)]
    assert len(set(others)) == 3 and not ids & set(others)


# ---------------------------------------------------------------- bad input: one line, exit 2
BROKEN = """
import torch, torch.nn as nn

class WrongLogits(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.lin = nn.Linear(shape.d_model, shape.d_model)
    def forward(self, idx):
        return self.lin(self.wte(idx))            # [B, T, d], not [B, T, V]

class BadCounts(WrongLogits):
    def param_counts(self):
        return {"total": 10, "non_embedding": 20}

def wrong_logits(shape):
    return WrongLogits(shape)

def bad_counts(shape):
    return BadCounts(shape)

def not_a_module(shape):
    return "a string"

class NanAtInit(WrongLogits):
    def forward(self, idx):
        return torch.full((*idx.shape, 256), float("nan"))

class CountsFail(WrongLogits):
    def param_counts(self):
        raise KeyError("total")

class EmbeddingsOnly(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.wte = nn.Embedding(shape.vocab_size, shape.vocab_size)
    def forward(self, idx):
        return self.wte(idx)

def nan_at_init(shape):
    return NanAtInit(shape)

def counts_fail(shape):
    return CountsFail(shape)

def embeddings_only(shape):
    return EmbeddingsOnly(shape)
"""


@pytest.mark.parametrize(
    "overrides, names",
    [
        (["model.arch=mamba"], ["model.arch", "mamba", "gpt2", "llama"]),
        (["model.tied_head=false"], ["model.tied_head", "model.arch=gpt2"]),
        (["model._target_=no_such_pkg.build"], ["model._target_", "no_such_pkg.build", "does not import"]),
        (["model._target_=broken_models.nothing"], ["model._target_", "broken_models.nothing", "does not import"]),
        (["model._target_=broken_models.wrong_logits"], ["model._target_", "forward(idx)", "[2, 32, 256]"]),
        (["model._target_=broken_models.bad_counts"], ["model._target_", "non_embedding <= total"]),
        (["model._target_=broken_models.not_a_module"], ["model._target_", "not a torch.nn.Module"]),
        # before: trained, recorded as diverged at step 0 (exit 3)
        (["model._target_=broken_models.nan_at_init"], ["model._target_", "NaN or +inf", "initialisation"]),
        # before: a traceback
        (["model._target_=broken_models.counts_fail"], ["model._target_", "failed param_counts() (KeyError"]),
        # before: "param_counts() must return ...", for a model that has none
        (["model._target_=broken_models.embeddings_only"], ["counted without a param_counts()", "define"]),
        (["model=nearest", "model.target_params=1e4", "model._target_=examples.byo_model.build"], ["model._target_"]),
    ],
)
def test_bad_model_settings_are_one_line_and_write_nothing(tmp_path, overrides, names):
    (tmp_path / "broken_models.py").write_text(BROKEN)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    for verb in (["train"], ["sweep", "tiny", "hydra.sweeper.dry_run=true"]):
        proc = run_cli(
            *verb, "budget=1e9", "model=d16", *TINY_TRAIN, f"store={tmp_path / 'store'}", *overrides, env=env
        )
        assert_one_line_error(proc, *names)
        assert not (tmp_path / "store" / "runs").exists()


def test_scaling_shapes_rejects_an_unknown_arch_in_one_line():
    assert_one_line_error(run_cli("shapes", "model.arch=mamba"), "model.arch", "mamba", "gpt2, llama")
    assert_one_line_error(run_cli("shapes", "model.d_model=3"), "model.d_model=3", "model.arch")


def test_logits_masked_with_minus_inf_pass_the_factory_check():
    """A model may mask a vocabulary entry with -inf on purpose: only NaN and +inf are refused (review3)."""
    import torch

    from scaling.byo import check_forward
    from scaling.errors import ConfigError

    shape = ModelShape(1, 16, 2, seq_len=8)

    class Masked(torch.nn.Module):
        def __init__(self, fill):
            super().__init__()
            self.fill = fill

        def forward(self, idx):
            logits = torch.zeros(*idx.shape, shape.vocab_size)
            logits[..., 0] = self.fill
            return logits

    check_forward("masked", Masked(float("-inf")), shape)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ConfigError, match=r"NaN or \+inf"):
            check_forward("masked", Masked(bad), shape)
