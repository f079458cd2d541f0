"""A run stopped short of its budget forms a clustered budget of one run: warned, naming it (`analysis.sources.budgets`)."""

from __future__ import annotations

from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW as L
from analysis.synthetic import isoflop_runs


def runs():
    """Four budgets of 5 sizes, no budget column: budgets are clustered from C = 6·N·D."""
    return isoflop_runs(L, [1e18, 1e19, 1e20, 1e21], 5, spread_decades=0.6, seed=1).drop(
        columns=["budget_flops", "flops"]
    )


def lone(frame) -> list[str]:
    table = table_from_frame(frame, "t.csv", ColumnMap())
    return [w for lines in table.lines() for w in lines if "budget(s) of one run" in w]


def test_a_run_stopped_at_60_percent_of_its_budget_is_named():
    # Before: the run (C = 6e19 instead of 1e20) became a budget of its own, seen only as approach 2's
    # "budget without a parabola".
    crashed = runs()
    crashed.loc[12, "tokens"] *= 0.6
    (warning,) = lone(crashed)
    n = crashed.loc[12, "params"]
    assert f"C = 6e+19, N = {n:.3g} (between 1e+19 and 1e+20)" in warning and "Stopped early?" in warning
    assert "budget column" in warning


def test_a_clean_ladder_and_one_run_per_budget_say_nothing():
    assert lone(runs()) == []
    assert lone(runs().iloc[[0, 5, 10, 15]]) == []  # Kaplan-style: every budget one run


def test_the_lone_run_is_named_by_its_row_and_its_run_id():
    # Before (review tables10 #3): the warning gave the run's C and N only; in a table of 20 runs the user had
    # to find which row that was.
    crashed = runs()
    crashed.loc[12, "tokens"] *= 0.6
    (warning,) = lone(crashed)
    assert f"row 13 (run {crashed.loc[12, 'run_id']}): C = 6e+19, N = " in warning
    (warning,) = lone(crashed.drop(columns="run_id"))  # no run id: the row alone
    assert "row 13: C = 6e+19, N = " in warning
