"""Bootstrap samples that overflowed (±inf) take part in the percentile intervals as the extreme order
statistics they are (`analysis.fits.percentiles`); a bound that lands on one leaves the estimate
unbounded on that side, unidentified with the count, and nothing prints or stores inf. NaN samples
(no value) are left out as before. Clean samples keep np.percentile's numbers exactly."""

import json

import numpy as np
import pytest

from analysis.describe.numbers import interval_text
from analysis.fits.codec import from_jsonable, to_jsonable
from analysis.fits.fit import fit_all
from analysis.fits.optimal import ParametricLaw
from analysis.fits.results import Bootstrap, Estimate, FitReport
from analysis.fits.saved_law import law_from_fit
from analysis.sources.check import table_from_frame
from analysis.synthetic import CHINCHILLA_LAW
from tests.test_parametric_form import d_ladder

RESAMPLES = 1000
TAILS = [50.0 * (1 - 0.95), 100.0 - 50.0 * (1 - 0.95)]  # as `percentile_bounds` computes them (2.5 + 2e-15)


def normal_samples(overflowed: int, sign: float = 1.0) -> np.ndarray:
    """1000 standard-normal samples, the ``overflowed`` largest (or smallest, sign −1) made ±inf."""
    x = np.sort(np.random.default_rng(0).standard_normal(RESAMPLES))
    if overflowed:
        x[-overflowed:] = np.inf
    return x * sign


def as_order_statistics(x: np.ndarray) -> np.ndarray:
    """±inf replaced by ±1e300: larger than every finite sample, so the same order statistics."""
    return np.where(np.isinf(x), np.sign(x) * 1e300, x)


def test_clean_samples_keep_np_percentile_exactly():
    x = normal_samples(0)
    e = Estimate.from_samples(0.1, x, 0.95)
    assert [e.lower, e.upper] == list(np.percentile(x, TAILS)) and not e.unidentified


def test_nan_samples_are_left_out_as_failed_resamples():
    x = normal_samples(0)
    with_nan = np.concatenate([x, np.full(30, np.nan)])
    assert Estimate.from_samples(0.1, with_nan, 0.95) == Estimate.from_samples(0.1, x, 0.95)


def test_one_percent_overflowed_inside_the_tail_widens_the_interval_to_its_order_statistic():
    """10 of 1000 samples +inf: the 97.5th percentile sits at position 999 x 0.975 = 974.025, between
    order statistics 974 and 975, below the first inf (990). The bound is finite, interpolated between
    those two, as if the infs were any values above every finite one; dropping the infs (as before)
    took it at position 989 x 0.975 = 964.3 of the finite ones: narrower."""
    x = normal_samples(10)
    position = (RESAMPLES - 1) * 0.975
    assert int(np.ceil(position)) < RESAMPLES - 10  # below the infs: a finite bound
    e = Estimate.from_samples(0.1, x, 0.95)
    assert [e.lower, e.upper] == list(np.percentile(as_order_statistics(x), TAILS)) and not e.unidentified
    dropped = np.percentile(x[np.isfinite(x)], TAILS)
    assert e.upper > dropped[1] + 0.05 and e.lower == pytest.approx(dropped[0], abs=0.02)


@pytest.mark.parametrize("overflowed, bounded", [(24, True), (25, False), (50, False)])
def test_overflowed_beyond_the_tail_leave_the_interval_unbounded(overflowed, bounded):
    """The upper bound interpolates order statistics 974 and 975 (of 0..999): 24 infs (976..999) leave
    both finite, 25 (from 975) reach one, and 5% lie beyond the 2.5% tail: unbounded above, no
    interval, unidentified with the count; -inf mirrors it below. Never an inf in text or JSON."""
    for sign, side in ((1.0, "above"), (-1.0, "below")):
        e = Estimate.from_samples(0.1, normal_samples(overflowed, sign), 0.95)
        if bounded:
            assert e.interval is not None and np.isfinite(e.interval).all() and not e.unidentified
            continue
        assert e.interval is None and e.value == 0.1
        assert e.unidentified == (
            f"interval unbounded {side}: {overflowed} of 1000 resamples overflowed to {'+' if sign > 0 else '-'}inf"
        )
        assert interval_text(e) == f"unidentified ({e.unidentified})"
        assert json.loads(json.dumps(e.as_json(), allow_nan=False))["interval"] is None  # strict: no inf


def test_samples_keep_their_overflow_through_json():
    """Bootstrap samples write ±inf as ±1.797e308 (strict JSON) and read it back as ±inf; NaN stays
    null/NaN; any other non-finite float is still null. An unbounded estimate has no bound to store."""
    boot = Bootstrap(1000, 0, 0.95, 0, samples={"A": [1.0, np.inf, -np.inf, np.nan]})
    text = json.dumps(to_jsonable(boot), allow_nan=False)
    assert "1.7976931348623157e+308" in text and "-1.7976931348623157e+308" in text and "null" in text
    back = from_jsonable(Bootstrap, json.loads(text))
    assert back.samples["A"][:3] == [1.0, np.inf, -np.inf] and np.isnan(back.samples["A"][3])
    e = Estimate.from_samples(0.1, normal_samples(50), 0.95)
    assert from_jsonable(Estimate, json.loads(json.dumps(to_jsonable(e), allow_nan=False))) == e
    assert to_jsonable({"x": np.inf}) == {"x": None}  # outside samples: null as before


def test_a_real_fit_whose_resamples_overflow_keeps_them_in_the_interval(tmp_path):
    """Approach 3 on 12 sizes at 3 D with the loss x1.02 at each larger D: 2 of 200 refitted resamples
    send B beyond floating point (measured), inside the 2.5% tail (the form's rule keeps them). B's
    upper bound is now their order statistic (before: taken with them dropped, narrower); spanning 33
    decades, the interval does not identify B (`coefficient_identification`) but is kept. FIT.json
    keeps them, and the loaded fit allocates exactly as the fitted one."""
    report = fit_all(table_from_frame(d_ladder(0, 1.02), "level"), (3,), resamples=200)
    fit = report.parametric
    b = np.asarray(fit.bootstrap.samples["B"], float)
    assert int(np.isinf(b).sum()) == 2 and b.size == 200 and not np.isnan(b).any()
    e = fit.estimates["B"]
    assert e.unidentified.startswith("interval spans 33.4 orders of magnitude, an exponent uncertain by 3.07")
    assert [e.lower, e.upper] == list(np.percentile(as_order_statistics(b), TAILS))
    assert e.upper > np.percentile(b[np.isfinite(b)], 97.5)
    report.save(tmp_path / "fit.json")
    assert "Infinity" not in (tmp_path / "fit.json").read_text() and "NaN" not in (tmp_path / "fit.json").read_text()
    loaded = FitReport.load(tmp_path / "fit.json")
    assert loaded.parametric.bootstrap.samples["B"] == fit.bootstrap.samples["B"]
    now, then = (law_from_fit(r, "x", approach=3).allocate(1e21) for r in (report, loaded))
    assert now.as_json() == then.as_json()


def test_an_allocation_from_samples_whose_a_overflowed_is_unidentified_and_says_so():
    """5% of a law's samples with A beyond floating point: the stored law gives N_opt = inf, though its
    law in log space is finite: they have no value (`ParametricLaw`), more than the tail, so N_opt is
    unidentified saying why, and D_opt and D/N (which fall as N grows) as N's; the JSON holds no inf."""
    rng = np.random.default_rng(1)
    samples = {k: v * np.exp(0.02 * rng.standard_normal(400)) for k, v in CHINCHILLA_LAW.items()}
    samples["A"][:20] = np.inf
    law = ParametricLaw("test", dict(CHINCHILLA_LAW), samples)
    a = law.allocate(1e21)
    assert a.n.unidentified == "20 of 400 resamples have A or B beyond floating point: their law has no value here"
    assert a.d.unidentified == a.tokens_per_parameter.unidentified == f"as N's: {a.n.unidentified}"
    assert a.n.interval is None and a.d.interval is None and np.isfinite(a.n.value)
    json.dumps(a.as_json(), allow_nan=False)  # strict JSON: raises on an inf or NaN
    assert interval_text(a.d) == f"unidentified (as N's: {a.n.unidentified})"


def test_a_target_loss_some_samples_never_reach_bounds_the_budget_from_above():
    """Samples whose E lies above the target never reach it: their budget is unbounded (inf), not a
    failed sample. 5% of them leave the budget's interval unbounded above; 1% widen it."""
    rng = np.random.default_rng(2)
    for never, bounded in ((4, True), (20, False)):
        samples = {k: v * np.exp(0.01 * rng.standard_normal(400)) for k, v in CHINCHILLA_LAW.items()}
        samples["E"][:never] = 2.5  # above the target
        a = ParametricLaw("test", dict(CHINCHILLA_LAW), samples).budget_for_loss(2.2)
        assert f"{never} bootstrap samples never reach the target loss" in a.notes
        assert (a.budget.interval is not None) == bounded
        if not bounded:
            assert (
                a.budget.unidentified == f"interval unbounded above: {never} of 400 samples never reach the target loss"
            )
            assert a.as_json()["budget_unidentified"] == a.budget.unidentified


def test_an_allocation_from_samples_whose_b_overflowed_is_unidentified():
    """5% of the samples with B beyond floating point: the stored law gives N_opt = 0 (G = 0) and
    D_opt = C/(6·0) (a ZeroDivisionError once); they have no value, so N, D and D/N are unidentified
    saying why, with no interval; nothing is inf in the JSON. 1% are left out and the intervals stay."""
    rng = np.random.default_rng(3)
    samples = {k: v * np.exp(0.02 * rng.standard_normal(400)) for k, v in CHINCHILLA_LAW.items()}
    samples["B"][:20] = np.inf
    a = ParametricLaw("test", dict(CHINCHILLA_LAW), samples).allocate(1e21)
    assert a.n.interval is None and a.n.unidentified.startswith("20 of 400 resamples have A or B beyond")
    for e in (a.d, a.tokens_per_parameter):
        assert e.interval is None and e.unidentified == f"as N's: {a.n.unidentified}"
    json.dumps(a.as_json(), allow_nan=False)
    samples["B"][4:20] = CHINCHILLA_LAW["B"]
    few = ParametricLaw("test", dict(CHINCHILLA_LAW), samples).allocate(1e21)
    assert not few.n.unidentified and few.n.lower > 0 and few.d.interval is not None


def test_a_real_fit_whose_resamples_overflow_beyond_the_tail_allocates_without_an_interval():
    """Seed 2 of the same design: 7 of 200 resamples send B beyond floating point, more than the tail.
    B has no interval (unbounded above), and the form's rule flags it; `optimal` (and the report, which
    crashed on this table with a ZeroDivisionError) allocates; those 7 have no value for N_opt or a loss."""
    fit = fit_all(table_from_frame(d_ladder(2, 1.02), "level"), (3,), resamples=200).parametric
    assert int(np.isinf(fit.bootstrap.samples["B"]).sum()) == 7 and fit.estimates["B"].interval is None
    assert fit.estimates["B"].unidentified.startswith("7 of 200 refitted resamples gave beta <= 0 or B beyond")
    report = FitReport("level", "total", len(fit.n), [], [], parametric=fit)
    a = law_from_fit(report, "x", approach=3).allocate(1e21)
    assert a.n.interval is None and a.d.interval is None and a.d.unidentified == "as the fit's a"
    json.dumps(a.as_json(), allow_nan=False)
    # those 7 (3.6%, beyond the 2.5% tail) have no value: the budget for a loss is unidentified, not
    # [9.7e19, 8.4e20] as when their loss, inf/inf = NaN, was dropped silently as a failed sample
    b = law_from_fit(report, "x", approach=3).budget_for_loss(2.45)
    lost = "7 of 200 resamples have A or B beyond floating point: their law has no value here"
    assert b.budget.unidentified == lost and b.loss.interval is None
    assert b.loss.value == 2.45 and not b.loss.unidentified  # the loss is the target asked for


def test_inference_allocation_names_overflowed_samples_not_the_few_that_never_reach():
    """20 of 400 samples with A beyond floating point and 3 whose E lies above the target (inside the
    tail): N is unidentified because of the 20, and says so (review: it said '3 of 380 never reach')."""
    from analysis.fits.inference import inference_allocation

    rng = np.random.default_rng(4)
    samples = {k: v * np.exp(0.02 * rng.standard_normal(400)) for k, v in CHINCHILLA_LAW.items()}
    samples["A"][:20] = np.inf
    samples["E"][20:23] = 2.5
    law = ParametricLaw("test", dict(CHINCHILLA_LAW), samples)
    result = inference_allocation(law, 1e12, target_loss=2.2)
    assert result.values["N"].unidentified.startswith("20 of 400 resamples have A or B beyond floating point")
