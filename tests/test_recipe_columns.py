"""A recipe column (`schedule`) is checked as any other text column, not skipped as run bookkeeping.

/tmp/user15 t15: a table of cosine and constant-LR runs (different laws) in a `schedule` column was fitted
pooled without a word, while the same column named `optimizer`, `lr_schedule` or `model_type` warned:
`schedule` was among the store's bookkeeping columns (`groups.RUN_METADATA`). Our own stores stay silent:
every run of a sweep has one schedule (a WSD trunk's branches too), and records written before WSD, which
name none, ran cosine."""

import json

import pandas as pd

from analysis.sources.check import table_from_frame
from analysis.sources.groups import split_groups
from analysis.sources.load import load_runs
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs
from tests.synthetic_store import write_store

BUDGETS = [1e18, 1e19, 1e20]
CONSTANT_LR = {**CHINCHILLA_LAW, "E": CHINCHILLA_LAW["E"] + 0.2}  # no decay: a higher loss everywhere


def _schedules() -> pd.DataFrame:
    cosine = isoflop_runs(CHINCHILLA_LAW, BUDGETS, 5, spread_decades=0.6, noise=0.005, seed=1)
    constant = isoflop_runs(CONSTANT_LR, BUDGETS, 5, spread_decades=0.6, noise=0.005, seed=2)
    constant["run_id"] += "c"
    return pd.concat([cosine.assign(schedule="cosine"), constant.assign(schedule="constant")], ignore_index=True)


def test_a_schedule_column_of_two_recipes_is_warned_about_and_groups_the_runs():
    runs = _schedules().drop(columns=["budget_flops", "flops"])
    said = [w for w in table_from_frame(runs, "sched.csv").warnings if "'schedule'" in w]
    assert said == [
        "rows at the same (N, D) differ in column 'schedule' (cosine, constant) at 15 of 15 points: if these are "
        "different experiments, fit them apart with --group-by schedule (or --where, --experiment-column "
        "schedule); the fits pool them"
    ]
    groups = split_groups(runs, "schedule", "sched.csv")
    assert [(name, len(rows)) for name, rows in groups] == [("cosine", 15), ("constant", 15)]
    assert not [w for w in table_from_frame(groups[0][1], "cosine.csv").warnings if "'schedule'" in w]


def _restamp(store, schedule_of) -> None:
    """Each record of ``store`` with the schedule ``schedule_of(i)`` (None: the key left out, as before WSD)."""
    for i, path in enumerate(sorted((store / "runs").glob("*/record.json"))):
        record = json.loads(path.read_text())
        if (schedule := schedule_of(i)) is not None:
            record["schedule"] = schedule
        path.write_text(json.dumps(record))


def test_our_stores_of_one_schedule_are_silent_and_a_store_of_two_warns(tmp_path):
    for name, schedule_of in (
        ("wsd", lambda i: "wsd"),  # a WSD sweep: trunks and branches alike
        ("grown", lambda i: None if i % 2 else "cosine"),  # an old cosine store extended after WSD existed
    ):
        write_store(tmp_path / name, with_failures=False)
        _restamp(tmp_path / name, schedule_of)
        assert not [w for w in load_runs(str(tmp_path / name)).warnings if "schedule" in w], name
    write_store(tmp_path / "both", with_failures=False)
    _restamp(tmp_path / "both", lambda i: "wsd" if i % 2 else "cosine")  # not a design of our sweeps: said
    assert [w for w in load_runs(str(tmp_path / "both")).warnings if "column 'schedule'" in w]


def test_numeric_experiment_codes_are_warned_about_as_text_labels_are():
    # user21: experiment_id 0/1 (two recipes, one worth 2x compute) was pooled without a word; "A"/"B" were warned
    one = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 5, spread_decades=0.6, noise=0.005, seed=0)
    two = one.assign(run_id=one["run_id"] + "b", val_loss=one["val_loss"] * 0.97, params=one["params"] * 1.1)
    for column in ("experiment_id", "arm_id", "version"):
        frame = pd.concat([one.assign(**{column: 0}), two.assign(**{column: 1})], ignore_index=True)
        warned = [w for w in table_from_frame(frame, "t.csv").warnings if f"--group-by {column}" in w]
        assert len(warned) == 1 and f"column {column!r} splits the runs into 2 groups (0, 1)" in warned[0], column
    seeds = pd.concat([one.assign(seed=0), two.assign(seed=1)], ignore_index=True)  # other numbers: not checked
    assert not [w for w in table_from_frame(seeds, "t.csv").warnings if "--group-by" in w]


def test_runs_scored_on_held_out_sets_of_two_sizes_are_warned_about():
    # user24: a sweep with train.eval_tokens 4096 launched into a store of 8192's: d48's loss 0.035 apart, pooled silently
    runs = isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19, 1e20], 5, spread_decades=0.6, noise=0.005, seed=0)
    same = table_from_frame(runs.assign(eval_tokens=8192), "t.csv").warnings
    assert not [w for w in same if "held-out sets" in w]
    mixed = runs.assign(eval_tokens=[4096 if i % 3 == 0 else 8192 for i in range(len(runs))])
    (said,) = [w for w in table_from_frame(mixed, "t.csv").warnings if "held-out sets" in w]
    assert (
        "train.eval_tokens: 8,192 tokens (10 runs), 4,096 tokens (5 runs)" in said and "--where eval_tokens==" in said
    )
