"""A fit without a bootstrap (--bootstrap 0) says once, in every output, that identification was not checked.

Before: `scaling fit t16 --approach 3 --bootstrap 0` printed alpha 2.835, beta 2.46, A 5.25e23 bare (truth 0.34,
0.28, 406; the default bootstrap calls them all unidentified), `optimal --law` of that fit a loss 2.395 (truth 2.139)
with no note, approach 2 lost its per-budget N_opt intervals (which need no bootstrap) and compare said "95% intervals
from 0 bootstrap pairs"."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_main

from analysis.compare import compare_inputs, read_inputs
from analysis.compare.render import render_comparison
from analysis.fits.bootstrap import PER_BUDGET_CHECKED, UNCHECKED, unchecked
from analysis.fits.fit import fit_all
from analysis.fits.isoflop import fit_isoflop
from analysis.report.blocks import Bullets
from analysis.report.sweep import summary_blocks
from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap, Source
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return isoflop_runs(CHINCHILLA_LAW, np.logspace(18, 21, 4), 6, noise=0.01, seed=3)


def test_fit_and_optimal_without_a_bootstrap_say_once_that_identification_was_not_checked(capsys, tmp_path, runs):
    path, saved = tmp_path / "runs.csv", str(tmp_path / "fit.json")
    runs.to_csv(path, index=False)
    text = run_main(capsys, "fit", str(path), "--approach", "3", "--bootstrap", "0", "--out", saved).stdout
    assert text.splitlines()[1] == UNCHECKED and text.count("identification not checked") == 1
    assert "the laws' numbers" in UNCHECKED and PER_BUDGET_CHECKED not in text  # approach 2 was not fitted
    as_json = json.loads(run_main(capsys, "fit", str(path), "--approach", "3", "--bootstrap", "0", "--json").stdout)
    assert as_json["identification"] == UNCHECKED
    checked = run_main(capsys, "fit", str(path), "--approach", "3", "--bootstrap", "20").stdout
    assert "identification not checked" not in checked
    answer = run_main(capsys, "optimal", "--budget", "1e21", "--law", saved).stdout
    assert answer.count(f"note: {UNCHECKED}") == 1
    notes = json.loads(run_main(capsys, "optimal", "--budget", "1e21", "--law", saved, "--json").stdout)["notes"]
    assert notes.count(UNCHECKED) == 1


def test_approach_2_keeps_its_per_budget_intervals_without_a_bootstrap(runs):
    table = table_from_frame(runs, "runs.csv", ColumnMap())
    bare, booted = fit_isoflop(table, resamples=0), fit_isoflop(table, resamples=1000)
    assert bare.bootstrap is None and all(p.n_opt_interval for p in bare.profiles)
    assert [p.n_opt_interval for p in bare.profiles] == [p.n_opt_interval for p in booted.profiles]
    assert "N_opt per budget: 1000 draws" in bare.diagnostics["n_opt_per_budget"]


def test_budgets_of_three_runs_are_not_said_to_have_tested_intervals():
    # Before: every budget of 3 runs has no interval (no scatter left), yet the header said they "were tested"
    three = fit_all(
        table_from_frame(isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 3, seed=0), "three.csv"), (2,), resamples=0
    )
    assert all(p.n_opt_interval is None for p in three.isoflop.profiles)
    assert unchecked(three.fits) == [UNCHECKED]
    assert unchecked(
        fit_all(
            table_from_frame(isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 4, seed=0), "four.csv"), (2,), resamples=0
        ).fits
    ) == [f"{UNCHECKED}; {PER_BUDGET_CHECKED}"]


def test_compare_without_pairs_prints_no_interval_text(tmp_path, runs):
    base, cand = tmp_path / "base.csv", tmp_path / "cand.csv"
    runs.to_csv(base, index=False)
    runs.assign(val_loss=runs["val_loss"] - 0.05).to_csv(cand, index=False)
    comparison = compare_inputs(read_inputs([str(base), str(cand)], ColumnMap()), resamples=0, seed=0, level=0.95)[0]
    text = render_comparison(comparison)
    assert "bootstrap pairs" not in text and "(approach-3 frontiers; losses in nats/token; no intervals; m(C)" in text
    assert text.count(UNCHECKED) == 1
    assert text.index(UNCHECKED) < text.index(comparison.summary)  # before any number, as fit and the report


def test_the_report_summary_says_it_before_any_number(runs):
    table = table_from_frame(runs, "runs.csv", ColumnMap())
    items = summary_blocks(Source(table, runs), fit_all(table, (3,), resamples=0), [])[1]
    assert isinstance(items, Bullets) and sum("Identification not checked" in i for i in items.items) == 1
    assert items.items.index(next(i for i in items.items if "Identification" in i)) < next(
        k for k, i in enumerate(items.items) if i.startswith("Approach 3")
    )
