"""A comparison as text (a table per budget, the exponent differences, the answer) and as JSON."""

from __future__ import annotations

import math

from analysis.compare.multiplier import DIFFERENCES
from analysis.compare.result import Comparison
from analysis.describe.numbers import interval_text, num
from analysis.describe.outliers import count_by_rule, flagged_line
from analysis.fits.bootstrap import unchecked
from analysis.fits.codec import to_jsonable
from analysis.fits.percentiles import level_text
from analysis.fits.results import Estimate

LABELS = {
    "alpha": "alpha (N exponent)",
    "beta": "beta  (D exponent)",
    "a": "a     (N_opt ~ C^a)",
    "gamma": "gamma (L* - E ~ C^-gamma)",
    "E": "E     (irreducible loss)",
}
BEYOND = "beyond fitted range"


def _g(x: float | None) -> str:
    if x is None:
        return "-"
    return "unbounded" if math.isinf(x) else num(x)


def _signed(x: float) -> str:
    return "unbounded" if math.isinf(x) else f"{x:+.4g}"


def _with_interval(e: Estimate, signed: bool = False) -> str:
    """`analysis.describe.numbers.interval_text`, with m = inf read as "unbounded" (a loss the baseline
    never reaches) and differences signed."""
    return interval_text(e, _signed if signed else _g)


def _cell(e: Estimate, signed: bool = False) -> str:
    """A per-budget cell: the estimate with its interval, or "unidentified" (the answer says why)."""
    return "unidentified" if e.unidentified else _with_interval(e, signed)


def render_comparison(comparison: Comparison) -> str:
    c = comparison
    unit = c.baseline.loss_unit  # both sides' (`analysis.compare.compare_inputs` refuses mixed units)
    difference = f"loss difference ({unit})"
    lines = [
        f"baseline:  {c.baseline.source} ({c.baseline.runs} runs, budgets {_g(c.baseline.fitted_range[0])}–"
        f"{_g(c.baseline.fitted_range[1])} FLOPs)",
        *_outliers_line(c.baseline),
        f"candidate: {c.candidate.source} ({c.candidate.runs} runs, budgets {_g(c.candidate.fitted_range[0])}–"
        f"{_g(c.candidate.fitted_range[1])} FLOPs)",
        *_outliers_line(c.candidate),
        *unchecked([c.baseline.fit, c.candidate.fit]),  # said once, before any number (as `scaling fit`)
        "",
        c.summary,
        "",
        f"per budget (approach-3 frontiers; losses in {unit}; "
        + (f"{level_text(c.level)} intervals from {c.pairs} bootstrap pairs; " if c.pairs else "no intervals; ")
        + "m(C): the compute the baseline needs for the loss the candidate reaches with C):",
        f"  {'C (FLOPs)':<11} {'m(C)':<28} {difference:<30} {'baseline loss':<14} {'candidate loss':<14}",
    ]
    for row in c.rows:
        flag = f"  ({BEYOND})" if row.beyond_fitted_range else ""
        lines.append(
            f"  {row.compute:<11.3g} {_cell(row.multiplier):<28} {_cell(row.loss_difference, signed=True):<30} "
            f"{_cell(Estimate(row.baseline_loss.value, unidentified=row.baseline_loss.unidentified)):<14} "
            f"{_cell(Estimate(row.candidate_loss.value, unidentified=row.candidate_loss.unidentified)):<14}{flag}"
        )
    lines += ["", "differences (candidate - baseline):"]
    for name in DIFFERENCES:
        d = c.differences[name]
        diff = _with_interval(Estimate(d["value"], d["lower"], d["upper"], d.get("unidentified", "")), signed=True)
        diff = "unidentified (as m(C), above)" if c.unidentified and d.get("unidentified") == c.unidentified else diff
        in_unit = f" {unit}" if name == "E" else ""  # the other differences are exponents
        # user37: "E ... (0.6875 -> 2.924e-09 nats/token)" beside an unidentified difference, the truth 1.69 on both
        sides = [
            "unidentified" if role in d["sides_unidentified"] else _g(d[role]) for role in ("baseline", "candidate")
        ]
        lines.append(f"  {LABELS[name]:<27} {diff:<32} ({sides[0]} -> {sides[1]}{in_unit})")
    lines += [f"  note: {n}" for n in c.notes]
    return "\n".join(lines)


def _outliers_line(side) -> list[str]:
    """A side's flagged runs, by rule, and whether its fit kept them (`scaling fit`'s line); none when none."""
    if not side.outliers:
        return []
    return [f"           outliers: {flagged_line(side.outliers, side.outliers_excluded, by_rule=True)}"]


def _outliers_json(side) -> dict:
    if not side.outliers:
        return {}
    runs = [to_jsonable(o) for o in side.outliers]  # as `scaling fit --json` lists them
    return {"outliers": {"by_rule": count_by_rule(side.outliers), "excluded": side.outliers_excluded, "runs": runs}}


def comparison_json(comparison: Comparison) -> dict:
    c = comparison

    def side(s) -> dict:
        return {
            "source": s.source,
            "runs": s.runs,
            "budgets": s.budgets,
            "seed": s.seed,
            "law": {k: e.as_json() for k, e in s.fit.estimates.items()},
            "bootstrap": None
            if s.fit.bootstrap is None
            else {"resamples": s.fit.bootstrap.resamples, "failed": s.fit.bootstrap.failed},
            **_outliers_json(s),
            "warnings": s.warnings,
            "notes": s.notes,
        }

    return {
        "baseline": side(c.baseline),
        "candidate": side(c.candidate),
        "loss_unit": c.baseline.loss_unit,  # of every loss, loss difference and E above and below
        "level": c.level,
        "pairs": c.pairs,
        "summary": c.summary,
        "scale_dependent": c.scale_dependent,
        # m where the summary quotes it (user35: only inside the summary's text): its one value (the middle) when it
        # does not change with scale, else both ends of the shared range (or of the gap between the fitted ranges)
        "multiplier": {
            "constant": c.scale_dependent is False,
            "at": [{"compute": compute, **_json(m)} for compute, m in c.ends],
        },
        "shared_fitted_range": list(c.shared_range) if c.overlap else None,  # none: the budgets do not overlap
        "gap_between_fitted_ranges": None if c.overlap else list(c.shared_range),
        "budgets": [
            {
                "compute": r.compute,
                "beyond_fitted_range": r.beyond_fitted_range,
                "multiplier": _json(r.multiplier),
                "loss_difference": _json(r.loss_difference),
                "baseline_loss": _json(r.baseline_loss),
                "candidate_loss": _json(r.candidate_loss),
            }
            for r in c.rows
        ],
        "differences": {
            name: {
                "baseline": d["baseline"],
                "candidate": d["candidate"],
                "estimate": d["value"],
                "interval": None if d["lower"] is None else [d["lower"], d["upper"]],
                **({"unidentified": d["unidentified"]} if d.get("unidentified") else {}),
            }
            for name, d in c.differences.items()
        },
        "notes": c.notes,
        **({"unidentified": c.unidentified} if c.unidentified else {}),
    }


def _json(e: Estimate) -> dict:
    """An Estimate as JSON; an infinite m (the baseline never reaches that loss) is the string "inf"."""

    def num(x):
        return "inf" if x is not None and math.isinf(x) else x

    out = {"estimate": num(e.value), "interval": None if e.lower is None else [num(e.lower), num(e.upper)]}
    return {**out, "unidentified": e.unidentified} if e.unidentified else out
