"""Parameter and FLOP accounting against the built model and against published numbers."""

import math

import pytest
import torch
from omegaconf import OmegaConf

from analysis.published import CHINCHILLA_TABLE3
from scaling.flops import PF_DAY_FLOPS, flops_6nd, flops_per_token_with_attention, tokens_for_budget
from scaling.model import GPT, param_counts
from scaling.shapes import (
    CONF_DIR,
    MAX_WIDTH,
    ModelShape,
    default_lr,
    nearest_shape,
    non_embedding_params,
    shape_for_width,
)

LADDER = sorted(p.stem for p in (CONF_DIR / "model").glob("d*.yaml"))


@pytest.mark.parametrize("name", LADDER)
def test_closed_form_counts_equal_built_model(name):
    m = OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml")
    shape = ModelShape(n_layer=m.n_layer, d_model=m.d_model, n_head=m.n_head, name=m.name)
    with torch.device("meta"):  # no memory for the large GPU shapes
        model = GPT(shape)
    counts = param_counts(shape)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts["non_embedding"] == counts["total"] - model.wte.weight.numel() - model.wpe.weight.numel()
    assert counts["non_embedding"] == non_embedding_params(shape.n_layer, shape.d_model)
    rule = shape_for_width(m.d_model)
    assert (m.n_layer, m.n_head, m.name) == (rule.n_layer, rule.n_head, rule.name), "ladder files follow the rule"
    assert m.lr == default_lr(m.d_model)


@pytest.mark.parametrize("path", sorted((CONF_DIR / "model" / "fine").glob("d*.yaml")), ids=lambda p: p.stem)
def test_intermediate_shapes_count_as_built_and_use_heads_of_8(path):
    """conf/model/fine/: widths between the ladder's (model=fine/d40), heads of 8, the rule's depth and LR."""
    m = OmegaConf.load(path)
    shape = ModelShape(n_layer=m.n_layer, d_model=m.d_model, n_head=m.n_head, name=m.name)
    assert m.name == path.stem and m.d_model % 16 and m.d_model == 8 * m.n_head
    assert m.n_layer == max(1, math.floor(m.d_model / 32 + 0.5)) and m.lr == default_lr(m.d_model)
    counts = param_counts(shape)
    assert counts["total"] == GPT(shape).num_params()
    assert f"{counts['non_embedding']:,} non-embedding, {counts['total']:,} total" in path.read_text()


def test_ladder_spans_more_than_100x_and_trains_on_cpu():
    ne = [
        non_embedding_params(
            OmegaConf.load(CONF_DIR / "model" / f"{n}.yaml").n_layer,
            OmegaConf.load(CONF_DIR / "model" / f"{n}.yaml").d_model,
        )
        for n in LADDER
    ]
    cpu = [n for n in ne if n <= 1.3e7]
    assert min(cpu) <= 2e4 and max(cpu) >= 5e6 and max(cpu) / min(cpu) > 100


def test_counts_for_non_default_vocab_and_context():
    shape = ModelShape(n_layer=3, d_model=96, n_head=3, vocab_size=1000, seq_len=64)
    model = GPT(shape)
    assert param_counts(shape)["total"] == model.num_params()
    assert param_counts(shape)["non_embedding"] == model.num_params(non_embedding=True)


def test_flops_by_hand():
    # 6ND: a 1e6-parameter model on 2e7 tokens
    assert flops_6nd(1e6, 2e7) == 1.2e14
    # PaLM App. B: 6N + 12·L·d·T for L=4, d=128, T=128, N=842,496
    assert flops_per_token_with_attention(842_496, 4, 128, 128) == 6 * 842_496 + 12 * 4 * 128 * 128
    assert tokens_for_budget(1.2e14, 1e6) == pytest.approx(2e7)
    assert PF_DAY_FLOPS == 8.64e19


@pytest.mark.parametrize("n, c, d", CHINCHILLA_TABLE3)
def test_table3_obeys_6nd(n, c, d):
    assert flops_6nd(n, d) == pytest.approx(c, rel=0.05)
    assert tokens_for_budget(c, n) == pytest.approx(d, rel=0.05)


def test_ladder_neighbours_are_close_at_the_small_end():
    counts = [
        param_counts(shape_for_width(d))["total"] for d in (16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256)
    ]
    assert all(1 < b / a < 3.1 for a, b in zip(counts, counts[1:]))


def test_nearest_shape():
    assert nearest_shape(7.9e5).name == "d128"  # 793,344 non-embedding parameters
    assert nearest_shape(1.0).name == "d16"
    assert nearest_shape(1e12).d_model == MAX_WIDTH
    total_128 = param_counts(shape_for_width(128))["total"]
    assert nearest_shape(total_128, kind="total").name == "d128"


def test_forward_loss_is_near_uniform_at_init():
    torch.manual_seed(0)
    model = GPT(shape_for_width(64))
    x = torch.randint(0, 256, (4, 129))
    _, loss = model(x[:, :-1], x[:, 1:])
    assert abs(loss.item() - math.log(256)) < 0.1


def test_attention_is_causal():
    torch.manual_seed(0)
    model = GPT(shape_for_width(64)).eval()
    x = torch.randint(0, 256, (1, 32))
    y = x.clone()
    y[0, 20:] = (y[0, 20:] + 1) % 256  # change only the future of position 19
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model(y)
    assert torch.allclose(a[0, :20], b[0, :20], atol=1e-6)
    assert not torch.allclose(a[0, 20:], b[0, 20:])
