"""Command line: wall times the tests check only as behaviour (a test asserts no timing).

    .venv/bin/python bench/bench_cli.py             # both, 3 rounds
    .venv/bin/python bench/bench_cli.py --rounds 1

  single run  `scaling train model=d16` at the default budget (1e11 FLOPs, 1.8M tokens) on the
              built-in corpus, from a fresh process, as a user's first run; target: under a minute
              on the 2-core CI machine (tests/test_train.py checks the run and its record)
  launchers   one 4-run tiny sweep (d32, d48 at 2e10 and 4e10 FLOPs) under the basic launcher (one
              run at a time on every core) and under joblib (two single-threaded runs at once), the
              two taking turns round by round; target: joblib faster (README, Benchmarks, Layout:
              two 1-thread runs beat one 2-thread run; tests/test_sweeps.py checks that both give
              the same runs and losses, and joblib's layout)
Each command runs into a fresh temporary store, with tracking off.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common  # noqa: F401  (puts the checkout on sys.path)
from common import ROOT, load_average, median, print_header, print_table

SCALING = str(Path(sys.executable).with_name("scaling"))
TINY_SWEEP = [
    "tiny",
    "hydra.sweeper.budgets=[2e10,4e10]",
    "hydra.sweeper.models=[d32,d48]",
    "hydra.sweeper.tokens_per_param=[0.5,20000]",
    "train.seq_len=64",
    "train.batch_size=8",
    "train.min_steps=20",
    "train.eval_tokens=2048",
    "train.evals=1",
    "train.checkpoint_interval_s=0",
]
COMMANDS = {
    "train d16, default budget": ["train", "model=d16", "tracking=none"],
    "tiny sweep, basic": ["sweep", *TINY_SWEEP, "hydra/launcher=basic"],
    "tiny sweep, joblib (2 workers)": ["sweep", *TINY_SWEEP, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
}


def timed(args: list[str]) -> float:
    """Seconds of `scaling ARGS store=<fresh temporary store>`; exits with its error if it fails."""
    store = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([SCALING, *args, f"store={store}"], cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(store, ignore_errors=True)
    if proc.returncode:
        sys.exit(f"error: scaling {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the commands take turns in each")
    args = parser.parse_args()
    print_header("command-line wall times: a single run, and a sweep under two launchers")
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    names = list(COMMANDS)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(timed(COMMANDS[name]))
    rows = [{"what": name, "median": median(xs), "min": min(xs), "max": max(xs)} for name, xs in samples.items()]
    print_table(
        rows, [("what", "command", ""), ("median", "median s", ".1f"), ("min", "min s", ".1f"), ("max", "max s", ".1f")]
    )
    single = median(samples[names[0]])
    basic, joblib = median(samples[names[1]]), median(samples[names[2]])
    print(f"- single run under a minute: {'met' if single < 60 else 'missed'} ({single:.1f} s)")
    print(f"- joblib faster than basic: {'met' if joblib < basic else 'missed'} ({basic / joblib:.2f}x)")
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
