"""An allocation the fit cannot back is unidentified wherever it is printed (`analysis.fits.identified`):
`optimal --target-loss` beyond the fit's point law or at an unidentified budget, an N_opt interval over
a decade (`optimal`, the report's tables), and `compare`'s m(C) with an unbounded interval.
Truth: Chinchilla approach 3 (a = 0.4516). (~35 s: a two-budget fit, 200 resamples; two comparisons' fits.)"""

import json

import numpy as np
import pytest

from analysis.describe.allocation import AS_N_OPT, AS_N_OPT_NOTE, allocation_cells, n_opt_cell
from analysis.fits import muennighoff as mf
from analysis.fits.fit import fit_all
from analysis.fits.muennighoff_optimal import repeat_law
from analysis.fits.optimal import ParametricLaw
from analysis.fits.presets import PRESETS
from analysis.fits.results import FitReport
from analysis.fits.saved_law import law_from_fit
from analysis.report.allocation import allocation_blocks
from analysis.report.blocks import Paragraph, Table
from analysis.sources.check import table_from_frame
from analysis.sources.load import read_source
from analysis.synthetic import CHINCHILLA_LAW as L
from analysis.synthetic import isoflop_runs
from scaling.cli import main
from scaling.errors import UserError

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]
ALLOCATED = ("N", "D", "tokens_per_parameter", "loss")


def two_runs():
    """The runs of `two`: 2 of 5 budgets (1e18 and 1e19)."""
    runs = isoflop_runs(L, BUDGETS, 7, spread_decades=0.6, seed=2)
    return runs[runs.budget_flops.isin([1e18, 1e19])]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """A fit on `two_runs`: its E = 2.01 [7e-13, 2.49] reaches down to the truth's 1.69."""
    path = tmp_path_factory.mktemp("two") / "two.json"
    fit_all(table_from_frame(two_runs(), "two"), (2, 3), resamples=200).save(path)
    return str(path)


def optimal(capsys, *argv) -> dict:
    assert main(["optimal", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_target_below_the_point_floor_but_within_its_interval_is_an_unidentified_budget(capsys, two):
    fit = {f.approach: f for f in FitReport.load(two).fits}[3]
    e_samples = np.asarray(fit.bootstrap.samples["E"])
    assert fit.params["E"] > 1.9 > np.percentile(e_samples, 2.5) and (e_samples < 1.9).sum() > 20
    truth = ParametricLaw("truth", dict(L)).budget_for_loss(1.9).budget.value
    assert 1e24 < truth < 2e24  # the truth reaches 1.9: refusing it was wrong
    got = optimal(capsys, "--law", two, "--target-loss", "1.9")
    assert got["budget_flops"] is None and got["budget_interval"] is None
    reached = int((e_samples < 1.9).sum())
    assert got["budget_unidentified"].startswith(f"interval unbounded above: {len(e_samples) - reached} of ")
    for key in ALLOCATED[:-1]:
        assert got[key] == {"estimate": None, "interval": None, "unidentified": "as the budget's"}
    assert got["loss"] == {"estimate": 1.9, "interval": None}  # the target asked for, by construction
    assert main(["optimal", "--law", two, "--target-loss", "1.9"]) == 0
    text = capsys.readouterr().out
    assert "N_opt              unidentified (as the budget's)" in text and "never reach the target loss" in text
    # below every sample's E (and for a law without samples) it stays one error line
    assert main(["optimal", "--law", two, "--target-loss", f"{e_samples.min() / 10:g}"]) == 2
    assert "is not reachable" in capsys.readouterr().err
    assert main(["optimal", "--law", "chinchilla-parametric", "--target-loss", "1.6"]) == 2


def test_at_an_unidentified_budget_n_d_and_the_loss_are_unidentified_too(capsys, two):
    got = optimal(capsys, "--law", two, "--target-loss", "2.1")
    assert got["budget_unidentified"].startswith("interval unbounded above:")
    truth_n = ParametricLaw("truth", dict(L)).budget_for_loss(2.1).n.value  # 6.72e9, outside the old interval
    assert truth_n == pytest.approx(6.72e9, rel=0.01)
    for key in ALLOCATED[:-1]:
        assert got[key]["interval"] is None and got[key]["unidentified"], key
    assert got["loss"] == {"estimate": 2.1, "interval": None}
    assert main(["optimal", "--law", two, "--target-loss", "2.1"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith(("N_opt", "D_opt", "tokens/"))]
    assert len(lines) == 3 and all("unidentified (" in x and "[" not in x for x in lines)


def test_an_n_opt_interval_over_a_decade_is_unidentified_and_d_follows_it(capsys, two):
    got = optimal(capsys, "--law", two, "--budget", "1e21")
    lower, upper = got["N"]["interval"]
    assert upper / lower > 10 and got["N"]["unidentified"].startswith("interval spans")
    for key in ("D", "tokens_per_parameter"):
        assert got[key]["unidentified"] == f"as N's: {got['N']['unidentified']}"
    assert "unidentified" not in got["loss"]  # the loss has its own interval
    inside = optimal(capsys, "--law", two, "--budget", "3e18")  # within the fitted budgets: under a decade
    assert "unidentified" not in inside["N"] and inside["N"]["interval"][1] / inside["N"]["interval"][0] < 10
    preset = optimal(capsys, "--law", "chinchilla-parametric", "--budget", "1e24")
    assert preset["N"] == {"estimate": pytest.approx(preset["N"]["estimate"]), "interval": None}
    # the report's allocation table and its N_opt-by-approach table, by the same allocation
    law, reference = law_from_fit(FitReport.load(two), "this fit", 3), PRESETS["chinchilla"]()
    cells = allocation_cells(law.allocate(1e24), reference.allocate(1e24), law.fitted_compute_max)
    assert cells[1].startswith("unidentified (interval spans") and cells[2] == cells[3] == AS_N_OPT
    assert n_opt_cell(law.allocate(1e24)).startswith("unidentified (interval spans")


def test_the_reports_allocation_table_says_once_why_d_follows_an_unidentified_n_opt(two, tmp_path):
    # Before: "unidentified (as N's: interval spans 2.3 orders of magnitude)" in the D and D/N cells of each such
    # row, beside N_opt's own "unidentified (interval spans 2.3 orders of magnitude)".
    two_runs().to_csv(tmp_path / "two.csv", index=False)
    blocks = allocation_blocks(FitReport.load(two), read_source(str(tmp_path / "two.csv")))
    ladder = next(b for b in blocks if isinstance(b, Table))
    unidentified = [row for row in ladder.rows if row[1].startswith("unidentified (interval spans")]
    assert unidentified and all(row[2] == row[3] == AS_N_OPT for row in unidentified)
    assert not any("as N's" in cell for row in ladder.rows for cell in row)
    notes = [b.text for b in blocks if isinstance(b, Paragraph) and b.text.startswith(AS_N_OPT)]
    assert notes == [AS_N_OPT_NOTE + "."], notes
    assert blocks[blocks.index(ladder) + 1].text == notes[0]  # right below the table


def test_the_data_constrained_law_answers_a_target_its_samples_reach_with_an_unidentified_budget():
    params, count = mf.published_params(), 200
    samples = {k: np.full(count, v) for k, v in params.items()}
    samples["E"] = params["E"] * np.linspace(0.9, 1.02, count)  # some floors lower than the point's
    law = repeat_law(params, "m", unique_tokens=25e9, samples=samples)
    lowest = float(law._lowest(law.params))
    answer = law.budget_for_loss(lowest - 0.01)  # below the point law's lowest loss, above some samples'
    assert answer.budget.unidentified.startswith("interval unbounded above:")
    assert all(e.unidentified == "as the budget's" for e in (answer.n, answer.d, answer.epochs))
    assert answer.loss.value == lowest - 0.01 and answer.loss.interval is None
    with pytest.raises(UserError, match="not reachable"):
        law.budget_for_loss(float(law._lowest(law.samples).min()) - 0.01)  # below every sample's too


def test_compare_withholds_m_where_its_interval_is_unbounded(capsys, tmp_path):
    """Baseline on 1e18 and 3e18 only, candidate on all five budgets, true m = 2: m(1e22) printed
    0.161 [0.058, unbounded], 12x below the truth."""
    base = isoflop_runs(L, BUDGETS, 7, spread_decades=0.6, seed=3)
    k = np.sqrt(2)  # L(kN, kD): m = k^2 = 2
    cand = isoflop_runs({**L, "A": L["A"] / k ** L["alpha"], "B": L["B"] / k ** L["beta"]}, BUDGETS, 7,
                        spread_decades=0.6, seed=4)  # fmt: skip
    base[base.budget_flops <= 3e18].to_csv(tmp_path / "a.csv", index=False)
    cand.to_csv(tmp_path / "c.csv", index=False)
    assert main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "c.csv"), "--json"]) == 0
    rows = {r["compute"]: r["multiplier"] for r in json.loads(capsys.readouterr().out)["comparisons"][0]["budgets"]}
    top = [m for c, m in rows.items() if c > 3e20]
    assert top and all(m["interval"] is None and m["unidentified"].startswith("interval unbounded above") for m in top)
    assert any(m["interval"] is not None for c, m in rows.items() if c < 1e19)  # where the fits overlap: numbers
    assert main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "c.csv")]) == 0
    text = capsys.readouterr().out
    assert "unbounded]" not in text and "m(C) is unidentified at" in text


def test_a_fit_whose_bootstrap_was_withheld_predicts_no_bare_loss():
    # user26: over half the resamples failed, every estimate "no interval", yet optimal and the report printed a
    # bare predicted loss (2.086) from the same law
    from analysis.fits.bootstrap import WITHHELD

    report = fit_all(table_from_frame(isoflop_runs(L, [1e18, 1e19], 5), "t.csv"), (3,), resamples=40, seed=0)
    fit = report.fits[0]
    fit.bootstrap.samples = {}  # as `bootstrap.summarize` withholds them
    for e in fit.estimates.values():
        e.lower = e.upper = None
        e.unidentified = WITHHELD
    allocation = law_from_fit(report, "t.json").allocate(1e19)
    assert allocation.loss.unidentified and allocation.loss.interval is None, allocation.loss
