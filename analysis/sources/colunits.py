"""Units written in a column's name, as published tables name their columns: ``params_M``,
``tokens_B``, ``N (B)``, ``tokens_T``, ``compute_pfdays``. Read as given, N in millions and D in
billions trained 0.02 "tokens per parameter" (inside the plausible window, so no warning) and every
budget was 1e15x too small (C = 1e3 to 1e7 "FLOPs"). A count column whose name ends in such a unit
is scaled to parameters, tokens or FLOPs, and a note says so; a loss column named as a perplexity is
refused (the laws are of the cross-entropy, ln of the perplexity).
"""

from __future__ import annotations

import re

import pandas as pd

from analysis.sources.rows import numeric
from scaling.errors import DataError
from scaling.flops import PF_DAY_FLOPS as PF_DAY

_COUNT_UNITS = {
    "k": 1e3,
    "thousand": 1e3,
    "thousands": 1e3,
    "m": 1e6,
    "mil": 1e6,
    "million": 1e6,
    "millions": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "billions": 1e9,
    "t": 1e12,
    "trillion": 1e12,
    "trillions": 1e12,
}
_COMPUTE_UNITS = {"pfdays": PF_DAY, "pfday": PF_DAY, "petaflopdays": PF_DAY, "petaflopsdays": PF_DAY}
_PERPLEXITY = re.compile(r"(^|[^a-z])(ppl|perplexity)([^a-z]|$)", re.IGNORECASE)


def split_unit(name: str, role: str) -> tuple[str, str, float] | None:
    """(base name, unit as written, factor) when ``name`` ends in a unit for ``role`` ("n", "d": counts;
    "c": also PF-days) after a separator (_ - . space or a bracket): ``params_M`` -> ("params", "M", 1e6),
    ``compute (PF-days)`` -> ("compute", "PF-days", 8.64e19); None otherwise."""
    units = {**_COUNT_UNITS, **(_COMPUTE_UNITS if role == "c" else {})}
    for cut in range(len(name) - 1, 0, -1):  # the unit follows a separator; try each, from the right
        if name[cut] not in "_ -.([":
            continue
        base, unit = name[:cut].rstrip("_ -.(["), name[cut + 1 :].strip("()[] ")
        if base and re.sub(r"[\s_-]", "", unit).lower() in units:
            return base, unit, units[re.sub(r"[\s_-]", "", unit).lower()]
    return None


def apply_column_units(frame: pd.DataFrame, picked: dict[str, str | None], notes: list[str]) -> pd.DataFrame:
    """``frame`` with each count column of ``picked`` (role -> column: "n", "d", "c") whose name carries
    a unit scaled to parameters, tokens or FLOPs (values that are not numbers kept for the row checks)."""
    out = frame
    for role, column in picked.items():
        found = split_unit(str(column), role) if column is not None else None
        if found is None:
            continue
        values, _ = numeric(frame, column)
        scaled = pd.Series(values * found[2], index=frame.index)
        out = out.assign(**{column: frame[column].where(scaled.isna(), scaled)})
        what = "FLOPs" if role == "c" else "parameters" if role == "n" else "tokens"
        notes.append(f"column {column!r} is in {found[1]} (its name says so): read as {what} x {found[2]:g}")
    return out


def refuse_perplexity(loss_column: str, source: str) -> None:
    """A loss column named as a perplexity: one error line saying what the fits need instead."""
    if _PERPLEXITY.search(str(loss_column)):
        raise DataError(
            f"{source!r}: loss column {loss_column!r} holds perplexities (exp of the loss), and the laws are of the "
            "loss: give the cross-entropy, ln(perplexity) in nats/token (log2 in bits/token with --loss-unit bits), "
            "as a column named with --loss-column"
        )
