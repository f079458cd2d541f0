"""A results store drawn from a known law, written the way the trainer and the sweeper write one
(docs/CONTRACTS.md: runs/<run_id>/record.json with its curve, sweep.json with the plan and the
dropped combinations), so plots and reports can be checked against the truth without training."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.fits import laws
from scaling.flops import flops_6nd, tokens_6nd
from scaling.store import SCHEMA, atomic_write_json, run_id

QUICK_BUDGETS = (3e11, 1e12, 3e12)  # the `quick` sweep's budgets (FLOPs)
# A law with losses like the quick sweep's (2-3 nats/token at N ~ 1e4-1e6, D ~ 1e5-1e7), optimum
# N_opt(1e12) ≈ 65k: a = β/(α+β) ≈ 0.46 (Chinchilla's own constants give ~20 nats at these sizes).
SMALL_LAW = {"E": 1.2, "A": 30.0, "B": 60.0, "alpha": 0.35, "beta": 0.30}
SHAPES_PER_BUDGET = 6
CURVE_POINTS = 12


def _record(law: dict, budget: float, shape: str, n: float, rng: np.random.Generator, noise: float) -> dict:
    d = tokens_6nd(budget, n)
    tokens = np.geomspace(d / 50.0, d, CURVE_POINTS)
    losses = laws.chinchilla_loss(n, tokens, **law) * np.exp(noise * rng.standard_normal(CURVE_POINTS))
    identity = {"budget": budget, "shape": shape, "law": law}
    return {
        "schema": SCHEMA,
        "run_id": run_id(identity),
        "sweep": "synthetic",
        "status": "completed",
        "reason": "",
        "budget_flops": budget,
        "flops": flops_6nd(n, d),
        "flops_attention": flops_6nd(n, d),
        "param_count": "total",
        "params": n,
        "params_non_embedding": 0.9 * n,
        "tokens": d,
        "steps": CURVE_POINTS,
        "batch_size": 8,
        "seq_len": 64,
        "shape": shape,
        "n_layer": 2,
        "d_model": 64,
        "n_head": 2,
        "vocab_size": 256,
        "lr": 1e-3,
        "val_loss": float(losses[-1]),
        "val_bpb": float(losses[-1]) / np.log(2),
        "train_loss": float(losses[-1]),
        "seed": 0,
        "corpus": "synthetic-law",
        "corpus_fingerprint": "0123456789abcdef",
        "entropy_rate": np.nan,
        "loss_floor": law["E"],
        "wall_time_s": 1.0,
        "tokens_per_s": d,
        "flops_per_s": flops_6nd(n, d),
        "device": "cpu",
        "threads": 1,
        "code_version": "abc123def456",
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "config": {},
        "curve": [
            {
                "step": i + 1,
                "tokens": float(t),
                "flops": float(flops_6nd(n, t)),
                "train_loss": float(v),
                "val_loss": float(v),
                "lr": 1e-3,
            }
            for i, (t, v) in enumerate(zip(tokens, losses))
        ],
    }


def write_store(
    store: Path,
    law: dict = SMALL_LAW,
    budgets=QUICK_BUDGETS,
    sizes: int = SHAPES_PER_BUDGET,
    noise: float = 0.005,
    seed: int = 0,
    with_failures: bool = True,
    old_plan: bool = True,
) -> dict[str, list]:
    """An IsoFLOP sweep around the law's optimum (sizes log-spaced over N_opt·10^(±1)); with
    ``with_failures`` also one diverged run, one planned run without a record, one dropped and one
    merged combination in sweep.json, and a truncated record file. ``old_plan``: sweep.json as
    written before its ``duplicates`` key (the merged one in ``dropped``, told by its reason).
    Returns what was written: the kept records, failed, missing, dropped."""
    rng = np.random.default_rng(seed)
    records, plan = [], []
    for budget in budgets:
        n_opt, _ = laws.chinchilla_allocation(budget, law["A"], law["B"], law["alpha"], law["beta"])
        for k, n in enumerate(np.geomspace(n_opt / 10, n_opt * 10, sizes)):
            rec = _record(law, budget, f"s{k}", float(np.round(n)), rng, noise)
            records.append(rec)
            plan.append(
                {
                    "run_id": rec["run_id"],
                    "overrides": [f"budget={budget:g}", f"model=s{k}"],
                    "shape": f"s{k}",
                    "budget_flops": budget,
                    "flops": rec["flops"],
                    "params": rec["params"],
                    "tokens": rec["tokens"],
                    "state_at_launch": "new",
                }
            )
    failed, missing, dropped = [], [], []
    if with_failures:
        bad = _record(law, budgets[0], "s-wide", 5e6, rng, noise)
        bad.update(status="failed", reason="diverged: val loss nan at step 7", val_loss=float("nan"))
        failed.append(bad)
        plan.append(
            {
                "run_id": bad["run_id"],
                "overrides": [f"budget={budgets[0]:g}", "model=s-wide"],
                "shape": "s-wide",
                "budget_flops": budgets[0],
                "flops": bad["flops"],
                "params": bad["params"],
                "tokens": bad["tokens"],
                "state_at_launch": "new",
            }
        )
        missing.append(
            {
                "run_id": "feedfacecafe",
                "overrides": [f"budget={budgets[-1]:g}", "model=s-late"],
                "shape": "s-late",
                "budget_flops": budgets[-1],
                "flops": budgets[-1],
                "params": 1e6,
                "tokens": budgets[-1] / 6e6,
                "state_at_launch": "new",
            }
        )
        dropped.append(
            {
                "overrides": [f"budget={budgets[-1]:g}", "model=s-huge"],
                "reason": "needs 9,999,999 tokens but the corpus's training split holds 1,000",
            }
        )
    duplicates = [{"overrides": ["budget=1e12", "model=s-twice"], "same_as": "budget=1e12 model=s-once"}]
    duplicates = duplicates if with_failures else []
    planning = {"dropped": dropped, "duplicates": duplicates}
    if old_plan:
        old = [
            {"overrides": d["overrides"], "reason": f"the same run as {d['same_as']}: planned once"} for d in duplicates
        ]
        planning = {"dropped": dropped + old}
    for rec in records + failed:
        atomic_write_json(store / "runs" / rec["run_id"] / "record.json", rec)
    if with_failures:  # a record cut short (a disk that filled up): read_store lists it among its problems
        (store / "runs" / "0badc0ffee00").mkdir(parents=True)
        (store / "runs" / "0badc0ffee00" / "record.json").write_text('{"schema": 1, "run_id": "0badc0ffee00", "sta')
    atomic_write_json(
        store / "sweep.json",
        {
            "sweep": "synthetic",
            "launched_at": "2026-01-01T00:00:00+00:00",
            "launched_at_unix": 1767225600.0,
            "runs": plan + missing,
            **planning,
        },
    )
    return {"records": records, "failed": failed, "missing": missing, "dropped": dropped}
