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
  report      `scaling report` with its defaults (a fit with 200 bootstrap resamples) of a quick-sized
              store (18 runs, 3 budgets, loss curves; tests/synthetic_store.py); target: under 30 s
              (issue #3; tests/test_report.py checks the report itself)
Each command runs in a fresh temporary directory (its store, or the report's output), tracking off.
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
sys.path.insert(0, str(ROOT / "tests"))
from conftest import SECONDS_RUNS  # noqa: E402  (the tests' sweep runs of a few seconds: one home)

TINY_SWEEP = ["tiny", "hydra.sweeper.budgets=[2e10,4e10]", "hydra.sweeper.models=[d32,d48]", *SECONDS_RUNS]
COMMANDS = {  # name -> `scaling` arguments, given a fresh temporary directory (and the quick-sized store)
    "train d16, default budget": lambda tmp: ["train", "model=d16", "tracking=none", f"store={tmp}"],
    "tiny sweep, basic": lambda tmp: ["sweep", *TINY_SWEEP, "hydra/launcher=basic", f"store={tmp}"],
    "tiny sweep, joblib (2 workers)": lambda tmp: [
        "sweep",
        *TINY_SWEEP,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"store={tmp}",
    ],
    "report, quick-sized store": lambda tmp: ["report", tmp.parent / "quick-store", "--out", tmp / "report.html"],
}


def timed(args: list) -> float:
    """Seconds of `scaling ARGS`; exits with its error if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run([SCALING, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"error: scaling {' '.join(map(str, args))} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the commands take turns in each")
    args = parser.parse_args()
    print_header("command-line wall times: a single run, a sweep under two launchers, a report")
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    names = list(COMMANDS)
    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic_store import write_store

    root = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    write_store(root / "quick-store")
    try:
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                tmp = root / f"{r}-{names.index(name)}"
                tmp.mkdir()
                samples[name].append(timed(COMMANDS[name](tmp)))
                shutil.rmtree(tmp)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [{"what": name, "median": median(xs), "min": min(xs), "max": max(xs)} for name, xs in samples.items()]
    print_table(
        rows, [("what", "command", ""), ("median", "median s", ".1f"), ("min", "min s", ".1f"), ("max", "max s", ".1f")]
    )
    single = median(samples[names[0]])
    basic, joblib = median(samples[names[1]]), median(samples[names[2]])
    print(f"- single run under a minute: {'met' if single < 60 else 'missed'} ({single:.1f} s)")
    print(f"- joblib faster than basic: {'met' if joblib < basic else 'missed'} ({basic / joblib:.2f}x)")
    report = median(samples[names[3]])
    print(f"- report under 30 s: {'met' if report < 30 else 'missed'} ({report:.1f} s)")
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
