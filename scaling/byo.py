"""Bring your own model: ``model._target_=pkg.module.factory`` (the protocol: docs/MODELS.md).

The factory is called as ``factory(shape, **model.kwargs)`` with the run's `scaling.shapes.ModelShape`
and returns a ``torch.nn.Module`` whose ``forward(idx)`` maps int64 token ids [B, T] (T <= seq_len) to
logits [B, T, vocab_size]. It reports its parameter counts with an optional ``param_counts()`` ->
``{"total": int, "non_embedding": int}`` (default: the numel of its distinct parameters, less those of
its ``nn.Embedding`` modules) and its training FLOPs per token with an optional ``flops_per_token()``
(default 6·N, scaling/flops.py). `profile` checks all of it when the run is planned, before anything
is written; a break is one ConfigError naming ``model._target_``. `build_model` builds any run's model.
"""

from __future__ import annotations

import importlib
import json
import math
from functools import lru_cache, partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from scaling.errors import ConfigError
from scaling.shapes import ModelShape

KEY = "model._target_"
COUNTS = ("total", "non_embedding")  # the keys of param_counts()


def _broken(target: str, what: str) -> ConfigError:
    return ConfigError(f"{KEY}: {target!r} {what}; the protocol is in docs/MODELS.md")


def import_factory(target: str):
    """The callable ``target`` names (``package.module.attribute``)."""
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ConfigError(f"{KEY}: {target!r} is not valid; it must name a factory as package.module.function")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except Exception as err:  # ImportError, AttributeError, or the module's own error on import
        raise ConfigError(
            f"{KEY}: {target!r} does not import ({type(err).__name__}: {err}); "
            "it must name a factory as package.module.function on the Python path"
        ) from None
    if not callable(factory):
        raise ConfigError(f"{KEY}: {target!r} is not callable; it must name a factory function or class")
    return factory


def build(target: str, kwargs: dict, shape: ModelShape) -> nn.Module:
    """``factory(shape, **kwargs)``, checked to be an nn.Module."""
    factory = import_factory(target)
    try:
        model = factory(shape, **kwargs)
    except Exception as err:
        raise _broken(target, f"failed building the model ({type(err).__name__}: {err})") from None
    if not isinstance(model, nn.Module):
        raise _broken(target, f"returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def module_counts(model: nn.Module, call=lambda model, method: getattr(model, method)()) -> dict[str, int]:
    """The module's ``param_counts()`` (through ``call(model, "param_counts")``), else numel counts:
    distinct parameters (a tied weight once), non-embedding less the weights of its nn.Embedding modules."""
    if hasattr(model, "param_counts"):
        return call(model, "param_counts")
    params = {id(p): p.numel() for p in model.parameters()}
    embedded = {id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Embedding)}
    total = sum(params.values())
    return {"total": total, "non_embedding": total - sum(embedded.values())}


def _call(target: str, model: nn.Module, method: str):
    """``model.method()``, a failure being one ConfigError naming it."""
    try:
        return getattr(model, method)()
    except Exception as err:
        raise _broken(target, f"failed {method}() ({type(err).__name__}: {err})") from None


def check_counts(target: str, model: nn.Module) -> dict[str, int]:
    """The model's counts (`module_counts`, a param_counts() that raises being one ConfigError),
    checked: ints (not bools) with 0 < non_embedding <= total."""
    counts = module_counts(model, partial(_call, target))
    ok = isinstance(counts, dict) and all(type(counts.get(k)) is int for k in COUNTS)
    if not ok or not 0 < counts["non_embedding"] <= counts["total"]:
        how = (
            "reported parameter counts {!r}; param_counts() must return"
            if hasattr(model, "param_counts")
            else "has parameter counts {!r} (counted without a param_counts(): nn.Embedding weights are not "
            "non-embedding); define param_counts() returning"
        )
        raise _broken(target, how.format(counts) + " ints 0 < non_embedding <= total")
    return {k: counts[k] for k in COUNTS}


def check_forward(target: str, model: nn.Module, shape: ModelShape) -> None:
    """forward(idx [2, seq_len]) must give logits [2, seq_len, vocab_size] without NaN or +inf."""
    idx = torch.arange(2 * shape.seq_len).remainder(shape.vocab_size).view(2, shape.seq_len)
    try:
        with torch.no_grad():
            logits = model(idx)
    except Exception as err:
        raise _broken(
            target, f"failed forward(idx) on token ids [2, {shape.seq_len}] ({type(err).__name__}: {err})"
        ) from None
    want = (2, shape.seq_len, shape.vocab_size)
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != want or not logits.is_floating_point():
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise _broken(target, f"forward(idx) returned {got}; it must return float logits of shape {list(want)}")
    # else the run would be recorded as diverged at step 0; -inf is allowed (a vocabulary entry masked on purpose)
    if logits.isnan().any() or logits.isposinf().any():
        raise _broken(target, "forward(idx) returned logits with NaN or +inf at initialisation")


@lru_cache(maxsize=64)
def profile(target: str, kwargs_json: str, shape: ModelShape) -> tuple[dict[str, int], float | None]:
    """Build the factory's model on the CPU, check the protocol, and return its counts and FLOPs
    per token (None: the default, 6·N). Once per (factory, kwargs, shape) in a process."""
    model = build(target, json.loads(kwargs_json), shape)
    counts = check_counts(target, model)
    flops = None
    if hasattr(model, "flops_per_token"):
        flops = _call(target, model, "flops_per_token")
        if not (isinstance(flops, (int, float)) and math.isfinite(flops) and flops > 0):
            raise _broken(target, f"reported flops_per_token() = {flops!r}; it must be a positive number")
        flops = float(flops)
    check_forward(target, model, shape)
    return counts, flops


class LogitsModel(nn.Module):
    """A factory's module in the trainer's calling convention: ``(logits, loss)`` from ``(idx,
    targets)``, the loss computed as the built-in blocks compute it."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.inner(idx)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build_model(shape: ModelShape, target: str = "", kwargs: dict | None = None) -> nn.Module:
    """The run's model: the factory's (wrapped in LogitsModel), else the built-in block of shape.arch."""
    if target:
        return LogitsModel(build(target, kwargs or {}, shape))
    if shape.arch == "llama":
        from scaling.llama import Llama

        return Llama(shape)
    from scaling.model import GPT

    return GPT(shape)
