"""Shared by the fault tests: the deterministic test sweep (tests/sweeps/faults.yaml), launching it in
its own process group, killing it at a seeded point, and comparing stores run by run."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, SCALING, built_once

SWEEP = ROOT / "tests" / "sweeps" / "faults.yaml"
HOOKS = ROOT / "tests" / "fault_hooks"  # sitecustomize.py: wandb and SIGTERM faults on demand

# Lines the trainer and the sweeper print (scaling/train.py, hydra_plugins/scaling_sweeper).
RUN_STARTED = re.compile(r"^\[([0-9a-f]{12})\] C\S+: N=", re.M)
RUN_COMPLETED = re.compile(r"^\[([0-9a-f]{12})\] completed: val loss", re.M)
RESUMED = re.compile(r"^\[([0-9a-f]{12})\] resuming from checkpoint at step (\d+)/", re.M)
PREEMPTED = re.compile(r"^\[([0-9a-f]{12})\] preempted: SIG(?:TERM|INT) at step (\d+)/\d+; checkpoint saved", re.M)

# What a deterministic run must reproduce exactly, whether or not it was interrupted.
OUTCOME_KEYS = (
    "status",
    "reason",
    "val_loss",
    "val_bpb",
    "train_loss",
    "steps",
    "tokens",
    "flops",
    "params",
    "lr",
    "corpus_fingerprint",
    "curve",
)


def fault_env(**extra: str) -> dict[str, str]:
    """The environment of a launched sweep: the session's corpus cache, wandb offline (see conftest)."""
    return {**os.environ, **extra}


class Launch:
    """One `scaling sweep tests/sweeps/faults.yaml store=STORE ...` (or the command ``argv``) in its
    own process group (so a kill reaches every process it started, launcher workers included),
    output to a log file."""

    def __init__(self, store: Path | None, log: Path, *overrides: str, env: dict[str, str] | None = None, argv=None):
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen(
            argv or [SCALING, "sweep", str(SWEEP), f"store={store}", *overrides],
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env or fault_env(),
            start_new_session=True,
        )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def running(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 300) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"sweep still running after {timeout} s:\n{self.output[-3000:]}") from None
        finally:
            self._out.close()
        return rc

    def group_is_gone(self, within: float = 30) -> bool:
        """True when no process of the group is left within ``within`` seconds (a killed sweep leaves
        no worker behind). 30 s, not less: an orphaned worker notices its sweep is gone at its next
        poll, and a machine loaded by higher-priority work (a benchmark at autogroup nice -10 beside
        the suite, 2026-11-25) delayed that past 10 s once."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
        return False


def wait_until(condition, launch: Launch, timeout: float = 120) -> bool:
    """Poll ``condition()`` until true (True) or the launch has ended (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if not launch.running():
            return False
        time.sleep(0.02)
    raise AssertionError(f"waited {timeout} s for a kill point:\n{launch.output[-3000:]}")


def run_sweep(
    store: Path, log: Path, *overrides: str, env: dict[str, str] | None = None, expect_status: int = 0
) -> str:
    """Launch the test sweep to completion; return its output (fail unless it exits ``expect_status``:
    0 every planned run completed, 1 a run failed; scaling/sweep_app.py)."""
    launch = Launch(store, log, *overrides, env=env)
    rc = launch.wait()
    assert rc == expect_status, f"sweep exited {rc}, not {expect_status}:\n{launch.output[-3000:]}"
    return launch.output


def reference_store(tmp_path_factory) -> Path:
    """The test sweep run once, uninterrupted (built on first use, shared by the session's tests: `built_once`)."""

    def build(directory: Path) -> None:
        run_sweep(directory / "store", directory / "faults-reference.log")
        done = records(directory / "store")
        assert len(done) == 6 and all(r["status"] == "completed" for r in done.values())

    return built_once(tmp_path_factory, "faults-reference", build) / "store"


def copy_store(store: Path, target: Path) -> Path:
    shutil.copytree(store, target)
    return target


def records(store: Path) -> dict[str, dict]:
    """run_id -> record, for every record.json in the store."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(Path(store).glob("runs/*/record.json"))}


def record_bytes(store: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted(Path(store).glob("runs/*/record.json"))}


def outcome(record: dict) -> dict:
    return {k: record[k] for k in OUTCOME_KEYS}


def assert_same_results(store: Path, reference: Path, runs: int = 6) -> None:
    """The store holds ``runs`` runs (all 6 of the sweep, or the subset a test launched), each once,
    each with exactly the outcome it has in the reference; no checkpoint is left; table.csv holds
    each run once."""
    got, want = records(store), records(reference)
    assert len(got) == runs and set(got) <= set(want), sorted(got)
    for run_id, rec in got.items():
        assert outcome(rec) == outcome(want[run_id]), run_id
    assert not list(Path(store).glob("runs/*/ckpt.pt"))
    table_ids = [line.split(",", 1)[0] for line in (Path(store) / "table.csv").read_text().splitlines()[1:]]
    assert sorted(table_ids) == sorted(got)


def set_aside_files(store: Path) -> list[Path]:
    """Records and checkpoints the trainer renamed instead of deleting (``*.corrupt-*``, ``*.errored-*``)."""
    return sorted(p for p in Path(store).glob("runs/*/*") if re.search(r"\.(corrupt|errored)-\d", p.name))


def checkpoint_steps(store: Path) -> dict[str, int]:
    """run_id -> step of each checkpoint in the store (a run interrupted after its first checkpoint)."""
    import torch

    return {p.parent.name: torch.load(p, weights_only=False)["step"] for p in Path(store).glob("runs/*/ckpt.pt")}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``root`` (relative path -> bytes, None for a directory): to check
    that nothing written was changed and nothing was added."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(Path(root).rglob("*"))}
