"""The JSON codec of the fits' result objects (`analysis.fits.results`): dataclasses to strict JSON
and back, by their type hints, so a saved fit loads back unchanged."""

from __future__ import annotations

import math
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """Dataclasses → dicts, numpy → Python; non-finite floats → None (strict JSON)."""
    if is_dataclass(obj):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` (a dataclass of `analysis.fits.results`, or a container of them) from JSON."""
    if data is None:
        return math.nan if tp is float else None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        return from_jsonable(inner[0], data)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [from_jsonable(item, v) for v in data]
    if origin is dict:
        _, value_type = typing.get_args(tp)
        return {k: from_jsonable(value_type, v) for k, v in data.items()}
    if is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: from_jsonable(hints[f.name], data[f.name]) for f in fields(tp) if f.name in data})
    if tp is float:
        return float(data)
    return data
