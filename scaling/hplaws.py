"""Hyperparameter laws: the peak learning rate and the batch size as power laws of the run's size.

Two forms (one home for both; the trainer evaluates them, the analysis fits them)::

    step_law   η* = c · N^a · D^b      N non-embedding parameters, D tokens    (Li et al. 2025, Step Law)
               B* = c · D^b            B in tokens per optimizer step
    deepseek   η* = c · C^a            C = 6·N·D FLOPs                         (DeepSeek LLM, 2024)
               B* = c · C^b

A law is plain data: ``{"form": "step_law", "coefficient": c, "n_exponent": a, "d_exponent": b}`` or
``{"form": "deepseek", "coefficient": c, "c_exponent": a}`` (an exponent left out is 0).
A saved fit (``scaling fit --out FIT.json``) carries ``"hyperparameter_laws": {"lr": LAW, "batch_tokens":
LAW}``, each coefficient as ``{"estimate", "interval"}`` or as a bare number; presets carry their source.

This module imports no torch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError

FORMS = ("step_law", "deepseek")

# Published laws, as printed in their papers (../shared/REFERENCE.md).
PRESETS: dict[str, dict[str, Any]] = {
    "step_law": {
        "source": "Li et al. 2025, 'Predictable Scale: Part I' (Step Law); N non-embedding, B in tokens",
        "lr": {"form": "step_law", "coefficient": 1.79, "n_exponent": -0.713, "d_exponent": 0.307},
        "batch_tokens": {"form": "step_law", "coefficient": 0.58, "n_exponent": 0.0, "d_exponent": 0.571},
    },
    "deepseek": {
        "source": "DeepSeek LLM 2024, §3.1; C in FLOPs, B in tokens",
        "lr": {"form": "deepseek", "coefficient": 0.3118, "c_exponent": -0.125},
        "batch_tokens": {"form": "deepseek", "coefficient": 0.2920, "c_exponent": 0.3271},
    },
}


def _number(value: Any) -> float:
    """A coefficient given as a number or as a fit's {"estimate", "interval"}."""
    if isinstance(value, dict):
        value = value.get("estimate")
    return float(value)


EXPONENTS = {"step_law": ("n_exponent", "d_exponent"), "deepseek": ("c_exponent",)}
WITHOUT_TERM = "fitted without this term"  # ends the reason of a term a fit could not fit: the law leaves it out


def unidentified_in(law: Any) -> dict[str, str]:
    """The values of a fitted law (a FIT.json's) that its fit calls unidentified, by key, with why; a term fitted
    without (`WITHOUT_TERM`: its exponent 0) is absent from the law, not unidentified in it."""
    return {
        key: value["unidentified"]
        for key, value in (law.items() if isinstance(law, dict) else ())
        if isinstance(value, dict) and value.get("unidentified") and not value["unidentified"].endswith(WITHOUT_TERM)
    }


def law_problem(law: Any) -> str:
    """What is wrong with a law read from a file ("" when nothing is): its form, a coefficient that is not a finite
    number > 0 (a learning rate or batch size from it would be <= 0), an exponent that is not a finite number (a
    hand-edited FIT.json's null ended `optimal` in a TypeError; its -1 coefficient advised lr -1.4e-06: user17)."""
    if not isinstance(law, dict):
        return f"{law!r} is not a law (an object with a form, a coefficient and exponents)"
    if law.get("form") not in FORMS:
        return f"form {law.get('form')!r} is not one of {', '.join(FORMS)}"
    values = {"coefficient": law.get("coefficient"), **{k: law.get(k, 0.0) for k in EXPONENTS[law["form"]]}}
    for key, value in values.items():
        number = value.get("estimate") if isinstance(value, dict) else value
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            return f"{key} = {number!r} is not a finite number"
        if key == "coefficient" and number <= 0:
            return f"coefficient = {number!r} must be > 0"
    return ""


def evaluate(law: dict[str, Any], *, n_non_embedding: float, tokens: float, flops: float) -> float:
    """The law's value for one run (a learning rate, or a batch size in tokens)."""
    form = law.get("form")
    c = _number(law.get("coefficient"))
    if form == "step_law":
        return (
            c * n_non_embedding ** _number(law.get("n_exponent", 0.0)) * tokens ** _number(law.get("d_exponent", 0.0))
        )
    if form == "deepseek":
        return c * flops ** _number(law.get("c_exponent", 0.0))
    raise ConfigError(f"hyperparameter law form {form!r} is not valid; valid: {', '.join(FORMS)}")


def load(name_or_path: str, key: str = "optim.lr_law") -> dict[str, Any]:
    """A preset by name, or the ``hyperparameter_laws`` of a FIT.json; one clear error otherwise."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    path = Path(name_or_path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"{key}: {name_or_path!r} is neither a preset ({', '.join(PRESETS)}) nor a readable FIT.json ({e})"
        ) from None
    laws = data.get("hyperparameter_laws") if isinstance(data, dict) else None
    if not isinstance(laws, dict) or "lr" not in laws:
        raise ConfigError(f"{key}: {path} has no 'hyperparameter_laws' with an 'lr' law; fit one with `scaling fit`")
    for name, law in laws.items():
        if problem := law_problem(law):
            raise ConfigError(f"{key}: {path}: law {name!r}: {problem}; fit it again with `scaling fit`")
    return laws
