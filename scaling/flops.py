"""Compute accounting.

Training compute C ≈ 6·N·D FLOPs: forward 2·N·D, backward 4·N·D (Kaplan et al. 2020, §2.1).
With attention, per token (PaLM, Chowdhery et al. 2022, App. B; nanoGPT's ``estimate_mfu``)::

    flops_per_token = 6·N + 12·n_layer·n_head·d_head·seq_len = 6·N + 12·n_layer·d_model·seq_len

Budgets are in FLOPs throughout (not PF-days: 1 PF-day = 1e15 · 86 400 FLOPs = 8.64e19 FLOPs).
"""

from __future__ import annotations

import math

from scaling.errors import ConfigError

PF_DAY_FLOPS = 1e15 * 86_400
# The sweeper's default window of tokens per parameter D/N (hydra.sweeper.tokens_per_param), which
# `scaling next` also keeps its proposals inside unless the source's sweep file sets another.
TOKENS_PER_PARAM = (0.5, 2000.0)


# The one home of C = 6·N·D: every other module calls these (they broadcast over numpy arrays).
FLOPS_PER_PARAM_TOKEN = 6.0


def flops_6nd(n_params, tokens):
    """C = 6·N·D."""
    return FLOPS_PER_PARAM_TOKEN * n_params * tokens


def tokens_6nd(compute, n_params):
    """D = C / (6·N): the tokens C FLOPs buy for a model of N parameters."""
    return compute / (FLOPS_PER_PARAM_TOKEN * n_params)


def params_6nd(compute, tokens):
    """N = C / (6·D): the parameters C FLOPs buy for D tokens."""
    return compute / (FLOPS_PER_PARAM_TOKEN * tokens)


def smallest_6nd(n_params, tokens) -> float | None:
    """The smallest 6·N·D over paired runs (a fit's N and D lists), or None when there are none."""
    return min((float(flops_6nd(n, d)) for n, d in zip(n_params, tokens)), default=None)


# Inference: a forward pass costs 2·N FLOPs per token (Kaplan et al. 2020, §2.1), so serving T tokens
# costs 2·N·T (the lifetime-cost model of Sardana et al. 2024: training 6·N·D plus inference 2·N·T).
FLOPS_PER_PARAM_INFERENCE_TOKEN = 2.0


def inference_flops_2nt(n_params, tokens):
    """2·N·T: the FLOPs of serving ``tokens`` tokens with a model of N parameters."""
    return FLOPS_PER_PARAM_INFERENCE_TOKEN * n_params * tokens


def flops_per_token_with_attention(n_params: float, n_layer: int, d_model: int, seq_len: int) -> float:
    """6·N + 12·n_layer·d_model·seq_len (PaLM App. B)."""
    return FLOPS_PER_PARAM_TOKEN * n_params + 12.0 * n_layer * d_model * seq_len


def tokens_for_budget(budget_flops: float, n_params: float) -> float:
    """D = C / (6·N): the tokens a budget of C FLOPs buys a model of N parameters."""
    if not (math.isfinite(budget_flops) and budget_flops > 0):
        raise ConfigError(f"budget: {budget_flops!r} is not valid; it must be a positive number of FLOPs, e.g. 1e12")
    if not (math.isfinite(n_params) and n_params > 0):
        raise ConfigError(f"parameter count {n_params!r} is not valid; it must be positive")
    return tokens_6nd(budget_flops, n_params)
