"""Which model a run trains, without torch: the built-in blocks (``model.arch``) or the user's own
(``model._target_``), their counts for the plan, and the part of a run's identity that names them.

    model.arch=gpt2     scaling/model.py (the default; its run ids are those of every earlier run)
    model.arch=llama    scaling/llama.py; model.tied_head=true|false
    model._target_=pkg.module.factory [+model.kwargs.KEY=VALUE ...]
                        the user's factory (protocol: docs/MODELS.md; scaling/byo.py checks it)

Counts of the built-in blocks are closed forms (scaling/shapes.py); a factory's come from its module,
built once per (factory, kwargs, shape) by scaling/byo.py, which imports torch only then.
"""

from __future__ import annotations

import json
from typing import Any

from omegaconf import DictConfig, OmegaConf

from scaling.flops import flops_6nd, flops_per_token_with_attention
from scaling.shapes import ARCHITECTURES, ModelShape, param_counts

CUSTOM = "custom"  # the record's `arch` of a run whose model came from model._target_


def target_of(model_cfg: DictConfig) -> str:
    """``model._target_``, or "" for a built-in block."""
    return model_cfg.get("_target_") or ""


def kwargs_of(model_cfg: DictConfig) -> dict[str, Any]:
    """``model.kwargs``: the factory's keyword arguments beside the shape (plain containers)."""
    kwargs = model_cfg.get("kwargs") or {}
    return OmegaConf.to_container(kwargs, resolve=True) if OmegaConf.is_config(kwargs) else dict(kwargs)


def shape_options(model_cfg: DictConfig) -> dict[str, Any]:
    """ModelShape's ``arch`` and ``tied_head`` from the model config (checked by ModelShape)."""
    return {"arch": model_cfg.get("arch", "gpt2"), "tied_head": bool(model_cfg.get("tied_head", True))}


def arch_name(model_cfg: DictConfig, shape: ModelShape) -> str:
    """The record's ``arch``: gpt2, llama or custom."""
    return CUSTOM if target_of(model_cfg) else shape.arch


def architecture_label(model_cfg: DictConfig, shape: ModelShape) -> str:
    """The record's versioned ``architecture``: gpt2-v2, llama-v1, or custom:<model._target_>."""
    target = target_of(model_cfg)
    return f"{CUSTOM}:{target}" if target else ARCHITECTURES[shape.arch]


def identity_fields(model_cfg: DictConfig, shape: ModelShape) -> dict[str, Any]:
    """What the run id's ``model`` section holds beside the shape and lr. For gpt2 exactly what it
    held before model.arch existed (run ids of gpt2 runs do not change)."""
    target = target_of(model_cfg)
    if target:
        return {"architecture": CUSTOM, "target": target, "kwargs": kwargs_of(model_cfg)}
    fields: dict[str, Any] = {"architecture": ARCHITECTURES[shape.arch]}
    if shape.arch != "gpt2":
        fields["tied_head"] = shape.tied_head
    return fields


def counts_and_flops(model_cfg: DictConfig, shape: ModelShape, param_count: str) -> tuple[dict[str, int], float]:
    """Parameter counts ``{"total", "non_embedding"}`` and training FLOPs per token of the run's
    model: closed forms for the built-in blocks (6·N + 12·L·d·T, scaling/flops.py), the module's
    own report for a factory's (scaling/byo.py; default 6·N)."""
    target = target_of(model_cfg)
    if target:
        from scaling import byo  # torch, only for a factory's model

        counts, flops_per_token = byo.profile(target, json.dumps(kwargs_of(model_cfg), sort_keys=True), shape)
        if flops_per_token is None:
            flops_per_token = flops_6nd(counts[param_count], 1)
        return counts, flops_per_token
    counts = param_counts(shape)
    return counts, flops_per_token_with_attention(counts[param_count], shape.n_layer, shape.d_model, shape.seq_len)
