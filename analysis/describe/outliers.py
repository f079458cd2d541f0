"""One description of the runs the outlier rule flagged (`FitReport.outliers`, from
`analysis.fits.outliers`): a sentence on the rule and what was done with them, and a row per run
(run, rule, detail, budget, N, loss, whether the fits kept or excluded it) for the report."""

from __future__ import annotations

from collections import Counter

from analysis.describe.numbers import count_label, flops_label, num
from analysis.fits.results import FitReport

OUTLIER_HEADER = ["run", "rule", "detail", "budget C (FLOPs)", "N", "loss", "in the fits"]


def outliers_summary(report: FitReport) -> str:
    """How many runs were flagged, by which rule, and whether the fits kept them."""
    rule = f" (the rule: {report.outlier_rule})" if report.outlier_rule else ""
    if not report.outliers:
        return f"No run was flagged as an outlier{rule}."
    return f"{len(report.outliers)} run(s) flagged as outliers{rule}; {_done(report.outliers_excluded)}."


def flagged_line(outliers: list, excluded: bool, by_rule: bool = False) -> str:
    """`scaling fit`'s and `scaling compare`'s line on the flagged runs: how many (``by_rule``: and by
    which rule, "(residual 2, off budget 1)"), and whether the fits kept them; "none flagged" when none."""
    if not outliers:
        return "none flagged"
    rules = ", ".join(f"{rule.replace('_', ' ')} {k}" for rule, k in count_by_rule(outliers).items())
    return f"{len(outliers)} run(s) flagged{f' ({rules})' if by_rule else ''}, {_done(excluded)}"


def _done(excluded: bool) -> str:
    """What the fits did with the flagged runs, in `outliers_summary`'s and `flagged_line`'s words."""
    return "fitted without them (--exclude-outliers)" if excluded else "kept (--exclude-outliers drops them)"


def count_by_rule(outliers: list) -> dict[str, int]:
    """How many of ``outliers`` each rule flagged, rules in order of first appearance."""
    return dict(Counter(o.rule for o in outliers))


def outlier_rows(report: FitReport) -> list[list[str]]:
    """One row per flagged run, in the order of `OUTLIER_HEADER`."""
    state = "excluded" if report.outliers_excluded else "kept"
    return [
        [o.run_id, o.rule.replace("_", " "), o.detail, flops_label(o.budget), count_label(o.n), num(o.loss), state]
        for o in report.outliers
    ]
