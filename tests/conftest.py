"""Shared helpers: run the real `scaling` CLI in a subprocess, isolated from the user's setup."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCALING = str(Path(sys.executable).with_name("scaling"))
# Tiny runs for tests that train: 32-token windows, 2 sequences a step, at least 10 steps, one
# evaluation of 256 tokens, 4 curve points, no periodic checkpoints. Tracking is the test's choice.
TINY_TRAIN = [
    "train.seq_len=32",
    "train.batch_size=2",
    "train.min_steps=10",
    "train.eval_tokens=256",
    "train.evals=1",
    "train.log_points=4",
    "train.checkpoint_interval_s=0",
]
# Sweep runs of a few seconds each on a 2-core machine (d32 at ~1e10 FLOPs: 20+ steps of 512
# tokens), long enough for concurrent runs to overlap in time.
SECONDS_RUNS = [
    "hydra.sweeper.tokens_per_param=[0.5,20000]",
    "train.seq_len=64",
    "train.batch_size=8",
    "train.min_steps=20",
    "train.eval_tokens=2048",
    "train.evals=1",
    "train.checkpoint_interval_s=0",
]


def _test_env(tmp_path_factory) -> dict[str, str]:
    """No network for wandb, a private corpus cache shared by the session's tests."""
    cache = str(tmp_path_factory.getbasetemp() / "corpus-cache")
    return {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "SCALING_CACHE": cache}


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    for key, value in _test_env(tmp_path_factory).items():
        monkeypatch.setenv(key, value)


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The directory ``name`` made by ``build(directory)`` once for the whole test session, shared by pytest-xdist's
    workers (each would build its own: a module's tests are spread over both, and a module fixture is per worker).
    What is built here is read, never written, by the tests; a failed build leaves no directory behind."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the session's, above each worker's
    directory, done = root / "built-once" / name, root / "built-once" / f"{name}.done"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory) + ".lock"):
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            try:
                with pytest.MonkeyPatch.context() as patch:  # a module fixture runs before `_isolated_env` (review22)
                    for key, value in _test_env(tmp_path_factory).items():
                        patch.setenv(key, value)
                    build(directory)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
            done.touch()
    return directory


@pytest.fixture(scope="session")
def packed_sweep_store(tmp_path_factory):
    """The store of tests/test_packed_faults.py's packed sweep run once, uninterrupted: the reference
    that the kill-and-relaunch tests compare against, built once (`built_once`). Read it, never write it."""
    from test_packed_faults import SWEEP

    def build(directory):
        run_cli(
            *SWEEP, f"store={directory / 'store'}", env=_test_env(tmp_path_factory), check=True
        )  # before _isolated_env

    return built_once(tmp_path_factory, "packed-sweep", build) / "store"


def run_cli(*args, cwd=None, timeout=600, env=None, check=False):
    """`scaling ARGS...` in a fresh process; returns CompletedProcess with text output."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [SCALING, *map(str, args)], cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, env=full_env
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"scaling {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def run_main(capsys, *args, check=False):
    """`scaling ARGS...` in this process (`scaling.cli.main`, no interpreter start-up or imports to
    pay): a CompletedProcess as `run_cli` returns, its output read from ``capsys``."""
    from scaling.cli import main

    capsys.readouterr()
    try:
        code = main(list(map(str, args)))
    except SystemExit as stop:  # argparse's usage errors, as the console script would exit
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    out, err = capsys.readouterr()
    if check and code != 0:
        raise AssertionError(f"scaling {' '.join(map(str, args))} failed ({code}):\n{out}\n{err}")
    return subprocess.CompletedProcess(["scaling", *map(str, args)], code, out, err)


def assert_one_line_error(proc, *must_contain, status: int = 2):
    """Bad input: exit ``status`` (2), one `error:` line naming what is wrong, no traceback."""
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    for text in must_contain:
        assert text in errors[0], (text, errors[0])
    return errors[0]
