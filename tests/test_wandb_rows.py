"""Step-level exports and the columns researchers export, read as they are meant (review "wandbrows", each test
failed before its fix): a last row holding only the train loss, wandb's ``_step`` history export, logger loss
names (eval/loss, bpb, val_ppl), a budget written "1.0e19 FLOPs", a spreadsheet title row, a table of N and
loss only. Truth: Chinchilla's approach 3 (a = beta/(alpha + beta) = 0.4516)."""

import numpy as np
import pandas as pd
import pytest

from analysis.fits.parametric import fit_parametric
from analysis.sources.check import table_from_frame
from analysis.sources.files import read_table_file
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs
from scaling.errors import DataError

LAW = dict(CHINCHILLA_LAW)
TRUE_A = LAW["beta"] / (LAW["alpha"] + LAW["beta"])
EXPORT = ColumnMap(loss="eval/loss", d="tokens_seen")


def ladder() -> pd.DataFrame:
    return isoflop_runs(LAW, [1e18, 1e19, 1e20, 1e21], 5, spread_decades=0.6, noise=0.0, seed=1)


def history(step="step", final_train_row=True) -> pd.DataFrame:
    """A wandb step export of the ladder: per run, steps 100..1000 at tenths of its tokens, eval/loss (exact,
    from the law) on every second step, and (``final_train_row``) a last row at +1% tokens with the train
    loss only, as exports end."""
    rows = []
    for _, run in ladder().iterrows():
        name, size = f"run-{int(run['params'])}", f"{run['params'] / 1e6:.6f}M"
        for k in range(1, 11):
            loss = float(run["val_loss"]) if k == 10 else 5.0 - 0.1 * k  # the final point is the law's
            rows.append(
                {
                    step: 100 * k,
                    "run_name": name,
                    "model_size": size,
                    "tokens_seen": run["tokens"] * k / 10,
                    "train/loss": loss * 1.02,
                    "eval/loss": loss if k % 2 == 0 else np.nan,
                }
            )
        if final_train_row:
            rows.append(
                {
                    step: 1010,
                    "run_name": name,
                    "model_size": size,
                    "tokens_seen": run["tokens"] * 1.01,
                    "train/loss": rows[-1]["train/loss"],
                    "eval/loss": np.nan,
                }
            )
    return pd.DataFrame(rows)


def test_a_last_row_without_an_eval_loss_leaves_each_run_its_last_evaluated_row():
    # Before: 19 of 20 "rows" excluded (each run's +1% row had no eval/loss), then no approach could be fitted.
    table = table_from_frame(history(), "lastnan2.csv", EXPORT)
    truth = ladder()
    assert len(table.runs) == len(truth) and not table.lines()[0]
    assert np.allclose(np.sort(table.runs["D"]), np.sort(truth["tokens"]), rtol=1e-12)  # the evaluated row's D
    assert any("runs end in rows with no 'eval/loss'" in n for n in table.notes)
    without = table_from_frame(history(final_train_row=False), "lastnan.csv", EXPORT)
    pd.testing.assert_frame_equal(table.runs, without.runs)
    fit = fit_parametric(table, resamples=0)
    assert fit.estimates["a"].value == pytest.approx(TRUE_A, abs=0.01)
    # a run with no eval loss at all is excluded, and the warning counts runs, not rows
    broken = history()
    broken.loc[broken["run_name"] == broken["run_name"].iloc[0], "eval/loss"] = np.nan
    table = table_from_frame(broken, "lastnan2.csv", EXPORT)
    assert len(table.runs) == len(truth) - 1
    assert any(w.startswith("excluded 1 of 20 runs whose") for w in table.warnings)


def test_a_step_history_export_is_read_as_curves_and_a_runs_table_with_step_stays_runs():
    # Before: a _step export was one run per logged step: 100 "runs" in 20 budgets, checkpoints as budgets.
    table = table_from_frame(history("_step", final_train_row=False), "wandb.csv", EXPORT)
    assert len(table.runs) == 20 and len(table.budgets) == 4 and table.curves is not None
    assert table.notes[0].startswith("rows are training curves") and "--rows-are-runs" in table.notes[0]
    steps = table_from_frame(history("step", final_train_row=False), "wandb.csv", EXPORT)
    pd.testing.assert_frame_equal(table.runs, steps.runs)
    # a runs table (one row per run, names unique) with each run's total _step stays one run per row
    runs = ladder().drop(columns=["run_id"]).assign(Name=lambda f: [f"r{i}" for i in range(len(f))], _step=1000)
    table = table_from_frame(runs, "runs.csv", ColumnMap())
    plain = table_from_frame(runs.drop(columns=["_step"]), "runs.csv", ColumnMap())
    assert table.curves is None and len(table.runs) == len(runs) and table.reading is None
    pd.testing.assert_frame_equal(table.runs.drop(columns="run_id"), plain.runs.drop(columns="run_id"))
    assert list(table.runs["run_id"]) == list(runs["Name"])  # named by the run's name, as with any step column
    assert table.notes == plain.notes and not any("curves" in n for n in table.notes)


def test_a_list_valued_config_column_is_read_past():
    # Before: a wandb config's list (betas), which read_wandb_runs keeps as a list, was a TypeError ("only
    # 0-dimensional arrays can be converted to Python scalars") from the duplicate check's cell reading.
    runs = ladder()
    table = table_from_frame(runs.assign(betas=[[0.9, 0.95]] * len(runs)), "wandb:e/p")
    pd.testing.assert_frame_equal(table.runs, table_from_frame(runs, "wandb:e/p").runs)
    twice = pd.concat([runs, runs.assign(val_loss=runs["val_loss"].round(4))], ignore_index=True)
    listed = table_from_frame(twice.assign(betas=[[0.9, 0.95]] * len(twice)), "wandb:e/p")
    assert len(listed.runs) == len(runs) and any("the same run listed twice" in w for w in listed.warnings)


def test_logger_loss_names_are_found_with_their_unit_or_refusal():
    # Before: eval/loss, bpb and val_ppl were "no column for loss" unless named.
    runs = ladder()[["params", "tokens", "val_loss"]]
    table = table_from_frame(history(final_train_row=False), "w.csv", ColumnMap(d="tokens_seen"))
    assert "loss = column 'eval/loss'" in " ".join(table.notes)
    for name in ("val/loss", "validation_loss"):
        table = table_from_frame(runs.rename(columns={"val_loss": name}), "t.csv")
        assert np.allclose(table.runs["loss"], runs["val_loss"]) and table.loss_unit == "nats/token"
    for name in ("bpb", "val_bpb"):
        table = table_from_frame(runs.rename(columns={"val_loss": name}), "t.csv")
        assert table.loss_unit == "bits/byte", name
    for name in ("val_ppl", "ppl"):
        with pytest.raises(DataError, match="holds perplexities"):
            table_from_frame(runs.rename(columns={"val_loss": name}), "t.csv")
    # the store's and the usual names still come first: a table with val_loss and val_bpb fits val_loss
    both = runs.assign(val_bpb=runs["val_loss"] * 0.4)
    assert table_from_frame(both, "t.csv").loss_unit == "nats/token"


def test_a_budget_written_with_its_flops_unit_is_read():
    # Before: "1.0e19 FLOPs" was "7 missing budget value(s)" and the budgets were clustered from C.
    runs = ladder()
    text = runs.assign(budget=[f"{b:.1e} FLOPs" for b in runs.pop("budget_flops")])
    table = table_from_frame(text, "budget_str.csv")
    assert not table.budgets_clustered and np.allclose(table.budgets, [1e18, 1e19, 1e20, 1e21])
    odd = text.assign(budget=text["budget"].where(text.index != 4, "1e19 flop/s"))
    table = table_from_frame(odd, "budget_str.csv")
    assert table.budgets_clustered
    assert any(
        "1 budget value(s) that are not finite numbers > 0 (row 5: '1e19 flop/s')" in n for n in table.lines()[0]
    )  # a warning: the column's grouping is given up


def test_a_title_row_and_a_table_of_n_alone_say_what_is_wrong(tmp_path):
    path = tmp_path / "excel.csv"
    ladder()[["params", "tokens", "val_loss"]].to_csv(path, index=False)
    path.write_text("Table 1: our ladder,,\n" + path.read_text())
    with pytest.raises(DataError, match="header may be on a later line"):
        table_from_frame(read_table_file(path), "excel.csv")
    kaplan = ladder()[["params", "val_loss"]]
    with pytest.raises(DataError, match=r"approaches 1-3 need D or C.*L\(N\)"):
        table_from_frame(kaplan, "kaplan.csv")


def curves_of(runs: pd.DataFrame, points: int) -> pd.DataFrame:
    """Each run as ``points`` rows at k/points of its tokens (the last the law's loss), wandb's _step beside."""
    rows = []
    for i, run in runs.reset_index(drop=True).iterrows():
        for k in range(1, points + 1):
            loss = float(run["val_loss"]) * (1 + 0.2 * (points - k))
            rows.append(dict(name=f"run-{i}", _step=100 * k, params=run["params"], tokens=run["tokens"] * k / points))
            rows[-1].update(val_loss=loss, budget_flops=run["budget_flops"])
    return pd.DataFrame(rows)


def test_a_run_that_diverged_is_excluded_not_ended_early(tmp_path):
    # Before (review rowsfix #1): a run whose last losses were inf, nan ended at its row at half the tokens,
    # a finished run, with a note only; its rows must be excluded with a warning, as a store's diverged run is.
    rows = curves_of(ladder(), 4)
    last = rows.index[rows["name"] == "run-3"][-2:]
    rows.loc[last, "val_loss"] = [np.inf, np.nan]
    path = tmp_path / "diverged.csv"
    rows.to_csv(path, index=False)
    table = table_from_frame(read_table_file(path), "diverged.csv")
    assert len(table.runs) == len(ladder()) - 1 and table.curves is not None
    assert any(w.startswith("excluded 1 of 20 runs") and f"row {last[-1] + 1}" in w for w in table.warnings)
    assert not any("end in rows with no" in n for n in table.notes)
    # a run logged no further than half its tokens (blank after) did not finish either; a word is no blank
    for value, at in ((np.nan, 2), ("diverged", 1)):
        rows = curves_of(ladder(), 4).astype({"val_loss": object})
        rows.loc[rows.index[rows["name"] == "run-3"][-at:], "val_loss"] = value
        table = table_from_frame(rows, "diverged.csv")
        assert len(table.runs) == len(ladder()) - 1 and any(w.startswith("excluded 1 of 20") for w in table.warnings)


def test_step_with_repeated_names_reads_as_curves_only_where_rows_look_like_a_history():
    # Before (review rowsfix #2): approach 3's grid named by model with _step was 6 curves, then refused with no
    # hint; two recipes' runs sharing names (an optimizer column) were 21 curves of 2 points, not 42 runs.
    sizes, tokens = np.geomspace(1e7, 1e9, 6), np.geomspace(1e9, 1e11, 5)  # each model at 5 token counts
    grid = pd.DataFrame([dict(name=f"model-{i}", params=n, tokens=d) for i, n in enumerate(sizes) for d in tokens])
    e, a, b, alpha, beta = (LAW[k] for k in ("E", "A", "B", "alpha", "beta"))
    grid["val_loss"] = e + a / grid["params"] ** alpha + b / grid["tokens"] ** beta
    grid["_step"] = (grid["tokens"] / 2**19).astype(int)
    with pytest.raises(DataError, match="2 distinct token counts.*rows were read as training curves.*--rows-are-runs"):
        fit_parametric(table_from_frame(grid, "grid.csv"), resamples=0)
    runs = table_from_frame(grid, "grid.csv", ColumnMap(rows_are_runs=True))
    assert len(runs.runs) == 30 and fit_parametric(runs, resamples=0).estimates["a"].value == pytest.approx(TRUE_A)
    assert len(table_from_frame(grid.rename(columns={"name": "model"}), "grid.csv").runs) == 30  # a model name
    base = curves_of(ladder(), 1).assign(optimizer="adamw")
    candidate = base.assign(optimizer="lion", tokens=base["tokens"] * 1.3, val_loss=base["val_loss"] * 0.99)
    for recipes in (
        pd.concat([base, candidate]),
        pd.concat([base, candidate, candidate.assign(tokens=base["tokens"] * 2)]),
    ):
        table = table_from_frame(recipes.reset_index(drop=True), "recipes.csv")
        assert len(table.runs) == len(recipes) and table.curves is None  # 2 rows a name; an optimizer column varies
    assert table_from_frame(curves_of(ladder(), 3), "history.csv").curves is not None  # 3 rows a name: curves


def test_how_rows_were_read_is_a_fact_of_the_table_kept_where_its_notes_are_not():
    # Before (review tables10 #1): the refusal's --rows-are-runs hint searched the notes' text, which a held-out
    # table (`RunTable.without_budget`, hold-out validation's) no longer has: the hint was lost there.
    sizes = np.geomspace(1e7, 1e9, 8)
    grid = pd.DataFrame(
        [dict(name=f"model-{i}", params=n, tokens=1e10 * k) for i, n in enumerate(sizes) for k in (1, 2, 4)]
    )
    e, a, b, alpha, beta = (LAW[k] for k in ("E", "A", "B", "alpha", "beta"))
    grid["val_loss"] = e + a / grid["params"] ** alpha + b / grid["tokens"] ** beta
    grid["_step"] = (grid["tokens"] / 2**19).astype(int)
    table = table_from_frame(grid, "grid.csv")
    assert table.reading.curves and table.reading.by_name and table.reading.note in table.notes
    held = table.without_budget(table.budgets[-1])
    assert held.notes == [] and held.reading == table.reading
    with pytest.raises(DataError, match="2 distinct token counts.*read as training curves.*--rows-are-runs"):
        fit_parametric(held, resamples=0)
    runs = table_from_frame(grid, "grid.csv", ColumnMap(rows_are_runs=True))
    assert runs.reading is None and len(runs.runs) == 24


def test_a_history_export_with_token_counts_in_thousands_is_read_as_curves():
    # Before (review tables10 #2): the text-column test of a _step export read "82,339,987" as a word, one varying
    # within each run name, so the export was 80 runs of one row; `numeric` reads such counts, and so does it now.
    rows = curves_of(ladder(), 4)
    spreadsheet = rows.assign(tokens=rows["tokens"].map(lambda x: f"{int(x):,}"))
    table = table_from_frame(spreadsheet, "history.csv")
    plain = table_from_frame(rows.assign(tokens=rows["tokens"].astype(int)), "history.csv")
    assert table.reading.curves and len(table.runs) == len(ladder())
    pd.testing.assert_frame_equal(table.runs, plain.runs)
    # a word varying within a name (two recipes' runs under one name) still keeps the rows runs
    recipes = spreadsheet.assign(optimizer=np.resize(["adamw", "lion"], len(rows)))
    assert len(table_from_frame(recipes, "recipes.csv").runs) == len(rows)


@pytest.mark.parametrize(
    "name",
    ["tokens_seen", "train/tokens_seen", "tokens_processed", "train/num_input_tokens_seen", "throughput/total_tokens"],
)
def test_a_loggers_token_count_is_the_d_column_without_naming_it(name):
    # Before (review tables10 #3): a wandb export's tokens_seen (HF's train/num_input_tokens_seen, Levanter's
    # throughput/total_tokens) was "neither a token count D nor a compute C column" unless --d-column named it.
    export = history().rename(columns={"tokens_seen": name})
    table = table_from_frame(export, "wandb.csv", ColumnMap(loss="eval/loss"))
    named = table_from_frame(history(), "wandb.csv", EXPORT)
    pd.testing.assert_frame_equal(table.runs, named.runs)
    assert fit_parametric(table, resamples=0).estimates["a"].value == pytest.approx(TRUE_A, abs=0.01)
    # a table's own tokens column still comes first
    both = ladder().assign(tokens_seen=lambda f: f["tokens"] * 1.01)
    assert np.allclose(table_from_frame(both, "t.csv").runs["D"], both["tokens"])


@pytest.mark.parametrize("step", ["_step", "step", "iteration", "iter", "global_step", "trainer/global_step"])
def test_every_step_column_reads_rows_as_curves_by_one_rule(step):
    # Before (review tables10 #3): `step`, `iteration` and `global_step` made curves of any repeated name, so two
    # recipes' runs sharing names (an optimizer column) were 20 curves of 2 points, not 40 runs; Lightning's
    # trainer/global_step was no step column at all: 20 runs logged at 4 steps were 80 "runs".
    history = curves_of(ladder(), 4).rename(columns={"_step": step})
    history["betas"] = [[0.9, 0.95]] * len(history)  # a list from a wandb config, as read_wandb_runs keeps it
    table = table_from_frame(history, "history.csv")
    assert table.reading.curves and len(table.runs) == len(ladder()) and len(table.curves) == len(history)
    base = curves_of(ladder(), 1).rename(columns={"_step": step}).assign(optimizer="adamw")
    candidate = base.assign(optimizer="lion", tokens=base["tokens"] * 1.3, val_loss=base["val_loss"] * 0.99)
    for recipes in (
        pd.concat([base, candidate]),  # 2 rows a name
        pd.concat([base, candidate, candidate.assign(tokens=base["tokens"] * 2)]),  # an optimizer column varies
    ):
        table = table_from_frame(recipes.reset_index(drop=True), "recipes.csv")
        assert len(table.runs) == len(recipes) and table.curves is None and table.reading is None


def test_an_lr_schedule_logged_on_every_row_is_read_as_curves_and_a_swept_lr_keeps_rows_runs():
    # Before: wandb's history with the scheduled lr on every row was 100 "runs" (user8 review): lr is a
    # hyperparameter column, and its 10 values within each run said "not a curve".
    export = history("_step", final_train_row=False)
    k = export["_step"].to_numpy() / 100  # 1..10: warmup over 2 logged steps, then cosine decay to lr/10
    export["lr"] = 3e-4 * np.where(k <= 2, k / 2, 0.1 + 0.45 * (1 + np.cos(np.pi * (k - 2) / 8)))
    plain = table_from_frame(history("_step", final_train_row=False), "wandb.csv", EXPORT)
    table = table_from_frame(export, "wandb.csv", EXPORT)
    assert len(table.runs) == 20 and table.curves is not None and table.notes[0].startswith("rows are training curves")
    pd.testing.assert_frame_equal(table.runs, plain.runs)
    # an lr that goes down and up again within a name is no schedule: a sweep, the rows stay runs
    export["lr"] = np.tile([1e-3, 2e-3, 4e-3, 1e-3, 2e-3, 4e-3, 1e-3, 2e-3, 4e-3, 1e-3], 20)
    table = table_from_frame(export, "wandb.csv", EXPORT)
    assert len(table.runs) == 100 and table.curves is None  # the 100 rows with an eval/loss
    assert any(n.startswith("rows are runs") and "values of column 'lr'" in n for n in table.notes)


def test_a_wandb_runs_config_and_summary_flatten_to_dotted_keys_with_their_types():
    from analysis.sources.wandb import _flatten

    config = {"optim": {"lr": 1e-3, "betas": [0.9, 0.95]}, "train": {"batch_size": 32}, "kwargs": {}, "name": "d64"}
    flat = _flatten(config)
    assert flat == {"optim.lr": 1e-3, "optim.betas": [0.9, 0.95], "train.batch_size": 32, "name": "d64"}
    assert type(flat["train.batch_size"]) is int and _flatten({}) == {}
