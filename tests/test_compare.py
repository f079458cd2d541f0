"""`scaling compare`: synthetic pairs with a known effective compute multiplier m(C).

Truths (analysis.synthetic draws IsoFLOP sweeps from them, 1% log-normal noise):
  * constant 1.5×: the candidate's law is the baseline's with every token worth 1.5 tokens,
    L_cand(N, D) = L_base(N, 1.5·D), i.e. B_cand = B·1.5^(−β) and all else equal. At compute C the
    candidate's frontier is min_N L_base(N, 1.5·C/(6N)) = L*_base(1.5·C), so m(C) = 1.5 at every C.
  * scale-dependent: the candidate has a different data exponent β (and B), so the frontiers have
    different exponents γ = αβ/(α+β) and m(C) drifts; the true m(C) is computed here by brute force
    (a dense grid over N for each frontier, brentq in log C for the inverse), independently of the
    closed form the code uses.
  * `compare X X`: the same table twice (bootstrapped with different seeds) must give intervals
    that contain 1.
  * every C doubled, losses unchanged: the baseline table is the candidate's with every D (hence
    C = 6ND) doubled; the baseline then needs 2·C for the loss the candidate reaches with C: m = 2.
"""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main
from scipy.optimize import brentq
from test_outliers import lone_run_ladder

from analysis.compare import Input, compare_inputs, fit_side, read_groups, read_inputs
from analysis.compare.answer import drift_cause
from analysis.compare.frontier import Frontier
from analysis.fits import laws
from analysis.fits.fit import fit_all
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs

BUDGETS = np.geomspace(1e18, 1e21, 4)
SIZES = 9
RESAMPLES = 200
BASE = dict(CHINCHILLA_LAW)
CONSTANT = {**BASE, "B": BASE["B"] * 1.5 ** -BASE["beta"]}  # L(N, 1.5·D) of the baseline's law
STEEPER = {**BASE, "beta": 0.34, "B": 1200.0}  # a different data exponent: m(C) changes with C


def _sweep(law, seed, path, **extra):
    frame = isoflop_runs(law, BUDGETS, SIZES, noise=0.01, seed=seed)
    for column, value in extra.items():
        frame[column] = value
    frame.to_csv(path, index=False)
    return frame


def _brute_frontier(law, compute):
    n = np.geomspace(1e5, 1e14, 200_001)
    return float(np.min(laws.chinchilla_loss(n, laws.tokens_for_compute(compute, n), **law)))


def _true_multiplier(base, cand, compute):
    target = _brute_frontier(cand, compute)
    log_c = brentq(lambda x: _brute_frontier(base, np.exp(x)) - target, np.log(1e12), np.log(1e30), xtol=1e-9)
    return np.exp(log_c) / compute


def test_frontier_closed_form_matches_brute_force_and_inverts():
    frontier = Frontier.of_law(**STEEPER)
    for c in (1e18, 1e20, 1e22):
        assert frontier.loss(c) == pytest.approx(_brute_frontier(STEEPER, c), rel=1e-7)
        assert frontier.compute_for(frontier.loss(c)) == pytest.approx(c, rel=1e-9)
    assert np.isinf(frontier.compute_for(STEEPER["E"] * 0.99))  # below the floor: never reached


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    paths = {name: folder / f"{name}.csv" for name in ("base", "constant", "steeper", "doubled")}
    base = _sweep(BASE, 1, paths["base"])
    _sweep(CONSTANT, 2, paths["constant"])
    _sweep(STEEPER, 3, paths["steeper"])
    doubled = base.copy()
    for column in ("tokens", "flops", "budget_flops"):
        doubled[column] = 2.0 * doubled[column]
    doubled.to_csv(paths["doubled"], index=False)
    return paths


def _compare(paths, resamples=RESAMPLES):
    inputs = read_inputs([str(p) for p in paths], ColumnMap())
    return compare_inputs(inputs, resamples=resamples, seed=0, level=0.95)[0]


def _noisy_pair(tmp_path, sizes: int, noise: float, seed: int):
    """Two sources drawn from one law at 3 budgets (1e18-1e20), ``sizes`` each, with large noise (seeds ``seed`` and
    ``seed + 1``), compared with 60 resamples: runs that cannot pin m down."""
    small = np.geomspace(1e18, 1e20, 3)
    base, cand = tmp_path / "b.csv", tmp_path / "c.csv"
    isoflop_runs(BASE, small, sizes, spread_decades=0.6, noise=noise, seed=seed).to_csv(base, index=False)
    isoflop_runs(BASE, small, sizes, spread_decades=0.6, noise=noise, seed=seed + 1).to_csv(cand, index=False)
    return _compare([base, cand], resamples=60)


def _inside(row, truth):
    return row.multiplier.lower <= truth <= row.multiplier.upper


def test_constant_multiplier_is_recovered_within_its_interval(pair):
    c = _compare([pair["base"], pair["constant"]])
    fitted = [r for r in c.rows if not r.beyond_fitted_range]
    assert len(fitted) == len(BUDGETS)
    assert all(_inside(r, 1.5) for r in fitted), [(r.compute, r.multiplier) for r in fitted]
    assert not c.scale_dependent and c.summary.startswith("m ≈ "), c.summary
    assert c.differences["gamma"]["lower"] <= 0 <= c.differences["gamma"]["upper"]
    assert all(r.beyond_fitted_range for r in c.rows[len(BUDGETS) :])  # the extrapolated rows are flagged


def test_the_json_gives_the_multiplier_the_summary_quotes(pair):
    """user35: the headline m was only inside the summary's text: `--json` gives it at the range's ends and middle."""
    from analysis.compare.render import comparison_json

    for candidate, constant in (("constant", True), ("steeper", False)):
        c = _compare([pair["base"], pair[candidate]])
        m = json.loads(json.dumps(comparison_json(c)))["multiplier"]
        assert m["constant"] is constant and [a["compute"] for a in m["at"]] == pytest.approx(
            [c.shared_range[0], np.sqrt(c.shared_range[0] * c.shared_range[1]), c.shared_range[1]]
        )
        quoted = m["at"][1] if constant else m["at"][0]  # "m ≈ MID [..]" or "it goes from LOW [..] ..."
        assert f"{quoted['estimate']:.3g} [{quoted['interval'][0]:.3g}, {quoted['interval'][1]:.3g}]" in c.summary


def test_scale_dependent_multiplier_is_recovered_at_several_budgets(pair):
    c = _compare([pair["base"], pair["steeper"]])
    fitted = [r for r in c.rows if not r.beyond_fitted_range]
    truths = [_true_multiplier(BASE, STEEPER, r.compute) for r in fitted]
    assert truths[-1] / truths[0] > 1.3  # the truth drifts across the range
    assert all(_inside(r, t) for r, t in zip(fitted, truths)), [(r.multiplier, t) for r, t in zip(fitted, truths)]
    assert c.scale_dependent and "changes with scale" in c.summary and "goes from" in c.summary, c.summary
    assert c.differences["beta"]["lower"] <= STEEPER["beta"] - BASE["beta"] <= c.differences["beta"]["upper"]


def test_without_intervals_whether_m_changes_with_scale_cannot_be_said(pair):
    """user35: `--bootstrap 0` on two recipes read a drift of noise as "m(C) changes with scale"; a constant m is no
    more known without intervals than a changing one."""
    for candidate in ("constant", "steeper"):
        c = _compare([pair["base"], pair[candidate]], resamples=0)
        assert c.scale_dependent is None and "whether it changes with scale cannot be said" in c.summary, c.summary
        assert c.summary.endswith("no intervals)") and "m ≈" not in c.summary, c.summary


def _user35_runs(law, budgets, sizes, seed):
    """user35's generator: ``sizes`` runs a budget at N_opt·e^(−1 .. +1), 1% log-normal noise."""
    rng, rows = np.random.default_rng(seed), []
    for c in budgets:
        n_opt = laws.chinchilla_allocation(c, law["A"], law["B"], law["alpha"], law["beta"])[0]
        for n in n_opt * np.exp(np.linspace(-1.0, 1.0, sizes)):
            d = c / (6 * n)
            loss = laws.chinchilla_loss(n, d, **law) * np.exp(0.01 * rng.standard_normal())
            rows.append(dict(params=n, tokens=d, flops=6 * n * d, loss=loss))
    return pd.DataFrame(rows)


def test_an_exponent_difference_without_a_drift_across_the_range_says_nothing_of_scale(tmp_path):
    """user35: a thin candidate (3 budgets of 3 sizes) worth exactly 2x the baseline's compute at every scale read
    "m(C) changes with scale: it goes from 2.03 [1.84, 2.34] ... to 2 [1.72, 2.28]": Δγ and ΔE, off together,
    excluded 0 while m did not drift. Now whether it changes with scale cannot be said."""
    law = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    doubled = {**law, "A": law["A"] / 2 ** (law["alpha"] / 2), "B": law["B"] / 2 ** (law["beta"] / 2)}
    _user35_runs(law, [1e18, 1e19, 1e20, 1e21], 6, seed=1).to_csv(tmp_path / "a.csv", index=False)
    _user35_runs(doubled, [1e18, 1e19, 1e20], 3, seed=36).to_csv(tmp_path / "b.csv", index=False)
    c = _compare([tmp_path / "a.csv", tmp_path / "b.csv"], resamples=1000)
    gamma = c.differences["gamma"]
    assert not gamma["lower"] <= 0 <= gamma["upper"], gamma  # the exponents read apart ...
    assert c.scale_dependent is None and "whether it changes with scale cannot be said" in c.summary, c.summary
    assert all(r.multiplier.lower <= 2.0 <= r.multiplier.upper for r in c.rows if not r.beyond_fitted_range)


def test_doubled_compute_gives_two(pair):
    c = _compare([pair["doubled"], pair["base"]])
    for r in c.rows:
        assert r.multiplier.value == pytest.approx(2.0, rel=2e-3)
        assert r.multiplier.lower <= 2.0 <= r.multiplier.upper
        assert r.loss_difference.value == pytest.approx(r.candidate_loss.value - r.baseline_loss.value)


def test_sources_whose_budgets_do_not_overlap_share_no_fitted_range(tmp_path, capsys):
    # user16: a 1e16-1e18 baseline against a 1e20-1e22 candidate printed "m ≈ 1.96 [1.31, 2.93] across the shared
    # fitted range 1e+18-1e+20" with the rows at 1e18 and 1e20 unflagged; each law is extrapolated 100x there
    low, high = tmp_path / "low.csv", tmp_path / "high.csv"
    isoflop_runs(BASE, np.geomspace(1e16, 1e18, 3), SIZES, noise=0.01, seed=4).to_csv(low, index=False)
    isoflop_runs(CONSTANT, np.geomspace(1e20, 1e22, 3), SIZES, noise=0.01, seed=5).to_csv(high, index=False)
    c = _compare([low, high], resamples=40)
    assert not c.overlap and all(r.beyond_fitted_range for r in c.rows)
    assert c.summary.startswith("the sources' fitted budgets do not overlap (1e+16–1e+18 and 1e+20–1e+22 FLOPs)")
    assert "shared fitted range" not in c.summary and "in the gap between them, 1e+18–1e+20 FLOPs" in c.summary
    from analysis.figures.compare import compare_figure

    legends = [t.get_text() for ax in compare_figure([c]).axes for t in ax.get_legend().get_texts()]
    assert legends.count("no shared fitted range: laws extrapolated") == 2, legends  # the grey said (user25)
    out = run_main(capsys, "compare", low, high, "--bootstrap", "20", "--json", check=True).stdout
    result = json.loads(out)["comparisons"][0]
    assert result["shared_fitted_range"] is None and result["gap_between_fitted_ranges"] == [1e18, 1e20]


def test_a_source_against_itself_is_named_so(pair):
    # user20: `compare base.csv base.csv` printed m ~ 1 [0.874, 1.22] as if two recipes' runs
    same = _compare([pair["base"], pair["base"]], resamples=20)
    assert any("hold the same runs" in n and "by construction" in n for n in same.notes), same.notes
    assert not any("same runs" in n for n in _compare([pair["base"], pair["constant"]], resamples=20).notes)


def test_a_multiplier_that_reads_the_baseline_far_beyond_its_budgets_says_so(pair, tmp_path):
    # user25: m ~ 105 [80.5, 149] read the baseline's law at 19x its largest budget, unsaid; the truth at the range's
    # end (160) lay outside. A candidate of L(30·N, 30·D): m = 900, the baseline read at 28x its largest budget
    # review18: and L(10·N, 10·D), m = 100, reads it 100x beyond at 1e21 where the range's middle reads it 3.8x
    for k, budgets in ((30, 3), (10, 2)):
        far = {**BASE, "A": BASE["A"] * k ** -BASE["alpha"], "B": BASE["B"] * k ** -BASE["beta"]}
        _sweep(far, 6, tmp_path / "far.csv")
        c = _compare([pair["base"], tmp_path / "far.csv"], resamples=40)
        (note,) = [n for n in c.notes if "reads the baseline's law" in n]
        named = ", ".join(f"{c:.3g}" for c in BUDGETS[-budgets:])  # user32: 2 counted, only the farthest named
        assert note.startswith(f"m(C) at {budgets} budget(s) within the fitted range (C = {named}) reads the"), note
        assert "(the farthest, at C = 1e+21: m ≈ " in note and "rest on that law's extrapolation" in note
    assert not any("reads the baseline's law" in n for n in _compare([pair["base"], pair["constant"]], 40).notes)


def test_a_candidates_answer_does_not_hang_on_the_others_listed(pair):
    # Before: candidate k drew its bootstrap from seed + k, so 'constant' listed second read another interval
    def compared(*names):
        return compare_inputs(read_inputs([str(pair[n]) for n in names], ColumnMap()), resamples=40, seed=0)

    alone, behind = compared("base", "constant")[0], compared("base", "steeper", "constant")[1]
    assert [r.multiplier.interval for r in alone.rows] == [r.multiplier.interval for r in behind.rows]


def test_group_by_compare_cli_json_and_figure(pair, tmp_path, capsys):
    """One table with a `recipe` column: the CLI compares the groups; `compare X X` contains 1."""
    table = tmp_path / "both.csv"
    frames = [pd.read_csv(pair["base"]).assign(recipe="A"), pd.read_csv(pair["constant"]).assign(recipe="B")]
    pd.concat(frames).to_csv(table, index=False)
    out = tmp_path / "out"
    proc = run_main(
        capsys,
        "compare",
        table,
        "--group-by",
        "recipe",
        "--baseline",
        "A",
        "--candidate",
        "B",
        "--bootstrap",
        RESAMPLES,
        "--json",
        "--out",
        out,
        check=True,
    )
    result = json.loads(proc.stdout)["comparisons"][0]
    assert result["candidate"]["source"].endswith("[recipe=B]")
    fitted = [b for b in result["budgets"] if not b["beyond_fitted_range"]]
    assert all(b["multiplier"]["interval"][0] <= 1.5 <= b["multiplier"]["interval"][1] for b in fitted)
    assert (out / "compare.png").stat().st_size > 10_000 and json.loads((out / "compare.json").read_text())

    same = run_main(
        capsys, "compare", pair["base"], pair["base"], "--bootstrap", RESAMPLES, "--out-figure", tmp_path / "x.svg"
    )
    assert same.returncode == 0, same.stderr
    assert "per budget" in same.stdout and (tmp_path / "x.svg").exists()
    # Before: m ≈ 1 [0.85, 1.19] for m = 0.99999 read "(m < 1: the candidate is worse, ...)"
    assert "the interval holds 1: consistent with no difference between them" in same.stdout, same.stdout
    assert "the candidate is worse" not in same.stdout
    in_groups = read_groups(str(table), "recipe", ColumnMap(), "A", ["A"])
    c = compare_inputs(in_groups, resamples=RESAMPLES)[0]
    assert all(r.multiplier.lower <= 1.0 <= r.multiplier.upper for r in c.rows)
    assert all(r.multiplier.value == pytest.approx(1.0, rel=1e-9) for r in c.rows)


def test_group_by_default_baseline_is_a_value_and_an_unfittable_baseline_says_how_to_choose(pair, tmp_path, capsys):
    """User40: rows without a recipe (the "(missing)" group) led the table, so the default baseline was that group,
    and its refusal (too few runs to fit) did not say that --baseline chooses another."""
    table = tmp_path / "missing.csv"
    base = pd.read_csv(pair["base"])
    frames = [base.head(2).assign(recipe=np.nan), base.assign(recipe="cosine lr"), pd.read_csv(pair["constant"])]
    pd.concat([frames[0], frames[1], frames[2].assign(recipe="wsd lr")]).to_csv(table, index=False)
    labels = [item.label for item in read_groups(str(table), "recipe", ColumnMap())]
    assert labels[0].endswith("[recipe=cosine lr]") and labels[1].endswith("[recipe=(missing)]"), labels
    proc = run_main(capsys, "compare", table, "--group-by", "recipe", "--baseline", "(missing)", "--bootstrap", "20")
    assert_one_line_error(proc, "needs at least 6 runs")
    assert "--baseline GROUP names another" in proc.stderr


def test_group_by_reads_the_table_as_fit_does_with_where_budget_and_experiment_options(pair, tmp_path):
    """The groups come from the shared reader (`analysis.sources.load.read_groups`): --where filters
    before grouping, the budget options apply, and the experiment guard holds within a group."""
    table = tmp_path / "three.csv"
    frames = [pd.read_csv(pair[k]).assign(recipe=r) for k, r in (("base", "A"), ("constant", "B"), ("base", "C"))]
    both = pd.concat(frames, ignore_index=True)
    both.loc[both["recipe"] == "C", "val_loss"] = np.nan  # a group with nothing usable: filtered out by --where
    both.to_csv(table, index=False)
    args = ["compare", table, "--group-by", "recipe", "--bootstrap", 0, "--json"]
    proc = run_cli(*args, "--where", "recipe!=C", "--budget-column", "none", "--budget-tolerance", "0.3", check=True)
    (result,) = json.loads(proc.stdout)["comparisons"]
    assert result["baseline"]["source"].endswith("[recipe!=C and recipe=A]")  # the group names the filter too
    assert result["candidate"]["source"].endswith("[recipe!=C and recipe=B]")
    assert "--where recipe!=C: kept" in proc.stderr and "clustered from C = 6·N·D" in proc.stderr, proc.stderr
    assert_one_line_error(run_cli(*args), "no usable rows")  # without --where, group C is read, and has none
    both.assign(dataset=np.arange(len(both)) % 2).to_csv(table, index=False)
    assert_one_line_error(run_cli(*args, "--where", "recipe!=C"), "dataset", "--allow-mixed")
    mixed = run_cli(*args, "--where", "recipe!=C", "--allow-mixed")
    assert mixed.returncode == 0 and "pooling runs from 2 experiments" in mixed.stderr, mixed.stderr


def test_different_evaluation_data_are_refused(pair, tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _sweep(BASE, 1, a, corpus_fingerprint="aaaa1111", eval_set="held-out-1")
    _sweep(CONSTANT, 2, b, corpus_fingerprint="bbbb2222", eval_set="held-out-2")
    assert_one_line_error(
        run_main(capsys, "compare", a, b, "--bootstrap", 0), "corpus_fingerprint", "--allow-different-eval"
    )
    allowed = run_main(capsys, "compare", a, b, "--bootstrap", 0, "--allow-different-eval")
    assert allowed.returncode == 0 and "different evaluation data" in allowed.stderr, allowed.stderr
    assert_one_line_error(run_main(capsys, "compare", a, b, "--bootstrap", 0, "--eval-column", "eval_set"), "eval_set")
    assert_one_line_error(
        run_main(capsys, "compare", pair["base"], b, "--eval-column", "eval_set"), "eval_set", "no such column"
    )


@pytest.mark.parametrize(
    "args, must",
    [
        (["{base}"], "at least two sources"),
        (["{base}", "{constant}", "--baseline", "A"], "--group-by"),
        (["{base}", "--group-by", "recipe"], "'recipe'"),
        (["{base}", "{constant}", "--group-by", "recipe"], "one SOURCE"),
        (["{base}", "{constant}", "--out-figure", "{tmp}/fig.gif"], ".png"),
        (["{base}", "{tmp}/missing.csv"], "missing.csv"),
        (["{base}", "{constant}", "--level", "2"], "--level"),
    ],
)
def test_bad_input_is_one_line(pair, tmp_path, args, must, capsys):
    filled = [a.format(base=pair["base"], constant=pair["constant"], tmp=tmp_path) for a in args]
    assert_one_line_error(run_main(capsys, "compare", *filled, "--bootstrap", 0), must)
    assert not (tmp_path / "fig.gif").exists()


def test_report_with_two_sources_has_a_comparison(pair, tmp_path, capsys):
    out = tmp_path / "r.html"
    run_main(capsys, "report", pair["base"], pair["constant"], "--out", out, "--bootstrap", 50, check=True)
    html = out.read_text()
    assert "Comparison of recipes" in html and 'id="compare"' in html
    assert (tmp_path / "r-figures" / "compare.png").exists()


def test_report_group_by_reports_the_baseline_group_and_compares_the_others(pair, tmp_path, capsys):
    """Several experiments in one file: `report --group-by` is `report BASELINE CANDIDATE` with the groups
    as sources (before: refused, the only way a table of two recipes was two files or two --where)."""
    table = tmp_path / "two.csv"
    frames = [pd.read_csv(pair[k]).assign(recipe=r) for k, r in (("base", "A"), ("constant", "B"))]
    pd.concat(frames, ignore_index=True).to_csv(table, index=False)
    out = tmp_path / "g.html"
    args = ["report", table, "--group-by", "recipe", "--out", out, "--bootstrap", 50]
    run_main(capsys, *args, "--baseline", "A", check=True)
    md = (tmp_path / "g.md").read_text()
    assert md.startswith("# Scaling-law report: two.csv [recipe=A]"), md[:200]
    assert "### Candidate: " in md and "[recipe=B] (36 runs)" in md, md
    assert (tmp_path / "g-figures" / "compare.png").exists()
    before = out.read_bytes()
    assert_one_line_error(run_main(capsys, *args, "--baseline", "C"), "no group 'C'", "A, B")
    assert_one_line_error(run_main(capsys, "report", table, pair["base"], *args[2:]), "one SOURCE and no CANDIDATE")
    assert_one_line_error(run_main(capsys, "report", table, "--candidate", "B", "--out", out), "--group-by")
    assert out.read_bytes() == before  # nothing written is changed by a refused call


def test_compare_intervals_are_the_fits_percentiles_with_their_infinity_rule():
    """One percentile rule: compare's intervals are `percentile_bounds` (linear, as every FIT.json
    interval) of each column, NaNs left out; before, numpy's inverted_cdf (an order statistic)."""
    from analysis.compare.multiplier import percentile_interval
    from analysis.fits.percentiles import percentile_bounds

    samples = np.random.default_rng(0).normal(size=(200, 3))
    samples[5, 0] = np.nan  # a pair left out
    samples[:10, 1] = np.inf  # 5% never reach the loss: the upper bound lands on them
    samples[:, 2] = np.nan  # no usable pair at this compute
    lower, upper = percentile_interval(samples, 0.95)
    kept = samples[~np.isnan(samples[:, 0]), 0]
    assert (lower[0], upper[0]) == percentile_bounds(kept, 0.95) == tuple(np.percentile(kept, [2.5, 97.5]))
    assert (lower[1], upper[1]) == percentile_bounds(samples[:, 1], 0.95) and upper[1] == np.inf
    assert np.isfinite(lower[1]) and np.isnan(lower[2]) and np.isnan(upper[2])
    assert percentile_interval(samples[:, 0][:, None], 0.95)[0].shape == (1,)


def test_each_sides_flagged_outliers_are_said_and_can_be_left_out(pair, tmp_path, capsys):
    """A diverged candidate run (loss x1.3) moves the candidate's law: compare says so on its side, as
    `scaling fit` does (how many, by rule, kept), and --exclude-outliers fits without it (m = 1.5 again)."""
    diverged = pd.read_csv(pair["constant"])
    worst = diverged.index[len(diverged) // 2]
    diverged.loc[worst, "val_loss"] *= 1.3
    diverged.to_csv(tmp_path / "diverged.csv", index=False)
    asked = ("compare", pair["base"], tmp_path / "diverged.csv", "--bootstrap", 50)
    lines = run_cli(*asked, check=True).stdout.splitlines()
    # the baseline's one chance flag is the one `scaling fit` makes: the same rule, the same words
    fit = run_main(capsys, "fit", pair["base"], "--approach", "3", "--bootstrap", 0, check=True).stdout
    assert "outliers: 1 run(s) flagged, kept (--exclude-outliers drops them)" in fit
    assert lines[0].startswith("baseline:") and lines[2].startswith("candidate:"), lines[:4]
    assert (
        lines[1]
        == lines[3]
        == "           outliers: 1 run(s) flagged (residual 1), kept (--exclude-outliers drops them)"
    )
    kept = json.loads(run_cli(*asked, "--json", check=True).stdout)["comparisons"][0]
    assert kept["candidate"]["outliers"]["by_rule"] == {"residual": 1} and not kept["candidate"]["outliers"]["excluded"]
    assert kept["candidate"]["outliers"]["runs"][0]["run_id"] == diverged.loc[worst, "run_id"]
    dropped = json.loads(run_cli(*asked, "--json", "--exclude-outliers", check=True).stdout)["comparisons"][0]
    assert dropped["candidate"]["runs"] == len(diverged) - 1 and dropped["candidate"]["outliers"]["excluded"]
    assert (
        dropped["baseline"]["runs"] == 35
        and dropped["budgets"][0]["multiplier"]["interval"][0]
        <= 1.5
        <= dropped["budgets"][0]["multiplier"]["interval"][1]
    )


def test_labels_that_differ_only_in_case_are_refused_unless_the_baseline_is_named(pair, tmp_path, capsys):
    """'base' and 'Base' are one recipe spelled two ways far more often than two recipes: grouping
    refuses them (compare's default baseline would be whichever comes first); surrounding whitespace
    is no difference at all (' new ' is 'new')."""
    base, new = pd.read_csv(pair["base"]), pd.read_csv(pair["constant"])
    base["recipe"] = np.where(np.arange(len(base)) % 2, "Base", "base")  # every budget in both spellings
    new["recipe"] = np.where(np.arange(len(new)) % 3, "new", " new ")
    pd.concat([base, new]).to_csv(tmp_path / "twins.csv", index=False)
    for command in ("compare", "fit"):
        proc = run_cli(command, tmp_path / "twins.csv", "--group-by", "recipe", "--bootstrap", 0)
        assert_one_line_error(proc, "labels 'base' and 'Base', which differ only in case", "--where recipe!=Base")
    asked = ("--group-by", "recipe", "--baseline", "base", "--bootstrap", 50, "--json")
    result = json.loads(run_main(capsys, "compare", tmp_path / "twins.csv", *asked, check=True).stdout)["comparisons"]
    assert [c["candidate"]["source"].split("=")[1] for c in result] == ["Base]", "new]"]
    assert result[1]["candidate"]["runs"] == len(new)  # ' new ' and 'new': one group
    same = [b["multiplier"]["interval"] for b in result[0]["budgets"] if not b["beyond_fitted_range"]]
    assert all(low <= 1.0 <= high for low, high in same), same  # two halves of one sweep: m contains 1


def test_a_sides_notes_on_the_outlier_rule_are_scaling_fits(pair, tmp_path):
    """One flag-then-refit sequence (`fit_flagged`): compare tells a side's notes on the outlier rule as
    `scaling fit` tells them for the same table (before, compare dropped them): the run approach 3
    passes through whatever its loss (leverage 1: not tested) and, with --exclude-outliers, the runs
    left out (r06, its loss planted 10% high)."""
    frame = lone_run_ladder(1, 1.02, 1.1, middle=4)
    path = tmp_path / "lone.csv"
    frame.to_csv(path, index=False)
    table = read_inputs([str(path)], ColumnMap())[0].table
    untested = "outlier residual test: run(s) lone alone fix the refitted law (leverage 1): not tested"
    for exclude, notes in (
        (False, [untested]),
        (True, ["--exclude-outliers: fitted without the 1 flagged run(s): r06", untested]),
    ):
        fitted = fit_all(table, (3,), resamples=0, exclude_outliers=exclude)
        side = fit_side(Input(str(path), table, frame), 0, 0, 0.95, exclude)
        assert fitted.notes[len(table.lines()[1]) :] == side.outlier_notes == notes
    told = run_cli("compare", pair["base"], path, "--bootstrap", 0, "--exclude-outliers", check=True).stderr
    assert all(f"note [{path}]: {note}\n" in told for note in notes), told


def test_a_multiplier_drifting_with_e_alone_is_not_put_down_to_the_exponents(tmp_path):
    # Before: t06 (only E differs) read "m(C) changes with scale ... (frontier exponent difference Δγ = 0.00327
    # [-0.0325, 0.0299])": a cause whose interval holds 0. m is constant only when γ and E both agree.
    lower_e = {**BASE, "E": BASE["E"] - 0.1}
    _sweep(BASE, 1, tmp_path / "base.csv")
    _sweep(lower_e, 5, tmp_path / "lower_e.csv")
    c = _compare([tmp_path / "base.csv", tmp_path / "lower_e.csv"])
    gamma, e = c.differences["gamma"], c.differences["E"]
    assert c.scale_dependent and gamma["lower"] <= 0 <= gamma["upper"], c.summary
    assert "irreducible-loss difference ΔE = " in c.summary, c.summary
    assert not e["lower"] <= 0 <= e["upper"], e  # these seeds: ΔE's interval excludes 0, Δγ's holds it
    assert "ΔE = " in c.summary and "with frontier exponent difference Δγ = " in c.summary
    assert "consistent with 0" in c.summary
    away, near = {"value": 0.05, "lower": 0.02, "upper": 0.08}, {"value": 0.01, "lower": -0.02, "upper": 0.04}
    assert drift_cause({"gamma": near, "E": near}, True).endswith(
        "excludes 0 alone; m is constant only when both agree"
    )
    assert drift_cause({"gamma": away, "E": near}, True) == "frontier exponent difference Δγ = 0.05 [0.02, 0.08]"
    assert drift_cause({"gamma": near, "E": away}, True) == (
        "irreducible-loss difference ΔE = 0.05 [0.02, 0.08], with frontier exponent difference Δγ = 0.01 "
        "[-0.02, 0.04] consistent with 0"
    )


def test_an_unidentified_difference_is_not_named_as_the_drifts_cause_nor_as_consistent_with_0():
    # Before: ΔE unidentified (its interval kept for JSON readers) was named the cause, "ΔE = 0.05 [0.02, 0.08]",
    # while the table called it unidentified; a Δγ unidentified read "consistent with 0".
    away, near = {"value": 0.05, "lower": 0.02, "upper": 0.08}, {"value": 0.01, "lower": -0.02, "upper": 0.04}
    why = "the baseline's E is unidentified"
    assert drift_cause({"gamma": near, "E": {**away, "unidentified": why}}, True) == (
        "the cause cannot be said: irreducible-loss difference ΔE is unidentified (the baseline's E is unidentified)"
        "; frontier exponent difference Δγ = 0.01 [-0.02, 0.04] is consistent with 0"
    )
    said = drift_cause({"gamma": {**near, "unidentified": "stuck"}, "E": away}, True)
    assert said == (
        "the cause cannot be said: frontier exponent difference Δγ is unidentified (stuck); irreducible-loss "
        "difference ΔE = 0.05 [0.02, 0.08] excludes 0"
    )
    both = drift_cause({"gamma": {**near, "unidentified": "stuck"}, "E": {**away, "unidentified": why}}, True)
    assert both.startswith("the cause cannot be said: frontier exponent difference Δγ is unidentified (stuck) and ")
    assert "[" not in both


def test_a_multiplier_the_runs_cannot_pin_says_so_in_words_and_in_the_figure(tmp_path):
    # user29: "m ≈ 1.21 [0.0286, 15.1] ... (the interval holds 1: consistent with no difference)" read as no
    # difference; the figure drew m(C) as a solid line where the text called it unidentified (unbounded above)
    from analysis.figures.compare import compare_figure

    c = _noisy_pair(tmp_path, sizes=5, noise=0.08, seed=11)
    said = r"\(the interval holds 1 and spans \d+x: these runs cannot tell them apart\)|these runs cannot say how much"
    assert re.search(said, c.summary), c.summary
    unbounded = [r for r in c.rows if r.multiplier.unidentified.startswith("interval unbounded above")]
    assert unbounded and "consistent with no difference" not in c.summary
    labels = [t.get_text() for t in compare_figure([c]).axes[1].get_legend().get_texts()]
    assert ("m(C) unidentified here" in labels) == bool(unbounded), (labels, unbounded)


def test_a_candidate_that_cannot_be_fitted_is_left_out_and_named_not_the_end_of_all(pair, tmp_path, capsys):
    # user30: `compare mix.csv --group-by recipe` exited 2 and compared nothing when one of five groups could not be
    # fitted; the others are compared now, each comparison naming the one left out
    base, cand = pd.read_csv(pair["base"]), pd.read_csv(pair["constant"])
    bad = base.iloc[:3].assign(params=base["params"].iloc[0])  # one size: approach 3 cannot be fitted
    mixed = pd.concat([base.assign(recipe="a"), cand.assign(recipe="b"), bad.assign(recipe="c")], ignore_index=True)
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    args = ("compare", tmp_path / "mixed.csv", "--group-by", "recipe", "--bootstrap", "40", "--json")
    got = json.loads(run_main(capsys, *args, check=True).stdout)["comparisons"]
    assert len(got) == 1 and any(
        n.startswith("candidate left out: cannot compare") and "[recipe=c]" in n for n in got[0]["notes"]
    )


def test_an_unidentified_multiplier_gets_no_number_in_the_answer(tmp_path):
    # user32: "m ≈ unidentified (interval unbounded above ...) ...: the candidate reaches with C the loss the
    # baseline needs 50.3·C for"; at 1,000 resamples the same stores read "changes with scale" from 0.273
    # [2.5e-14, 5.1e3] to unidentified: a verdict no interval supported
    c = _noisy_pair(tmp_path, sizes=4, noise=0.1, seed=8)
    assert all(r.multiplier.unidentified for r in c.rows)
    assert c.summary.startswith("m is unidentified across the shared fitted range 1e+18–1e+20 FLOPs")
    assert "these runs cannot say how much compute the candidate is worth" in c.summary, c.summary
    assert "·C" not in c.summary and "m(C) changes with scale" not in c.summary


def test_sides_whose_exponents_are_unidentified_leave_the_drift_unsaid(tmp_path):
    # review21: both sides at E = 0 with alpha, beta and a unidentified (floors fit as well), gamma still differenced
    # with a tight interval: "m ≈ 1.69 [1.23, 2.41] ... (its drift and the exponent difference are consistent with
    # 0)" where the true m rises from 1.39 to 2.73
    from test_parametric_form import one_run_per_budget

    runs = one_run_per_budget(9)
    base, cand = tmp_path / "b.csv", tmp_path / "c.csv"
    runs.to_csv(base, index=False)
    runs.assign(val_loss=runs["val_loss"] * 0.97).to_csv(cand, index=False)
    c = _compare([base, cand], resamples=100)
    assert c.differences["gamma"]["unidentified"] == "the baseline and candidate's gamma is unidentified"
    assert c.scale_dependent is None and "consistent with 0" not in c.summary.split("(")[0]
    assert "m ≈" not in c.summary and ("cannot say" in c.summary or "cannot be said" in c.summary), c.summary


def test_numbers_that_rest_on_a_sides_unidentified_floor_are_unidentified(tmp_path):
    # user35: a candidate fitted at 1e22-1e23 with E at its bound 0 (no floor in its runs) gave m = 79 [30, 540]
    # three decades below its budgets, for a true 2: its loss there is set by the E it cannot identify, as `scaling
    # optimal` says of a loss outside a fit's budgets (`identified.rests_on_floor`); the baseline's own loss is not
    double = {**BASE, "B": BASE["B"] * 2.0 ** -BASE["beta"]}
    low, far = tmp_path / "low.csv", tmp_path / "far.csv"
    isoflop_runs(BASE, np.geomspace(1e17, 1e19, 3), 6, noise=0.01, seed=37).to_csv(low, index=False)
    isoflop_runs(double, [1e22, 1e23], 6, spread_decades=0.87, noise=0.01, seed=102).to_csv(far, index=False)
    c = _compare([low, far], resamples=100)
    assert c.candidate.fit.estimates["E"].unidentified.startswith("the best fit puts E at 0")
    below = [r for r in c.rows if r.compute < 1e20]
    assert [r.compute for r in below] == pytest.approx([1e17, 1e18, 1e19])
    for r in below:
        for e in (r.multiplier, r.loss_difference, r.candidate_loss):
            assert e.unidentified == "rests on the candidate's E, unidentified outside its fitted budgets", r
        assert not r.baseline_loss.unidentified and r.baseline_loss.lower < r.baseline_loss.value
    assert any(n.startswith("the candidate's irreducible loss E is unidentified") for n in c.notes), c.notes
    assert "m is unidentified in the gap between them" in c.summary, c.summary


def test_a_sides_loss_keeps_its_interval_when_the_other_sides_resamples_fail(pair, tmp_path):
    # user35: a candidate whose bootstrap failed took the baseline's loss intervals with it (they need only its own)
    few = pd.read_csv(pair["constant"])
    few = few[few["budget_flops"] <= sorted(set(few["budget_flops"]))[1]].groupby("budget_flops").head(3)  # 6 runs
    few.to_csv(tmp_path / "few.csv", index=False)
    c = _compare([pair["base"], tmp_path / "few.csv"], resamples=40)
    assert c.unidentified.startswith("no interval: too few of the candidate's resamples"), c.unidentified
    for r in c.rows:
        assert (
            r.baseline_loss.lower < r.baseline_loss.value < r.baseline_loss.upper and not r.baseline_loss.unidentified
        )
        assert r.candidate_loss.unidentified and r.multiplier.unidentified


def test_a_frontier_bent_by_a_diverged_run_leaves_its_budgets_numbers_unidentified():
    """User41: a candidate worth m = 2 at every C (A and B scaled), its smallest size at 1e18 diverged (loss x5), was
    fitted with a law through that run (alpha 5.98): its frontier lay 10% below every run at 1e18, and the loss
    difference there printed -0.5863 [-0.6937, -0.1661] (m 11.7). Such budgets' numbers are unidentified, said in a
    note naming the flagged run; on the clean candidate nothing is."""
    from analysis.sources.check import table_from_frame

    law = CHINCHILLA_LAW
    budgets = [1e18, 3e18, 1e19, 3e19, 1e20]
    scaled = {**law, "A": law["A"] / 2 ** (0.5 * law["alpha"]), "B": law["B"] / 2 ** (0.5 * law["beta"])}
    base = isoflop_runs(law, budgets, 7, spread_decades=0.7, noise=0.01, seed=1)
    new = isoflop_runs(scaled, budgets, 7, spread_decades=0.7, noise=0.01, seed=2)
    new["run_id"] = "b" + new["run_id"]
    inputs = [Input("base", table_from_frame(base, "base"), base)]
    clean = compare_inputs([*inputs, Input("new", table_from_frame(new, "new"), new)], resamples=50)[0]
    assert not any("far below every run" in note for note in clean.notes)
    new.loc[new.index[new["budget_flops"] == 1e18][0], "val_loss"] *= 5
    bent = compare_inputs([*inputs, Input("new", table_from_frame(new, "new"), new)], resamples=50)[0]
    (note,) = [note for note in bent.notes if "far below every run" in note]
    assert "1e+18 FLOPs" in note and "br0000" in note and "--exclude-outliers" in note
    first = bent.rows[0]
    assert first.compute == pytest.approx(1e18) and first.multiplier.unidentified and first.loss_difference.unidentified
    # `scaling fit` warns of it too (`optimal` repeats it): user41's loss at 1e21 was 2.583 [2.19, 2.87] for 2.329
    warned = fit_all(table_from_frame(new, "new"), (3,), resamples=0, validate=False).parametric.convergence
    assert "far below every run" in warned["bent"] and "br0000" in warned["bent"]
    assert (
        "bent" not in fit_all(table_from_frame(base, "base"), (3,), resamples=0, validate=False).parametric.convergence
    )
