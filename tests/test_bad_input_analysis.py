"""Bad input to the analysis verbs: a hand-edited or damaged fit file, an unwritable --out, and
argparse's handling of negative numbers. Each is one `error:` line, exit 2, no traceback."""

from __future__ import annotations

import argparse
import json

import pytest
from conftest import assert_one_line_error, run_cli
from synthetic_store import write_store

from analysis.cli.common import join_negative_values


@pytest.fixture(scope="module")
def saved_fit(tmp_path_factory):
    """A small store and a fit of it saved by `scaling fit --out` (no bootstrap: quick)."""
    root = tmp_path_factory.mktemp("fit")
    write_store(root / "store", budgets=(3e11, 1e12, 3e12), with_failures=False)
    run_cli("fit", root / "store", "--bootstrap", "0", "--out", root / "fit.json", check=True)
    return root / "store", root / "fit.json"


def _edited(saved: str, tmp_path, edit) -> str:
    data = json.loads(open(saved).read())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_negative_exponent_in_a_fit_file_is_an_error_not_a_nan_answer(saved_fit, tmp_path):
    _store, fit = saved_fit
    law = _edited(fit, tmp_path, lambda d: d["parametric"]["estimates"]["alpha"].update(value=-0.5))
    proc = run_cli("optimal", "--budget", "1e20", "--law", law)
    assert_one_line_error(proc, "edited.json", "approach 3", "'alpha'", "-0.5", "> 0")
    assert "nan" not in proc.stdout


@pytest.mark.parametrize("verb", ["optimal", "report", "plot"])
def test_a_fit_file_missing_a_key_is_one_line_naming_it(saved_fit, tmp_path, verb):
    store, fit = saved_fit
    law = _edited(fit, tmp_path, lambda d: d["parametric"]["estimates"].pop("beta"))
    args = {
        "optimal": ["optimal", "--budget", "1e20", "--law", law],
        "report": ["report", store, "--fit", law, "--out", tmp_path / "r.html"],
        "plot": ["plot", store, "--fit", law, "--out", tmp_path / "figures"],
    }[verb]
    assert_one_line_error(run_cli(*args), "edited.json", "'beta'", "scaling fit SOURCE --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edited.json"]  # nothing written


@pytest.mark.parametrize(
    "law, said",
    [
        ({"form": "step_law", "coefficient": {"estimate": 1.8}, "n_exponent": {"estimate": None}}, "n_exponent = None"),
        (
            {"form": "step_law", "coefficient": -1, "n_exponent": -0.7, "d_exponent": 0.3},
            "coefficient = -1 must be > 0",
        ),
        ({"form": "kaplan", "coefficient": 1.0}, "form 'kaplan' is not one of step_law, deepseek"),
    ],
)
def test_a_hand_edited_hyperparameter_law_is_one_line(saved_fit, tmp_path, law, said):
    # user17: a null exponent ended `optimal` in a TypeError; a -1 coefficient advised lr -1.4e-06
    _store, fit = saved_fit
    edited = _edited(fit, tmp_path, lambda d: d.update(hyperparameter_laws={"lr": law}))
    assert_one_line_error(run_cli("optimal", "--budget", "1e20", "--law", edited), "edited.json", "'lr'", said)
    proc = run_cli("train", "budget=1e9", "model=d16", f"optim.lr_law={edited}", "store=" + str(tmp_path / "s"))
    assert_one_line_error(proc, "optim.lr_law", "'lr'", said)


def test_a_law_that_gives_no_finite_allocation_is_an_error(saved_fit, tmp_path):
    _store, fit = saved_fit

    def edit(d):  # approach 2 only, its N_opt exponent overflowed (JSON: a huge number reads as inf)
        d["envelope"] = d["parametric"] = None
        d["isoflop"]["n_opt_law"]["exponent"] = 1e999

    law = _edited(fit, tmp_path, edit)
    proc = run_cli("optimal", "--budget", "1e20", "--law", law)
    assert_one_line_error(proc, "edited.json", "no usable answer", "N_opt")
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "{store}", "--bootstrap", "0", "--out", "/proc/x/fit.json"],
        ["plot", "{store}", "--fit", "{fit}", "--out", "/proc/x"],
        ["report", "{store}", "--fit", "{fit}", "--out", "/proc/x/r.html"],
    ],
    ids=["fit", "plot", "report"],
)
def test_out_under_an_unwritable_system_path_is_one_line(saved_fit, args):
    store, fit = saved_fit
    proc = run_cli(*[a.format(store=store, fit=fit) for a in args])
    assert_one_line_error(proc, "--out", "/proc/x")


def test_a_negative_budget_reaches_the_check_that_names_it():
    assert_one_line_error(run_cli("optimal", "--budget", "-1e21"), "--budget", "-1e21", "finite number > 0")
    assert_one_line_error(run_cli("optimal", "--budget", "-5"), "--budget", "-5")


def test_negative_values_are_joined_to_their_option_only():
    assert join_negative_values(["--budget", "-1e21", "--json"]) == ["--budget=-1e21", "--json"]
    assert join_negative_values(["--budget", "-.5e3", "x"]) == ["--budget=-.5e3", "x"]
    assert join_negative_values(["--budget=-1", "--level", "0.9"]) == ["--budget=-1", "--level", "0.9"]
    assert join_negative_values(["--json", "--budget", "1e21"]) == ["--json", "--budget", "1e21"]


def test_argparse_still_reads_an_exponent_after_an_option_as_an_option():
    """Why `join_negative_values` exists: fails (and it can go) once argparse reads `-1e21` as a value."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--budget", type=float)
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parser.parse_args(["--budget", "-1e21"])
    assert parser.parse_args(["--budget=-1e21"]).budget == -1e21


def test_a_fit_files_bad_loss_unit_is_one_error_line_naming_the_file_the_key_and_the_valid_values(saved_fit, tmp_path):
    # Before: any value loaded silently, and went into every loss label (a hand-edited "<b>" into the HTML).
    from analysis.fits.results import FitReport
    from scaling.errors import UserError

    _store, fit = saved_fit
    law = _edited(fit, tmp_path, lambda d: d.update(loss_unit="bits|byte"))
    proc = run_cli("optimal", "--budget", "1e20", "--law", law)
    assert_one_line_error(proc, "edited.json", "'loss_unit'", "'bits|byte'", "nats/token, bits/token, bits/byte")
    assert proc.stdout == ""
    for bad in ("", "<b>", "x" * 40, 3, None, ["bits/byte"]):
        with pytest.raises(UserError, match=r"edited.json.*'loss_unit' = .* is not valid; give the loss's unit"):
            FitReport.load(_edited(fit, tmp_path, lambda d, bad=bad: d.update(loss_unit=bad)))
    assert FitReport.load(_edited(fit, tmp_path, lambda d: d.update(loss_unit=" bpb"))).loss_unit == "bits/byte"
    assert FitReport.load(_edited(fit, tmp_path, lambda d: d.pop("loss_unit"))).loss_unit == "nats/token"  # old files


@pytest.mark.parametrize(
    "command",
    [
        ("fit", "{t}", "--bootstrap", "0", "--out", "{t}"),
        ("next", "{t}", "--flops", "1e21", "--draws", "8", "--out", "./runs.csv"),
        ("compare", "{t}", "{t}", "--out-figure", "{t}"),
        ("compare", "{d}/compare.json", "{t}", "--out", "{d}"),  # review17: --out DIR holding what it reads
    ],
)
def test_an_output_naming_the_table_read_is_refused_and_the_table_kept(tmp_path, capsys, monkeypatch, command):
    # user21: `fit c2.csv --out c2.csv` saved its FIT.json over the 28 runs read; `next c5.csv --out c5.csv` left a header
    from conftest import run_main

    from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs

    monkeypatch.chdir(tmp_path)
    table = tmp_path / "runs.csv"
    isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 5, spread_decades=0.8, noise=0.005, seed=0).to_csv(table)
    (tmp_path / "compare.json").write_bytes(table.read_bytes())
    before = table.read_bytes()
    proc = run_main(capsys, *(word.format(t=table, d=tmp_path) for word in command))
    assert_one_line_error(proc, "is a file this command reads", "give another path")
    assert table.read_bytes() == before


def test_a_report_leaves_a_markdown_file_it_did_not_write(tmp_path, capsys):
    # user21: `report --out c6.html` replaced the user's own c6.md with the report's Markdown twin
    from conftest import run_main

    from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs

    table, notes = tmp_path / "runs.csv", tmp_path / "c6.md"
    isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 5, spread_decades=0.8, noise=0.005, seed=0).to_csv(table)
    notes.write_text("my notes\n")
    proc = run_main(capsys, "report", table, "--out", tmp_path / "c6.html", "--bootstrap", "0")
    assert_one_line_error(proc, "c6.md", "is not a report", "'my notes'")
    assert notes.read_text() == "my notes\n" and not (tmp_path / "c6.html").exists()
    page = tmp_path / "page.html"  # user23: an HTML page of the user's was replaced
    page.write_text("<html>my page</html>")
    proc = run_main(capsys, "report", table, "--out", page, "--bootstrap", "0")
    assert_one_line_error(proc, "page.html", "is not a report")
    assert page.read_text() == "<html>my page</html>"
    run_main(capsys, "report", table, "--out", tmp_path / "r.html", "--bootstrap", "0", check=True)
    run_main(capsys, "report", table, "--out", tmp_path / "r.html", "--bootstrap", "0", check=True)  # its own: again


def test_a_level_of_999_permille_is_printed_so(tmp_path, capsys):
    # user23: --level 0.999 printed "100% percentile intervals"
    from conftest import run_main

    from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs

    table = tmp_path / "runs.csv"
    isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 5, spread_decades=0.8, noise=0.005, seed=0).to_csv(table)
    out = run_main(capsys, "fit", table, "--approach", "3", "--bootstrap", "40", "--level", "0.999", check=True).stdout
    assert "99.9% percentile intervals" in out and "100%" not in out


def test_a_bad_report_out_is_said_before_any_warning(tmp_path, capsys):
    # user22: `report ... --out r.txt --bootstrap 10` printed the too-few-resamples warning, then the error
    from conftest import run_main

    proc = run_main(capsys, "report", tmp_path, "--out", tmp_path / "r.txt", "--bootstrap", "10")
    assert_one_line_error(proc, "--out", "r.txt", "give an .html file name")
    assert "warning" not in proc.stderr
    from analysis.fits.percentiles import level_text

    assert level_text(0.9999999) == "99.99999%" and level_text(0.95) == "95%"  # review18: 0.9999995+ read "100%"


@pytest.mark.parametrize(
    "args, named",
    [
        (["optimal", "--budget", "1e21", "--budget", "1e22"], "--budget is given 2 times"),  # user31: 1e22, silently
        (["optimal", "--budget=1e21", "--bud", "1e22"], "--budget is given 2 times"),  # an abbreviation is the option
        (["fit", "x.csv", "--bootstrap", "10", "--seed", "1", "--seed", "2"], "--seed is given 2 times"),
        (
            ["plot", "x.csv", "--out", "f", "--format", "png", "--format", "svg"],
            "--format is given 2 times",
        ),  # review21: svg alone
    ],
)
def test_an_option_of_one_value_given_twice_is_one_line(args, named):
    assert_one_line_error(run_cli(*args), named, "give it once")


def test_words_after_a_double_dash_are_values_and_a_negative_number_is_no_option():
    """review21: the repeated-option check counted words after `--` (argparse's end of options) as options."""
    from scaling.errors import Parser, UserError

    parser = Parser(prog="t")
    parser.add_argument("--x")
    parser.add_argument("rest", nargs="*")
    assert parser.parse_args(["--x", "1", "--", "--x"]).rest == ["--x"]
    assert parser.parse_args(["--x", "-1", "-2"]).x == "-1"
    with pytest.raises(UserError, match="--x is given 2 times"):
        parser.parse_args(["--x=1", "--x", "2", "--", "y"])
