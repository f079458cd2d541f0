"""The loss unit is one fact read from the source (the store's val_loss: nats/token, its val_bpb:
bits/byte; a user's table: --loss-unit) and every label takes it from there: figure axes, the
report, the fit's text, `optimal` and its inference-aware answer. Numbers are never converted.
(~15 s: one fit with 20 resamples in process, a few CLI processes.)"""

import pytest
from conftest import assert_one_line_error, run_main
from synthetic_store import write_store

from analysis.cli.fit import fit_summary
from analysis.compare import Input, compare_inputs
from analysis.compare.result import Side, compare
from analysis.describe.fit import describe_fit
from analysis.figures import make_figures
from analysis.figures.compare import compare_figure
from analysis.fits.fit import fit_all
from analysis.fits.parametric import fit_parametric
from analysis.published import CHINCHILLA_APPROACH3
from analysis.report.sweep import fit_matches_source
from analysis.sources.check import table_from_frame
from analysis.sources.load import load_runs
from analysis.sources.schema import DEFAULT_LOSS_UNIT, ColumnMap
from analysis.synthetic import isoflop_runs
from scaling.errors import UserError

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]
BPB = ColumnMap(loss="bpb", loss_unit="bpb")


def bpb_frame():
    """A Chinchilla ladder whose loss column is named bpb (the numbers are the law's, labelled bpb)."""
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.005, seed=1)
    return runs.rename(columns={"val_loss": "bpb"})


@pytest.fixture(scope="module")
def bpb_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("units") / "bpb.csv"
    bpb_frame().to_csv(path, index=False)
    return str(path)


def figure_labels(fig) -> list[str]:
    return [text for ax in fig.axes for text in (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) if text]


def test_the_unit_is_read_from_the_source_and_spelled_out():
    frame = bpb_frame().assign(val_loss=lambda f: f["bpb"], val_bpb=lambda f: f["bpb"])
    assert table_from_frame(frame, "t.csv", ColumnMap()).loss_unit == DEFAULT_LOSS_UNIT == "nats/token"
    assert table_from_frame(frame, "t.csv", ColumnMap(loss="val_bpb")).loss_unit == "bits/byte"  # the store's column
    assert table_from_frame(frame, "t.csv", BPB).loss_unit == "bits/byte"
    assert ColumnMap(loss_unit="bits").loss_unit == "bits/token"
    assert ColumnMap(loss_unit=" perplexity ").loss_unit == "perplexity"  # any short label, as given
    for bad in ("", "a|b", "<b>", "x" * 40):
        with pytest.raises(UserError, match="--loss-unit"):
            ColumnMap(loss_unit=bad)


def test_a_bpb_table_is_labelled_bpb_in_every_figure_and_the_fit_text():
    table = table_from_frame(bpb_frame(), "bpb.csv", BPB)
    report = fit_all(table, (1, 2, 3), resamples=20, seed=0)
    assert report.loss_unit == fit_summary(report, single=False)["loss_unit"] == "bits/byte"  # and `fit --json`
    meanings = [r.meaning for d in describe_fit(report) for r in d.rows]
    assert "irreducible loss (bits/byte)" in meanings and not [m for m in meanings if "nats" in m]
    figures, _ = make_figures(table, report)
    assert {"loss_vs_compute", "isoflop_profiles", "loss_landscape"} <= set(figures)
    labels = [label for fig in figures.values() for label in figure_labels(fig)]
    loss_labels = [label for label in labels if label.startswith("validation loss")]
    assert len(loss_labels) >= 3 and set(loss_labels) == {"validation loss (bits/byte)"}
    assert not [label for label in labels if "nats" in label]
    # The default keeps its label: a table read without --loss-unit is in nats/token, unless its loss
    # column's name spells a unit (`analysis.sources.schema.unit_in_name`: "bpb" is bits/byte).
    plain = table_from_frame(bpb_frame().rename(columns={"bpb": "score"}), "t.csv", ColumnMap(loss="score"))
    assert describe_fit(fit_all(plain, (3,), resamples=0))[0].rows[0].meaning == "irreducible loss (nats/token)"
    assert table_from_frame(bpb_frame(), "t.csv", ColumnMap(loss="bpb")).loss_unit == "bits/byte"


def test_a_bpb_table_through_fit_optimal_and_report_says_bpb_and_never_nats(bpb_csv, tmp_path, capsys):
    fit_json = tmp_path / "fit.json"
    source = [bpb_csv, "--loss-column", "bpb", "--loss-unit", "bpb"]
    fitted = run_main(capsys, "fit", *source, "--bootstrap", "20", "--out", fit_json, check=True).stdout
    assert "irreducible loss (bits/byte)" in fitted and "nats" not in fitted
    answer = run_main(capsys, "optimal", "--law", fit_json, "--budget", "1e21", check=True).stdout
    assert "predicted loss" in answer and answer.count("bits/byte") == 1 and "nats" not in answer
    inference = run_main(
        capsys, "optimal", "--law", fit_json, "--target-loss", "2.5", "--inference-tokens", "1e12", check=True
    ).stdout
    assert "target loss 2.5 bits/byte" in inference and "nats" not in inference
    out = tmp_path / "report" / "r.html"
    proc = run_main(capsys, "report", *source, "--fit", fit_json, "--out", out, check=True)
    assert "is of losses in" not in proc.stderr  # the fit and its source agree on the unit
    markdown = out.with_suffix(".md").read_text()
    assert "final validation loss in bits/byte" in markdown and "predicted loss (bits/byte)" in markdown
    assert "irreducible loss (bits/byte)" in markdown
    assert "nats" not in markdown and "nats" not in out.read_text()


def test_a_bad_loss_unit_is_one_error_line_and_writes_nothing(bpb_csv, tmp_path, capsys):
    fit_json = tmp_path / "fit.json"
    proc = run_main(capsys, "fit", bpb_csv, "--loss-column", "bpb", "--loss-unit", "bits|byte", "--out", fit_json)
    assert_one_line_error(proc, "--loss-unit", "'bits|byte'", "bits/byte (bpb)")
    assert not fit_json.exists()


def test_a_fit_of_other_units_than_its_source_is_named():
    frame = bpb_frame()
    bpb = table_from_frame(frame, "bpb.csv", BPB)
    report = fit_all(bpb, (3,), resamples=0)
    assert fit_matches_source(report, bpb, "fit.json") == []
    nats = table_from_frame(frame, "bpb.csv", ColumnMap(loss="bpb", loss_unit="nats"))
    (line,) = fit_matches_source(report, nats, "fit.json")
    assert "losses in bits/byte" in line and "are in nats/token" in line


def test_compare_refuses_losses_in_different_units_and_labels_its_figure():
    frame = bpb_frame()
    bpb = table_from_frame(frame, "a.csv", BPB)
    nats = table_from_frame(frame, "b.csv", ColumnMap(loss="bpb", loss_unit="nats"))
    with pytest.raises(UserError, match=r"different units \(a.csv: bits/byte, b.csv: nats/token\)"):
        compare_inputs([Input("a.csv", bpb, frame), Input("b.csv", nats, frame)], resamples=0)
    fit = fit_parametric(bpb, resamples=0)
    side = Side("a.csv", len(bpb), [float(b) for b in bpb.budgets], fit, 0, bpb.loss_unit)
    assert "validation loss (bits/byte)" in figure_labels(compare_figure([compare(side, side, 0.95)]))


def test_a_stores_val_bpb_is_bits_per_byte_and_never_mixed_with_its_nats_curves(tmp_path):
    write_store(tmp_path / "store")
    nats = load_runs(str(tmp_path / "store"))
    assert nats.loss_unit == "nats/token" and nats.curves is not None
    bpb = load_runs(str(tmp_path / "store"), ColumnMap(loss="val_bpb"))
    assert bpb.loss_unit == "bits/byte" and bpb.curves is None  # the curves hold val_loss (nats) only
    assert "curves: they hold no 'val_bpb' (bits/byte) but 'val_loss', in other units: final points only" in bpb.notes


def test_compare_optimal_and_inference_name_the_unit_of_every_loss_they_state(tmp_path, capsys):
    # Before: compare's "loss difference" column, its E row and every --json answer gave losses with no unit.
    import json

    from analysis.cli.optimal import optimal_main
    from analysis.compare.render import comparison_json, render_comparison

    table = table_from_frame(bpb_frame(), "bpb.csv", BPB)
    side = Side(
        "bpb.csv", len(table), [float(b) for b in table.budgets], fit_parametric(table, resamples=0), 0, "bits/byte"
    )
    comparison = compare(side, side, 0.95)
    text = render_comparison(comparison)
    header = next(line for line in text.splitlines() if line.split()[:2] == ["C", "(FLOPs)"])
    assert "loss difference (bits/byte)" in header and "losses in bits/byte" in text
    assert next(line for line in text.splitlines() if line.split()[:1] == ["E"]).endswith(" bits/byte)")
    assert comparison_json(comparison)["loss_unit"] == "bits/byte" and "nats" not in text

    fit_json = tmp_path / "fit.json"
    fit_all(table, (3,), resamples=0).save(fit_json)
    for extra in ([], ["--max-tokens", "1e9"], ["--target-loss", "2.5", "--inference-tokens", "1e12"]):
        budget = [] if "--target-loss" in extra else ["--budget", "1e21"]
        assert optimal_main(["--law", str(fit_json), *budget, *extra, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["loss_unit"] == "bits/byte", extra
    assert optimal_main(["--law", str(fit_json), "--budget", "1e21", "--max-tokens", "1e9"]) == 0
    assert "at the unconstrained optimum" in (capped := capsys.readouterr().out) and "nats" not in capped
    assert [line for line in capped.splitlines() if "against" in line][0].count("bits/byte") == 1
    for extra in ([], ["--inference-tokens", "1e12"]):  # a target below the fit's E: the error names its unit
        with pytest.raises(UserError, match=r"\d bits/byte"):
            optimal_main(["--law", str(fit_json), "--target-loss", "0.5", *extra])


def test_the_reports_comparison_tables_name_the_unit_of_their_losses():
    # Before: "loss difference (candidate − baseline)", "baseline loss", "candidate loss" and E with no unit.
    from analysis.report.blocks import Table
    from analysis.report.compare import comparison_blocks

    table = table_from_frame(bpb_frame(), "bpb.csv", BPB)
    side = Side(
        "bpb.csv", len(table), [float(b) for b in table.budgets], fit_parametric(table, resamples=0), 0, "bits/byte"
    )
    per_budget, differences = [b for b in comparison_blocks([compare(side, side, 0.95)], False) if isinstance(b, Table)]
    assert per_budget.header[2:] == [
        "loss difference (candidate − baseline, bits/byte)",
        "baseline loss (bits/byte)",
        "candidate loss (bits/byte)",
    ]
    assert [row[0] for row in differences.rows if row[0].startswith("E ")] == ["E     (irreducible loss, bits/byte)"]


def test_a_fit_of_another_loss_of_the_same_runs_is_named():
    # user22: `report --eval heldout --fit FIT.json` of a fit on val_loss showed the heldout losses beside the val
    # fit's laws, without a word
    frame = bpb_frame().assign(other=lambda f: f["bpb"] * 1.05)
    report = fit_all(table_from_frame(frame, "bpb.csv", BPB), (2, 3), resamples=0)
    (line,) = fit_matches_source(
        report, table_from_frame(frame, "bpb.csv", ColumnMap(loss="other", loss_unit="bpb")), "f"
    )
    assert "was made from other losses of these runs" in line and "in the fit" in line and "(--eval)" in line
