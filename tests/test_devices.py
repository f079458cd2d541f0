"""Devices: one run per GPU in the local launchers, tested on CPU with a faked device count
(SCALING_FAKE_GPUS, scaling/devices.py), and a step loop that never waits for the device.

- layout: G GPUs × runs_per_gpu runs at once under joblib and submitit_local, capped by a positive
  n_jobs; basic one at a time; a bad runs_per_gpu or SCALING_FAKE_GPUS is one `error:` line;
- a tiny joblib sweep under SCALING_FAKE_GPUS=3 runs 3 at once: every run records its slot, runs
  that trained at the same time had different slots, slot 2 was taken (so 3 held slots at once), and
  the run ids are those of the same sweep without the fake count;
- the step loop reads tensors (``.item()``, ``.tolist()``, ``float()``, ``bool()``) only at its log
  and evaluation points and checkpoints, never in a training step; reading every step's loss at once
  (the old loop) gives the same curve and record, to the bit.

About 1 minute on an idle 2-core machine (the sweeps ~30 s, the in-process runs a few seconds).
"""

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import SECONDS_RUNS, assert_one_line_error, run_cli
from omegaconf import OmegaConf

import scaling.train as train_mod
from hydra_plugins.scaling_sweeper.layout import concurrency, launch_chunk_size, plan_layout
from scaling.machine import usable_cores
from scaling.train_app import compose_config
from scaling.train_state import TrainState

JOBLIB = OmegaConf.create(
    {"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": -1}
)
LOCAL = OmegaConf.create({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"})
BASIC = OmegaConf.create({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"})


def test_local_launchers_run_gpus_times_runs_per_gpu_at_once():
    assert concurrency(JOBLIB, 10, gpus=4) == 4 and concurrency(JOBLIB, 10, gpus=4, runs_per_gpu=2) == 8
    assert concurrency(JOBLIB, 3, gpus=4) == 3  # fewer runs than slots
    assert concurrency(OmegaConf.merge(JOBLIB, {"n_jobs": 2}), 10, gpus=4) == 2  # a positive n_jobs caps it
    assert concurrency(LOCAL, 10, gpus=3) == 3 and launch_chunk_size(LOCAL, 3, None) == 3
    assert concurrency(BASIC, 10, gpus=4) == 1
    # one GPU, one run per GPU: one at a time, one job per joblib launch call (as before)
    assert concurrency(JOBLIB, 10, gpus=1) == 1 and launch_chunk_size(JOBLIB, 1, None) == 1


def test_a_joblib_launch_starts_one_worker_per_run_at_once_not_one_per_core():
    """A loky worker that never got a run dies of a SIGTERM, and loky then SIGKILLs the other
    workers, a run saving its checkpoint among them (processes.py): so a launch's worker count is
    its runs at once, never more (one run: joblib runs it in the sweep's process)."""
    from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

    for runs in (1, 10):
        launcher = JoblibLauncher(n_jobs=-1)
        layout = plan_layout(launcher, JOBLIB, OmegaConf.create({"device": "cpu"}), runs, 1)
        assert launcher.joblib["n_jobs"] == layout.n_parallel == min(runs, usable_cores())


# Runs of a few seconds each on a 2-core machine, so that three of them overlap.
SWEEP = [
    "tiny",
    "hydra.sweeper.budgets=[1e10,1.2e10,1.4e10,1.6e10,1.8e10,2e10]",
    "hydra.sweeper.models=[d32]",
    *SECONDS_RUNS,
    "hydra/launcher=joblib",
]


def records(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]


def test_fake_gpus_run_one_run_per_gpu_each_on_its_own_slot(tmp_path):
    store = tmp_path / "fake"
    proc = run_cli("sweep", *SWEEP, f"store={store}", cwd=tmp_path, env={"SCALING_FAKE_GPUS": "3"}, check=True)
    assert "launching 6 runs, 3 at a time (3 GPUs, 1 run(s) per GPU, faked by SCALING_FAKE_GPUS)" in proc.stdout
    recs = records(store)
    assert len(recs) == 6 and all(r["status"] == "completed" for r in recs)
    for r in recs:
        assert r["gpus_faked"] and r["gpu"] == r["device_slot"] % 3 and r["device"] == "cpu"
        assert r["config"]["train"]["device_slots"] == 3 and r["config"]["train"]["concurrent_runs"] == 3
    spans = [(pd.Timestamp(r["started_at"]), pd.Timestamp(r["finished_at"]), r["device_slot"]) for r in recs]
    for i, (s1, e1, k1) in enumerate(spans):
        for s2, e2, k2 in spans[i + 1 :]:
            if s1 < e2 and s2 < e1:  # trained at the same time: never on one slot
                assert k1 != k2, spans
    # a job takes the lowest free slot: slot 2 in use means three runs held slots at once
    assert {r["device_slot"] for r in recs} == {0, 1, 2}
    # the same runs as without the fake count (slots and devices are not part of a run's identity)
    plain = run_cli("sweep", *SWEEP, f"store={tmp_path / 'plain'}", "hydra.sweeper.dry_run=true", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    planned = json.loads((tmp_path / "plain" / "sweep.dry-run.json").read_text())
    assert {r["run_id"] for r in recs} == {r["run_id"] for r in planned["runs"]}


@pytest.mark.parametrize(
    "args, env, names",
    [
        (["hydra.sweeper.runs_per_gpu=0"], {}, ["hydra.sweeper.runs_per_gpu", "0", "positive integer"]),
        (["hydra.sweeper.runs_per_gpu=-2"], {}, ["hydra.sweeper.runs_per_gpu", "-2"]),
        ([], {"SCALING_FAKE_GPUS": "two"}, ["SCALING_FAKE_GPUS", "'two'", "count"]),
    ],
)
def test_bad_device_settings_are_one_line_and_write_nothing(tmp_path, args, env, names):
    store = tmp_path / "store"
    proc = run_cli("sweep", *SWEEP, *args, f"store={store}", cwd=tmp_path, env=env, timeout=120)
    assert_one_line_error(proc, *names)
    assert not store.exists()  # not even the directory made to check it is writable


# ---------------------------------------------------------------- no host syncs in the step loop
RUN = [
    "data=synthetic",
    "model=d16",
    "budget=3e8",
    "train.seq_len=32",
    "train.batch_size=4",
    "train.min_steps=10",
    "train.eval_tokens=512",
    "train.evals=2",
    "train.log_points=4",
    "train.checkpoint_interval_s=0",
    "tracking=none",
]
READS = ("item", "tolist", "__float__", "__bool__")  # the ways Python code waits for a tensor's value


def train_in_process(store: Path) -> dict:
    cfg = compose_config([*RUN, f"store={store}"])
    return train_mod.train(cfg, log=lambda *a: None)


def test_the_step_loop_reads_tensors_only_at_log_points_and_checkpoints(tmp_path, monkeypatch):
    where = {"phase": "loop"}
    reads = {"step": 0, "point": 0, "loop": 0}
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            reads[where["phase"]] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)

    def phase(name, fn):
        def wrapped(*args, **kwargs):
            where["phase"] = name
            try:
                return fn(*args, **kwargs)
            finally:
                where["phase"] = "loop"

        return wrapped

    steps, original_step = [], train_mod.train_step

    def step_counted(*args):
        steps.append(1)
        return original_step(*args)

    monkeypatch.setattr(train_mod, "train_step", phase("step", step_counted))
    monkeypatch.setattr(train_mod, "log_point", phase("point", train_mod.log_point))
    monkeypatch.setattr(TrainState, "save", phase("point", TrainState.save))
    rec = train_in_process(tmp_path / "counted")
    assert rec["status"] == "completed" and len(steps) == rec["steps"] >= 40
    assert reads["step"] == 0 and reads["loop"] == 0, reads  # no read in a step, nor between steps
    assert reads["point"] > 0  # each log point reads the steps' losses in one transfer, and evaluates


def test_reading_losses_at_log_points_gives_the_per_step_loops_curve_to_the_bit(tmp_path, monkeypatch):
    batched = train_in_process(tmp_path / "batched")
    original = TrainState.observe

    def observe_and_read_now(self, loss, step, divergence_factor):  # the old loop: .item() every step
        original(self, loss, step, divergence_factor)
        self.settle()

    monkeypatch.setattr(TrainState, "observe", observe_and_read_now)
    per_step = train_in_process(tmp_path / "per-step")
    assert batched["run_id"] == per_step["run_id"]
    assert batched["curve"] == per_step["curve"] and batched["val_loss"] == per_step["val_loss"]
    assert batched["train_loss"] == per_step["train_loss"]
