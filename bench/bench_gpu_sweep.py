"""GPU: the `gpu` sweep end to end (all of it, or the budgets of it that fit the time you have), its
wall time against the sum of its runs' ideal times, and where the rest goes.

    python bench/bench_gpu_sweep.py                       # its 1e15 budget: 5 runs, d32-d128
    python bench/bench_gpu_sweep.py --budgets 1e15,1e16   # 11 runs
    python bench/bench_gpu_sweep.py --budgets all         # the whole sweep (~5.7e18 FLOPs: hours)

The sweep is sweeps/gpu.yaml with its grid cut to ``--budgets`` (written to a temporary sweep file;
everything else as the file says: bf16 autocast, train.compile=true, 32 x 1,024 tokens a step,
evaluations of 1M tokens), launched as a user launches it (`scaling sweep`, the basic launcher: one
run after another on the GPU), on a corpus of uniform random ids written first, large enough for
every run's D. Per run, from its record: steps, tokens/s, MFU (attention-inclusive FLOP/s, as the
records count them, over the peak), its wall time and the part of it in training steps (the first
step's compilation included). Then the sweep's
  ideal         Σ over runs of flops_attention (of the tokens trained) ÷ the bf16 matmul peak measured just before
  in steps      Σ tokens ÷ tokens_per_s: the GPU stepping (compilation in the first step included)
  in runs       Σ wall_time_s − in steps: start-up, corpus, evaluations, checkpoints, the record
  outside runs  the rest: the sweep's own start-up, planning, each run's process and imports
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the checkout on sys.path)
from bench_gpu import start
from bench_gpu_sync import random_corpus
from common import ROOT, print_table

GPU_SWEEP = ROOT / "sweeps" / "gpu.yaml"


def cut_sweep(budgets: str, out: Path) -> tuple[Path, dict[float, list[str]]]:
    """sweeps/gpu.yaml with its grid cut to ``budgets`` ("all" or comma-separated, as the grid writes
    them), as a sweep file in ``out``; and that grid."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(GPU_SWEEP)
    grid = {float(k): v for k, v in OmegaConf.to_container(cfg.hydra.sweeper.grid).items()}
    try:
        wanted = list(grid) if budgets == "all" else [float(b) for b in budgets.split(",")]
    except ValueError:
        raise SystemExit(
            f"error: --budgets {budgets!r}: give numbers, comma-separated (e.g. 1e15,1e16), or all"
        ) from None
    unknown = [f"{b:g}" for b in wanted if b not in grid]
    if unknown:
        raise SystemExit(
            f"error: --budgets {', '.join(unknown)}: not in {GPU_SWEEP.name}'s grid ({', '.join(map('{:g}'.format, grid))})"
        )
    cfg.sweep = "gpu-bench"
    cfg.hydra.sweeper.grid = {f"{b:g}": grid[b] for b in wanted}
    path = out / "gpu-bench.yaml"
    OmegaConf.save(cfg, path)
    return path, {b: grid[b] for b in wanted}


def tokens_needed(grid: dict[float, list[str]], vocab: int, seq_len: int) -> int:
    """The most tokens any run of ``grid`` trains (D = C / (6 N), N total), with 5% to spare."""
    from omegaconf import OmegaConf

    from scaling.shapes import total_params

    most = 0.0
    for budget, shapes in grid.items():
        for name in shapes:
            shape = OmegaConf.load(ROOT / "conf" / "model" / f"{name}.yaml")
            most = max(most, budget / (6 * total_params(shape.n_layer, shape.d_model, vocab, seq_len)))
    return int(most * 1.05)


def trained(record: dict) -> float:
    """The share of its planned tokens a run trained (1 when completed; a failed run's, as far as it got)."""
    return record.get("tokens_trained", record["tokens"]) / record["tokens"]


def in_steps(record: dict) -> float:
    """Seconds a run spent in training steps: the tokens it trained at its rate; 0 for a run that
    failed before its first step."""
    rate = record["tokens_per_s"]
    return record["tokens"] * trained(record) / rate if rate > 0 else 0.0


def run_rows(records: list[dict], peak: float) -> list[dict]:
    return sorted(
        (
            {
                "budget": r["budget_flops"],
                "shape": r["shape"],
                "status": r["status"],
                "steps": r["steps"],
                "ktok_s": r["tokens_per_s"] / 1e3,
                "mfu": r["flops_per_s"] / peak * 100,
                "in_steps": in_steps(r),
                "wall": r["wall_time_s"],
                "ideal": r["flops_attention"] * trained(r) / peak,
            }
            for r in records
        ),
        key=lambda x: (x["budget"], x["shape"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="1e15", help="budgets of the gpu grid, comma-separated, or all")
    parser.add_argument("overrides", nargs="*", help="passed to `scaling sweep` (e.g. train.compile=false)")
    args = parser.parse_args()

    peak = start(f"The gpu sweep end to end, budgets {args.budgets}")
    print(f"bf16 matmul peak {peak / 1e12:.0f} TFLOP/s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sweep").mkdir()  # its own folder: Hydra reads folders beside a sweep file as config groups
        sweep, grid = cut_sweep(args.budgets, Path(tmp) / "sweep")
        tokens = tokens_needed(grid, vocab=50304, seq_len=1024)
        t0 = time.perf_counter()
        corpus = random_corpus(Path(tmp) / "corpus", tokens, 50304)
        print(f"corpus: {tokens:,} random training tokens, written in {time.perf_counter() - t0:.0f} s", flush=True)
        store = Path(tmp) / "store"
        cmd = [sys.executable, "-m", "scaling.cli", "sweep", str(sweep), f"data.path={corpus}", "tracking=none"]
        cmd += [f"store={store}", *args.overrides]
        env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}", "PYTHONUNBUFFERED": "1"}
        print(f"running: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.run(cmd, cwd=ROOT, env=env).returncode  # its progress as it goes
        wall = time.perf_counter() - t0
        if code:
            print(f"the sweep exited {code}: the runs it recorded follow")
        records = [json.loads(f.read_text()) for f in sorted(store.glob("runs/*/record.json"))]
    rows = run_rows(records, peak)
    columns = [("budget", "budget", ".0e"), ("shape", "shape", ""), ("status", "status", ""), ("steps", "steps", "d")]
    columns += [("ktok_s", "ktok/s", ",.0f"), ("mfu", "MFU %", ".1f"), ("in_steps", "steps s", ".1f")]
    print_table(rows, [*columns, ("wall", "run s", ".1f"), ("ideal", "ideal s", ".2f")])
    ideal, in_steps = sum(r["ideal"] for r in rows), sum(r["in_steps"] for r in rows)
    in_runs = sum(r["wall"] for r in rows) - in_steps
    print(f"runs: {len(rows)}; wall {wall:.1f} s; Σ ideal {ideal:.1f} s -> ideal/wall {ideal / wall:.1%}")
    for name, part in (("in steps", in_steps), ("in runs", in_runs), ("outside runs", wall - in_steps - in_runs)):
        print(f"  {name:<13} {part:8.1f} s  {part / wall:6.1%}")


if __name__ == "__main__":
    main()
