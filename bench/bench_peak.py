"""Peak: this machine's matmul FLOP/s, per thread count and per core, measured.

    .venv/bin/python bench/bench_peak.py            # fp32 and bf16, 1 .. all threads (~1 minute)

"Peak" throughout the benchmarks is the best rate of a matrix product (``torch.mm`` or ``F.linear``,
whichever is faster) on square fp32 matrices of side 256, 512, 1024 and 2048 (each counted as 2·n³
FLOPs), at a given number of torch threads, best of three timing windows. It is what torch reaches on this CPU on large, friendly GEMMs — the ceiling a
trainer's GEMMs are measured against (MFU), not the silicon's nominal FMA rate.

"All cores busy" (the sweep's ideal) is measured both ways a sweep can fill the machine: one
process with every core's thread, and one single-threaded process per core running at once
(their rates summed); the better is the machine's all-core peak.

bf16 is measured too; it pays only where the CPU has bf16 instructions (avx512_bf16 / AMX).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from common import cores, print_header, print_table

SQUARE_SIZES = (256, 512, 1024, 2048)


def gemm_rate(m: int, k: int, n: int, dtype_name: str = "float32", min_seconds: float = 0.2, windows: int = 3) -> float:
    """Best FLOP/s of an m×k by k×n matrix product (2·m·k·n FLOPs a call) over ``windows`` timing
    windows of at least ``min_seconds`` each, at torch's current thread count, by whichever of
    ``torch.mm`` and ``F.linear`` (the path of a model's Linear layers) is faster for the dtype
    (on CPUs without bf16 instructions, bf16 ``mm`` takes a far slower path than bf16 ``linear``)."""
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    weight = b.t().contiguous()  # F.linear(a, W) = a·Wᵀ, W of shape [n, k]
    out = torch.empty(m, n, dtype=dtype)
    best = 0.0
    for product in (lambda: torch.mm(a, b, out=out), lambda: F.linear(a, weight)):
        product()  # warm: first-call allocation and kernel selection
        for _ in range(windows):
            calls, t0 = 0, time.perf_counter()
            while True:
                product()
                calls += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= min_seconds:
                    break
            best = max(best, 2.0 * m * k * n * calls / elapsed)
    return best


def matmul_peak(threads: int, dtype_name: str = "float32", sizes=SQUARE_SIZES, min_seconds: float = 0.2) -> dict:
    """{"threads", "dtype", "by_size": {n: FLOP/s}, "best": FLOP/s} at ``threads`` torch threads
    (the previous thread count is restored)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        by_size = {n: gemm_rate(n, n, n, dtype_name, min_seconds) for n in sizes}
    finally:
        torch.set_num_threads(before)
    return {"threads": threads, "dtype": dtype_name, "by_size": by_size, "best": max(by_size.values())}


def _worker(n: int, seconds: float) -> None:
    """One single-threaded process of `concurrent_peak`: warm up, say "ready", wait for "go" on
    stdin (sent once every process is ready), count matmuls for ``seconds``, print the rate."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)
    print("ready", flush=True)
    sys.stdin.readline()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.mm(a, b, out=out)
        calls += 1
    print(json.dumps({"flops_per_s": 2.0 * n**3 * calls / (time.perf_counter() - t0)}), flush=True)


def concurrent_peak(processes: int, n: int = 1024, seconds: float = 2.0) -> float:
    """Summed FLOP/s of ``processes`` single-threaded processes multiplying n×n fp32 matrices at the
    same time (how a parallel sweep of 1-thread runs uses the machine)."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(n), str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a concurrent-peak worker failed to start (exit status {p.wait()})")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return sum(json.loads(p.communicate()[0].strip().splitlines()[-1])["flops_per_s"] for p in procs)


def all_cores_peak(one_process: float | None = None, n: int = 1024, seconds: float = 2.0) -> dict:
    """The machine's all-core fp32 peak: the better of one process × all threads (best square size;
    ``one_process`` when already measured) and one 1-thread process per core at once.
    {"one_process", "processes", "best"} in FLOP/s."""
    one = one_process or matmul_peak(cores())["best"]
    many = concurrent_peak(cores(), n, seconds) if cores() > 1 else one
    return {"one_process": one, "processes": many, "best": max(one, many)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-seconds", type=float, default=0.2, help="length of each timing window")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bf16 measurements")
    args = parser.parse_args()
    print_header("matmul peak (torch.mm or F.linear, square matrices, best of 3 windows)")

    thread_counts = sorted({1, cores()})
    rows = [matmul_peak(t, "float32", min_seconds=args.min_seconds) for t in thread_counts]
    if not args.no_bf16:
        rows += [
            matmul_peak(t, "bfloat16", SQUARE_SIZES[:2], args.min_seconds) for t in thread_counts
        ]  # slow where unsupported
    table = []
    for r in rows:
        row = {
            "dtype": r["dtype"],
            "threads": r["threads"],
            "best": r["best"] / 1e9,
            "per_core": r["best"] / 1e9 / r["threads"],
        }
        row.update({str(n): r["by_size"].get(n, float("nan")) / 1e9 for n in SQUARE_SIZES if n in r["by_size"]})
        table.append(row)
    print("GFLOP/s by matrix side n:")
    print_table(
        table,
        [("dtype", "dtype", ""), ("threads", "threads", "d")]
        + [(str(n), f"n={n}", ".1f") for n in SQUARE_SIZES]
        + [("best", "best", ".1f"), ("per_core", "per core", ".1f")],
    )

    fp32 = {r["threads"]: r["best"] for r in rows if r["dtype"] == "float32"}
    print(
        f"fp32 peak per core: {fp32[1] / 1e9:.1f} GFLOP/s on 1 thread; "
        f"{fp32[cores()] / 1e9 / cores():.1f} per core on {cores()} threads "
        f"(scaling {fp32[cores()] / fp32[1]:.2f}x)"
    )
    if not args.no_bf16:
        bf16 = {r["threads"]: r["best"] for r in rows if r["dtype"] == "bfloat16"}
        ratio = bf16[1] / fp32[1]
        print(f"bf16 / fp32 on 1 thread: {ratio:.2f}x -> bf16 {'pays' if ratio > 1.1 else 'does not pay'} on this CPU")
    if cores() > 1:
        peak = all_cores_peak(fp32[cores()])
        print(
            f"all {cores()} cores busy: one process x {cores()} threads {peak['one_process'] / 1e9:.1f} GFLOP/s; "
            f"{cores()} processes x 1 thread (n=1024, summed) {peak['processes'] / 1e9:.1f} GFLOP/s; "
            f"machine peak {peak['best'] / 1e9:.1f} GFLOP/s"
        )


if __name__ == "__main__":
    main()
