"""A run's record: what `scaling.train` writes to ``runs/<id>/record.json`` when a run ends.

The keys are the store's contract (docs/CONTRACTS.md); `scaling.store` reads them back.
"""

from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import torch
from omegaconf import DictConfig

from scaling import evalsets
from scaling.arch import arch_name, architecture_label, target_of
from scaling.data import Corpus
from scaling.devices import SLOT_KEYS
from scaling.plan import RunPlan, job_config
from scaling.store import SCHEMA, Failure, Status, atomic_write_json, code_version
from scaling.train_state import TrainState

# What the tracker's run summary shows of the record.
SUMMARY_KEYS = (
    "status",
    "val_loss",
    "val_bpb",
    "train_loss",
    "tokens",
    "flops",
    "params",
    "params_non_embedding",
    "tokens_per_s",
    "flops_per_s",
)


class RecordNotWritten(Exception):
    """The run ended but its record could not be written (a full or read-only disk)."""


@dataclass(frozen=True)
class Outcome:
    """How a run's training ended: completed, diverged or errored (with the exception's type)."""

    failure: Failure = Failure.NONE
    reason: str = ""  # why it failed, one line; "" when completed
    error_type: str = ""  # the exception class of an errored run (OSError, MemoryError, ...)

    @property
    def status(self) -> Status:
        return Status.COMPLETED if self.failure == Failure.NONE else Status.FAILED


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _nan_if_none(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _architecture(cfg: DictConfig, plan: RunPlan) -> dict[str, Any]:
    return {
        "architecture": architecture_label(cfg.model, plan.shape),  # gpt2-v2, llama-v1, custom:<target>
        "arch": arch_name(cfg.model, plan.shape),  # gpt2 | llama | custom
        "tied_head": plan.shape.tied_head,
        "model_target": target_of(cfg.model),  # model._target_, "" for a built-in block
    }


def _machine_keys(machine: dict) -> dict[str, Any]:
    """Device and threads, and in a sweep on GPUs the device slot (`scaling.devices`)."""
    return {
        "device": machine["device"],
        "threads": machine["threads"],
        **{k: machine[k] for k in SLOT_KEYS if k in machine},
    }


def _schedule(cfg: DictConfig, plan: RunPlan) -> dict[str, Any]:
    """The LR schedule's keys: cosine | wsd (scaling.schedule), and the warmup."""
    return {"warmup_frac": cfg.optim.warmup_frac, "warmup_steps": plan.warmup_steps, "schedule": plan.schedule}


def build_record(
    cfg: DictConfig, plan: RunPlan, corpus: Corpus, state: TrainState, outcome: Outcome, machine: dict, sets=()
) -> dict[str, Any]:
    """The record of a run that ended with ``outcome``; ``machine`` holds device, threads,
    started_at and wall_time_s; ``sets`` the run's evaluation sets (none: no eval_* key)."""
    t, curve, val_loss = cfg.train, state.curve, state.val_loss()
    bytes_per_token = evalsets.primary_set(cfg.eval, sets).bytes_per_token if sets else corpus.bytes_per_token
    trained_tokens = (curve[-1]["step"] if curve else 0) * plan.tokens_per_step
    return {
        "schema": SCHEMA,
        "run_id": plan.run_id,
        "sweep": cfg.sweep,
        "status": str(outcome.status),
        "failure": str(outcome.failure),
        "error_type": outcome.error_type,
        "reason": outcome.reason,
        "budget_flops": float(cfg.budget),
        "flops": plan.flops,
        "flops_attention": plan.flops_attention,
        "param_count": cfg.param_count,
        "params": plan.params,
        "params_non_embedding": plan.params_non_embedding,
        "tokens": plan.tokens,
        "unique_tokens": plan.corpus_train_tokens,  # the training split: what the corpus holds
        "epochs": plan.tokens / plan.corpus_train_tokens,  # > 1: the run repeated its data
        "steps": plan.steps,
        "batch_size": plan.batch_size,
        "seq_len": t.seq_len,
        "eval_tokens": t.eval_tokens,  # the held-out set's size: runs of two sizes are scored on two sets (user24)
        "tokens_trained": trained_tokens,  # = tokens when completed; how far a failed run got
        "shape": plan.shape.name,
        "n_layer": plan.shape.n_layer,
        "d_model": plan.shape.d_model,
        "n_head": plan.shape.n_head,
        "vocab_size": plan.shape.vocab_size,
        "lr": plan.lr,
        **_schedule(cfg, plan),
        "val_loss": val_loss,
        "val_bpb": val_loss / math.log(2) / bytes_per_token,
        "train_loss": curve[-1]["train_loss"] if curve else math.nan,
        "seed": cfg.seed,
        "corpus": corpus.name,
        "corpus_fingerprint": corpus.fingerprint,
        "entropy_rate": _nan_if_none(corpus.entropy_rate),
        "loss_floor": _nan_if_none(corpus.loss_floor(t.seq_len)),
        "wall_time_s": machine["wall_time_s"],
        "tokens_per_s": trained_tokens / max(state.train_time, 1e-9),
        "flops_per_s": plan.flops_attention / plan.tokens * trained_tokens / max(state.train_time, 1e-9),
        **_machine_keys(machine),
        "host": socket.gethostname(),
        "code_version": code_version(),
        "torch_version": torch.__version__,
        **_architecture(cfg, plan),
        "started_at": machine["started_at"],
        "finished_at": now_iso(),
        "corpus_description": corpus.description,
        "config": job_config(cfg),
        "curve": curve,
        **(evalsets.record_keys(cfg.eval, sets, curve) if sets else {}),
    }


def write_record(run, outcome: Outcome, started_at: str, t_start: float, **fields: Any) -> dict[str, Any]:
    """Write the record of ``run`` (a `scaling.train.Run`) that ended with ``outcome``, plus
    ``fields`` (a cooldown branch's ``branch_of``, ``branch_start_step``), atomically; then remove
    its checkpoint and close its tracker. RecordNotWritten when the disk refuses it."""
    plan, paths = run.plan, run.paths
    machine = {
        "device": str(run.device),
        "threads": run.threads,
        "started_at": started_at,
        "wall_time_s": time.perf_counter() - t_start,
        **run.slot_keys,
    }
    record = {**build_record(run.cfg, plan, run.corpus, run.state, outcome, machine, run.eval_sets), **fields}
    try:
        atomic_write_json(paths.record, record)
    except OSError as err:
        run.tracker.finish(failed=True)
        kept = "its checkpoint is kept" if paths.checkpoint.exists() else "no checkpoint"
        raise RecordNotWritten(
            f"run {plan.run_id}: record {paths.record} cannot be written ({err.strerror or err}); "
            f"the run ended {outcome.status}, {kept}; free space and relaunch"
        ) from None
    paths.checkpoint.unlink(missing_ok=True)
    run.tracker.summary({k: record[k] for k in SUMMARY_KEYS})
    run.tracker.finish(failed=outcome.status != "completed")
    run.log(
        f"[{plan.run_id}] {outcome.status}: val loss {record['val_loss']:.4f} nats ({record['val_bpb']:.3f} bits/byte), "
        f"{record['tokens_per_s']:,.0f} tok/s, {record['wall_time_s']:.1f} s"
    )
    return record
