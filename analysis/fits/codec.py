"""The JSON codec of the fits' result objects (`analysis.fits.results`): dataclasses to strict JSON
and back, by their type hints, so a saved fit loads back unchanged.

Strict JSON has no NaN or inf: a non-finite float is written as null and read back as NaN (a float)
or None (an optional). A dataclass field whose metadata sets `KEEPS_OVERFLOW` (bootstrap samples, where
+inf is an overflowed resample and NaN a missing one) writes ±inf as ±`BEYOND_FLOAT`, the largest
double, and reads that back as ±inf, so an overflowed sample still bounds an interval after loading."""

from __future__ import annotations

import math
import sys
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

KEEPS_OVERFLOW = "keeps_overflow"  # field metadata key: ±inf round-trips as ±BEYOND_FLOAT
BEYOND_FLOAT = sys.float_info.max  # what ±inf is written as in such a field (no finite result equals it)


def to_jsonable(obj: Any, overflow: bool = False) -> Any:
    """Dataclasses → dicts, numpy → Python; non-finite floats → None (strict JSON), except ±inf →
    ±`BEYOND_FLOAT` when ``overflow`` (inside a `KEEPS_OVERFLOW` field)."""
    if is_dataclass(obj):
        return {f.name: to_jsonable(getattr(obj, f.name), f.metadata.get(KEEPS_OVERFLOW, False)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, overflow) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [to_jsonable(v, overflow) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        if overflow and math.isinf(obj):
            return math.copysign(BEYOND_FLOAT, obj)
        return float(obj) if math.isfinite(obj) else None
    return obj


def from_jsonable(tp: Any, data: Any, overflow: bool = False) -> Any:
    """Rebuild a value of type ``tp`` (a dataclass of `analysis.fits.results`, or a container of them) from
    JSON; ``overflow``: inside a `KEEPS_OVERFLOW` field, ±`BEYOND_FLOAT` reads as ±inf."""
    if data is None:
        return math.nan if tp is float else None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        return from_jsonable(inner[0], data, overflow)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [from_jsonable(item, v, overflow) for v in data]
    if origin is dict:
        _, value_type = typing.get_args(tp)
        return {k: from_jsonable(value_type, v, overflow) for k, v in data.items()}
    if is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(
            **{
                f.name: from_jsonable(hints[f.name], data[f.name], f.metadata.get(KEEPS_OVERFLOW, False))
                for f in fields(tp)
                if f.name in data
            }
        )
    if tp is float:
        value = float(data)
        return math.copysign(math.inf, value) if overflow and abs(value) == BEYOND_FLOAT else value
    return data
