"""No network, no login, a failing wandb: tracking never blocks or fails a run, and the local record
is the same as without tracking. Real subprocesses with wandb 0.31; about 20 s on an idle 2-core
machine, plus the reference sweep (~15 s) when this module runs alone.
"""

import socket

import pytest
from faults_support import HOOKS, fault_env, outcome, records, reference_store, run_sweep

ONE_RUN = ("budget=1e10", "model=d32", "tracking=wandb")  # the reference sweep's smallest run, tracked


def no_login_env(home, **extra):
    """No API key, no ~/.netrc, no WANDB_MODE: what a fresh cluster account looks like."""
    env = fault_env(HOME=str(home), **extra)
    for key in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        env.pop(key, None)
    return {**env, **extra}


def offline_runs(store):
    return list(store.glob("runs/*/wandb/wandb/offline-run-*"))


def closed_port() -> int:
    """A local TCP port nobody listens on (connections to it are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_wandb_failing_mid_run_leaves_the_run_and_its_record_intact(tmp_path, tmp_path_factory):
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    env = no_login_env(tmp_path, PYTHONPATH=str(HOOKS), SCALING_FAULT_WANDB="log")
    output = run_sweep(store, tmp_path / "sweep.log", *ONE_RUN, env=env)
    assert "wandb log failed (CommError: simulated by tests/fault_hooks" in output
    assert "tracking is off for the rest of this run; the local record is unaffected" in output
    ((run_id, rec),) = records(store).items()
    assert outcome(rec) == outcome(records(reference)[run_id])  # tracking is not part of the result
    assert offline_runs(store), "with no login, wandb logs offline (to `scaling sync` later)"


@pytest.mark.slow
def test_logged_in_without_network_logs_offline_at_once(tmp_path, tmp_path_factory):
    """A key is configured but the server cannot be reached: the run logs offline without waiting
    out wandb's 30 s init timeout (it used to wait, then train with no tracking at all)."""
    reference = reference_store(tmp_path_factory)
    store = tmp_path / "store"
    server = f"http://127.0.0.1:{closed_port()}"
    env = no_login_env(tmp_path, WANDB_API_KEY="0" * 40, WANDB_BASE_URL=server)
    output = run_sweep(store, tmp_path / "sweep.log", *ONE_RUN, env=env)
    assert f"wandb: {server} cannot be reached; this run logs offline" in output
    ((run_id, rec),) = records(store).items()
    assert outcome(rec) == outcome(records(reference)[run_id])
    assert rec["wall_time_s"] < 25, "tracking held the run up"  # ~3 s of training; the wandb timeout was 30 s
    assert offline_runs(store)
