"""`scaling compare --allow-mixed` on pooled recipes: m(C) is unidentified, never a zero-width interval.

Why it happened: two recipes pooled at the same (N, D) share one bootstrap unit, so every resample
draws both rows of a point together. The robust (Huber) objective is linear in each residual beyond
its small delta, and the two rows' residuals have opposite signs anywhere between their losses: the
gradient is exactly 0 in a whole valley of laws, L-BFGS stops where it starts, and every resample
returns the same law. Its "interval" then has zero width, and so has every m(C) built from it.
(~10 s: a few approach-3 fits with 50 resamples, one CLI process.)"""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from analysis.compare import Input, compare_inputs
from analysis.compare.multiplier import evaluate, unresponsive
from analysis.compare.render import render_comparison
from analysis.compare.result import Side, compare
from analysis.fits.parametric import fit_parametric
from analysis.published import CHINCHILLA_APPROACH3
from analysis.report.compare import comparison_blocks
from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap
from analysis.synthetic import isoflop_runs

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]
RESAMPLES = 50
REASON = "gave the same law"


def ladder(scale=1.0, seed=1) -> pd.DataFrame:
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.005, seed=seed)
    return runs.assign(val_loss=runs["val_loss"] * scale)


def pooled(scale=1.0) -> pd.DataFrame:
    """Two recipes at the same (N, D), the second 5% lower, in one table (pooled with --allow-mixed)."""
    base = ladder(scale)
    new = base.assign(run_id=base["run_id"] + "b", val_loss=base["val_loss"] * 0.95)
    return pd.concat([base.assign(recipe="baseline"), new.assign(recipe="new")], ignore_index=True)


def side(frame: pd.DataFrame, label: str, seed: int) -> Side:
    table = table_from_frame(frame, label, ColumnMap(), allow_mixed_corpora=True)
    fit = fit_parametric(table, resamples=RESAMPLES, seed=seed)
    return Side(label, len(table), [float(b) for b in table.budgets], fit, seed)


def test_the_cause_every_resample_of_a_pooled_fit_is_the_same_law():
    stuck = side(pooled(), "pooled.csv", 0).fit
    assert stuck.convergence["gradient_max_abs"] < 1e-12  # a flat valley: the optimizer never moved
    assert all(np.ptp(stuck.bootstrap.samples[k]) == 0 for k in ("E", "A", "B", "alpha", "beta"))
    assert unresponsive(stuck)
    assert not unresponsive(side(ladder(), "clean.csv", 0).fit)


def test_two_pooled_sources_give_m_unidentified_not_a_zero_width_interval(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pooled().to_csv(a, index=False)
    pooled(scale=0.97).to_csv(b, index=False)
    args = ("compare", a, b, "--allow-mixed", "--bootstrap", RESAMPLES)
    out = json.loads(run_cli(*args, "--json", check=True).stdout)["comparisons"][0]
    assert out["summary"].startswith("m(C) is unidentified: every resample of the baseline's and the candidate's")
    for row in out["budgets"]:
        m = row["multiplier"]
        assert m["interval"][0] == m["interval"][1]  # the degenerate interval that is no longer shown
        for key in ("multiplier", "loss_difference", "baseline_loss", "candidate_loss"):
            assert REASON in row[key]["unidentified"]
    assert all(d["unidentified"] == out["unidentified"] for d in out["differences"].values())
    text = run_cli(*args, check=True).stdout
    table = text.split("per budget")[1].split("differences")[0]
    assert table.count("unidentified") == 4 * len(out["budgets"]) and "[" not in table


def test_one_pooled_side_is_enough_and_the_other_sides_losses_stay_numbers():
    stuck, clean = side(pooled(), "pooled.csv", 0), side(ladder(), "clean.csv", 1)
    c = compare(stuck, clean, 0.95)
    assert REASON in c.unidentified and "the baseline's fit" in c.unidentified and "candidate" not in c.unidentified
    for row in c.rows:
        assert row.multiplier.lower < row.multiplier.upper  # the candidate's spread alone: not the uncertainty
        assert row.multiplier.unidentified == row.loss_difference.unidentified == row.baseline_loss.unidentified
        assert not row.candidate_loss.unidentified
    cells = [r for block in comparison_blocks([c], has_figure=False) for r in getattr(block, "rows", [])][0]
    assert cells[1:4] == ["unidentified"] * 3 and cells[4] != "unidentified"
    assert "unidentified (as m(C), above)" in render_comparison(c)


@pytest.mark.parametrize("resamples", [0, RESAMPLES])
def test_the_normal_path_keeps_its_numbers(resamples):
    base, cand = ladder(), ladder(scale=0.95, seed=2)
    inputs = [Input(label, table_from_frame(f, label, ColumnMap()), f) for label, f in (("a", base), ("b", cand))]
    (c,) = compare_inputs(inputs, resamples=resamples, seed=0, level=0.95)
    assert not c.unidentified and not any(d.get("unidentified") for d in c.differences.values())
    direct = evaluate(c.baseline.fit, c.candidate.fit, [r.compute for r in c.rows], 0.95)
    for i, row in enumerate(c.rows):
        assert not row.multiplier.unidentified
        assert row.multiplier.value == direct["multiplier"]["value"][i]
        if resamples:
            assert row.multiplier.lower == direct["multiplier"]["lower"][i] < direct["multiplier"]["upper"][i]
