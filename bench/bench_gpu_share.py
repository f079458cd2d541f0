"""GPU: a sweep's runs one at a time against two at a time on one GPU (`hydra.sweeper.runs_per_gpu`),
end to end through `scaling sweep` and the joblib launcher, against the sum of the runs' ideal times.

    python bench/bench_gpu_share.py                 # bench/gpu-share.yaml: 4 runs at 1e14 FLOPs (~2 min on an H100)
    python bench/bench_gpu_share.py --per-gpu 1,2,4

The sweep is bench/gpu-share.yaml (the gpu sweep's setting at one budget, eager) on a corpus of
random ids written first. Per setting: the sweep's wall time (launch to exit), the runs' records
(status, device slot, GPU, start and end), and ideal = the runs' attention-inclusive FLOPs
(`flops_attention`) ÷ the bf16 matmul peak (bench_gpu.gpu_peak), summed.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-gpu", default="1,2", help="hydra.sweeper.runs_per_gpu values, in turn")
    parser.add_argument("--tokens", type=int, default=14_000_000, help="the random corpus's training tokens")
    args = parser.parse_args()

    import pandas as pd
    import torch

    peak = start("Runs side by side on one GPU, end to end")
    print(f"bf16 matmul peak {peak / 1e12:.0f} TFLOP/s", flush=True)
    torch.cuda.empty_cache()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = random_corpus(Path(tmp) / "corpus", args.tokens, 50304)
        for per_gpu in args.per_gpu.split(","):
            store = Path(tmp) / f"store-{per_gpu}"
            cmd = [sys.executable, "-m", "scaling.cli", "sweep", str(ROOT / "bench" / "gpu-share.yaml")]
            cmd += [f"data.path={corpus}", "hydra/launcher=joblib", f"hydra.sweeper.runs_per_gpu={per_gpu}"]
            cmd += ["tracking=none", f"store={store}"]
            env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode:
                print(f"runs_per_gpu={per_gpu}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
                continue
            records = [json.loads(f.read_text()) for f in sorted(store.glob("runs/*/record.json"))]
            table = pd.DataFrame(records)
            cols = [
                "run_id",
                "shape",
                "status",
                "device_slot",
                "gpu",
                "started_at",
                "finished_at",
                "wall_time_s",
                "tokens_per_s",
            ]
            print(f"\nruns_per_gpu={per_gpu}: wall {wall:.1f} s")
            print(table[[c for c in cols if c in table.columns]].to_string(index=False))
            ideal = float(table.flops_attention.sum()) / peak
            rows.append(
                {
                    "runs_per_gpu": per_gpu,
                    "runs": f"{(table.status == 'completed').sum()}/{len(table)}",
                    "wall_s": f"{wall:.1f}",
                    "runs_wall_sum_s": f"{table.wall_time_s.sum():.1f}",
                    "ideal_s": f"{ideal:.2f}",
                    "ideal/wall": f"{ideal / wall:.1%}",
                    "slots": ",".join(str(s) for s in sorted(table.get("device_slot", pd.Series()).dropna().unique())),
                }
            )
    print()
    print_table(rows, [(k, k, "") for k in rows[0]] if rows else [])


if __name__ == "__main__":
    main()
