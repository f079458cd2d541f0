"""Clean tables the tables3 guesses misread (each test failed before its fix): an approach-3 grid with
each run's total steps read as 6 curves with no way out, genuine seeds under one run id merged as "the
same run exported twice", three seeds of a checkpointed model pooled into one curve, a budget label
warned about as "a sweep of its own", and a State column of US states excluding every row."""

import json

import numpy as np
import pandas as pd
from conftest import run_cli

from analysis.fits import laws
from analysis.published import CHINCHILLA_APPROACH3
from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap
from analysis.sources.wandb import FINISHED, RUN_STATES
from analysis.synthetic import isoflop_runs

BUDGETS = [1e18, 3e18, 1e19, 3e19]


def loss(n, d, noise=0.004, seed=1):
    rng = np.random.default_rng(seed)
    return laws.chinchilla_loss(n, d, **CHINCHILLA_APPROACH3) * np.exp(noise * rng.standard_normal(np.shape(n)))


def grid_with_steps() -> pd.DataFrame:
    """Approach 3's grid: 6 models x 6 token counts, each row a run of its own, its total steps beside it."""
    n, d = (a.ravel() for a in np.meshgrid(np.geomspace(2e7, 1e9, 6), np.geomspace(2e8, 2e10, 6), indexing="ij"))
    models = [f"m{k}" for k in range(6) for _ in range(6)]
    return pd.DataFrame({"model": models, "N": n, "D": d, "step": (d / 5e5).astype(int), "loss": loss(n, d)})


def test_a_grid_with_total_steps_names_the_flag_that_reads_its_rows_as_runs(tmp_path):
    # Before: read as 6 curves (D/step is constant, as in checkpoints), and nothing said how to read 36 runs.
    grid = grid_with_steps()
    table = table_from_frame(grid, "grid.csv")
    assert len(table.runs) == 6 and any("--rows-are-runs reads them so" in n for n in table.notes)
    runs = table_from_frame(grid, "grid.csv", ColumnMap(rows_are_runs=True)).runs
    plain = table_from_frame(grid.drop(columns="step"), "grid.csv").runs  # read as at 722b1c9
    pd.testing.assert_frame_equal(runs, plain)
    path = tmp_path / "grid.csv"
    grid.to_csv(path, index=False)
    proc = run_cli("fit", str(path), "--rows-are-runs", "--approach", "3", "--bootstrap", "0", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["runs"] == 36
    # A hyperparameter column varying within a model's rows says they are runs, not one curve.
    swept = grid.assign(lr=np.tile([1e-3, 2e-3, 4e-3], 12))
    table = table_from_frame(swept, "grid.csv")
    assert len(table.runs) == 36 and table.curves is None
    assert any("rows are runs" in n and "values of column 'lr'" in n for n in table.notes)


def seeds(two_columns: dict) -> pd.DataFrame:
    """An IsoFLOP ladder run with two seeds, each (N, D) under one run id (the config's), losses 0.1% apart."""
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.004, seed=3)
    again = runs.assign(val_loss=runs["val_loss"] * 1.001)
    return pd.concat([runs.assign(**two_columns[0]), again.assign(**two_columns[1])], ignore_index=True)


def test_seeds_under_one_run_id_are_kept_and_only_a_rounded_copy_is_the_same_run():
    # Before: rows of one run id with D within 2% and loss within 0.2% were one run: 0.1% apart seeds merged.
    assert len(table_from_frame(seeds([{"seed": 0}, {"seed": 1}]), "seeds.csv").runs) == 56
    assert len(table_from_frame(seeds([{}, {}]), "seeds.csv").runs) == 56  # full precision: they differ
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.004, seed=3)
    rounded = runs.assign(val_loss=runs["val_loss"].round(4), tokens=runs["tokens"].round(-4))
    table = table_from_frame(pd.concat([runs, rounded], ignore_index=True), "twice.csv")
    assert len(table.runs) == 28 and any("the same run listed twice" in w for w in table.warnings)
    other = rounded.assign(optimizer="lion")  # any other column differing: not the same run
    mixed = pd.concat([runs.assign(optimizer="adamw"), other], ignore_index=True)
    assert len(table_from_frame(mixed, "twice.csv").runs) == 56
    # a loss written 3.10 reads as 3.1 (two digits "shown"): 3.06 rounds to it, yet it is another seed,
    # 1.3% apart (review5: merged)
    two = pd.DataFrame({"run_id": ["cfg", "cfg"], "N": [1e8, 1e8], "D": [2e9, 2e9], "loss": [3.10, 3.06]})
    assert len(table_from_frame(two, "two.csv").runs) == 2


def test_a_wandb_export_of_seeds_keeps_every_seed():
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.004, seed=5)
    export = pd.DataFrame(
        {"Name": [f"gpt2-{i}" for i in range(len(runs))], "State": FINISHED, "iter": 1000, "N": runs["params"]}
    ).assign(D=runs["tokens"], loss=runs["val_loss"], seed=0)
    both = pd.concat([export, export.assign(loss=export["loss"] * 1.001, seed=1)], ignore_index=True)
    table = table_from_frame(both, "export.csv")
    assert len(table.runs) == 56 and not table.lines()[0]


def test_checkpoints_of_three_seeds_are_three_curves_per_model():
    # Before: model named the run, so the 3 seeds' checkpoints were pooled into one curve per model.
    rows = []
    for k, n in enumerate(np.geomspace(7e7, 3e9, 6)):
        for seed in range(3):
            for step in (1000, 4000, 16000, 64000, 143000):
                rows.append({"model": f"p{k}", "seed": seed, "step": step, "N": n, "D": step * 2.1e6})
    frame = pd.DataFrame(rows)
    frame["loss"] = loss(frame["N"].to_numpy(), frame["D"].to_numpy(), noise=0.01)
    table = table_from_frame(frame, "suite.csv")
    assert len(table.runs) == 18 and len(table.curves) == 90
    assert table.curves.groupby("run_id").size().eq(5).all() and "p0 seed=2" in set(table.runs["run_id"])
    assert table.runs["unit"].nunique() == 6  # the seeds of one model share its (N, D): one bootstrap unit


def test_a_label_per_budget_or_a_model_index_is_no_sweep_of_its_own():
    # Before: a text budget label (C=1e18) and a wandb Group per IsoFLOP budget were warned about with
    # "fit them apart with --group-by label", which would leave approach 2 one budget per fit.
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.004, seed=6)
    labelled = runs.assign(
        label=[f"C={c:g}" for c in runs["budget_flops"]],
        Group=[f"iso-{c:g}" for c in runs["budget_flops"]],
        model=[f"m{k % 7}" for k in range(len(runs))],  # each size's place in its budget: one N per budget
    )
    assert not table_from_frame(labelled, "labels.csv").lines()[0]
    # Two groups each sweeping the budgets (muP beside SP) are still warned about.
    other = runs.assign(run_id=runs["run_id"] + "b", params=runs["params"] * 1.3, val_loss=runs["val_loss"] * 0.95)
    both = pd.concat([runs.assign(arch_group="muP"), other.assign(arch_group="SP")], ignore_index=True)
    warned = [w for w in table_from_frame(both, "groups.csv").warnings if "'arch_group' splits" in w]
    assert len(warned) == 1


def test_a_state_column_holding_no_run_states_excludes_nothing():
    # Before: a table's State column of US states excluded every row ("no completed runs to fit").
    runs = isoflop_runs(CHINCHILLA_APPROACH3, BUDGETS, 7, spread_decades=0.8, noise=0.004, seed=7)
    table = table_from_frame(runs.drop(columns="status").assign(State=np.resize(["CA", "NY", "WA"], len(runs))), "t")
    assert len(table.runs) == 28 and any("column 'State' holds no run states (CA, NY, WA" in n for n in table.notes)
    states = runs.drop(columns="status").assign(State=FINISHED)
    states.loc[[2, 9], "State"] = ["Crashed", "running"]
    assert len(table_from_frame(states, "t").runs) == 26 and {"crashed", "running"} <= RUN_STATES
    # user41: a wandb JSON export's lowercase `state`, and a spreadsheet's `Status`, were not read: crashed runs fitted
    assert len(table_from_frame(states.rename(columns={"State": "state"}), "t").runs) == 26
    spreadsheet = runs.drop(columns="status").assign(Status="completed")
    spreadsheet.loc[[2, 9], "Status"] = ["diverged", "OOM"]
    assert len(table_from_frame(spreadsheet, "t").runs) == 26


def test_rows_are_runs_says_when_a_run_id_column_decides():
    """--rows-are-runs on a table with a run_id column does nothing: a note says so (review5: silent)."""
    table = table_from_frame(seeds([{"seed": 0}, {"seed": 1}]), "seeds.csv", ColumnMap(rows_are_runs=True))
    assert any("--rows-are-runs: not applied" in n for n in table.notes)


def evaluations_beside_planned_totals() -> pd.DataFrame:
    """9 runs x 5 evaluations; the token column holds each run's planned total, the loss is at step/5 of it."""
    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e18, 1e19, 1e20], 3, spread_decades=0.6, noise=0.0, seed=0)
    rows = [
        {
            "run_id": r.run_id,
            "step": 100 * k,
            "params": r.params,
            "tokens": r.tokens,
            "loss": loss(r.params, r.tokens * k / 5, 0),
        }
        for r in runs.itertuples()
        for k in range(1, 6)
    ]
    return pd.DataFrame(rows)


def test_evaluations_beside_each_runs_planned_total_keep_its_last_step_and_warn():
    # user21: 28 runs x 10 evaluations with each run's planned total as its tokens were 280 "seeds" of 28 points,
    # mid-training losses among them (N_opt 5.4e7 [2.5e7, 7.1e7] at 1e18 for a true 8.1e7), without a word
    frame = evaluations_beside_planned_totals()
    table = table_from_frame(frame, "evals.csv", ColumnMap())
    assert len(table.runs) == 9 and (table.runs["unit"].nunique() == 9)
    final = frame[frame["step"] == 500].set_index("run_id")["loss"]
    assert np.allclose(table.runs.set_index("run_id")["loss"], final.loc[table.runs["run_id"]])
    assert [w for w in table.warnings if "planned total" in w and "'step'" in w], table.warnings
    seeds = frame.assign(step=500, loss=lambda f: f["loss"] * (1 + 0.01 * np.sin(f.index)))  # one step: seeds
    assert len(table_from_frame(seeds, "seeds.csv", ColumnMap()).runs) == 45


def test_a_learning_rate_column_is_read_as_lr():
    # user21: HF Trainer's `learning_rate` beside 4 LRs per point was pooled as 4 seeds of each (E 1.78 for 1.69)
    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e18, 1e19, 1e20], 4, spread_decades=0.6, noise=0.0, seed=0)
    frame = pd.concat(
        [
            runs.assign(learning_rate=lr, val_loss=runs["val_loss"] + 0.1 * np.log10(lr / 1e-3) ** 2)
            for lr in (3e-4, 1e-3, 3e-3)
        ]
    )
    table = table_from_frame(frame.reset_index(drop=True), "lr.csv", ColumnMap())
    assert len(table.runs) == 12 and table.hparams is not None and table.hparams.swept == ["lr"]
    assert np.allclose(np.sort(table.runs["loss"]), np.sort(runs["val_loss"]))
    assert "column 'learning_rate' read as the learning rate 'lr'" in " ".join(table.notes)


def test_a_spreadsheets_summary_rows_are_excluded_and_named():
    # user21: a row "Mean" of the runs' mean N, D and loss stayed a run (approach 1's a from 0.45 to 0.36); a
    # "Total" row with a blank loss was excluded only as a bad loss
    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e18, 1e19, 1e20], 5, spread_decades=0.6, noise=0.0, seed=0)
    frame = runs[["params", "tokens", "val_loss"]].assign(model=[f"m{i}" for i in range(len(runs))])
    means = frame[["params", "tokens", "val_loss"]].mean()
    summary = pd.DataFrame([{**means, "model": "Mean"}, {"params": means["params"] * 15, "model": "Total"}])
    table = table_from_frame(pd.concat([frame, summary], ignore_index=True), "t.csv", ColumnMap())
    assert len(table.runs) == len(runs)
    (said,) = [w for w in table.warnings if "summary row" in w]
    assert "row 16 ('Mean' in column 'model'), row 17 ('Total' in column 'model')" in said, said
    assert not [w for w in table.warnings if "not a finite number" in w]


def test_planned_totals_and_the_lr_alias_leave_seeds_sweeps_and_logged_schedules_as_they_were():
    # review17: seeds sharing a run id whose final steps differed by a few were read as planned totals in 9 of 20
    # draws; a batch sweep keyed by model with a step column kept its last step, not its best setting; an export
    # logging learning_rate on every row of its curves was read as an LR sweep
    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e18, 1e19], 4, spread_decades=0.6, noise=0.0, seed=0)
    rng = np.random.default_rng(0)
    seeds = pd.concat([runs.assign(seed=s, step=10_000 + rng.integers(0, 20, len(runs))) for s in range(3)])
    seeds["val_loss"] *= 1 + 0.01 * rng.standard_normal(len(seeds))
    assert len(table_from_frame(seeds.reset_index(drop=True), "s.csv", ColumnMap()).runs) == 3 * len(runs)
    sweep = pd.concat(
        [
            runs.assign(batch_size=b, step=4096 // b, val_loss=runs["val_loss"] * (1 + (b != 16) * 0.01))
            for b in (8, 16, 32)
        ]
    ).drop(columns="run_id")
    sweep["model"] = np.tile([f"m{i}" for i in range(len(runs))], 3)
    table = table_from_frame(sweep.reset_index(drop=True), "b.csv", ColumnMap())
    assert table.hparams is not None and set(table.hparams.rows.loc[table.hparams.rows["chosen"], "batch_size"]) == {16}
    logged = pd.concat(
        [
            runs.assign(
                tokens=runs["tokens"] * k / 4, val_loss=runs["val_loss"] * (1 + (4 - k) / 10), learning_rate=1e-3 / k
            )
            for k in (1, 2, 3, 4)
        ]
    )
    table = table_from_frame(logged.reset_index(drop=True), "h.csv", ColumnMap())
    assert len(table.runs) == len(runs) and table.curves is not None and table.hparams is None


def test_approach_1_takes_a_wsd_runs_final_point_only():
    # user23: curve points before a WSD run's cooldown (0.04 above its cooled loss) made envelope points; the loss
    # at 1e21 read 2.353 [2.348, 2.381] for a true 2.329
    from analysis.fits.envelope import fit_envelope

    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e18, 1e19, 1e20], 5, spread_decades=0.6, noise=0.0, seed=0)
    rows = [
        {"run_id": r.run_id, "params": r.params, "tokens": r.tokens * k / 10, "budget": r.budget_flops}
        | {"loss": loss(r.params, r.tokens * k / 10, 0) + 0.04 * (k < 10)}
        for r in runs.itertuples()
        for k in range(1, 11)
    ]
    frame = pd.DataFrame(rows)
    wsd = fit_envelope(table_from_frame(frame.assign(schedule="wsd"), "wsd.csv", ColumnMap()), resamples=0)
    cosine = fit_envelope(table_from_frame(frame.assign(schedule="cosine"), "cos.csv", ColumnMap()), resamples=0)
    assert wsd.diagnostics["curve_points"] == len(runs) < cosine.diagnostics["curve_points"]
    assert wsd.diagnostics["points_used"] == "training curves (15 WSD runs' final points only)"


def test_a_wandb_jsonl_export_with_config_and_summary_objects_is_read_as_the_wandb_reader_reads_runs(tmp_path):
    """User38: `config` and `summary` as nested objects were refused ("no column for N", columns config, summary);
    flattened as `config.model.n_params`, `summary.val/loss`, the names were not found. Now the objects' keys are
    columns (nested keys joined with '.'), a count under a namespace is found by its last name (one column only,
    not a one-letter `model.d`), and a loss only under summary. (not `train/loss`)."""
    runs = isoflop_runs(CHINCHILLA_APPROACH3, [1e19, 1e20], 5, seed=4)
    lines = [
        {
            "name": r.run_id,
            "state": "finished",
            "config": {
                "model": {"n_params": r.params, "d": 512},
                "train": {"tokens": r.tokens},
                "budget": r.budget_flops,
            },
            "summary": {"val/loss": r.val_loss, "train/loss": r.val_loss * 0.97, "_step": 1000},
        }
        for r in runs.itertuples()
    ]
    nested = tmp_path / "export.jsonl"
    nested.write_text("\n".join(json.dumps(line) for line in lines))
    proc = run_cli("fit", nested, "--approach", "2", "--bootstrap", "0", check=True)
    assert "N = column 'model.n_params' (total), loss = column 'val/loss'" in proc.stderr, proc.stderr
    assert "budget column 'budget': 2 budgets; 6·N·D agrees with it within 2%" in proc.stderr, proc.stderr
    flat = tmp_path / "flat.jsonl"
    flat.write_text(
        "\n".join(
            json.dumps(
                {"name": x["name"], **{f"config.{k}": v for k, v in x["config"].items()}}
                | {f"summary.{k}": v for k, v in x["summary"].items()}
            )
            for x in lines
        )
    )
    proc = run_cli("fit", flat, "--approach", "2", "--bootstrap", "0", check=True)
    assert "loss = column 'summary.val/loss'" in proc.stderr, proc.stderr
    # user40: a summary nested as {"eval": {"loss": ...}, "train": {"loss": ...}} is read as eval/loss
    for line in lines:
        line["summary"] = {"eval": {"loss": line["summary"]["val/loss"]}, "train": {"loss": 9.0}}
    deeper = tmp_path / "deeper.jsonl"
    deeper.write_text("\n".join(json.dumps(line) for line in lines))
    proc = run_cli("fit", deeper, "--approach", "2", "--bootstrap", "0", check=True)
    assert "loss = column 'eval.loss'" in proc.stderr, proc.stderr
