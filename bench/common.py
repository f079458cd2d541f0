"""Shared by the benchmarks: the machine's description, the command that ran, peak memory, aligned
tables, and interleaved timing.

Benchmarks print ratios measured within one run (both sides of a comparison timed in the same
process, interleaved round by round), because the absolute numbers of a shared machine move with
whatever else runs on it; the load average is printed with every result for the same reason.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the benchmarks run as scripts: make `scaling` importable from the checkout
    sys.path.insert(0, str(ROOT))
import scaling.train  # noqa: E402,F401  (the trainer's process settings, e.g. OpenMP waiting, before torch loads)
from scaling.machine import usable_cores  # noqa: E402


def cores() -> int:
    """CPUs this process may run on, as the trainer counts them."""
    return usable_cores()


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def machine_description() -> str:
    """CPU, cores, memory, software versions, date and load: enough to tell two results apart."""
    import torch

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in flags]
    return (
        f"{cores()} cores ({cpu_model()}; {', '.join(isa) or 'no avx2'}), {memory_gib():.0f} GiB; "
        f"Python {platform.python_version()}, torch {torch.__version__}; "
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; load average {load_average()}"
    )


def print_header(title: str) -> None:
    """The benchmark's title, the exact command that ran it and the machine."""
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    print(f"== {title}")
    print(f"command: {command}")
    print(f"machine: {machine_description()}", flush=True)


def print_table(rows: Sequence[dict], columns: Sequence[tuple[str, str, str]]) -> None:
    """Rows of dicts as an aligned table; columns are (key, header, format spec)."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([format(row[key], spec) if row.get(key) is not None else "-" for key, _, spec in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip())
    sys.stdout.flush()


# ---------------------------------------------------------------- peak memory
def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux ≥ 4.0: writing 5 to /proc/self/clear_refs);
    False where that is not possible (the peak is then the process's lifetime peak)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_bytes(kind: str = "VmRSS") -> int:
    """Current (VmRSS) or peak (VmHWM) resident set of this process, bytes."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(kind + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_rss_during(fn: Callable[[], object]) -> int:
    """Bytes the resident set grew to above its level before ``fn()`` ran (peak − start)."""
    import gc

    gc.collect()
    start = rss_bytes("VmRSS")
    reset_peak_rss()
    fn()
    return max(0, rss_bytes("VmHWM") - start)


# ---------------------------------------------------------------- timing
def interleaved_medians(
    variants: dict[str, Callable[[], object]],
    rounds: int,
    calls: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each variant, one sample per round, the variants taking turns within each
    round (so a burst of load elsewhere hits every variant, not one); the order rotates by round.
    ``clock``: the wall clock, or e.g. time.process_time (CPU seconds, for single-threaded work)."""
    names = list(variants)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = variants[name]
            t0 = clock()
            for _ in range(calls):
                fn()
            samples[name].append((clock() - t0) / calls)
    return samples


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def cpu_time_peak(
    threads: int | None = None, sizes: Sequence[int] = (256, 512, 1024), min_seconds: float = 0.1
) -> float:
    """bench_peak.matmul_peak's best fp32 torch.mm rate on ``threads`` threads (default: as set), per
    CPU second of this process (both threads' seconds with 2 threads): the peak for benches timed by
    `time.process_time` on a busy machine."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    best = 0.0
    for n in sizes:
        a, b, out = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
        torch.mm(a, b, out=out)
        calls, t0 = 0, time.process_time()
        while time.process_time() - t0 < min_seconds:
            torch.mm(a, b, out=out)
            calls += 1
        best = max(best, 2.0 * n**3 * calls / (time.process_time() - t0))
    return best
