"""A LLaMA-style decoder (``model.arch=llama``): the modern block that OLMo's and Marin's ladders train.

Against `scaling.model.GPT`: RMSNorm instead of LayerNorm, rotary position embeddings (RoPE, Su et
al. 2021) on queries and keys instead of a learned position table, a SwiGLU MLP (Shazeer 2020) instead
of the 4x GELU MLP, no biases anywhere, and an output head tied to the token embedding or not
(``model.tied_head``). Pre-norm residual blocks and the initialisation (normal 0.02, residual
projections scaled by 1/sqrt(2·n_layer)) are GPT-2's, so the two blocks differ only where named.

Parameter count (h = `scaling.shapes.swiglu_hidden` (d) = 8·round(d/3), ≈ 8/3·d)::

    embedding      = V·d                              token embedding (RoPE has no parameters)
    per block      = 4·d² + 3·d·h + 2·d               qkv 3d², out d², gate, up 2dh, down hd, 2 RMSNorm 2d
    total          = V·d + L·(4·d² + 3·d·h + 2·d) + d  (+ V·d for an untied head)
    non_embedding  = total − V·d                      an untied head counts as non-embedding (its matmul
                                                      is paid per token; Porian et al. 2024)

With 3·d·h ≈ 8·d² the block's weights, hence its 6·N FLOPs per token, match GPT-2's 12·d²;
attention adds the same 12·L·d·T (scaling/flops.py). The closed forms live in scaling/shapes.py,
checked against this module's numel in tests/test_arch.py. Speed on CPU: bench/bench_arch.py
(RoPE's rotations are a precomputed buffer applied as one complex multiply to q and k together).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from scaling.shapes import ModelShape, swiglu_hidden

ROPE_BASE = 10_000.0  # θ of RoPE (LLaMA 1/2)
NORM_EPS = 1e-6


def rope_table(seq_len: int, head_dim: int) -> torch.Tensor:
    """RoPE's rotations e^(i·t·θ_j), θ_j = ROPE_BASE^(−2j/head_dim): complex64 [seq_len, head_dim/2]."""
    inv_freq = ROPE_BASE ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """x [B, T, ..., head_dim] with each pair (2j, 2j+1) of a position t rotated by rotations[t, j]:
    one complex multiply, as Meta's LLaMA code (README Benchmarks 7: ~7x cheaper on CPU, forward and
    backward, than the rotate-half form's slices, negation, concatenation and two real multiplies)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rot = rotations.view(rotations.size(0), *([1] * (x.dim() - 3)), rotations.size(1))
    return torch.view_as_real(pairs * rot).flatten(-2).type_as(x)


class RMSNorm(nn.Module):
    """x / rms(x) · g (Zhang & Sennrich 2019), no bias."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.size(-1),), self.weight, NORM_EPS)


class Attention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.n_head = shape.n_head
        self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model, bias=False)
        self.proj = nn.Linear(shape.d_model, shape.d_model, bias=False)

    def forward(self, x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        # split, not two slices: its backward is one concatenation, a slice's a zero-filled copy
        qk, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).split([2, 1], dim=2)
        q, k = apply_rope(qk, rotations).permute(2, 0, 3, 1, 4)  # q and k rotated at once
        v = v.squeeze(2).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d, h = shape.d_model, swiglu_hidden(shape.d_model)
        self.norm_1 = RMSNorm(d)
        self.attn = Attention(shape)
        self.norm_2 = RMSNorm(d)
        # gate and up as two matmuls: one fused [d, 2h] matmul is slower on CPU, its backward
        # concatenating the two halves' gradients (README Benchmarks 7)
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm_1(x), rotations)
        h = self.norm_2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.norm_f = RMSNorm(shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        rotations = rope_table(shape.seq_len, shape.d_model // shape.n_head)
        self.register_buffer("rope", rotations, persistent=False)  # derived, not state: not in checkpoints
        self.apply(self._init_weights)
        if shape.tied_head:
            self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("down.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * shape.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count from the built tensors (a tied head counted once)."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wte.weight.numel() if non_embedding else n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits [B, T, V]; with ``targets``, also the mean cross-entropy in nats per token."""
        T = idx.size(1)
        rotations = self.rope[:T]
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x, rotations)
        logits = self.head(self.norm_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss
