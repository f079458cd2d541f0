"""Approach 1's bootstrap, calibrated: does a's interval cover the true a, and how wide is it against
a calibrated width?

    .venv/bin/python bench/bench_approach1.py                          # 40 seeds x 200 resamples
    .venv/bin/python bench/bench_approach1.py --seeds 10 --resamples 100 --designs ladder,quick

For each design, seeds 0..S-1 each draw a table from a known law and fit approach 1
(`analysis.fits.envelope.fit_envelope`, R resamples, the table's seed), keeping a's estimate and its
95% interval. Per design, over the seeds:
  covered     seeds whose interval holds the true a
  identified  seeds whose a is not flagged unidentified (an interval wider than 0.5, ...)
  bias        mean of a minus the true a
  spread      the seed-to-seed standard deviation of a (ddof 1)
  width       the median interval width
  ratio       width / (4 x spread): a calibrated 95% interval is about 4 spreads wide (±1.96σ), so
              1 is calibrated, above 1 conservative (a bias, as on the quick design, is not in it)
The designs: `ladder` and `quick` are those of the tests' 20-seed checks
(tests/test_isoflop_bracketing.py), defined once in analysis/synthetic.py: `no_floor_ladder`,
3 budgets 1e18/1e20/1e22 x 6 sizes over N_opt·10^(±1) of the Chinchilla law with E = 0, 12 curve
points a run, 0.5% noise; `quick_design`, the quick sweep's budgets and sizes with 8 curve points a
run, from approach 3's law fitted to the demo. The others draw the Chinchilla law (analysis.synthetic): `5x9`
5 budgets 1e18-1e22 x 9 sizes with 12 curve points a run (1% noise on the runs, 0.5% on the
points), `5x9-final` its final points only, `3x6-final` the ladder's final points (with E), `decade`
3 budgets 1e19-1e20 x 6 sizes with curves. One BLAS thread, as the analysis runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from analysis.fits.bootstrap import one_blas_thread  # noqa: E402
from analysis.fits.envelope import fit_envelope  # noqa: E402
from analysis.sources.check import table_from_frame  # noqa: E402
from analysis.synthetic import (  # noqa: E402
    CHINCHILLA_LAW,
    QUICK_LAW,
    isoflop_runs,
    loss_curves,
    no_floor_ladder,
    quick_design,
)


def _chinchilla(budgets, sizes: int, noise: float, curves: bool):
    """A table of the Chinchilla law: ``sizes`` runs a budget, with 12-point curves or final points only."""

    def draw(seed: int):
        runs = isoflop_runs(CHINCHILLA_LAW, budgets, sizes, noise=noise, seed=seed)
        points = loss_curves(runs, CHINCHILLA_LAW, 12, noise=0.005, seed=seed + 1000) if curves else None
        return table_from_frame(runs, "synthetic", curves=points)

    return draw


def _true_a(law: dict) -> float:
    return law["beta"] / (law["alpha"] + law["beta"])  # N_opt ∝ C^a for L = E + A/N^α + B/D^β


# name: (what it is, the table of a seed, the true a)
DESIGNS = {
    "ladder": ("3x6 ladder, curves, E = 0 (tests)", no_floor_ladder, _true_a(CHINCHILLA_LAW)),
    "quick": ("quick sweep's design (tests)", quick_design, _true_a(QUICK_LAW)),
    "5x9": ("5x9, curves", _chinchilla(np.logspace(18, 22, 5), 9, 0.01, True), _true_a(CHINCHILLA_LAW)),
    "5x9-final": ("5x9, final points", _chinchilla(np.logspace(18, 22, 5), 9, 0.01, False), _true_a(CHINCHILLA_LAW)),
    "3x6-final": ("3x6, final points", _chinchilla([1e18, 1e20, 1e22], 6, 0.005, False), _true_a(CHINCHILLA_LAW)),
    "decade": (
        "3 budgets in a decade, 3x6, curves",
        _chinchilla([1e19, 3e19, 1e20], 6, 0.005, True),
        _true_a(CHINCHILLA_LAW),
    ),
}


def study(name: str, seeds: int, resamples: int) -> dict:
    """a's coverage, identification, bias and width against a calibrated width, over ``seeds`` tables."""
    _, draw, true_a = DESIGNS[name]
    values, widths, covered, identified = [], [], 0, 0
    for seed in range(seeds):
        a = fit_envelope(draw(seed), resamples=resamples, seed=seed).estimates["a"]
        values.append(a.value)
        if a.interval is not None:
            widths.append(a.upper - a.lower)
            covered += a.lower <= true_a <= a.upper
        identified += not a.unidentified
    spread = float(np.std(values, ddof=1)) if seeds > 1 else float("nan")
    width = float(np.median(widths)) if widths else float("nan")
    return {
        "design": name,
        "true_a": true_a,
        "seeds": seeds,
        "covered": covered,
        "identified": identified,
        "bias": float(np.mean(values)) - true_a,
        "spread": spread,
        "width": width,
        "ratio": width / (4 * spread),
    }


def table(rows: list[dict]) -> str:
    head = (
        f"{'design':<10} {'true a':>7} {'covered':>8} {'ident.':>7} {'bias':>8} {'spread':>7} {'width':>7} {'ratio':>6}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['design']:<10} {r['true_a']:>7.4f} {r['covered']:>4}/{r['seeds']:<3} {r['identified']:>3}/{r['seeds']:<3} "
            f"{r['bias']:>+8.3f} {r['spread']:>7.4f} {r['width']:>7.3f} {r['ratio']:>6.2f}"
        )
    return "\n".join(lines)


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--seeds", type=int, default=40, help="tables drawn per design (default 40)")
    p.add_argument("--resamples", type=int, default=200, help="bootstrap resamples per fit (default 200)")
    p.add_argument(
        "--designs", default=",".join(DESIGNS), help=f"comma-separated, of {', '.join(DESIGNS)} (default all)"
    )
    args = p.parse_args(argv)
    names = [n for n in args.designs.split(",") if n]
    unknown = [n for n in names if n not in DESIGNS]
    if unknown or args.seeds < 2 or args.resamples < 2:
        p.error(
            f"--designs {','.join(unknown)} unknown (valid: {', '.join(DESIGNS)})"
            if unknown
            else "--seeds and --resamples must be at least 2"
        )
    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), "")
    print(f"== approach 1, a's 95% interval: {args.seeds} seeds x {args.resamples} resamples per design")
    print(f"command: {shlex.join(['bench/bench_approach1.py', *(sys.argv[1:] if argv is None else argv)])}")
    print(
        f"machine: {cpu or platform.machine()}, {os.cpu_count()} CPUs, one BLAS thread; "
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    started, rows = time.perf_counter(), []
    with one_blas_thread():
        for name in names:
            rows.append(study(name, args.seeds, args.resamples))
    print(table(rows))
    for name in names:
        print(f"  {name}: {DESIGNS[name][0]}")
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
