"""Approach-3 fit: our fit against the exhaustive grid of Besiroglu et al. 2024, on the same data.

    .venv/bin/python bench/bench_fit.py            # ~250 runs, all 4,500 grid starts (a few minutes)
    .venv/bin/python bench/bench_fit.py --grid-starts 300   # a quicker, partial baseline

Data: an IsoFLOP sweep drawn from the published Chinchilla law (analysis.synthetic), 6 budgets
1e18-1e22 FLOPs x 42 sizes, 1% log-normal noise, seed 0. Timed, one after another in this process:
  1. our single fit (`analysis.fits.parametric.fit_parametric`, no bootstrap), median of 3;
  2. our fit + 1,000 bootstrap refits;
  3. the exhaustive baseline: scipy's L-BFGS-B with finite-difference gradients (no jac, default
     tolerances) from every point of the 4,500-point grid, keeping the best — the procedure of
     Besiroglu et al. 2024 — on the same summed Huber objective.
Everything runs with one BLAS thread (as the analysis itself does), so neither side pays for
OpenBLAS threads synchronising on 5-element vectors.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.fits.bootstrap import one_blas_thread  # noqa: E402
from analysis.fits.huber_objective import HuberLogLoss  # noqa: E402
from analysis.fits.parametric import fit_parametric, start_grid  # noqa: E402
from analysis.sources.check import table_from_frame  # noqa: E402
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs  # noqa: E402


def exhaustive_grid(objective: HuberLogLoss, starts: np.ndarray) -> tuple[float, np.ndarray]:
    """Best of L-BFGS-B (finite differences, scipy defaults) from every start, in θ = (e, a, b, α, β)."""

    def value(theta):
        return objective.value_and_grad(objective.to_centered(theta))[0]

    best_value, best_theta = np.inf, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for start in starts:
            res = minimize(value, start, method="L-BFGS-B")
            if res.fun < best_value:
                best_value, best_theta = float(res.fun), res.x
    return best_value, best_theta


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({model}); Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}; {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; "
        f"load average {load} (other work on the machine slows both sides)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid-starts", type=int, default=4500, help="starts of the baseline (default: all 4,500)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples to time (default 1000)")
    args = parser.parse_args()

    runs = isoflop_runs(CHINCHILLA_LAW, np.logspace(18, 22, 6), 42, noise=0.01, seed=0)
    table = table_from_frame(runs, "synthetic")
    objective = HuberLogLoss(table.runs["N"].to_numpy(), table.runs["D"].to_numpy(), table.runs["loss"].to_numpy())
    grid = start_grid()
    starts = (
        grid
        if args.grid_starts >= len(grid)
        else grid[np.random.default_rng(0).choice(len(grid), args.grid_starts, replace=False)]
    )
    with one_blas_thread():
        single_times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fit = fit_parametric(table, resamples=0)
            single_times.append(time.perf_counter() - t0)
        single = statistics.median(single_times)
        t0 = time.perf_counter()
        boot_fit = fit_parametric(table, resamples=args.bootstrap, seed=0)
        with_bootstrap = time.perf_counter() - t0
        t0 = time.perf_counter()
        grid_value, grid_theta = exhaustive_grid(objective, starts)
        grid_time = time.perf_counter() - t0

    partial = "" if len(starts) == len(grid) else f" (a random {len(starts)} of the {len(grid)} starts)"
    e, a, b, alpha, beta = grid_theta
    print(f"runs                         {len(table)} (6 budgets x 42 sizes, Chinchilla law, 1% noise)")
    print(f"our single fit               {single:.3f} s (median of 3: {', '.join(f'{t:.3f}' for t in single_times)})")
    print(
        f"{f'our fit + {args.bootstrap} bootstraps':<29}{with_bootstrap:.2f} s ({boot_fit.bootstrap.failed} failed"
        f"{'; ' + '; '.join(boot_fit.bootstrap.notes) if boot_fit.bootstrap.notes else ''})"
    )
    print(
        f"exhaustive grid              {grid_time:.1f} s ({len(starts)} L-BFGS-B runs, finite-difference gradients"
        f"{partial})"
    )
    print(f"speed ratio                  {grid_time / single:.0f}x (grid / our single fit)")
    print(f"objective, ours              {fit.objective:.12g}")
    print(f"objective, grid              {grid_value:.12g}")
    print(
        f"difference (grid - ours)     {grid_value - fit.objective:.3g} ({(grid_value - fit.objective) / fit.objective:.2g} relative)"
    )
    print(
        f"ours: E={fit.params['E']:.4f} A={fit.params['A']:.2f} B={fit.params['B']:.2f} "
        f"alpha={fit.params['alpha']:.4f} beta={fit.params['beta']:.4f}"
    )
    print(f"grid: E={np.exp(e):.4f} A={np.exp(a):.2f} B={np.exp(b):.2f} alpha={alpha:.4f} beta={beta:.4f}")
    print(f"machine                      {machine()}")


if __name__ == "__main__":
    main()
