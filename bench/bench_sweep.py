"""Sweep: a sweep's wall time against its ideal, and the share of it spent outside training steps.

    .venv/bin/python bench/bench_sweep.py quick                  # as `make demo` runs it (make bench): 1-thread runs, one per core
    .venv/bin/python bench/bench_sweep.py quick hydra/launcher=basic   # any overrides, passed to `scaling sweep`

The sweep runs for real, from a fresh process (as a user launches it), into a temporary store.
  ideal         Σ over its runs of the FLOPs trained, (6·N + 12·n_layer·d_model·seq_len)·D (each
                record's flops_attention), ÷ this machine's fp32 matmul peak with all cores busy,
                measured just before in this run (bench_peak.all_cores_peak). These are the FLOPs the
                records count (N total, as budgets do), not MFU's model FLOPs
                (scaling.shapes.model_flops_per_token leaves out gpt2's position table, 5-15% of the
                quick sweep's d16-d64 FLOPs): counted that way the ideal, and the efficiency, are lower
  efficiency    ideal ÷ wall time
  in steps      Σ over runs of time in training steps (tokens / tokens_per_s) × the run's threads,
                ÷ cores: the wall time the cores spent stepping
  in runs       Σ (wall_time_s − time in steps) × threads ÷ cores: set-up (corpus, model), held-out
                evaluations, checkpoints, tracking, writing the record
  outside runs  the rest: interpreter and torch imports, Hydra composition, planning, the launcher,
                wandb's finish, and cores left idle while the last runs finish
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the checkout on sys.path)
from common import ROOT, cores, print_header, print_table


def sweep_breakdown(records: list[dict], wall_s: float, n_cores: int) -> dict:
    """Seconds of the sweep's wall time in training steps, in runs outside steps, and outside runs
    (see the module docstring), from the runs' records."""
    in_steps = sum(r["tokens"] / r["tokens_per_s"] * r["threads"] for r in records) / n_cores
    in_runs = sum((r["wall_time_s"] - r["tokens"] / r["tokens_per_s"]) * r["threads"] for r in records) / n_cores
    return {"in_steps": in_steps, "in_runs": in_runs, "outside_runs": wall_s - in_steps - in_runs}


def evaluation_flops(record: dict) -> float:
    """Forward FLOPs of a run's held-out evaluations: evals × eval tokens × (2·N + 4·n_layer·d_model·seq_len)
    (a forward pass is a third of 6·N + 12·L·d·T)."""
    t = record["config"]["train"]
    eval_tokens = t["eval_tokens"] // t["seq_len"] * t["seq_len"]
    per_token = 2 * record["params"] + 4 * record["n_layer"] * record["d_model"] * record["seq_len"]
    return t["evals"] * eval_tokens * per_token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", default="quick", help="sweep name or file (default quick)")
    parser.add_argument("overrides", nargs="*", help="passed to `scaling sweep` (e.g. hydra/launcher=basic)")
    parser.add_argument("--keep", metavar="DIR", help="keep the store in DIR instead of a temporary directory")
    args = parser.parse_args()
    print_header(f"sweep wall time against its ideal: scaling sweep {args.sweep} {' '.join(args.overrides)}".rstrip())

    from bench_peak import all_cores_peak

    peak = all_cores_peak()
    print(
        f"all-core fp32 peak: {peak['best'] / 1e9:.1f} GFLOP/s (one process x {cores()} threads "
        f"{peak['one_process'] / 1e9:.1f}; {cores()} processes x 1 thread {peak['processes'] / 1e9:.1f})",
        flush=True,
    )

    store = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    if args.keep and store.exists() and any(store.iterdir()):
        sys.exit(f"error: --keep {store}: the directory is not empty; a sweep there would skip finished runs")
    command = [str(ROOT / ".venv" / "bin" / "scaling"), "sweep", args.sweep, f"store={store}", *args.overrides]
    print(f"running: {' '.join(command)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    wall = time.perf_counter() - t0
    try:
        if proc.returncode:
            sys.exit(f"error: the sweep failed (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}")
        records = [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]
        report(records, wall, peak["best"], proc.stdout)
    finally:
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)


def report(records: list[dict], wall: float, peak: float, sweep_output: str) -> None:
    launched = next((line for line in sweep_output.splitlines() if line.startswith("launching")), "")
    failed = [r for r in records if r["status"] != "completed"]
    flops = sum(r["flops_attention"] for r in records)
    ideal = flops / peak
    parts = sweep_breakdown(records, wall, cores())
    rows = sorted(
        (
            {
                "shape": r["shape"],
                "budget": r["budget_flops"],
                "threads": r["threads"],
                "steps": r["steps"],
                "wall": r["wall_time_s"],
                "in_steps": r["tokens"] / r["tokens_per_s"],
                "mfu": r["flops_per_s"] / (peak / cores() * r["threads"]) * 100,
                "ktps": r["tokens_per_s"] / 1e3,
            }
            for r in records
        ),
        key=lambda x: (x["budget"], x["shape"]),
    )
    print(f"{launched}")
    print_table(
        rows,
        [
            ("budget", "budget", ".0e"),
            ("shape", "shape", ""),
            ("threads", "thr", "d"),
            ("steps", "steps", "d"),
            ("ktps", "ktok/s", ".1f"),
            ("mfu", "FLOP/s % (all-core peak/core)", ".0f"),
            ("in_steps", "steps s", ".1f"),
            ("wall", "run s", ".1f"),
        ],
    )
    print(
        f"runs: {len(records)} ({len(failed)} failed), FLOPs trained {flops:.3g} "
        f"(evaluations add {sum(map(evaluation_flops, records)) / flops:.1%} in forward passes)"
    )
    print(f"wall time {wall:.1f} s; ideal {ideal:.1f} s at {peak / 1e9:.1f} GFLOP/s -> efficiency {ideal / wall:.1%}")
    print(f"  in training steps  {parts['in_steps']:7.1f} s  {parts['in_steps'] / wall:6.1%}")
    print(
        f"  in runs, outside   {parts['in_runs']:7.1f} s  {parts['in_runs'] / wall:6.1%}  "
        "(set-up, evaluations, checkpoints, tracking, record)"
    )
    print(
        f"  outside runs       {parts['outside_runs']:7.1f} s  {parts['outside_runs'] / wall:6.1%}  "
        "(imports, Hydra, planning, launcher, idle cores at the end)"
    )
    print(
        f"outside training steps: {1 - parts['in_steps'] / wall:.1%} of wall time; load average {common.load_average()}"
    )


if __name__ == "__main__":
    main()
