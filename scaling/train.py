"""`train(cfg) -> record`: one model, one FLOP budget, one atomic record.

Reads top to bottom:
  1. plan      — shape, parameter counts, D = C/(6N) rounded to whole steps, run id (no compute)
  2. claim     — lock the run in the store; a finished run is a no-op, a partial one resumes
  3. set up    — corpus, device, threads, model, optimizer, fixed evaluation set, tracker
  4. loop      — warmup + cosine schedule of exactly `steps` steps; divergence and SIGTERM checks;
                 held-out evaluations; periodic checkpoints
  5. record    — final held-out loss, curve, throughput; written atomically; checkpoint removed
"""

from __future__ import annotations

import io
import math
import os
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

# OpenMP threads that wait by sleeping, not spinning. With libgomp's default spin-wait, a 2-thread
# run slowed 15-40x whenever another process used one of the cores (bench, 2 cores: d32 4 ktok/s
# against 139 with PASSIVE, d64 2 against 35); on an idle machine PASSIVE costs 0-10% (d32-d64)
# or nothing (d128 up). libgomp reads it once, when torch loads it; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402  (after the line above)

from scaling import data as data_lib
from scaling.errors import ConfigError
from scaling.machine import usable_cores
from scaling.model import GPT
from scaling.plan import RunPlan, lr_at, plan_run
from scaling.shapes import ARCHITECTURE
from scaling.store import (
    SCHEMA,
    RunPaths,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    code_version,
    read_record,
    remove_partial_writes,
    run_lock,
    run_state,
    set_aside,
)
from scaling.tracking import start_tracker


# ---------------------------------------------------------------- helpers
def pick_device(name: str) -> torch.device:
    if name != "auto":
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"train.device: {name!r} is not available on this machine (no CUDA); valid: auto, cpu")
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def set_threads(t) -> int:
    """Torch CPU threads: explicit, or cores // concurrent runs (never oversubscribe: docs/NOTES.md)."""
    threads = t.threads or max(1, usable_cores() // t.concurrent_runs)
    torch.set_num_threads(threads)
    return threads


def nan_if_none(x: float | None) -> float:
    return math.nan if x is None else float(x)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def load_checkpoint(paths: RunPaths, run_id: str, device: torch.device, log) -> dict[str, Any] | None:
    """The run's last checkpoint, or None to train from step 0. A checkpoint that cannot be read
    (truncated, garbled, written by an incompatible torch) is set aside as ``ckpt.pt.corrupt-<time>``
    and named in the log, so that a relaunch trains the run again instead of failing every time."""
    if not paths.checkpoint.exists():
        return None
    try:
        ckpt = torch.load(paths.checkpoint, map_location=device, weights_only=False)
        missing = {"run_id", "step", "model", "optimizer", "curve", "train_time", "loss_start"} - set(ckpt)
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
    except Exception as err:  # torch.load raises many types for a damaged file
        kept = set_aside(paths.checkpoint, "corrupt")
        why = (str(err).strip().splitlines() or [""])[0]
        log(
            f"[{run_id}] checkpoint {paths.checkpoint} cannot be read ({type(err).__name__}: {why}); "
            f"kept as {kept.name}, training from step 0"
        )
        return None
    if ckpt["run_id"] != run_id:
        log(f"[{run_id}] ignoring a checkpoint of another run ({ckpt['run_id']!r})")
        return None
    return ckpt


def exit_preempted(signum: int = signal.SIGTERM):
    """Exit with status 128 + the signal (143 for SIGTERM, 130 for SIGINT) after a preemption or a
    Ctrl-C. In a launcher's worker process (joblib's loky workers) SystemExit would only end the
    task, and the worker would start the sweep's next run and outlive the sweep; so a worker process
    ends itself."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


class Diverged(Exception):
    pass


class Preempted(Exception):
    pass


@torch.no_grad()
def evaluate(model: GPT, eval_x: torch.Tensor, autocast, batch: int) -> float:
    """Mean held-out cross-entropy (nats per token) over the fixed evaluation set."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, eval_x.size(0), batch):
        chunk = eval_x[i : i + batch]
        with autocast():
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
        total += loss.item() * chunk.size(0)
        count += chunk.size(0)
    model.train()
    return total / count


def train_step(
    model: GPT, step_fn, optimizer: torch.optim.Optimizer, batch: torch.Tensor, lr: float, grad_clip: float, autocast
) -> float:
    """One optimizer step on ``batch`` (int64 [B, T+1]: inputs [:, :-1], targets [:, 1:]) at learning
    rate ``lr``, clipping the global gradient norm to ``grad_clip`` (0: no clipping); returns the
    batch's training loss in nats per token. ``step_fn`` is the model or its compiled form."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast():
        _, loss = step_fn(batch[:, :-1], batch[:, 1:])
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def make_optimizer(model: GPT, cfg: DictConfig, lr: float) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices (2-D weights) only, as nanoGPT."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel updates every tensor (CUDA, and CPU since torch 2.4); CPU's foreach path falls
    # back to a loop of per-tensor ops (bench/bench_trainer.py: optimizer step ~3x cheaper fused at d128)
    fused = next(model.parameters()).device.type in ("cpu", "cuda", "mps")
    kwargs = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(groups, lr=lr, betas=(cfg.optim.beta1, cfg.optim.beta2), eps=cfg.optim.eps, **kwargs)


# ---------------------------------------------------------------- the run
def _log(*args) -> None:
    """Progress lines, flushed at once: a worker's lines reach the sweep's log even if it is
    killed next, and they show in real time under parallel launchers."""
    print(*args, flush=True)


def train(cfg: DictConfig, *, log=_log) -> dict[str, Any] | None:
    """Train one run to its budget and return its record (None if another process owns the run)."""
    # 1. plan: every config error surfaces here, before data or compute
    plan = plan_run(cfg)
    paths = RunPaths(Path(cfg.store), plan.run_id)

    # 2. claim
    with run_lock(paths) as owned:
        if not owned:
            log(f"[{plan.run_id}] {plan.run_name}: another process is training this run; skipping")
            return None
        remove_partial_writes(paths.dir)  # of a process killed while writing here
        state = run_state(paths)
        if state in ("completed", "failed"):
            rec = read_record(paths.record)
            log(
                f"[{plan.run_id}] {plan.run_name}: already {rec['status']} (val loss {rec['val_loss']:.4f}); nothing to do"
            )
            return rec
        if state in ("corrupt", "errored"):
            kept = set_aside(paths.record, state)
            log(f"[{plan.run_id}] {plan.run_name}: previous record was {state}; kept as {kept.name}, training again")
        atomic_write_text(paths.config, OmegaConf.to_yaml(cfg, resolve=True))
        return _train_owned(cfg, plan, paths, log)


def _train_owned(cfg: DictConfig, plan: RunPlan, paths: RunPaths, log) -> dict[str, Any]:
    t_start = time.perf_counter()
    started_at = now_iso()
    t = cfg.train

    # 3. set up
    corpus = data_lib.load_corpus(cfg.data)
    if corpus.vocab_size != plan.shape.vocab_size:
        raise ConfigError(f"data: corpus vocab {corpus.vocab_size} differs from the model's {plan.shape.vocab_size}")
    device = pick_device(t.device)
    threads = set_threads(t)
    use_bf16 = t.precision == "bf16" or (t.precision == "auto" and device.type == "cuda")

    def autocast():
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16)

    torch.manual_seed(cfg.seed)
    model = GPT(plan.shape).to(device)
    assert model.num_params() == plan.params and model.num_params(True) == plan.params_non_embedding
    optimizer = make_optimizer(model, cfg, plan.lr)
    step_fn = torch.compile(model) if t.compile else model
    eval_x = torch.from_numpy(data_lib.eval_set(corpus, t.seq_len, t.eval_tokens)).to(device)

    start_step, curve, train_time, loss_start = 0, [], 0.0, None
    window_sum, window_n, ema = 0.0, 0, None  # the training loss since the last curve point; its moving average
    ckpt = load_checkpoint(paths, plan.run_id, device, log)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_step, curve, train_time, loss_start = ckpt["step"], ckpt["curve"], ckpt["train_time"], ckpt["loss_start"]
        window_sum, window_n, ema = ckpt.get("window_sum", 0.0), ckpt.get("window_n", 0), ckpt.get("ema")
        log(f"[{plan.run_id}] resuming from checkpoint at step {start_step}/{plan.steps}")

    group = cfg.sweep or "single"
    tracker = start_tracker(
        cfg.tracking,
        name=plan.run_name,
        group=group,
        run_id=f"{group}-{plan.run_id}",
        tags=[cfg.sweep, plan.budget_label, plan.shape.name],
        config={
            **OmegaConf.to_container(cfg, resolve=True),
            "run_id": plan.run_id,
            "params": plan.params,
            "params_non_embedding": plan.params_non_embedding,
            "tokens": plan.tokens,
            "flops": plan.flops,
        },
        run_dir=paths.dir / "wandb",
    )
    log(
        f"[{plan.run_id}] {plan.run_name}: N={plan.n_budget:,} ({cfg.param_count}), D={plan.tokens:,} tokens, "
        f"{plan.steps} steps, lr {plan.lr:g}, {device.type}, {threads} thread(s)"
    )

    # SIGTERM (a cluster's preemption) or SIGINT (Ctrl-C): finish the current step, checkpoint, exit;
    # a second Ctrl-C stops at once (KeyboardInterrupt; the last periodic checkpoint stays).
    preempt = {"flag": False, "signal": signal.SIGTERM}

    def on_signal(signum, frame):
        if signum == signal.SIGINT and preempt["flag"] and preempt["signal"] == signal.SIGINT:
            raise KeyboardInterrupt
        preempt.update(flag=True, signal=signum)

    previous_handlers = (
        {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)} if _main_thread() else {}
    )

    log_every = max(1, plan.steps // t.log_points)
    eval_steps = {round(plan.steps * (i + 1) / t.evals) - 1 for i in range(t.evals)}
    eval_batch = max(1, min(64, t.batch_size * 4))
    status, reason, val_loss = "completed", "", math.nan
    last_ckpt = time.perf_counter()

    def save_checkpoint(step: int) -> None:
        buf = io.BytesIO()
        torch.save(
            {
                "run_id": plan.run_id,
                "step": step,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "curve": curve,
                "train_time": train_time,
                "loss_start": loss_start,
                "window_sum": window_sum,
                "window_n": window_n,
                "ema": ema,
            },
            buf,
        )
        atomic_write_bytes(paths.checkpoint, buf.getvalue())

    # 4. loop
    try:
        for step in range(start_step, plan.steps):
            t0 = time.perf_counter()
            lr = lr_at(step, plan, cfg.optim.min_lr_ratio)
            batch = torch.from_numpy(data_lib.train_batch(corpus, step, t.batch_size, t.seq_len, cfg.seed)).to(device)
            loss_value = train_step(model, step_fn, optimizer, batch, lr, cfg.optim.grad_clip, autocast)
            train_time += time.perf_counter() - t0

            # divergence: a non-finite loss, or a smoothed loss far above where it started
            if not math.isfinite(loss_value):
                raise Diverged(f"diverged: training loss {loss_value} at step {step}")
            loss_start = loss_value if loss_start is None else loss_start
            ema = loss_value if ema is None else 0.9 * ema + 0.1 * loss_value
            if step >= 10 and ema > t.divergence_factor * loss_start:
                raise Diverged(
                    f"diverged: smoothed training loss {ema:.3f} at step {step} exceeds "
                    f"{t.divergence_factor}x its start ({loss_start:.3f})"
                )
            window_sum, window_n = window_sum + loss_value, window_n + 1

            is_eval = step in eval_steps
            if is_eval or (step + 1) % log_every == 0:
                point = {
                    "step": step + 1,
                    "tokens": (step + 1) * plan.tokens_per_step,
                    "flops": plan.flops * (step + 1) / plan.steps,
                    "train_loss": window_sum / window_n,
                    "val_loss": evaluate(model, eval_x, autocast, eval_batch) if is_eval else math.nan,
                    "lr": lr,
                }
                if is_eval and not math.isfinite(point["val_loss"]):
                    raise Diverged(f"diverged: held-out loss {point['val_loss']} at step {step + 1}")
                curve.append(point)
                window_sum, window_n = 0.0, 0
                tracker.log({k: v for k, v in point.items() if k != "step" and math.isfinite(v)}, step=step + 1)
                if is_eval:
                    val_loss = point["val_loss"]
                    log(
                        f"[{plan.run_id}] step {step + 1}/{plan.steps}  train {point['train_loss']:.4f}  val {val_loss:.4f}"
                    )

            if preempt["flag"] and step + 1 < plan.steps:  # at the last step: finish and record first
                save_checkpoint(step + 1)
                raise Preempted(
                    f"{signal.Signals(preempt['signal']).name} at step {step + 1}/{plan.steps}; "
                    "checkpoint saved, relaunch to resume"
                )
            if (
                t.checkpoint_interval_s
                and time.perf_counter() - last_ckpt > t.checkpoint_interval_s
                and step + 1 < plan.steps
            ):
                save_checkpoint(step + 1)
                last_ckpt = time.perf_counter()
    except Diverged as err:
        status, reason = "failed", str(err)
        log(f"[{plan.run_id}] {reason}; recorded as failed")
    except Preempted as err:
        log(f"[{plan.run_id}] preempted: {err}")
        tracker.finish(failed=True)
        exit_preempted(preempt["signal"])
    except Exception as err:  # an error (out of memory, a bug): recorded, retried on relaunch
        import traceback

        traceback.print_exc()
        status, reason = "failed", f"error: {type(err).__name__}: {err}"
        log(f"[{plan.run_id}] {reason}; recorded as failed (a relaunch retries it)")
    finally:
        for s, previous in previous_handlers.items():
            signal.signal(s, previous)

    # 5. record
    trained_tokens = (curve[-1]["step"] if curve else 0) * plan.tokens_per_step
    record = {
        "schema": SCHEMA,
        "run_id": plan.run_id,
        "sweep": cfg.sweep,
        "status": status,
        "reason": reason,
        "budget_flops": float(cfg.budget),
        "flops": plan.flops,
        "flops_attention": plan.flops_attention,
        "param_count": cfg.param_count,
        "params": plan.params,
        "params_non_embedding": plan.params_non_embedding,
        "tokens": plan.tokens,
        "steps": plan.steps,
        "batch_size": t.batch_size,
        "seq_len": t.seq_len,
        "tokens_trained": trained_tokens,  # = tokens when completed; how far a failed run got
        "shape": plan.shape.name,
        "n_layer": plan.shape.n_layer,
        "d_model": plan.shape.d_model,
        "n_head": plan.shape.n_head,
        "vocab_size": plan.shape.vocab_size,
        "lr": plan.lr,
        "val_loss": val_loss,
        "val_bpb": val_loss / math.log(2) / corpus.bytes_per_token,
        "train_loss": curve[-1]["train_loss"] if curve else math.nan,
        "seed": cfg.seed,
        "corpus": corpus.name,
        "corpus_fingerprint": corpus.fingerprint,
        "entropy_rate": nan_if_none(corpus.entropy_rate),
        "loss_floor": nan_if_none(corpus.loss_floor(t.seq_len)),
        "wall_time_s": time.perf_counter() - t_start,
        "tokens_per_s": trained_tokens / max(train_time, 1e-9),
        "flops_per_s": plan.flops_attention / plan.tokens * trained_tokens / max(train_time, 1e-9),
        "device": str(device),
        "threads": threads,
        "host": socket.gethostname(),
        "code_version": code_version(),
        "torch_version": torch.__version__,
        "architecture": ARCHITECTURE,
        "started_at": started_at,
        "finished_at": now_iso(),
        "corpus_description": corpus.description,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "curve": curve,
    }
    atomic_write_json(paths.record, record)
    paths.checkpoint.unlink(missing_ok=True)
    tracker.summary(
        {
            k: record[k]
            for k in (
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
        }
    )
    tracker.finish(failed=status != "completed")
    log(
        f"[{plan.run_id}] {status}: val loss {val_loss:.4f} nats ({record['val_bpb']:.3f} bits/byte), "
        f"{record['tokens_per_s']:,.0f} tok/s, {record['wall_time_s']:.1f} s"
    )
    if preempt["flag"]:
        name = signal.Signals(preempt["signal"]).name
        log(
            f"[{plan.run_id}] {name} arrived during the last step: the run is recorded; exiting for the "
            f"{'preemption' if name == 'SIGTERM' else 'interrupt'}"
        )
        exit_preempted(preempt["signal"])
    return record


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
