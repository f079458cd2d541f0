"""Units written in a column's name, as published tables name their columns: ``params_M``,
``tokens_B``, ``N (B)``, ``tokens_T``, ``compute_pfdays``. Read as given, N in millions and D in
billions trained 0.02 "tokens per parameter" (inside the plausible window, so no warning) and every
budget was 1e15x too small (C = 1e3 to 1e7 "FLOPs"). A count column whose name ends in such a unit
is scaled to parameters, tokens or FLOPs, and a note says so; a loss column named as a perplexity is
refused (the laws are of the cross-entropy, ln of the perplexity), unless the name says it is its log
(log_ppl, ln_perplexity, nll).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
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
_COMPUTE_UNITS = {"pfdays": PF_DAY, "pfday": PF_DAY, "petaflopdays": PF_DAY, "petaflopsdays": PF_DAY, "flops": 1.0}
_PERPLEXITY = re.compile(r"(^|[^a-z])(ppl|perplexity)([^a-z]|$)", re.IGNORECASE)
_LOG_WORDS = {"log", "ln", "nll", "logppl", "lnppl", "log2", "loge"}  # log_ppl, ln_perplexity: a loss


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


def leaf_name(column) -> str:
    """A column's name without an exporter's namespace, lower case: `optim.weight_decay`, `config/wd` -> the last."""
    return str(column).strip().lower().rsplit(".", 1)[-1].rsplit("/", 1)[-1]


def find_usual(columns, usual, role: str | None):
    """The column of ``columns`` named one of ``usual`` (tried in order): as written, else in any case where one
    column has that name (for a loss, one `_namespaced` so), else a usual name in any case followed by a unit for ``role`` (`split_unit`: params_M,
    "Budget (FLOPs)", compute_pfdays), else one column whose `leaf_name` is a usual name (`model.n_params` of a wandb
    export: user38); the last two not for ``role`` None (a loss: `train/loss` is no `loss`); None if none is."""
    columns = list(columns)
    found = next((c for c in usual if c in columns), None)
    lower: dict[str, list] = {}
    for c in columns:
        lower.setdefault(str(c).lower(), []).append(c)
    found = found or next((lower[c.lower()][0] for c in usual if len(lower.get(c.lower(), ())) == 1), None)
    folded = {c.lower() for c in usual}
    if found is not None or role is None:  # a loss under a wandb export's summary. only (`train/loss` is no loss),
        summary = [c for c in columns if _namespaced(c) in folded]  # its namespaces joined by '.' as by '/' (user40)
        return found if found is not None or len(summary) != 1 else summary[0]
    # user21: "Params (M)" and "Tokens (B)" were not found
    found = next((c for c in columns if (u := split_unit(str(c), role)) and u[0].lower() in folded), None)
    leaves = [c for c in columns if leaf_name(c) in folded and len(leaf_name(c)) > 1]  # `model.d` is d_model
    return found if found is not None or len(leaves) != 1 else leaves[0]


def _namespaced(column) -> str:
    """A column's name in lower case without a leading ``summary.``, its '.' read as '/' (``summary.eval.loss`` of a
    nested summary is ``eval/loss``)."""
    name = str(column).lower()
    return name.removeprefix("summary.").replace(".", "/")


AS_GIVEN = "--as-given"  # the option naming columns whose names' units are not applied (`apply_column_units`)


def apply_column_units(
    frame: pd.DataFrame,
    picked: dict[str, str | None],
    notes: list[str],
    budget_col: str | None = None,
    as_given: tuple = (),
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` with each count column of ``picked`` (role -> column: "n", "d", "c", "u" the unique tokens)
    whose name carries a unit scaled to parameters, tokens or FLOPs (values that are not numbers kept for the
    row checks), and the scaled N, D and C columns, each as "column 'tokens_B' (x 1e+09, its name's unit)". A column is kept as
    given when it is in ``as_given`` (`AS_GIVEN`: the user says its name lies), or when the ``budget_col``
    agrees with 6·N·D (or C) unscaled and not scaled."""
    frame = _budget_in_flops(frame, budget_col, picked, notes, as_given)
    picked = {r: c for r, c in picked.items() if c is not None}
    frame = _from_logs(frame, picked, notes)
    found = {r: u for r, c in picked.items() if (u := split_unit(str(c), r)) is not None and u[2] != 1.0}
    raw = {r: numeric(frame, c, "d" if r == "u" else r)[0] for r, c in picked.items()}
    out, scaled = frame, []
    unscaled = _budget_says_unscaled(frame, budget_col, raw, found)
    for role, (_, unit, factor) in found.items():
        column = picked[role]
        if column in as_given:
            notes.append(f"column {column!r} is named in {unit} but read as given ({AS_GIVEN} {column})")
            continue
        if role in unscaled:
            notes.append(
                f"column {column!r} is named in {unit} but holds {_WHAT[role]} as given: budget column "
                f"{budget_col!r} agrees with 6·N·D unscaled, not x {factor:g}"
            )
            continue
        scaled_values = pd.Series(raw[role] * factor, index=frame.index)
        out = out.assign(**{column: frame[column].where(scaled_values.isna(), scaled_values)})
        if role != "u":  # U is no part of C = 6·N·D
            scaled.append(f"column {column!r} (x {factor:g}, its name's unit; {AS_GIVEN} {column} reads it unscaled)")
        notes.append(
            f"column {column!r} is in {unit} (its name says so): read as {_WHAT[role]} x {factor:g} "
            f"({AS_GIVEN} {column} if it holds {_WHAT[role]} as they are)"
        )
    return out, scaled


# a count column named as its logarithm: log10_params, log10(tokens), ln_flops; a bare "log" names no base
_LOG_NAME = re.compile(r"(log10|log_10|lg|ln|log)(?:[\s_(\-]+|(?=(?-i:[A-Z])))(.+?)\)?", re.IGNORECASE)
_LOG_BASES = {"log10": 10.0, "log_10": 10.0, "lg": 10.0, "ln": float(np.e)}
IMPLAUSIBLE = {"n": 1e3, "d": 1e3}  # fewer parameters or tokens than this (median) is no language model's


def logged_name(name) -> str | None:
    """What a column named as its logarithm holds (`_LOG_NAME`: log10_params -> params), or None."""
    match = _LOG_NAME.fullmatch(str(name).strip())
    return match.group(2) if match else None


def _from_logs(frame: pd.DataFrame, picked: dict[str, str], notes: list[str]) -> pd.DataFrame:
    """``frame`` with each count column of ``picked`` named as a logarithm (`_LOG_NAME`) raised back to counts, said
    in ``notes``; a name of no base (log_params) is refused (user28: log10_params read as N of ~8 parameters gave
    alpha 5.7 with no word)."""
    for role, column in picked.items():
        match = _LOG_NAME.fullmatch(str(column).strip())
        if match is None:
            continue
        base = _LOG_BASES.get(match.group(1).lower())
        if base is None:
            raise DataError(
                f"column {column!r} is named as a logarithm of no stated base: give {_WHAT[role]} as counts, or name it "
                f"log10_{match.group(2)} or ln_{match.group(2)}"
            )
        values = pd.Series(base ** numeric(frame, column, False)[0], index=frame.index)
        frame = frame.assign(**{column: frame[column].where(values.isna(), values)})
        notes.append(
            f"column {column!r} holds the {match.group(1)} of {_WHAT[role]} (its name says so): read as {base:.4g}^value"
        )
    return frame


def warn_implausible_counts(frame: pd.DataFrame, picked: dict[str, str | None], warnings: list[str]) -> None:
    """A warning where the median N or D (as read, units applied) is below `IMPLAUSIBLE`: a column in millions or
    billions with no unit in its name, or a logarithm (user28: N of 8 "parameters" fitted without a word)."""
    for role, least in IMPLAUSIBLE.items():
        column = picked.get(role)
        if column is None or column not in frame.columns:
            continue
        values = numeric(frame, column, role)[0]
        median = float(np.nanmedian(values)) if np.isfinite(values).any() else None
        if median is not None and median < least:
            warnings.append(
                f"column {column!r}: the median run has {median:.3g} {_WHAT[role]}, fewer than any language model's: is "
                f"it in millions or billions (name its unit: {column}_M, {column}_B) or a logarithm (log10_{column})?"
            )


def _budget_in_flops(frame: pd.DataFrame, budget_col, picked: dict, notes: list[str], as_given: tuple) -> pd.DataFrame:
    """``frame`` with its budget column scaled to FLOPs when its name carries a unit (budget_pfdays): the
    budgets of approaches 1 and 2 (N_opt per budget, k_N) were in PF-days, and optimal's N_opt 1e18x off."""
    unit = None if budget_col is None or budget_col in picked.values() else split_unit(str(budget_col), "c")
    if unit is None or unit[2] == 1.0:  # "Budget (FLOPs)": already FLOPs
        return frame
    if budget_col in as_given:
        notes.append(f"budget column {budget_col!r} is named in {unit[1]} but read as given ({AS_GIVEN} {budget_col})")
        return frame
    values = pd.Series(numeric(frame, budget_col, "c")[0] * unit[2], index=frame.index)
    notes.append(
        f"budget column {budget_col!r} is in {unit[1]} (its name says so): read as FLOPs x {unit[2]:g} "
        f"({AS_GIVEN} {budget_col} if it holds FLOPs as they are)"
    )
    return frame.assign(**{budget_col: frame[budget_col].where(values.isna(), values)})


CLOSE = 3.0  # C within 3x of a budget column agrees with it: a unit's 1e3 does not

_WHAT = {"n": "parameters", "d": "tokens", "c": "FLOPs", "u": "unique tokens"}


def _budget_says_unscaled(frame: pd.DataFrame, budget_col, raw: dict, found: dict) -> set[str]:
    """The roles of ``found`` (role -> named unit) whose columns hold plain counts: of every subset of the named
    units that C depends on (N's and D's for 6·N·D, else C's), the one subset applied with which C agrees with the
    budget column (median within a factor of `CLOSE`; units differ by 1e3 or more) leaves the others unscaled.
    None or several subsets agreeing: every unit is applied (the budget disagreement is warned about)."""
    if budget_col is None or budget_col not in frame.columns:
        return set()
    budget = numeric(frame, budget_col, "c")[0]
    unscaled: set[str] = set()
    for group in (("n", "d"), ("c",)) if "d" in raw else (("c",),):
        named = [r for r in group if r in found]
        if not named:
            continue

        def compute(applied: tuple, group=group) -> np.ndarray:
            scale = {r: found[r][2] if r in applied else 1.0 for r in group}
            return raw["c"] * scale["c"] if group == ("c",) else 6.0 * raw["n"] * scale["n"] * raw["d"] * scale["d"]

        subsets = [s for k in range(len(named) + 1) for s in itertools.combinations(named, k)]
        agreeing = [s for s in subsets if _agrees(compute(s), budget)]
        if len(agreeing) == 1:
            unscaled |= set(named) - set(agreeing[0])
    return unscaled


def _agrees(compute: np.ndarray, budget: np.ndarray) -> bool:
    usable = np.isfinite(compute) & np.isfinite(budget) & (budget > 0) & (compute > 0)
    return bool(usable.any()) and float(np.median(np.abs(np.log10(compute[usable] / budget[usable])))) <= np.log10(
        CLOSE
    )


def refuse_perplexity(loss_column: str, source: str) -> None:
    """A loss column named as a perplexity: one error line saying what the fits need instead. A name with
    a log word (log_ppl, ln_perplexity, log_perplexity, nll_ppl) is the log of one, a loss: accepted.
    By the name only: a table's values would not tell a loss of 12 from a perplexity of 12."""
    words = set(re.split(r"[^a-z0-9]+", str(loss_column).lower()))
    if _PERPLEXITY.search(str(loss_column)) and not words & _LOG_WORDS:
        raise DataError(
            f"{source!r}: loss column {loss_column!r} holds perplexities (exp of the loss), and the laws are of the "
            "loss: give the cross-entropy, ln(perplexity) in nats/token (log2 in bits/token with --loss-unit bits), "
            "as a column named with --loss-column"
        )


TOKENS_PER_PARAMETER = (1e-2, 1e5)  # median D/N outside this: N or D is in other units (millions? billions?)


def warn_tokens_per_parameter(runs: pd.DataFrame, warnings: list[str], scaled: list[str], tokens: bool) -> None:
    """Published runs train 1 to a few thousand tokens per parameter; a median D/N 1e6 away from
    that is a count in millions or billions, which C = 6·N·D and every N or D printed inherit.
    ``scaled``: the columns scaled by the unit in their names (`colunits`), which the warning names."""
    ratio = float(np.median(runs["D"] / runs["N"])) if len(runs) else 20.0
    low, high = TOKENS_PER_PARAMETER
    if not low <= ratio <= high:
        warnings.append(
            f"the median run trains {ratio:.3g} tokens per parameter (D/N; published runs: about 1 to a few "
            f"thousand): is N or D in millions or billions? C = 6·N·D and every N and D printed use them "
            + (f"as read, with {' and '.join(scaled)}" if scaled else "as given")
        )
    elif ratio < 1.0:  # user16: N and D swapped read as a = 0.55 for a true 0.45, then 0.015 tokens per parameter
        warnings.append(
            f"the median run trains {ratio:.3g} tokens per parameter (D/N), fewer tokens than parameters (published "
            + (
                f"runs: about 1 to a few thousand): are the N and D columns swapped? Read so, it is {1 / ratio:.3g}"
                if tokens
                else "runs: about 1 to a few thousand; D = C/(6N)): is N or C in other units?"
            )
        )


# the most a loss can plausibly be: a uniform guess over a million tokens (vocabularies reach ~256k), or a byte
MOST_LOSS = {"nats/token": np.log(1e6), "bits/token": np.log2(1e6), "bits/byte": 8.0}


def warn_loss_range(runs: pd.DataFrame, unit: str, warnings: list[str]) -> None:
    """A median loss above `MOST_LOSS` in its unit is no cross-entropy a model has: perplexities in a column
    named loss, or another unit (user20: exp(L) read as nats gave E = 6.4 and alpha 0.62 for 0.34, unwarned)."""
    most = MOST_LOSS.get(unit)
    median = float(np.median(runs["loss"])) if len(runs) else 0.0
    if most is not None and median > most:
        warnings.append(
            f"the median loss {median:.4g} {unit} is above {most:.3g}, a uniform guess over a million tokens"
            + (" (8 bits a byte)" if unit == "bits/byte" else "")
            + ": are these perplexities (give ln of them), or in another unit (--loss-unit)?"
        )


def budget_kind_note(frame: pd.DataFrame, n_col: str, n_kind: str, budgets: np.ndarray, runs: pd.DataFrame) -> str:
    """A note ("" when none) when the budget column disagrees with 6·N·D (N from ``n_col``, of ``n_kind``) but agrees
    within `AGREEING` with 6·N·D of the table's parameter column of the other kind (user25: a Kaplan-style table whose
    budgets were made with non-embedding N was fitted with its total N, unsaid: the exponents in total-N terms)."""
    from analysis.sources.budgets import AGREEING
    from analysis.sources.schema import FALLBACK_COLUMNS

    other_kind = "non_embedding" if n_kind == "total" else "total"
    generic = set(FALLBACK_COLUMNS["n"]["total"]) & set(FALLBACK_COLUMNS["n"]["non_embedding"])  # N, n: either kind
    other = next((c for c in FALLBACK_COLUMNS["n"][other_kind] if c in frame.columns and c not in generic), None)
    if other is None or other == n_col or np.abs(runs["C"].to_numpy() / budgets - 1.0).max() <= AGREEING:
        return ""
    compute = 6.0 * numeric(frame, other, "n")[0] * runs["D"].to_numpy()
    if not np.isfinite(compute).all() or np.abs(compute / budgets - 1.0).max() > AGREEING:
        return ""
    return (
        f"the budget column agrees within {AGREEING:.0%} with 6·N·D of column {other!r}, not of {n_col!r}: its budgets "
        f"were made with that count; --n-kind {other_kind} reads N from it (N_opt and the exponents then count it)"
    )
