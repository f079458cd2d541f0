"""Bootstrap samples that never reach a target loss (E above it) count as +inf in what reaching it costs,
by one rule (`Law.never_reaches`) for `optimal --target-loss` and `--inference-tokens`; a bound that
lands on them is unbounded, saying so. A sample whose A or B is beyond floating point has no value for
anything the law derives (`ParametricLaw`): more of them than the tail leave those unidentified, saying
why (they were counted as never reaching any loss in between: review of 2026-11-26). N_opt intervals
reaching 0 (`next` on samples whose B overflowed) are no intervals."""

import numpy as np

from analysis.cli.next import n_opt_now
from analysis.cli.optimal import render_allocation
from analysis.fits.inference import inference_allocation
from analysis.fits.optimal import ParametricLaw
from analysis.fits.percentiles import percentile_bounds
from analysis.synthetic import CHINCHILLA_LAW

SIZE = 400


def samples_with(name: str, value: float, count: int, seed: int = 0) -> dict:
    """The Chinchilla law's parameters with 1% noise on 400 samples, the first ``count`` of ``name`` set to ``value``."""
    rng = np.random.default_rng(seed)
    samples = {k: v * np.exp(0.01 * rng.standard_normal(SIZE)) for k, v in CHINCHILLA_LAW.items()}
    samples[name][:count] = value
    return samples


def law_with(name: str, value: float, count: int, seed: int = 0) -> ParametricLaw:
    return ParametricLaw("test", dict(CHINCHILLA_LAW), samples_with(name, value, count, seed))


LOST = f"20 of {SIZE} resamples have A or B beyond floating point: their law has no value here"


def test_a_sample_whose_coefficient_overflowed_has_no_value():
    """B = +inf: the stored law gives N_opt = 0 and a loss inf·0 = NaN, though the fitted law is finite
    in log space: the sample has no value. 5% of them (beyond the 2.5% tail) leave the budget, the loss
    and N unidentified, saying why; 1% are left out of the intervals, which stay."""
    for name in ("A", "B"):
        law = law_with(name, np.inf, 20)
        with np.errstate(all="ignore"):
            assert np.all(np.isnan(law._frontier_loss(law.samples, 1e21)[:20]))
        a = law.budget_for_loss(2.2)
        assert a.budget.interval is None and a.loss.interval is None
        assert a.budget.unidentified == LOST
        assert a.loss.value == 2.2 and not a.loss.unidentified  # the loss is the target asked for
        assert law.allocate(1e21).n.unidentified == LOST
        assert not any("never reach" in note for note in a.notes)
        few = law_with(name, np.inf, 4).budget_for_loss(2.2)
        assert few.budget.interval is not None and not few.budget.unidentified


def test_the_unit_follows_a_number_never_a_reason():
    unbounded = render_allocation(law_with("E", 2.5, 20).budget_for_loss(2.2), "nats/token").splitlines()
    budget = next(line for line in unbounded if "budget C" in line)
    assert budget.endswith(f"unidentified (interval unbounded above: 20 of {SIZE} samples never reach the target loss)")
    bounded = render_allocation(law_with("E", 2.5, 4).budget_for_loss(2.2), "nats/token").splitlines()
    assert next(line for line in bounded if "budget C" in line).endswith("] FLOPs")


def test_inference_counts_samples_that_never_reach_the_target_as_optimal_does():
    """The same samples (E above the target) never reach it in both answers: within the tail they widen
    N's interval as +inf (left out before); beyond it, every quantity is unidentified with the count,
    and the note is optimal's. Samples with B beyond floating point have no value, as in `optimal`."""
    law = law_with("E", 2.5, 20)
    a = inference_allocation(law, 1e12, target_loss=2.2)
    why = f"20 of {SIZE} samples never reach the target loss"
    assert a.values["N"].unidentified == a.values["total_flops"].unidentified == f"interval unbounded above: {why}"
    assert a.values["saving_fraction"].unidentified == why and a.values["N"].interval is None
    assert law.budget_for_loss(2.2).notes[-1] in a.notes == ["20 bootstrap samples never reach the target loss"]
    lost = inference_allocation(law_with("B", np.inf, 20), 1e12, target_loss=2.2)
    assert lost.values["N"].unidentified == LOST and lost.values["N"].interval is None
    law = law_with("E", 2.5, 4)
    a = inference_allocation(law, 0.0, target_loss=2.2)
    draws = inference_allocation(law_with("E", 2.5, 0), 0.0, target_loss=2.2)  # the same samples, all reaching
    assert a.values["N"].interval is not None and a.notes == ["4 bootstrap samples never reach the target loss"]
    n = np.where(np.arange(SIZE) < 4, np.inf, _n_draws(law_with("E", CHINCHILLA_LAW["E"], 4), 2.2))
    assert [a.values["N"].lower, a.values["N"].upper] == list(percentile_bounds(n, 0.95))
    assert a.values["N"].upper > draws.values["N"].upper


def _n_draws(law, target):
    from analysis.fits.inference import for_loss

    with np.errstate(all="ignore"):
        return for_loss(law.samples, target, 0.0)["N"]


def test_an_n_opt_interval_reaching_zero_is_no_interval():
    """5% of the samples with B beyond floating point (N_opt = 0 as stored) have no value in `next`, by
    `optimal`'s rule (one home, `ParametricLaw`): it prints no interval and says why."""
    now = n_opt_now(law_with("B", np.inf, 20), 1e21)
    lost = "20 of 400 resamples have A or B beyond floating point: their law has no value here"
    assert now.interval is None and now.unidentified == lost and np.isfinite(now.value)
    clean = law_with("B", CHINCHILLA_LAW["B"], 20)
    assert n_opt_now(clean, 1e21).interval is not None
    assert not clean.allocate(1e21).n.unidentified


def test_an_n_opt_interval_reaching_zero_is_unbounded_below_and_no_pair_brackets_it():
    """5% of the samples with A at 1e-300 give N_opt = 0 (it underflows): N_opt's interval at every budget
    reaches 0. `next` took it as the point N_opt, twice, as where there is no interval, and bought pairs
    bracketing that point; now it is (0, upper), unbounded below, no pair of sizes brackets it, and the reason
    given says so."""
    from analysis.cli.next import n_opt_bounds
    from analysis.fits import next_runs as nr

    law = law_with("A", 1e-300, 20)
    budgets = [1e19, 1e20, 1e21]
    bounds = n_opt_bounds(law, budgets)
    for budget in budgets:
        n = law.n_opt(budget)
        assert n.lower == 0 and bounds[budget] == (0.0, n.upper) and n.upper > n.value, (budget, bounds[budget])
    rules = nr.CandidateRules(nr.grid_sizes(1e6, 1e12), window_decades=0.5, bracket=True)
    pool = nr.candidates(law.params, [], budgets, rules, bounds)
    assert pool and not nr.units(pool, rules, bounds)
    why = nr.no_pair(bounds, rules)
    assert "it reaches 0 at every one, unbounded below (at 1e+19 FLOPs: up to " in why, why
    lost = law_with("B", np.inf, 20)  # no interval at all (too many resamples without a value): the point, twice
    assert n_opt_bounds(lost, budgets) == {b: (lost.n_opt(b).value, lost.n_opt(b).value) for b in budgets}
