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
(RoPE's rotations are a precomputed buffer applied as one complex multiply to q and k together;
on CPU, RMSNorm and the rotation of q and k have hand-written backwards, the same math in fewer passes).
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
    one complex multiply, as Meta's LLaMA code (README Benchmarks 8: ~7x cheaper on CPU, forward and
    backward, than the rotate-half form's slices, negation, concatenation and two real multiplies)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rot = rotations.view(rotations.size(0), *([1] * (x.dim() - 3)), rotations.size(1))
    return torch.view_as_real(pairs * rot).flatten(-2).type_as(x)


class _RopeQKV(torch.autograd.Function):
    """qkv [B, T, 3, H, hd] (fp32) -> q, k rotated by RoPE and v, each [B, H, T, hd] as attention
    takes them: `apply_rope`'s products with a hand-written backward. Autograd's would stack dq and
    dk, copy them out of attention's layout, rotate them back and concatenate dv: three passes over
    the qkv gradient where this writes it once. The rotations are repeated over the heads ([T, H,
    hd/2], a few KB), so each product runs over H·hd/2 contiguous pairs, not hd/2: faster on CPU
    (README Benchmarks 8)."""

    @staticmethod
    def forward(ctx, qkv: torch.Tensor, rotations: torch.Tensor):
        B, T, _, H, hd = qkv.shape
        turn = rotations.unsqueeze(1).expand(T, H, hd // 2).contiguous()
        ctx.save_for_backward(turn.conj().resolve_conj())  # the inverse rotations
        pairs = torch.view_as_complex(qkv[:, :, :2].unflatten(-1, (-1, 2))).permute(2, 0, 1, 3, 4)
        qk = torch.mul(pairs, turn, out=pairs.new_empty(2, B, T, H, hd // 2))
        q, k = torch.view_as_real(qk).flatten(-2).transpose(2, 3)
        return q, k, qkv[:, :, 2].transpose(1, 2)

    @staticmethod
    def backward(ctx, dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor):
        (back,) = ctx.saved_tensors
        B, H, T, hd = dv.shape
        grad = dv.new_empty(B, T, 3, H, hd)
        for i, d in enumerate((dq, dk)):
            if d is None:
                grad[:, :, i].zero_()
                continue
            d = d.transpose(1, 2)  # attention's gradients come in [B, T, H, hd] memory order
            d = torch.view_as_complex((d if d.stride(-1) == 1 else d.contiguous()).unflatten(-1, (-1, 2)))
            torch.mul(d, back, out=torch.view_as_complex(grad[:, :, i].unflatten(-1, (-1, 2))))
        if dv is None:
            grad[:, :, 2].zero_()
        else:
            grad[:, :, 2].copy_(dv.transpose(1, 2))
        return grad, None


class _RMSNormFunction(torch.autograd.Function):
    """F.rms_norm's math with a hand-written backward. Under autograd F.rms_norm runs as ~7 ops
    forward and ~15 backward, where LayerNorm has one kernel each way; this is 3 passes over x
    forward and 4 backward (README Benchmarks 8)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        d = x.size(-1)
        rstd = torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_().mul_(1.0 / d).add_(eps).rsqrt_()
        ctx.save_for_backward(x, weight, rstd)
        return torch.mul(x, rstd).mul_(weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # y = x·r·w, r = (mean(x²) + eps)^(−1/2):  dw = Σ_rows g·x·r;
        # dx = r·(g·w) − x·r³·(Σ_i g_i·w_i·x_i)/d, both sums from one product g·x
        x, weight, rstd = ctx.saved_tensors
        d = x.size(-1)
        x, grad, rstd = x.reshape(-1, d), grad.reshape(-1, d), rstd.view(-1, 1)
        gx = grad * x
        dw = torch.mv(gx.t(), rstd.view(-1)) if ctx.needs_input_grad[1] else None
        coef = torch.mv(gx, weight).view(-1, 1).mul_(rstd.pow(3)).mul_(1.0 / d)
        dx = torch.mul(grad, weight).mul_(rstd).addcmul_(x, coef, value=-1)
        return dx.view(ctx.saved_tensors[0].shape), dw, None


class RMSNorm(nn.Module):
    """x / rms(x) · g (Zhang & Sennrich 2019), no bias: F.rms_norm, faster under autograd."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return _RMSNormFunction.apply(x, self.weight, NORM_EPS)
        # without autograd one fused kernel; on GPUs F.rms_norm has fused kernels both ways
        return F.rms_norm(x, (x.size(-1),), self.weight, NORM_EPS)


class Attention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.n_head = shape.n_head
        self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model, bias=False)
        self.proj = nn.Linear(shape.d_model, shape.d_model, bias=False)

    def forward(self, x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head)
        if qkv.device.type == "cpu" and torch.is_grad_enabled() and qkv.requires_grad and qkv.dtype == torch.float32:
            q, k, v = _RopeQKV.apply(qkv, rotations)
        else:  # the same as autograd ops (mixed precision, GPUs (not measured), or no backward)
            qk, v = qkv.split([2, 1], dim=2)
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
        # concatenating the two halves' gradients (README Benchmarks 8)
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
