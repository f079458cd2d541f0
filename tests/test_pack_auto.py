"""``hydra.sweeper.pack: null`` (the default): an LR sweep is packed where it was measured to pay (on
GPUs, with train.compile=true, groups of at least `pack.AUTO_MIN_MEMBERS` learning rates; README,
Benchmarks 6) and nowhere else. GPUs are faked with SCALING_FAKE_GPUS (the runs train on this CPU)."""

from __future__ import annotations

import pytest
from conftest import run_cli
from test_packed import SWEEP

from hydra_plugins.scaling_sweeper import pack
from scaling.plan import plan_run
from scaling.store import read_store
from scaling.train_app import compose_config

LRS4 = "hydra.sweeper.lr_multipliers=[0.5,1,2,4]"


def _jobs(runs: list[list[str]], rule: pack.Rule) -> list[list[str]]:
    to_run = [{"overrides": o, "plan": plan_run(compose_config(o))} for o in runs]
    return pack.pack_jobs(to_run, [list(o) for o in runs], rule)[0]


def test_auto_packs_groups_of_four_or_more_small_models_only():
    four = [["model=d32", f"optim.lr_multiplier={m}"] for m in (0.5, 1, 2, 4)]
    three = [["model=d16", f"optim.lr_multiplier={m}"] for m in (0.5, 1, 2)]
    wide = [["model=d256", "budget=1e13", f"optim.lr_multiplier={m}"] for m in (0.5, 1, 2, 4)]
    assert len(_jobs(four + three + wide, pack.EVERY)) == 3
    jobs = _jobs(four + three + wide, pack.AUTO)
    assert len(jobs) == 8 and jobs[1:] == three + wide  # d32's four as one job; d16's three, d256's four alone


@pytest.mark.parametrize(
    ("fake_gpus", "overrides", "lr_axis", "packs"),
    [
        ("1", ["train.compile=true"], True, True),
        ("1", ["train.compile=false"], True, False),  # eager packs lose to one compiled run
        ("", ["train.compile=true"], True, False),  # on this CPU packing gains little
        ("1", ["train.compile=true", "train.device=cpu"], True, False),
        ("1", ["train.compile=true"], False, False),  # nothing to pack
        ("1", ["train.compile=true", "model.arch=llama"], True, False),  # cannot be packed
    ],
)
def test_auto_packs_on_gpus_with_compile_only(monkeypatch, fake_gpus, overrides, lr_axis, packs):
    monkeypatch.setenv("SCALING_FAKE_GPUS", fake_gpus) if fake_gpus else monkeypatch.delenv(
        "SCALING_FAKE_GPUS", raising=False
    )
    assert pack.auto(compose_config(["model=d32", *overrides]), lr_axis) is packs


def test_an_lr_sweep_on_gpus_with_compile_is_packed_by_default(tmp_path):
    store = tmp_path / "s"
    sweep = [*SWEEP[:-2], LRS4, SWEEP[-1], "train.compile=true", f"store={store}"]
    proc = run_cli(*sweep, env={"SCALING_FAKE_GPUS": "1"}, check=True)
    assert "launching 4 runs as 1 jobs, 1 of them packed (pack: null packs 4 or more LRs up to d128" in proc.stdout
    runs = read_store(store).runs
    assert len(runs) == 4 and (runs.status == "completed").all() and runs.pack_job.nunique() == 1
    assert (runs.pack_job != "").all()
