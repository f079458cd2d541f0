"""The one rule that groups runs into compute budgets, used by the fits, the figures and the report.

A run's budget is the value of the source's budget column when it has one: the column named with
``--budget-column``, else the first of `BUDGET_COLUMNS` present (``budget_flops`` is the results
store's). Its values must all be finite numbers > 0; an auto-detected column with gaps is noted and
not used. The column groups the runs; every fit places a budget at its runs' C = 6·N·D (their median
where over `AGREEING` off the label, `RunTable.budget_compute`). When 6·N·D differs from the column, a note says by how much
(a warning when 100x or more off: a unit mix-up, a PF-day's 8.64e19 named as such). Values within
`AGREEING` of each other that the runs' own 6·N·D does not separate are one budget written twice
(``1e19``, ``9.87e18``: `same_budgets`).

Without a budget column (or with ``--budget-column none``) runs are clustered by C = 6·N·D in log
space: sorted ascending, a run opens a new budget when its C exceeds its neighbour's (the next
smaller C) by more than the ``tolerance`` (relative, default 20%); each run gets its budget's
geometric mean. Points jittered by a few percent (digitised from a plot, rounded token counts)
share a budget; budgets of a ladder are usually 1.5x or more apart. A note states the rule used
and the widest budget, and `budget_table` says which runs went to which budget.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import numpy as np

from scaling.errors import DataError
from scaling.flops import PF_DAY_FLOPS

if TYPE_CHECKING:  # pandas is imported where it is used: the CLI reads the constants before parsing
    import pandas as pd

BUDGET_COLUMNS = ("budget_flops", "budget", "compute_budget")  # tried in order; the first is the store's
BUDGET_COLUMN = BUDGET_COLUMNS[0]  # the requested budget, as the trainer records it
NO_BUDGET_COLUMN = "none"  # --budget-column none: ignore any budget column and cluster C
BUDGET_TOLERANCE = 0.2  # a gap in C wider than 20% between neighbours starts a new budget (clustering only)
AGREEING = 0.02  # 6·N·D within 2% of the budget column is "agrees"


def assign_budgets(compute, given=None, tolerance: float = BUDGET_TOLERANCE) -> np.ndarray:
    """Each run's budget (FLOPs): ``given`` (requested budgets, one per run) when not None, else
    `cluster_budgets` of ``compute`` at ``tolerance``."""
    if given is not None:
        return np.asarray(given, dtype=float)
    return cluster_budgets(np.asarray(compute, dtype=float), tolerance)


def budget_column_of(frame: pd.DataFrame, named: str | None, source: str) -> str | None:
    """The budget column to use: ``named`` (must exist; "none": no column), else the first of
    `BUDGET_COLUMNS` present, else one of them named with a unit (budget_pfdays: `colunits` scales it), else None."""
    if named is not None and named.lower() == NO_BUDGET_COLUMN:
        return None
    if named is not None:
        if named not in frame.columns:
            raise DataError(
                f"--budget-column {named!r}: no such column in {source!r}; columns present: "
                f"{', '.join(map(str, frame.columns))} (or --budget-column none to cluster C = 6·N·D)"
            )
        return named
    from analysis.sources.colunits import find_usual

    return find_usual(frame.columns, BUDGET_COLUMNS, "c")  # any case, or with a unit: budget_pfdays, "Budget (FLOPs)"


def budget_as_c_offer(frame: pd.DataFrame, named: str | None, source: str) -> str:
    """For a table with neither D nor C: the offer of its budget column (`budget_column_of`) as each run's own C,
    when --c-column naming it reads it in FLOPs (no unit in its name: budget_pfdays would be read unscaled); ""."""
    from analysis.sources.colunits import split_unit

    budget = budget_column_of(frame, named, source)
    if budget is None or (split_unit(str(budget), "c") or (0, 0, 1.0))[2] != 1.0:  # a unit to apply: not as C
        return ""
    return f" (column {budget!r} holds budgets: --c-column {shlex.quote(str(budget))} if it is each run's own C)"


def budgets_of_frame(
    frame: pd.DataFrame,
    compute,
    notes: list[str],
    column: str | None = None,
    tolerance: float = BUDGET_TOLERANCE,
    *,
    source: str = "the source",
    named: bool = False,
    sizes=None,
    warnings: list[str] | None = None,
    run_ids: pd.Series | None = None,
) -> tuple[np.ndarray, bool]:
    """`assign_budgets` for a source's rows (the rule of the module docstring), with a note on the
    rule used, and whether the budgets were clustered from C. ``column`` is the budget column (None: cluster); ``named``: the user named it, so a
    value that is not a finite number > 0 is an error instead of a note. ``sizes`` (each run's N): a column
    whose values are mostly budgets of fewer than 3 sizes and that the clustering rule groups into fewer
    budgets is each run's C written as its budget (`per_run_budgets`): clustered, with a note. A column
    `WARNED_FACTOR` or more off 6·N·D is said in ``warnings`` (None: in the notes). ``run_ids`` (each run's id,
    indexed by its row of the source: `rows.row_label`) name the runs a warning is about."""

    compute = np.asarray(compute, dtype=float)
    from analysis.sources.rows import numeric

    cautions = notes if warnings is None else warnings  # where the run-together warning goes
    if column is not None:
        raw = frame[column]
        requested = numeric(frame, column, "c")[0]  # text counts as N and D are read; "1.0e19 FLOPs" too
        bad = ~(np.isfinite(requested) & (requested > 0))
        if not bad.any():
            given = requested  # each run's C written as its budget is clustered, else close labels merged:
            requested = per_run_budgets(column, given, sizes, tolerance, notes)  # (a label per run, rounded C,
            clustered = not np.array_equal(given, requested)  # merged first would hide that most hold 1-2 sizes)
            if not clustered and tolerance > 0:  # --budget-tolerance 0 keeps the column's values as written
                requested = same_budgets(given, compute, notes)
            if clustered and (run_together := _run_together(requested, given)):
                cautions.append(run_together)
            text, factor = _disagreement(column, requested, compute)
            warned = warnings is not None and not 1 / WARNED_FACTOR < factor < WARNED_FACTOR
            (warnings if warned else notes).append(text)
            return requested, clustered
        if named:
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"--budget-column {column!r}, row {int(frame.index[i]) + 1}: value {raw.iloc[i]!r} is not a "
                f"budget; budgets must be finite numbers > 0 ({int(bad.sum())} such values), or use "
                "--budget-column none to cluster C = 6·N·D"
            )
        # a warning: the column's grouping is given up (user20: a 'Total' row without one, in a note, was a budget)
        (notes if warnings is None else warnings).append(
            f"column {column!r} has {_unusable(raw, bad)}: it is not used, budgets are clustered from C = 6·N·D; "
            "fill or drop those rows to group runs by it"
        )
    budgets = cluster_budgets(compute, tolerance)
    notes.append(_clustered(budgets, compute, tolerance))
    for caution in (_run_together(budgets, compute), lone_runs(budgets, compute, sizes, run_ids)):
        if caution:
            cautions.append(caution)
    return budgets, True


def _unusable(raw: pd.Series, bad: np.ndarray) -> str:
    """ "3 missing budget value(s)", or with values that are there but no budget "2 budget value(s) that are not
    finite numbers > 0 (row 5: '1e19 flop/s')"."""
    from analysis.sources.rows import blank_cells

    missing = blank_cells(raw)
    gaps = np.flatnonzero(bad & missing)
    rows = ", ".join(str(int(raw.index[i]) + 1) for i in gaps[:5]) + (" ..." if len(gaps) > 5 else "")
    said = [f"{len(gaps)} missing budget value(s) (row {rows})"] if len(gaps) else []
    if (bad & ~missing).any():
        i = int(np.flatnonzero(bad & ~missing)[0])
        value = raw.iloc[i]
        shown = repr(value) if isinstance(value, str) else str(value)
        said.append(
            f"{int((bad & ~missing).sum())} budget value(s) that are not finite numbers > 0 "
            f"(row {int(raw.index[i]) + 1}: {shown})"
        )
    return " and ".join(said)


def same_budgets(budgets: np.ndarray, compute: np.ndarray, notes: list[str] | None = None) -> np.ndarray:
    """``budgets`` with neighbouring values within `AGREEING` of each other that are one budget written twice
    (``1e19`` and ``9.87e18``) written as one, with a note in ``notes`` naming the labels merged. Within
    `AGREEING` a label and 6·N·D are one budget, and so are two labels, unless the runs' own 6·N·D
    (``compute``) separates them (`_apart`: each label's runs lie nearer their own median C than the other's,
    and the medians lie at least half as far apart as the labels): a designed 1e19/1.015e19 pair, or a
    column of each run's C, keeps its values. Labels that print alike (``%g``) are always one: 6·N·D read back
    from CSV as 1e18 and 1.0000000000000001e18. Each merged budget is its most frequent label (ties: the one
    6·N·D agrees with best): the column's own convention, which the fit uses; 6·N·D's best would pick the
    largest label of a column that counts compute below 6·N·D. Before (within 1%, without 6·N·D): 1e19, 1.0e19,
    9.87e18 and 1E19 for each of 4 budgets were 8 budgets, 4 without a parabola, under "agrees within 2%"."""
    values, counts = np.unique(budgets, return_counts=True)
    logs, log_c = np.log(values), np.log(np.asarray(compute, dtype=float))
    runs = [log_c[budgets == v] for v in values]
    groups = [[0]]
    for i in range(1, len(values)):  # a label joins its neighbour's group within AGREEING of the group's first
        close = logs[i] - logs[groups[-1][0]] <= np.log1p(AGREEING)
        if f"{values[i - 1]:g}" == f"{values[i]:g}" or (
            close and not _apart(runs[i - 1], runs[i], logs[i] - logs[i - 1])
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) == len(values):
        return budgets
    written, said = {}, []
    for group in groups:
        misfit = [float(np.median(np.abs(np.concatenate([runs[j] for j in group]) - logs[i]))) for i in group]
        value = values[group[min(range(len(group)), key=lambda k: (-counts[group[k]], misfit[k]))]]
        written.update(dict.fromkeys(values[group], value))
        if len(labels := list(dict.fromkeys(f"{v:g}" for v in values[group]))) > 1:  # not 6·N·D's round-off
            said.append((labels, values[group[-1]] / values[group[0]] - 1.0, value))
    if said and notes is not None:
        notes.append(_merged(said))
    return np.array([written[b] for b in budgets])


def _apart(low: np.ndarray, high: np.ndarray, gap: float) -> bool:
    """Whether the runs' log 6·N·D of two labels (``low`` < ``high``, ``gap`` apart in log) separates them: the
    medians at least half the labels' gap apart, and every run on its own label's side of their midpoint."""
    centre_low, centre_high = float(np.median(low)), float(np.median(high))
    middle = (centre_low + centre_high) / 2
    return centre_high - centre_low >= gap / 2 and bool((low < middle).all() and (high > middle).all())


def _merged(said: list) -> str:
    """The one note on budget labels merged: the first group in full, then up to 3 more, and a count."""

    def joined(labels):
        return f"{', '.join(labels[:-1])} and {labels[-1]}"

    (labels, spread, value), rest = said[0], said[1:]
    text = (
        f"budget labels {joined(labels)} lie {spread:.1%} apart and 6·N·D puts their runs at one budget: "
        f"read as {value:g}"
    )
    if rest:
        more = f"; and {len(rest) - 3} more" if len(rest) > 3 else ""
        text += f" (likewise {'; '.join(f'{joined(ls)} as {v:g}' for ls, _, v in rest[:3])}{more})"
    return text


def _groups(sorted_log: np.ndarray, tolerance: float) -> list[np.ndarray]:
    """Positions of ascending log values split where a neighbour exceeds the next smaller by more than
    ``tolerance`` (relative): the one rule that groups values into budgets."""
    return np.split(np.arange(len(sorted_log)), np.flatnonzero(np.diff(sorted_log) > np.log1p(tolerance)) + 1)


PARABOLA_SIZES = 3  # a budget with fewer distinct sizes gives approach 2 no parabola
PARABOLA_BUDGETS = 2  # bracketed budgets approach 2's law N_opt ∝ C^a needs


def per_run_budgets(column: str, budgets: np.ndarray, sizes, tolerance: float, notes: list[str]) -> np.ndarray:
    """``budgets`` clustered by the rule of the module docstring when most of the column's values hold fewer
    than `PARABOLA_SIZES` sizes and the rule merges some (6e18 printed per run as 5.8e18 to 6.2e18: 20
    "budgets" for 6 left approach 2 unidentified); else as given. Never the store's `BUDGET_COLUMN`: its
    values are the budgets requested (a WSD sweep's branch budgets may lie within 14% of the grid's), and a
    note names the option that groups them instead, where they leave approach 2 short of parabolas that
    grouping would give (not on a WSD or repeat store whose grid budgets hold them)."""
    if sizes is None:
        return budgets
    merged = cluster_budgets(budgets, tolerance)
    values = np.unique(budgets)
    if len(np.unique(merged)) == len(values):
        return budgets
    per_value = [len(np.unique(np.asarray(sizes)[budgets == b])) for b in values]
    if np.mean(np.asarray(per_value) < PARABOLA_SIZES) <= 0.5:
        return budgets
    found = (
        f"budget column {column!r} holds {len(values)} values, most with fewer than {PARABOLA_SIZES} sizes, that the "
        f"clustering rule groups into {len(np.unique(merged))} budgets (neighbours within {tolerance:.0%}: each run's "
        "C written as its budget?)"
    )
    if column == BUDGET_COLUMN:
        if _parabolas(budgets, sizes) < PARABOLA_BUDGETS <= _parabolas(merged, sizes):
            notes.append(f"{found}; kept as the budgets requested: --budget-column none groups the runs by C = 6·N·D")
        return budgets
    notes.append(
        f"{found}; each run's budget is its group's geometric mean (--budget-tolerance 0 keeps the column's values)"
    )
    return merged


def _parabolas(budgets: np.ndarray, sizes) -> int:
    """How many of ``budgets``' values hold `PARABOLA_SIZES` or more distinct sizes."""
    sizes = np.asarray(sizes)
    return sum(len(np.unique(sizes[budgets == b])) >= PARABOLA_SIZES for b in np.unique(budgets))


UNIT_FACTOR = 10.0  # 6·N·D this many times off a budget column (median) is a unit mix-up, not a nominal budget
WARNED_FACTOR = 100.0  # and this many times off, a warning: N or D in other units puts every fit's N_opt or C in them
NOMINAL_FACTOR = 1.25  # beyond this (median) the column counts compute otherwise than 6·N·D, not by rounding
# what such a note says; `optimal` repeats the note (user16: N_opt of a column 1.3x 6·N·D printed beside
# "6·N·D = 1e+21" without it; its --budget is 6·N·D, not one of the column's values)
NOMINAL_BUDGETS = "every fit places a budget at its runs' C = 6·N·D, not at the column's value"


def _disagreement(column: str, budgets: np.ndarray, compute: np.ndarray) -> tuple[str, float]:
    """What the budget column is to 6·N·D, and the median factor 6·N·D / column."""
    off = np.abs(compute / budgets - 1.0)
    where = f"budget column {column!r}: {len(np.unique(budgets))} budgets"
    factor = float(np.median(compute / budgets))
    if off.max() <= AGREEING:
        return f"{where}; 6·N·D agrees with it within {AGREEING:.0%}", factor
    if 1 / 3 <= factor / PF_DAY_FLOPS <= 3:  # a PF-day's FLOPs (within 3x): the column is in PF-days, unnamed
        return (
            f"{where}; 6·N·D is {factor:.3g}x the column (median over runs), a PF-day's FLOPs (8.64e19): the column "
            f"is in PF-days? It groups the runs, and {NOMINAL_BUDGETS}; rename it {column + '_pfdays'!r} (with "
            "--budget-column, name that) to have its labels read in FLOPs"
        ), factor
    if not 1 / UNIT_FACTOR < factor < UNIT_FACTOR:  # "up to 100%" would hide a unit mix-up
        return (
            f"{where}; 6·N·D is {factor:.3g}x the column (median over runs): N, D or the budget is in other "
            "units (N in millions? a budget in PF-days?); the fit groups runs by the column and fits C = 6·N·D"
        ), factor
    text = f"{where}; 6·N·D differs from it by up to {off.max():.0%} (median {np.median(off):.0%}); the column groups"
    text += " the runs, each budget at its runs' 6·N·D"
    if not 1 / NOMINAL_FACTOR <= factor <= NOMINAL_FACTOR:  # a convention, not rounding: say what it changes
        text += (
            f", and 6·N·D is {factor:.3g}x it (median), a nominal budget: {NOMINAL_BUDGETS} (`optimal --budget` "
            "is in 6·N·D FLOPs)"
        )
    return text, factor


MERGED_SPAN = 0.5  # a clustered budget whose C spans over 50% is two budgets run together, not rounding,
MERGED_RUNS = 1.5  # when it holds this many times the runs of the median budget (a drifting ladder's do not)


def _run_together(budgets: np.ndarray, compute: np.ndarray) -> str:
    """A warning on the clustered budgets whose C spans more than `MERGED_SPAN` and that hold `MERGED_RUNS` times
    the runs of the median budget ("" when none does): two ladder budgets 1.5x apart, each drifting ±12%, chain
    into one budget of 12 sizes spanning 66%, and approach 2 fits one parabola through both."""
    wide = []
    labels = np.unique(budgets)
    typical = np.median([np.sum(budgets == b) for b in labels])  # a budget's runs, as most budgets have them
    for b in labels:
        c = np.sort(compute[budgets == b])
        # wide alone is a ladder drifting (±25% spans 67%); two budgets run together also hold twice the runs
        if c[-1] / c[0] - 1.0 > MERGED_SPAN and (len(labels) == 1 or len(c) >= MERGED_RUNS * typical):
            gap = int(np.argmax(np.diff(np.log(c))))
            wide.append(
                f"{b:.3g} ({len(c)} runs, C from {c[0]:.3g} to {c[-1]:.3g}, widest gap {c[gap + 1] / c[gap] - 1:.0%} "
                f"between {c[gap]:.3g} and {c[gap + 1]:.3g})"
            )
    if not wide:
        return ""
    return (
        f"budget(s) {'; '.join(wide)} clustered from each run's C span over {MERGED_SPAN:.0%} of C, more than a "
        "budget's rounding: two budgets run together? Approach 2 fits one parabola through each; a --budget-tolerance "
        "below the widest gap splits it, and a column of the nominal budgets (--budget-column) states them"
    )


LADDER_RUNS = 3  # budgets clustered from C holding this many runs (the median budget) make a ladder


def lone_runs(budgets: np.ndarray, compute: np.ndarray, sizes=None, run_ids=None) -> str:
    """A warning naming each clustered budget of one run in a ladder (the median budget holds `LADDER_RUNS`
    or more), "" when none: a run stopped at 60% of its budget has its own C, 6e18 between 3e18 and 1e19,
    and became a budget of one size (approach 2: a budget without a parabola). Budgets of one run each (a
    Kaplan-style table) say nothing. ``sizes``: each run's N, ``run_ids``: its id by its row (`rows.row_label`), said with its C."""
    labels, counts = np.unique(budgets, return_counts=True)
    if len(labels) < 2 or np.median(counts) < LADDER_RUNS or not np.any(counts == 1):
        return ""
    from analysis.sources.rows import row_label

    ladder = labels[counts > 1]
    lone = []
    for b in labels[counts == 1]:
        i = int(np.flatnonzero(budgets == b)[0])
        below, above = ladder[ladder < b], ladder[ladder > b]
        where = f"below {above[0]:.3g}" if not below.size else f"above {below[-1]:.3g}" if not above.size else ""
        where = where or f"between {below[-1]:.3g} and {above[0]:.3g}"
        size = "" if sizes is None else f", N = {float(np.asarray(sizes)[i]):.3g}"
        run = "" if run_ids is None else f"{row_label(i, run_ids)}: "
        lone.append(f"{run}C = {compute[i]:.3g}{size} ({where})")
    return (
        f"budget(s) of one run among budgets of {int(np.median(counts))} runs (median), clustered from C: {'; '.join(lone)}. "
        "Stopped early? A run short of its budget forms a budget of its own (--show-budgets lists it); give a budget column "
        "(--budget-column) or drop it (--where)"
    )


def _clustered(budgets: np.ndarray, compute: np.ndarray, tolerance: float) -> str:
    widest = max(compute[budgets == b].max() / compute[budgets == b].min() - 1.0 for b in np.unique(budgets))
    return (
        f"budgets: {len(np.unique(budgets))} clustered from C = 6·N·D in log space (a gap wider than "
        f"{tolerance:.0%} between neighbouring C values starts a new budget; --budget-tolerance sets it); "
        f"the widest spans {widest:.0%} of C"
    )


def cluster_budgets(compute: np.ndarray, tolerance: float = BUDGET_TOLERANCE) -> np.ndarray:
    """Each C value's budget under the clustering rule of the module docstring."""
    compute = np.asarray(compute, dtype=float)
    order = np.argsort(compute, kind="stable")
    labels = np.empty(len(compute))
    sorted_log = np.log(compute[order])
    for part in _groups(sorted_log, tolerance):
        if len(part):
            labels[order[part]] = np.exp(np.mean(sorted_log[part]))
    return labels


def budget_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Which runs went to which budget: one row per budget (ascending) with its runs, distinct
    sizes, the range of C = 6·N·D and of C relative to the budget."""
    import pandas as pd

    grouped = runs.groupby("budget", sort=True)
    table = pd.DataFrame(
        {
            "runs": grouped.size(),
            "sizes": grouped["N"].nunique(),
            "C_min": grouped["C"].min(),
            "C_max": grouped["C"].max(),
        }
    )
    table["off_max"] = (
        runs.assign(off=(runs["C"] / runs["budget"] - 1.0).abs()).groupby("budget", sort=True)["off"].max()
    )
    return table.reset_index()
