"""The trainer benchmark's baseline is the project's model written the textbook way: same
parameters, same function (about 3 s)."""

import sys
from pathlib import Path

import pytest
import torch

from scaling.model import GPT
from scaling.shapes import shape_for_width

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


@pytest.mark.parametrize("width", [64, 128])
def test_textbook_baseline_computes_the_project_models_function(width):
    from textbook_model import TextbookGPT

    torch.manual_seed(0)
    model = GPT(shape_for_width(width))
    textbook = TextbookGPT.from_gpt(model)
    assert sum(p.numel() for p in textbook.parameters()) == model.num_params()
    idx = torch.randint(0, 256, (2, 129))
    ours, loss = model(idx[:, :-1], idx[:, 1:])
    theirs, textbook_loss = textbook(idx[:, :-1], idx[:, 1:])
    assert (ours - theirs).abs().max() < 1e-4
    assert loss.item() == pytest.approx(textbook_loss.item(), abs=1e-5)
    # and the same gradients, so both sides of the benchmark do the same work
    loss.backward()
    textbook_loss.backward()
    attn = textbook.blocks[0].attn
    textbook_qkv_grad = torch.cat([attn.q.weight.grad, attn.k.weight.grad, attn.v.weight.grad])
    assert torch.allclose(model.blocks[0].attn.qkv.weight.grad, textbook_qkv_grad, atol=1e-6)
    assert torch.allclose(model.wte.weight.grad, textbook.wte.weight.grad, atol=1e-6)


def test_approach1_calibration_study_prints_its_table(capsys):
    """bench/bench_approach1.py (README, Approach 1's bootstrap): a few seeds, each design's row."""
    import bench_approach1

    assert bench_approach1.main(["--seeds", "3", "--resamples", "20", "--designs", "ladder,quick"]) == 0
    out = capsys.readouterr().out
    assert "command: bench/bench_approach1.py --seeds 3 --resamples 20 --designs ladder,quick" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("ladder ", "quick "))}
    assert rows["ladder"][1:3] == ["0.4516", "3/3"] and rows["quick"][1] == "0.4904", rows
    assert rows["quick"][3] == "0/3"  # wider than 0.5 every time (tests/test_isoflop_bracketing.py)
    with pytest.raises(SystemExit) as refused:
        bench_approach1.main(["--designs", "ladder,nosuch"])
    assert refused.value.code == 2 and "nosuch" in capsys.readouterr().err
