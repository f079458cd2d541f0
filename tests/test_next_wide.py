"""`scaling next` on a table whose N_opt interval is wide (4 sizes per budget, noisy: the tables that most need
runs). Before, candidates lay within N_opt·10^±0.5 and came in pairs bracketing the interval, so no pair existed
once the interval was wider, and the plan was empty ("allow more FLOPs"); now the window is the interval widened
by a grid step, and the pairs bracket the true N_opt. Such a pair lies past the table's own tokens per parameter
(1.67 and 774 on runs of 4.1 to 316): by default runs stay within them widened 2x (`next_limits.DN_REACH`), and
--dn-reach 10 lets them out, the user's call. And `next` prints the table's warnings, as `fit` does."""

import json

import pytest
from conftest import run_cli

from analysis.fits import laws
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs, repeated_runs

QUICK = ("--bootstrap", 100)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("next_wide") / "wide.csv"
    isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20, 1e21], 4, spread_decades=0.4, noise=0.02, seed=2).to_csv(
        path, index=False
    )
    return path


@pytest.fixture(scope="module")
def wide(table):
    proc = run_cli("next", table, "--flops", 5e21, "--json", "--refits", 8, "--dn-reach", 10, *QUICK)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_by_default_no_run_lies_past_the_tables_own_tokens_per_parameter_widened_2x(table, wide):
    assert [round(run["tokens_per_param"]) for run in wide["runs"]] == [774, 2]  # --dn-reach 10: 4.07 to 316
    proc = run_cli("next", table, "--flops", 5e21, "--refits", 0, *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert "  tokens per param     runs proposed at 2.03 to 632: the table's own 4.07 to 316 widened 2x" in proc.stdout
    assert (
        "  + C = " not in proc.stdout
        and "raise --draws; or raise --dn-reach (the tokens-per-parameter window above)" in proc.stdout
    )
    refused = run_cli("next", table, "--flops", 5e21, "--dn-reach", 0.5)
    assert refused.returncode == 2 and "'0.5' is below 1" in refused.stderr


def test_a_wide_interval_gets_pairs_that_bracket_the_true_n_opt(wide):
    plan = wide
    assert plan["runs"], plan
    law = {k: CHINCHILLA_LAW[k] for k in ("A", "B", "alpha", "beta")}
    for budget in {run["budget_flops"] for run in plan["runs"]}:
        n_opt = laws.chinchilla_allocation(budget, **law)[0]
        at = [run["params"] for run in plan["runs"] if run["budget_flops"] == budget]
        assert len(at) % 2 == 0 and min(at) < n_opt < max(at), (budget, at, n_opt)


def test_where_n_opt_at_the_target_is_unidentified_no_run_prints_a_narrowing(wide):
    """Its interval spans over a decade (1.3): the expected width was "unknown", but each run's reason still
    printed its pick's simulated narrowing ("spread of ln N_opt(target) 0.777 -> 0.553"); now it says why none
    is known."""
    assert wide["width_ratio"] is None and wide["why_unknown"].startswith("N_opt at the target is unidentified")
    assert wide["runs"]
    for run in wide["runs"]:
        assert "spread of ln N_opt" not in run["reason"] and "->" not in run["reason"], run["reason"]
        assert run["reason"].endswith(f"; {wide['why_unknown']}"), run["reason"]


@pytest.mark.parametrize("json_out", [False, True])
def test_next_prints_the_tables_repeat_warning_on_stderr(tmp_path, json_out):
    import numpy as np

    from analysis.fits import muennighoff as mf

    runs = repeated_runs(mf.published_params(), np.geomspace(1e8, 3e9, 5), [1e9, 4e9, 1.6e10], [1, 2, 8, 32], 0.01, 1)
    path = tmp_path / "repeated.csv"
    runs[["params", "tokens", "unique_tokens", "val_loss"]].to_csv(path, index=False)
    proc = run_cli(
        "next", path, "--flops", 1e21, "--draws", 16, "--refits", 0, *QUICK[:1], 40, *(["--json"] if json_out else [])
    )
    lines = [x for x in proc.stderr.splitlines() if "repeat their unique tokens" in x]
    assert len(lines) == 1 and lines[0].startswith("warning: "), proc.stderr
