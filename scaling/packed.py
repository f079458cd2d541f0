"""K same-shape GPT-2 runs as one model: stacked weights, batched GEMMs, one optimizer step for all.

`PackedGPT` holds each parameter of `scaling.model.GPT` once, with a leading member axis of size K,
taken from K separately built models (so member k's initialisation is exactly that of a separate
run seeded like it). Its forward is GPT's, op for op, on [K, ...] tensors: a Linear is one
``baddbmm`` over the K weight matrices, attention folds K into the batch of the fused
``scaled_dot_product_attention``, the head stays tied to the token embedding. It returns the K
members' mean cross-entropies; their sum's gradient with respect to member k's weights is member k's
own gradient, since no member's loss depends on another's weights.

`PackedAdamW` is torch.optim.AdamW's update (decoupled weight decay on matrices only, as
`scaling.train.make_optimizer`) with a learning rate per member, and `clip_per_member` is
``clip_grad_norm_`` per member (each run's own global norm). Both use public tensor ops only.

Numerics: a batched GEMM sums in another order than the separate run's ``addmm``, so a member
matches its separate run to fp32 rounding, not bit for bit (tests/test_packed.py states the
tolerance and why).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from scaling.errors import ConfigError
from scaling.shapes import ModelShape

LINEARS = ("attn.qkv", "attn.proj", "fc", "fc_proj")


def build_members(shape: ModelShape, seeds: Sequence[int]) -> list[torch.nn.Module]:
    """The K models separate runs would build: ``torch.manual_seed(seed)`` then the model, as
    `scaling.train.set_up` does."""
    from scaling.byo import build_model

    if shape.arch != "gpt2":
        raise ConfigError(f"model.arch: packing trains the gpt2 block only, not {shape.arch!r}")
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(build_model(shape))
    return models


class PackedGPT(torch.nn.Module):
    """K GPT-2 models of one shape with stacked parameters (``params[name]``: [K, *GPT's shape])."""

    def __init__(self, members: Sequence[torch.nn.Module]):
        super().__init__()
        self.shape: ModelShape = members[0].shape
        self.k = len(members)
        names = [name for name, _ in members[0].named_parameters()]  # the tied head appears once, as wte
        stacked = {
            name: torch.stack([dict(m.named_parameters())[name].detach() for m in members]).clone() for name in names
        }
        self.names = names
        self.params = torch.nn.ParameterList(torch.nn.Parameter(stacked[n]) for n in names)

    def keep(self, rows: list[int]) -> None:
        """Keep only the members ``rows`` (the others ended): a smaller batch of GEMMs from here on."""
        self.params = torch.nn.ParameterList(torch.nn.Parameter(p.detach()[rows].clone()) for p in self.params)
        self.k = len(rows)

    def named(self) -> dict[str, torch.Tensor]:
        return dict(zip(self.names, self.params))

    def member_state(self, k: int) -> dict[str, torch.Tensor]:
        """Member k's weights under GPT's parameter names (a GPT's ``load_state_dict`` takes them,
        with ``strict=False`` for the tied head)."""
        return {name: p[k].detach().clone() for name, p in self.named().items()}

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-member mean cross-entropy [K] in nats per token; ``idx``, ``targets``: int64 [K, B, T]."""
        p = self.named()
        K, B, T = idx.shape
        wte = p["wte.weight"]  # [K, V, d]
        V, d = wte.shape[1], wte.shape[2]
        offsets = (torch.arange(K, device=idx.device) * V).view(K, 1, 1)
        x = F.embedding(idx + offsets, wte.reshape(K * V, d)) + p["wpe.weight"][:, :T].unsqueeze(1)
        x = x.reshape(K, B * T, d)
        for i in range(self.shape.n_layer):
            x = self._block(p, f"blocks.{i}.", x, B, T)
        h = _layer_norm(x, p, "ln_f.")
        # the tied head and the loss member by member: a [K·B·T, V] logits tensor at once falls out of
        # cache (bench, d32 K=8: head + loss 30 ms of CPU time a step batched, 20 ms so, 18 ms separate)
        flat = targets.reshape(K, B * T)
        return torch.stack([F.cross_entropy(F.linear(h[k], wte[k]), flat[k]) for k in range(K)])

    def _block(self, p: dict[str, torch.Tensor], pre: str, x: torch.Tensor, B: int, T: int) -> torch.Tensor:
        K, _, C = x.shape
        H = self.shape.n_head
        qkv = _linear(_layer_norm(x, p, pre + "ln_1."), p, pre + "attn.qkv.")
        q, k, v = qkv.view(K * B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + _linear(y.transpose(1, 2).reshape(K, B * T, C), p, pre + "attn.proj.")
        h = F.gelu(_linear(_layer_norm(x, p, pre + "ln_2."), p, pre + "fc."))
        return x + _linear(h, p, pre + "fc_proj.")


def _linear(x: torch.Tensor, p: dict[str, torch.Tensor], pre: str) -> torch.Tensor:
    """x [K, M, in] through K nn.Linear layers (weights [K, out, in], biases [K, out])."""
    return torch.baddbmm(p[pre + "bias"].unsqueeze(1), x, p[pre + "weight"].transpose(1, 2))


def _layer_norm(x: torch.Tensor, p: dict[str, torch.Tensor], pre: str) -> torch.Tensor:
    normed = F.layer_norm(x, x.shape[-1:])
    return torch.addcmul(p[pre + "bias"].unsqueeze(1), normed, p[pre + "weight"].unsqueeze(1))


def _per_member(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A [K] vector shaped to broadcast over a [K, ...] tensor."""
    return v.view(-1, *([1] * (like.dim() - 1)))


@torch.no_grad()
def clip_per_member(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for each member separately: member k's gradients are
    scaled by min(1, max_norm / (‖g_k‖ + 1e-6)), ‖g_k‖ its global norm over every parameter.
    Returns the K norms before clipping."""
    grads = [p.grad for p in params]
    per_tensor = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])  # [n, K]
    norms = torch.linalg.vector_norm(per_tensor, dim=0)
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(_per_member(coef, g))
    return norms


class PackedAdamW:
    """AdamW over stacked [K, ...] parameters with a learning rate per member.

    For each parameter p (member k's slice p_k, gradient g_k, learning rate lr_k) at step t, as
    torch.optim.AdamW (single-tensor path)::

        p_k ← p_k · (1 − lr_k · wd)                    wd: weight_decay for matrices, 0 otherwise
        m_k ← m_k + (1 − β1) · (g_k − m_k)             (lerp)
        v_k ← β2 · v_k + (1 − β2) · g_k²
        p_k ← p_k − lr_k / (1 − β1^t) · m_k / (√v_k / √(1 − β2^t) + ε)

    A member whose learning rate is 0 does not move; `keep` drops the members that ended.
    """

    def __init__(self, params: Sequence[torch.Tensor], *, betas: tuple[float, float], eps: float, weight_decay: float):
        self.params = list(params)
        # matrices decay, as make_optimizer (a stacked matrix has 3 dims: member, rows, columns)
        self.decay = [weight_decay if p.dim() >= 3 else 0.0 for p in self.params]
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.t = 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, lr: torch.Tensor) -> None:
        """One update; ``lr``: float [K], each member's learning rate at this step."""
        self.t += 1
        bc1 = 1 - self.beta1**self.t
        bc2_sqrt = math.sqrt(1 - self.beta2**self.t)
        step_size = lr / bc1
        for p, wd, m, v in zip(self.params, self.decay, self.m, self.v):
            g = p.grad
            if wd:
                p.mul_(_per_member(1 - lr * wd, p))
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_(torch.div(m, denom).mul_(_per_member(step_size, p)))

    def keep(self, rows: list[int], params: Sequence[torch.Tensor]) -> None:
        """Keep the moments of the members ``rows`` only; ``params``: the model's kept parameters."""
        self.params = list(params)
        self.m = [m[rows].clone() for m in self.m]
        self.v = [v[rows].clone() for v in self.v]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
