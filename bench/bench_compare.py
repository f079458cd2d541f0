"""`scaling compare` with 1,000 bootstrap resamples on two synthetic sources: the wall time.

    .venv/bin/python bench/bench_compare.py              # 1,000 resamples, median of 3 repetitions
    .venv/bin/python bench/bench_compare.py --repeats 1

Data: two IsoFLOP sweeps drawn from the published Chinchilla law (analysis.synthetic), the
candidate's with every token worth 1.5 tokens (m = 1.5), 4 budgets 1e18-1e21 FLOPs × 9 sizes, 1%
log-normal noise. Timed: `analysis.compare.compare_inputs` (both approach-3 fits with their
bootstraps, and the comparison) in this process, and `scaling compare --bootstrap 1000` end to end
(a subprocess: imports, reading both CSVs, fitting, the table). No torch is imported.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from analysis.compare import Input, compare_inputs  # noqa: E402
from analysis.sources.check import table_from_frame  # noqa: E402
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs  # noqa: E402
from scaling.machine import usable_cores  # noqa: E402

BUDGETS = np.geomspace(1e18, 1e21, 4)
CANDIDATE = {**CHINCHILLA_LAW, "B": CHINCHILLA_LAW["B"] * 1.5 ** -CHINCHILLA_LAW["beta"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    frames = [isoflop_runs(law, BUDGETS, 9, noise=0.01, seed=s) for s, law in ((1, CHINCHILLA_LAW), (2, CANDIDATE))]
    inputs = [Input(name, table_from_frame(f, name), f) for name, f in zip(("baseline", "candidate"), frames)]
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        comparison = compare_inputs(inputs, resamples=args.resamples, seed=0)[0]
        times.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"{name}.csv" for name in ("baseline", "candidate")]
        for frame, path in zip(frames, paths):
            frame.to_csv(path, index=False)
        scaling = str(Path(sys.executable).with_name("scaling"))
        started = time.perf_counter()
        subprocess.run(
            [scaling, "compare", *map(str, paths), "--bootstrap", str(args.resamples)], check=True, capture_output=True
        )
        cli = time.perf_counter() - started
    row = [r for r in comparison.rows if not r.beyond_fitted_range][-1]
    print(
        f"machine: {platform.processor() or platform.machine()}, {usable_cores()} usable cores, load {os.getloadavg()}"
    )
    print(f"runs: 2 sources × {len(frames[0])} runs; {args.resamples} bootstrap resamples each")
    print(
        f"compare_inputs: median {statistics.median(times):.2f} s of {args.repeats} ({', '.join(f'{t:.2f}' for t in times)})"
    )
    print(f"scaling compare (subprocess, end to end): {cli:.2f} s")
    print(
        f"check: m({row.compute:.3g}) = {row.multiplier.value:.3f} [{row.multiplier.lower:.3f}, {row.multiplier.upper:.3f}] (truth 1.5)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
