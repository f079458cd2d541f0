"""The project's GPT written the textbook way: the baseline of bench/bench_trainer.py.

Same function and the same parameters as `scaling.model.GPT` (so the same N and FLOPs per token), but
written as in the papers and most tutorials (Vaswani et al. 2017; the "slow attention" path of
nanoGPT): separate q, k and v projections, and attention as an explicit product, a stored causal
mask and a softmax::

    att = softmax(mask(q·kᵀ / sqrt(d_head))) · v

rather than one fused qkv projection and ``scaled_dot_product_attention``. `TextbookGPT.from_gpt`
copies a project model's weights (splitting qkv into q, k, v), so the benchmark can check that both
compute the same logits before it times them.
"""

from __future__ import annotations

import math

import common  # noqa: F401  (puts the checkout on sys.path)
import torch
import torch.nn as nn
import torch.nn.functional as F

from scaling.model import GPT, ModelShape


class TextbookAttention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d = shape.d_model
        self.n_head = shape.n_head
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.register_buffer(
            "mask", torch.tril(torch.ones(shape.seq_len, shape.seq_len, dtype=torch.bool)), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        d_head = C // self.n_head

        def heads(t: torch.Tensor) -> torch.Tensor:  # [B, T, C] -> [B, n_head, T, d_head]
            return t.view(B, T, self.n_head, d_head).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d_head)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TextbookBlock(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d = shape.d_model
        self.ln_1, self.attn = nn.LayerNorm(d), TextbookAttention(shape)
        self.ln_2, self.fc, self.fc_proj = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class TextbookGPT(nn.Module):
    """GPT-2 style, as `scaling.model.GPT`: embeddings, pre-LN blocks, final LN, tied head."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.wpe = nn.Embedding(shape.seq_len, shape.d_model)
        self.blocks = nn.ModuleList(TextbookBlock(shape) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.d_model)
        self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.head.weight = self.wte.weight

    @classmethod
    def from_gpt(cls, gpt: GPT) -> TextbookGPT:
        """A textbook model holding a copy of ``gpt``'s weights (qkv split into q, k, v)."""
        model = cls(gpt.shape)
        source = gpt.state_dict()
        target = {}
        for name, tensor in source.items():
            if ".attn.qkv." in name:
                for part, chunk in zip("qkv", tensor.chunk(3, dim=0)):
                    target[name.replace(".qkv.", f".{part}.")] = chunk.clone()
            else:
                target[name] = tensor.clone()
        model.load_state_dict(target)
        return model

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
