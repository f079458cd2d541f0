"""The laws as pure functions: closed forms against brute force, limits, the JSON codec. (< 1 s)"""

import numpy as np
import pytest

from analysis.fits import laws
from analysis.fits.codec import from_jsonable, to_jsonable
from analysis.fits.results import FitReport, PowerLaw
from analysis.synthetic import CHINCHILLA_LAW


def test_log_sum_exp_form_is_the_log_of_the_loss():
    n, d = np.geomspace(1e6, 1e11, 7), np.geomspace(1e8, 1e13, 7)
    p = CHINCHILLA_LAW
    direct = np.log(laws.chinchilla_loss(n, d, **p))
    lse = laws.chinchilla_log_loss(
        np.log(n), np.log(d), np.log(p["E"]), np.log(p["A"]), np.log(p["B"]), p["alpha"], p["beta"]
    )
    np.testing.assert_allclose(lse, direct, rtol=1e-13)


@pytest.mark.parametrize("compute", [1e18, 1e21, 1e24])
def test_closed_form_allocation_minimises_loss_along_the_budget(compute):
    p = CHINCHILLA_LAW
    n_opt, d_opt = laws.chinchilla_allocation(compute, p["A"], p["B"], p["alpha"], p["beta"])
    assert 6 * n_opt * d_opt == pytest.approx(compute, rel=1e-12)
    n = np.geomspace(n_opt / 30, n_opt * 30, 200_001)
    brute = n[np.argmin(laws.chinchilla_loss(n, laws.tokens_for_compute(compute, n), **p))]
    assert brute == pytest.approx(n_opt, rel=1e-4)


def test_power_law_with_and_without_floor():
    x = np.array([1.0, 10.0, 100.0])
    np.testing.assert_allclose(laws.power_law(x, 2.0, -0.5), [2.0, 2 / 10**0.5, 0.2])
    np.testing.assert_allclose(laws.power_law(x, 2.0, -0.5, floor=1.5), [3.5, 1.5 + 2 / 10**0.5, 1.7])
    law = PowerLaw(2.0, -0.5, 1.5)
    np.testing.assert_allclose(law.inverse(law(x)), x)
    assert np.isnan(law.inverse(1.0))  # below the floor: no x reaches it


def test_kaplan_joint_form_reduces_to_its_one_variable_laws():
    k = dict(n_c=8.8e13, d_c=5.4e13, alpha_n=0.076, alpha_d=0.095)  # Kaplan et al. 2020, Table 5
    n, d = 1e9, 1e10
    assert laws.kaplan_joint_loss(n, 1e40, **k) == pytest.approx((k["n_c"] / n) ** k["alpha_n"], rel=1e-9)
    assert laws.kaplan_joint_loss(1e40, d, **k) == pytest.approx((k["d_c"] / d) ** k["alpha_d"], rel=1e-9)


def test_json_codec_round_trips_nested_dataclasses_and_non_finite_values():
    report = FitReport(source="x.csv", n_kind="total", runs=3, warnings=["w"], notes=[], skipped={"2": "why"})
    data = to_jsonable(report)
    assert from_jsonable(FitReport, data) == report
    assert to_jsonable({"v": np.float64(np.nan), "a": np.arange(2)}) == {"v": None, "a": [0, 1]}


def test_the_json_codec_is_imported_from_its_home_only():
    """analysis.fits.codec was split out of results.py; results.py imports it for its own save/load,
    and nothing else reaches the codec through results (one home, one import path)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    through_results = [
        f"{path.relative_to(root)}:{node.lineno}"
        for folder in ("analysis", "scaling", "hydra_plugins", "bench", "tests")
        for path in sorted((root / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.module == "analysis.fits.results"
        and {a.name for a in node.names} & {"to_jsonable", "from_jsonable"}
    ]
    assert through_results == []
