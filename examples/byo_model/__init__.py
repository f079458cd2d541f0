"""A worked bring-your-own model: a causal MLP-mixer (Tolstikhin et al. 2021, made causal), swept by

    PYTHONPATH=. scaling sweep tiny model._target_=examples.byo_model.build +model.kwargs.expansion=2

The factory takes the run's `scaling.shapes.ModelShape` (and ``model.kwargs``) and returns an
``nn.Module`` that follows the protocol of docs/MODELS.md: ``forward(idx) -> logits``,
``param_counts()`` and ``flops_per_token()``. No attention: each layer mixes positions with a learned
lower-triangular [seq_len, seq_len] matrix (a position sees only itself and earlier ones), then
channels with a GELU MLP ``expansion`` times wider than the model.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from scaling.flops import flops_6nd
from scaling.shapes import ModelShape


class MixerBlock(nn.Module):
    def __init__(self, d: int, seq_len: int, expansion: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.mix = nn.Parameter(torch.ones(seq_len, seq_len))  # token mixing (starts as a prefix mean)
        self.register_buffer("causal", torch.ones(seq_len, seq_len).tril(), persistent=False)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, expansion * d)
        self.proj = nn.Linear(expansion * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        mix = (self.mix[:T, :T] * self.causal[:T, :T]) / self.causal[:T, :T].sum(-1, keepdim=True)
        x = x + mix @ self.ln_1(x)
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class CausalMixer(nn.Module):
    def __init__(self, shape: ModelShape, expansion: int):
        super().__init__()
        self.shape, self.expansion = shape, expansion
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.blocks = nn.ModuleList(MixerBlock(shape.d_model, shape.seq_len, expansion) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied
        nn.init.normal_(self.wte.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    # ------------------------------------------------ the protocol's counts (docs/MODELS.md)
    def param_counts(self) -> dict[str, int]:
        """Closed form: per block T² (mixing) + 2·e·d² + (e + 1)·d (MLP) + 4·d (2 LayerNorms); the
        token embedding (tied head) is the only embedding."""
        d, T, e, L, V = (
            self.shape.d_model,
            self.shape.seq_len,
            self.expansion,
            self.shape.n_layer,
            self.shape.vocab_size,
        )
        non_embedding = L * (T * T + 2 * e * d * d + (e + 1) * d + 4 * d) + 2 * d
        return {"total": non_embedding + V * d, "non_embedding": non_embedding}

    def flops_per_token(self) -> float:
        """6·N less the mixing weights' 6·T² (a [T, T] matrix is applied once per sequence, not per
        token), plus the mixing matmul's 6·T·d per token and layer (forward 2·T·d, backward twice that)."""
        T, d, L = self.shape.seq_len, self.shape.d_model, self.shape.n_layer
        return flops_6nd(self.param_counts()["total"] - L * T * T, 1) + 6.0 * L * T * d


def build(shape: ModelShape, expansion: int = 2) -> CausalMixer:
    """The factory ``model._target_=examples.byo_model.build`` names."""
    return CausalMixer(shape, expansion)
