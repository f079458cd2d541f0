"""Approach 2's per-budget N_opt intervals cover the truth about as often as they claim (helper "appr12").

Ladders of 4 sizes per budget over N_opt·10^(±0.6), 1% noise, budgets 1e18..1e21, drawn from the
published Chinchilla law. Before, each interval came from resampling a budget's 4 runs: most resamples
draw 3 distinct sizes, whose parabola passes through them exactly, so the intervals showed how the 4
points disagree, not the noise: on these 40 ladders 70 of 139 printed intervals missed the true N_opt
(C = 1e19 of /tmp/user8/t12: 1.469e8 [1.225e8, 1.764e8], truth 2.28e8). Now they come from each
parabola's least-squares fit with the residual variance pooled over the budgets
(`analysis.fits.vertex_intervals._vertex_draws`): 86 of 98 cover it (from 1000 draws; 93 of 104 from 200), the other 60 unidentified (the curvature
is within the noise: the interval reaches past 10x the sizes, or spans over a decade).
"""

import numpy as np

from analysis.fits import laws
from analysis.fits.isoflop import fit_isoflop
from analysis.sources.check import table_from_frame
from analysis.synthetic import CHINCHILLA_LAW as LAW
from analysis.synthetic import isoflop_runs

TRUE_A = LAW["beta"] / (LAW["alpha"] + LAW["beta"])


def _true_n_opt(compute: float) -> float:
    return laws.chinchilla_allocation(compute, LAW["A"], LAW["B"], LAW["alpha"], LAW["beta"])[0]


def test_n_opt_intervals_of_four_sizes_per_budget_cover_the_truth_at_about_their_level():
    n_opt, a = [], []
    for seed in range(40):
        runs = isoflop_runs(LAW, [1e18, 1e19, 1e20, 1e21], 4, spread_decades=0.6, noise=0.01, seed=100 + seed)
        fit = fit_isoflop(table_from_frame(runs, f"ladder{seed}.csv"), resamples=200, seed=0)
        for p in fit.profiles:
            if not p.n_opt_unidentified:
                lower, upper = p.n_opt_interval
                n_opt.append(lower <= _true_n_opt(p.compute) <= upper)
        estimate = fit.estimates["a"]
        if not estimate.unidentified:
            a.append(estimate.lower <= TRUE_A <= estimate.upper)
    assert (
        len(n_opt) >= 80 and np.mean(n_opt) >= 0.87
    )  # 86 of 98 (0.878) from 1000 draws (`VERTEX_DRAWS`, the least now); 93 of 104 from 200; before: 69 of 139 (0.50)
    # a's interval, from the run resamples: 21 of 21 cover it. Before budgets with an unbounded N_opt were
    # left out of the law (t12: an edge vertex pulled a up), 33 of 33: fewer ladders keep 2 such budgets
    assert len(a) >= 20 and all(a)


def test_one_wild_run_leaves_the_other_budgets_intervals_as_they_were():
    """A run 6% high at 1e20 (review9's 5×5 ladder) made the pooled σ̂ many times the noise: the other
    budgets' intervals widened several-fold and two became unbounded. Its budget is now left out of
    their pool (`analysis.fits.pooled_noise`), and they stay identified and cover the truth."""
    budgets = [1e19, 3e19, 1e20, 3e20, 1e21]
    runs = isoflop_runs(LAW, budgets, 5, spread_decades=0.6, noise=0.005, seed=1)
    clean = fit_isoflop(table_from_frame(runs, "clean.csv"), resamples=400, seed=0)
    wild = runs["budget_flops"].sub(1e20).abs().idxmin() + 1  # the second size at 1e20
    runs.loc[wild, "val_loss"] *= 1.06
    fit = fit_isoflop(table_from_frame(runs, "wild.csv"), resamples=400, seed=0)
    compared = 0
    for before, after in zip(clean.profiles, fit.profiles, strict=True):
        if after.compute == 1e20 or before.n_opt_unidentified:
            continue
        compared += 1
        assert not after.n_opt_unidentified, (after.compute, after.n_opt_unidentified)
        lower, upper = after.n_opt_interval
        assert lower <= _true_n_opt(after.compute) <= upper
        assert upper / lower < 1.3 * before.n_opt_interval[1] / before.n_opt_interval[0]
    assert compared >= 3
    named = (
        f"1e+20 (run {runs.loc[wild, 'run_id']}, the farthest of 4 flagged) FLOPs hold run(s) far off their parabola"
    )
    assert any(named in note for note in fit.bootstrap.notes)


def test_wide_low_noise_ladders_cover_the_truth_despite_the_parabolas_shape():
    """/tmp/user14/t18: 9 sizes over N_opt·10^(±1) at 0.1% noise put every parabola's vertex 4% high (the
    loss is not a parabola in ln N) with an interval of ±1.5%: 1 of 48 intervals covered the truth, 25 of
    48 at 0.3% noise. The shape error is now added (`analysis.fits.parabola_shape`): 48 of 48 and 45 of 48."""
    for noise in (0.001, 0.003):
        covered = []
        for seed in range(12):
            runs = isoflop_runs(LAW, [6e18, 2e19, 6e19, 2e20], 9, spread_decades=1.0, noise=noise, seed=100 + seed)
            fit = fit_isoflop(table_from_frame(runs, f"wide{seed}.csv"), resamples=200, seed=0)
            for p in fit.profiles:
                assert not p.n_opt_unidentified, p.n_opt_unidentified
                lower, upper = p.n_opt_interval
                covered.append(lower <= _true_n_opt(p.compute) <= upper)
                assert upper / lower < 1.5  # narrow, as the low noise allows: 1.09 and 1.14 at the median
        assert np.mean(covered) >= 0.9, (noise, np.mean(covered))
