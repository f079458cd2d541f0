"""Tables a reviewer found read wrong after the tables work (each test failed before its fix): a
comma-decimal loss read as thousands, a model-keyed ladder read as curves, log_ppl refused as a
perplexity, text counts in curve rows, a unit in a column's name that a budget column contradicts,
JSON values and ids changed by the reader, a loss_unit column ignored."""

import json

import numpy as np
import pandas as pd
import pytest

from analysis.sources.check import table_from_frame
from analysis.sources.files import read_table_file
from analysis.sources.load import load_runs
from analysis.sources.rows import numeric
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs, loss_curves, lr_sweep_runs
from scaling.errors import DataError

BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def ladder(seed=1) -> pd.DataFrame:
    return isoflop_runs(dict(CHINCHILLA_LAW), BUDGETS, 7, spread_decades=0.6, noise=0.01, seed=seed)


def test_a_comma_decimal_loss_with_a_text_row_is_not_read_as_thousands(tmp_path):
    # Before: "3,723" in a ';' file whose loss column held "diverged" was read as 3723 (E = 1507).
    runs = ladder()
    text = runs.assign(val_loss=runs["val_loss"].map(lambda x: f"{x:.3f}".replace(".", ",")))
    text.loc[3, "val_loss"] = "diverged"
    path = tmp_path / "semi.csv"
    text[["run_id", "params", "tokens", "val_loss"]].to_csv(path, sep=";", index=False)
    table = load_runs(str(path))
    assert len(table.runs) == len(runs) - 1
    assert np.allclose(table.runs["loss"], runs["val_loss"].drop(3).round(3), atol=1e-9)
    # a loss never takes the thousands rule, whatever the file: "3,723" there is not a number
    frame = runs.assign(val_loss=runs["val_loss"].astype(object))
    frame.loc[0, "val_loss"] = "3,723"
    kept = table_from_frame(frame, "t.csv", ColumnMap())
    assert len(kept.runs) == len(runs) - 1 and kept.runs["loss"].max() < 10


def test_a_table_keyed_by_model_name_at_several_budgets_is_runs_not_curves():
    # Before: run_id model-50M at 4 budgets was read as one run's curve: 20 runs became 5.
    sizes = [5e7, 1e8, 2e8, 4e8, 8e8]
    runs = lr_sweep_runs(dict(CHINCHILLA_LAW), BUDGETS[:4], sizes, lr_multipliers=(1.0,))
    keyed = runs.assign(run_id=[f"model-{int(n / 1e6)}M" for n in runs["params"]])
    table = table_from_frame(keyed, "named.csv", ColumnMap())
    assert len(table.runs) == len(runs) and table.curves is None
    assert any("rows are runs, not training curves" in n and "budget_flops" in n for n in table.notes)
    # a repeated id whose loss rises with tokens in most runs is not a curve either
    rising = keyed.drop(columns=["budget_flops"]).assign(val_loss=lambda f: 10.0 - f["val_loss"])
    table = table_from_frame(rising, "named.csv", ColumnMap())
    assert len(table.runs) == len(runs) and any("not below the loss at the fewest" in n for n in table.notes)


def test_curve_rows_with_text_token_counts_are_curves():
    # Before: "82,339,987" token counts in curve rows were NaN to curverows: each row was a run.
    runs = ladder()
    curves = loss_curves(runs, dict(CHINCHILLA_LAW), points_per_run=5)
    rows = curves.merge(runs[["run_id", "params"]], on="run_id")[["run_id", "params", "tokens", "val_loss"]]
    grouped = rows.assign(tokens=rows["tokens"].map(lambda x: f"{int(x):,}"))
    table = table_from_frame(grouped, "curves.csv", ColumnMap())
    assert len(table.runs) == len(runs) and table.curves is not None and len(table.curves) == len(rows)


@pytest.mark.parametrize("name", ["log_ppl", "ln_perplexity", "log_perplexity", "nll_ppl"])
def test_a_log_perplexity_column_is_a_loss(name):
    runs = ladder().rename(columns={"val_loss": name})
    assert len(table_from_frame(runs, "t.csv", ColumnMap(loss=name)).runs) == len(runs)


def test_a_perplexity_column_is_still_refused():
    runs = ladder().rename(columns={"val_loss": "ppl"})
    with pytest.raises(DataError, match="holds perplexities"):
        table_from_frame(runs, "t.csv", ColumnMap(loss="ppl"))


def test_a_unit_in_a_name_that_the_budget_column_contradicts_is_not_applied():
    # Before: tokens_B holding raw tokens was scaled by 1e9 even with --d-column tokens_B.
    runs = ladder().drop(columns=["flops"]).rename(columns={"tokens": "tokens_B"})
    table = table_from_frame(runs, "t.csv", ColumnMap(d="tokens_B"))
    assert np.allclose(table.runs["D"], runs["tokens_B"])
    assert any("holds tokens as given" in n for n in table.notes)
    # in billions indeed: scaled, and the D/N warning names the scaled column, not "as given"
    billions = runs.assign(tokens_B=runs["tokens_B"] / 1e9)
    assert np.allclose(table_from_frame(billions, "t.csv", ColumnMap()).runs["D"], runs["tokens_B"])
    wrong = billions.drop(columns=["budget_flops"]).assign(tokens_B=runs["tokens_B"])
    warned = table_from_frame(wrong, "t.csv", ColumnMap()).warnings
    assert any("tokens per parameter" in w and "column 'tokens_B' (x 1e+09" in w for w in warned)


def test_json_values_equal_the_csvs_and_ids_stay_text(tmp_path):
    runs = ladder().assign(run_id=[f"{i:03d}" for i in range(35)])
    runs.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "t.json").write_text(json.dumps(runs.to_dict(orient="records")))  # floats as repr: exact
    from_csv = read_table_file(tmp_path / "t.csv")
    from_json = read_table_file(tmp_path / "t.json")
    assert list(from_json["run_id"]) == list(runs["run_id"])
    for column in ("params", "tokens", "val_loss", "flops"):
        assert (from_json[column].to_numpy() == from_csv[column].to_numpy()).all()


def test_a_loss_unit_column_sets_the_unit_and_the_option_wins():
    runs = ladder().assign(loss_unit="bits")
    assert table_from_frame(runs, "t.csv", ColumnMap()).loss_unit == "bits/token"
    assert table_from_frame(runs, "t.csv", ColumnMap(loss_unit="nats")).loss_unit == "nats/token"
    with pytest.raises(Exception, match="loss_unit"):
        table_from_frame(runs.assign(loss_unit="<bad>"), "t.csv", ColumnMap())


def test_a_loss_unit_column_does_not_override_the_unit_in_the_loss_columns_name():
    # Before: val_bpb beside val_loss and loss_unit=nats/token (describing val_loss) was labelled nats/token.
    runs = ladder().assign(val_bpb=lambda f: f["val_loss"] / np.log(2) / 3.6, loss_unit="nats/token")
    with pytest.raises(DataError, match=r"'loss_unit' says .* nats/token, but loss column 'val_bpb' is in bits/byte"):
        table_from_frame(runs, "two.csv", ColumnMap(loss="val_bpb"))
    assert table_from_frame(runs, "two.csv", ColumnMap(loss="val_bpb", loss_unit="bpb")).loss_unit == "bits/byte"
    assert table_from_frame(runs, "two.csv", ColumnMap()).loss_unit == "nats/token"  # val_loss: no unit in its name
    agreeing = runs.assign(loss_unit="bpb")
    assert table_from_frame(agreeing, "two.csv", ColumnMap(loss="val_bpb")).loss_unit == "bits/byte"
    # another spelling of the name's unit agrees; a label of the column's own yields to the name (review5: refused)
    bits = runs.assign(loss_bits=runs["val_loss"] / np.log(2))
    for label in ("bits per token", "log2 units"):
        got = table_from_frame(bits.assign(loss_unit=label), "t.csv", ColumnMap(loss="loss_bits")).loss_unit
        assert got == "bits/token"


def test_a_semicolon_csv_written_with_decimal_points_keeps_its_losses(tmp_path):
    # Before: one lr column in decimal commas ("0,001") made a loss of "4.670" a count grouped by dots: 4670.
    (tmp_path / "mixed.csv").write_text(
        "run_id;N;D;loss;budget;lr\na;5773503;2886751346;4.670;100000000000000000.000;0,001\n"
        "b;9872551;1688182428;4.500;100000000000000000.000;0,001\n"
    )
    assert list(pd.to_numeric(read_table_file(tmp_path / "mixed.csv")["loss"])) == [4.67, 4.5]
    (tmp_path / "no_budget.csv").write_text("run_id;N;D;val_loss;lr\na;57735;28867;4.670;0,001\n")
    assert list(pd.to_numeric(read_table_file(tmp_path / "no_budget.csv")["val_loss"])) == [4.67]  # never a count


def test_a_semicolon_csv_with_thousands_grouped_by_dots_reads_the_counts(tmp_path):
    # Before: "125.000" (a comma-decimal locale's 125000) was N = 125, and "1.300.000" no number (row dropped).
    (tmp_path / "de2.csv").write_text(
        "run_id;N;D;loss\na;125.000;250.000;3,5\nb;500.000;62.500;3,4\nc;250.000;1.300.000;3,45\n"
    )
    frame = read_table_file(tmp_path / "de2.csv")
    assert list(frame["N"]) == [125e3, 500e3, 250e3] and list(frame["D"]) == [250e3, 62.5e3, 1.3e6]
    assert list(frame["loss"]) == [3.5, 3.4, 3.45]  # the loss keeps its comma decimals
    runs = ladder()
    german = runs.assign(
        params=runs["params"].map(lambda x: f"{x:,.0f}".replace(",", ".")),
        tokens=runs["tokens"].map(lambda x: f"{x:,.0f}".replace(",", ".")),
        val_loss=runs["val_loss"].map(lambda x: f"{x:.4f}".replace(".", ",")),
    )
    german[["run_id", "params", "tokens", "val_loss"]].to_csv(tmp_path / "de.csv", sep=";", index=False)
    table = load_runs(str(tmp_path / "de.csv"))
    assert len(table.runs) == len(runs) and np.allclose(table.runs["N"], runs["params"].round(), rtol=0)
    assert np.allclose(table.runs["D"], runs["tokens"].round(), rtol=0)
    # a ';' file written with decimal points: "125.000" is 125 (three decimals), as before
    (tmp_path / "dots.csv").write_text("run_id;params_M;tokens_B;loss\na;125.000;2.500;3.512\nb;350.000;1.250;3.498\n")
    assert list(numeric(read_table_file(tmp_path / "dots.csv"), "params_M")[0]) == [125.0, 350.0]


def test_n_and_d_columns_both_named_in_units_they_do_not_hold_are_read_as_given():
    # Before: each column was tested with the other's unit applied, so params_M and tokens_B holding raw counts
    # were both scaled (C 1e15x the budget column), with a note only.
    runs = ladder().drop(columns="flops").rename(columns={"budget_flops": "budget"})
    lying = runs.rename(columns={"params": "params_M", "tokens": "tokens_B"})
    table = table_from_frame(lying, "lie.csv", ColumnMap())
    assert np.allclose(table.runs["N"], runs["params"]) and np.allclose(table.runs["D"], runs["tokens"])
    assert sum("holds parameters as given" in n or "holds tokens as given" in n for n in table.notes) == 2
    assert not table.lines()[0]
    true_n = lying.assign(params_M=lying["params_M"] / 1e6)  # N in millions as named, D raw: only N scaled
    table = table_from_frame(true_n, "lie.csv", ColumnMap())
    assert np.allclose(table.runs["N"], runs["params"]) and np.allclose(table.runs["D"], runs["tokens"])
    # a budget column 100x or more off 6·N·D is a warning, and one in PF-days is named so
    pf = table_from_frame(runs.assign(budget=runs["budget"] / 8.64e19), "pf.csv", ColumnMap())
    said = [w for w in pf.lines()[0] if "budget column 'budget'" in w]
    assert len(said) == 1 and "a PF-day's FLOPs" in said[0] and "in PF-days" in said[0]
    assert not any("budget column 'budget'" in n for n in pf.lines()[1])
    assert "rename it 'budget_pfdays'" in said[0]  # and so renamed, it is read in FLOPs: no warning
    in_pf_days = runs.assign(budget_pfdays=runs["budget"] / 8.64e19).drop(columns="budget")
    renamed = table_from_frame(in_pf_days, "pf.csv", ColumnMap())
    assert not renamed.warnings and np.allclose(renamed.runs["budget"], runs["budget"])
