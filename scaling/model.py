"""A decoder-only transformer, its shape, and its exact parameter count.

The model is GPT-2 style (as in nanoGPT): token and learned position
embeddings, pre-LayerNorm blocks of causal multi-head self-attention (fused
``scaled_dot_product_attention``) and a 4x GELU MLP, a final LayerNorm, and an output projection
tied to the token embedding.

Parameter count (every Linear and LayerNorm has a bias; the head is tied, so counted once)::

    embedding      = V·d + T·d                        token + position embeddings
    per block      = 12·d² + 13·d                     qkv 3d²+3d, proj d²+d, fc 4d²+4d, proj 4d²+d, 2 LN 4d
    total          = V·d + T·d + L·(12·d² + 13·d) + 2·d
    non_embedding  = total − V·d − T·d                Kaplan et al. 2020 exclude both embeddings

`tests/test_model.py` checks both against ``numel`` sums of the built model for every ladder shape.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from scaling.shapes import ModelShape, param_counts  # the closed forms above, torch-free

__all__ = ["GPT", "ModelShape", "param_counts"]


class CausalSelfAttention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.n_head = shape.n_head
        self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model)
        self.proj = nn.Linear(shape.d_model, shape.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # fused; no explicit mask
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d = shape.d_model
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(shape)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        # exact (erf) GELU, as nanoGPT's nn.GELU(): on CPU its kernel is ~2.3x faster than the tanh
        # approximation's, forward + backward (bench/bench_trainer.py; ARCHITECTURE in shapes.py)
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.wpe = nn.Embedding(shape.seq_len, shape.d_model)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.head.weight = self.wte.weight  # weight tying (Press & Wolf 2017), as GPT-2
        self.apply(self._init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(2·n_layer) so the residual stream's variance
        # does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("fc_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * shape.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count from the built tensors (tied weights counted once)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel() + self.wpe.weight.numel()
        return n

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """The final layer norm's output [B, T, d]: what the tied head multiplies."""
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """Logits [B, T, V]; with ``targets``, also the mean cross-entropy in nats per token."""
        logits = self.head(self.hidden(idx))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss
