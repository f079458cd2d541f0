"""How much compute is a candidate recipe worth? Compare fitted scaling laws of several sources.

    inputs = read_inputs(["results/base", "results/new"], ColumnMap())   # or read_groups(table, "recipe", ...)
    comparisons = compare_inputs(inputs, resamples=1000, seed=0)          # one per candidate, vs inputs[0]
    comparisons[0].rows[0].multiplier                                     # Estimate: m(C) with its interval

Each source is fitted with approach 3 (`analysis.fits.parametric.fit_parametric`; the baseline
with ``seed``, every candidate with ``seed + 1``, so `scaling fit --seed` reproduces each side and a
candidate's answer is the same whichever others are listed), and
compared through its loss frontier (`frontier`): the effective compute multiplier m(C), the loss
difference at fixed compute and the exponent differences (`multiplier`), a row per budget and
the one-sentence answer (`result`), checked for comparable evaluation data first (`inputs`).
Rendered as text and JSON by `render`; drawn by `analysis.figures.compare`.
"""

from __future__ import annotations

import numpy as np

from analysis.compare.inputs import Input, check_same_eval, read_groups, read_inputs
from analysis.compare.result import Comparison, Side, compare
from analysis.fits.outliers import fit_flagged
from analysis.fits.parametric import fit_parametric
from analysis.fits.results import no_law
from scaling.errors import DataError

__all__ = ["Comparison", "Input", "Side", "check_same_eval", "compare_inputs", "fit_side", "read_groups", "read_inputs"]


def fit_side(item: Input, resamples: int, seed: int, level: float, exclude_outliers: bool = False) -> Side:
    """Fit approach 3 to one input (DataError, naming the source, when it cannot be fitted), its runs
    flagged by the outlier rule as `scaling fit` flags them (`analysis.fits.outliers.fit_flagged`):
    kept in the fit, or left out with ``exclude_outliers``."""
    from scaling.errors import DataError

    def approach_3(table):
        return fit_parametric(table, resamples=resamples, seed=seed, level=level)

    try:
        with np.errstate(all="ignore"):  # wild resamples overflow on purpose; the fit checks its results
            flagged = fit_flagged(item.table, approach_3, exclude_outliers)
    except DataError as err:
        raise DataError(f"cannot compare {item.label!r}: {err}") from None
    fit, table = flagged.fit, flagged.table
    if no_law(fit):  # the runs contradict L = E + A/N^α + B/D^β: no frontier to compare
        raise DataError(f"cannot compare {item.label!r}: approach 3's law is unidentified ({no_law(fit)})")
    budgets = [float(b) for b in table.budget_compute]  # as its law places them: the runs' 6·N·D (user21)
    return Side(
        item.label,
        len(table),
        budgets,
        fit,
        seed,
        table.loss_unit,
        flagged.outliers,
        exclude_outliers,
        flagged.notes,
        *item.table.lines(),
    )


def compare_inputs(
    inputs: list[Input],
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    exclude_outliers: bool = False,
    another_baseline: str = "give another source first",
) -> list[Comparison]:
    """Each of ``inputs[1:]`` (candidates) compared with ``inputs[0]`` (the baseline); UserError when
    their losses are in different units (a loss difference across units means nothing). A candidate that cannot be
    fitted is left out, said in every comparison's notes (DataError when none can, or the baseline cannot: then
    ``another_baseline`` says how to choose another).
    ``exclude_outliers``: fit each side without the runs the outlier rule flags (`fit_side`)."""
    units = {item.label: item.table.loss_unit for item in inputs}
    if len(set(units.values())) > 1:
        from scaling.errors import UserError

        listing = ", ".join(f"{label}: {unit}" for label, unit in units.items())
        raise UserError(
            f"the sources' losses are in different units ({listing}): compare losses in one unit "
            "(--loss-column, --loss-unit)"
        )
    # the baseline from seed, every candidate from seed + 1: a candidate's answer does not hang on which others are
    # listed (candidate k drew from seed + k: 'same' read m ≈ 0.997 [0.816, 1.09] listed third, [0.811, 1.08] alone)
    try:
        baseline = fit_side(inputs[0], resamples, seed, level, exclude_outliers)
    except DataError as err:  # user40: the baseline unfittable, with no word of how to choose another
        raise DataError(f"{err}; every candidate is measured against the baseline: {another_baseline}") from None
    sides, left_out = [], []
    for item in inputs[1:]:  # user30: one group of five that could not be fitted ended the comparison of all
        try:
            sides.append((item, fit_side(item, resamples, seed + 1, level, exclude_outliers)))
        except DataError as err:
            left_out.append(f"candidate left out: {err}")
    if not sides:
        raise DataError("; ".join(left_out))
    with np.errstate(all="ignore"):
        out = [compare(baseline, side, level) for _, side in sides]
    for (item, _), comparison in zip(sides, out):
        comparison.notes += left_out
        if _same_runs(inputs[0].table.runs, item.table.runs):  # user20: a source against itself, unremarked
            comparison.notes.append(
                "the baseline and the candidate hold the same runs (N, D, loss): m = 1 by construction, and its "
                "interval treats them as two independent samples of them"
            )
    return out


def _same_runs(a, b) -> bool:
    """Whether two run tables hold the same (N, D, loss) rows, in any order."""
    columns = ["N", "D", "loss"]
    return len(a) == len(b) and bool(
        np.array_equal(a[columns].sort_values(columns).to_numpy(), b[columns].sort_values(columns).to_numpy())
    )
