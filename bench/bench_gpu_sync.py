"""GPU: where the trainer waits for the device. One `scaling train` run (the gpu sweep's setting on a
corpus of random GPT-2-sized token ids) under torch.profiler and CUDA's sync debug mode, with every
host synchronisation attributed to the part of the run it happened in.

    python bench/bench_gpu_sync.py                     # d128, 207 steps, 8 log points; eager and compiled (~1 min on an H200)
    python bench/bench_gpu_sync.py --compile false --budget 1e14

Parts (each a torch.profiler.record_function range around the trainer's own functions, patched in
this process only):
  step        `Run.batch` + `scaling.train.train_step`: the batch's copy to the GPU, forward,
              backward, clipping, the optimizer (the step loop proper), after the first 3 steps
  warm-up     the same for the first 3 steps (torch.compile compiles in them)
  loop        the rest of `run_loop` between steps (learning rate, `TrainState.observe`, ...)
  log_point   `scaling.train.log_point`: the losses read since the last point, the evaluation
  checkpoint  `TrainState.save`
  other       outside the loop: set-up (model, evaluation set to the GPU), the record
`entered`: the part's ranges in the profile (a step enters two: its batch and its train_step).
Counted per part (the profile starts at the first step after warm-up: earlier parts count warnings
only): the CUDA runtime's host-blocking calls in the profile (cudaStreamSynchronize,
cudaDeviceSynchronize, cudaEventSynchronize, blocking cudaMemcpy) and the warnings of
`torch.cuda.set_sync_debug_mode("warn")` (every synchronizing tensor operation: .item(), .tolist(),
a pageable copy, ...). The step loop is sync-free when both are 0 for `step` and `loop`.
GPU busy: the union of the CUDA kernels' intervals over the wall time from the first step after
warm-up to the loop's end (its log points and evaluations included).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import common  # noqa: F401  (puts the checkout on sys.path)
from bench_gpu import add_setting_args
from common import print_header, print_table

WARMUP = 3  # the first steps (a compiled step compiles in its first, and re-specialises)
PARTS = ("warm-up", "step", "loop", "log_point", "checkpoint", "other")
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def random_corpus(path: Path, tokens: int, vocab: int) -> Path:
    """A nanoGPT-format directory of uniform random uint16 ids (train.bin, val.bin)."""
    import numpy as np

    rng = np.random.default_rng(0)
    path.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.bin", tokens), ("val.bin", max(tokens // 20, 2_000_000))):
        rng.integers(0, vocab, size=n, dtype=np.uint16).tofile(path / name)
    return path


def patched_trainer(part: list[str], record_function, on_steady=lambda: None, on_loop_end=lambda: None):
    """Context: the trainer's functions wrapped to name the part of the run they are (``part[0]``);
    ``on_steady()`` is called once, as the first step after warm-up starts, ``on_loop_end()`` as the
    loop ends."""
    import scaling.train as tr
    from scaling.train_state import TrainState

    def wrap(owner, name, label, warmup=0):
        original, calls = getattr(owner, name), [0]

        def wrapped(*args, **kwargs):
            calls[0] += 1
            here = "warm-up" if calls[0] <= warmup else label
            if warmup and calls[0] == warmup + 1 and name == "train_step":
                on_steady()
            outer, part[0] = part[0], here
            try:
                with record_function(f"part:{here}"):
                    return original(*args, **kwargs)
            finally:
                part[0] = outer
                if name == "run_loop":
                    on_loop_end()

        return owner, name, original, wrapped

    patches = [
        wrap(tr, "run_loop", "loop"),
        wrap(tr, "train_step", "step", WARMUP),
        wrap(tr.Run, "batch", "step", WARMUP),
        wrap(tr, "log_point", "log_point"),
        wrap(TrainState, "save", "checkpoint"),
    ]

    @contextlib.contextmanager
    def patched():
        for owner, name, _, wrapped in patches:
            setattr(owner, name, wrapped)
        try:
            yield
        finally:
            for owner, name, original, _ in patches:
                setattr(owner, name, original)

    return patched()


def innermost_part(ranges: list[tuple[float, float, str]], t: float) -> str:
    """The part whose range holds time ``t`` most tightly ('loop' when none does: the profile covers
    the loop only)."""
    best = None
    for start, end, label in ranges:
        if start <= t <= end and (best is None or end - start < best[1] - best[0]):
            best = (start, end, label)
    return best[2] if best else "loop"


def union_within(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of ``intervals`` clipped to [start, end]."""
    total, reach = 0.0, start
    for a, b in sorted(intervals):
        a, b = max(a, reach), min(b, end)
        if b > a:
            total, reach = total + b - a, b
    return total


def profile_run(overrides: list[str], cuda: bool) -> tuple[dict, dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from scaling.plan import plan_run
    from scaling.train import train
    from scaling.train_app import compose_config

    cfg = compose_config(overrides)
    plan = plan_run(cfg)
    part, warned = ["other"], Counter()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def count_warning(message, *args, **kwargs):
        if "synchroniz" in str(message):
            warned[part[0]] += 1

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = count_warning
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            # profiled from the first step after warm-up on (compilation's traced ops would be millions
            # of events), so set-up and warm-up count sync warnings only
            prof, started = profile(activities=activities), []
            steady = lambda: started or (prof.start(), started.append(True))  # noqa: E731
            done = lambda: started and prof.stop()  # noqa: E731
            with patched_trainer(part, record_function, on_steady=steady, on_loop_end=done):
                record = train(cfg, log=lambda *a: None)
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode("default")
    wall = time.perf_counter() - t0
    events = prof.events()
    # each record_function range once: on CUDA the profile also holds its annotation on the GPU's timeline
    on_cpu = torch.autograd.DeviceType.CPU
    ranges = [
        (e.time_range.start, e.time_range.end, e.name[5:])
        for e in events
        if e.name.startswith("part:") and getattr(e, "device_type", on_cpu) == on_cpu
    ]
    calls, entries = Counter(), Counter(label for _, _, label in ranges)
    steady = [s for s, _, label in ranges if label == "step"]
    calls["warm-up"] = calls["other"] = "-"  # not profiled
    entries["warm-up"] = WARMUP
    loop_end = max((e for _, e, _ in ranges), default=0.0)
    kernels = []
    for e in events:
        if e.name in SYNC_CALLS:
            calls[innermost_part(ranges, e.time_range.start)] += 1
        if cuda and getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            kernels.append((e.time_range.start, e.time_range.end))
    busy = union_within(kernels, min(steady, default=0.0), loop_end)
    window = loop_end - min(steady, default=loop_end)
    summary = {
        "model": cfg.model.get("name", overrides[0]),
        "compile": cfg.train.compile_mode if cfg.train.compile else "false",
        "steps": plan.steps,
        "log_points": entries["log_point"],
        "status": record["status"],
        "wall_s": f"{wall:.1f}",
        "gpu_busy": f"{busy / window:.0%}" if cuda and window > 0 else "n/a",
        "tok_s": f"{record['tokens_per_s']:,.0f}",
    }
    rows = {p: {"part": p, "entered": entries[p], "sync calls": calls[p], "sync warnings": warned[p]} for p in PARTS}
    return summary, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="d128")
    parser.add_argument("--budget", default="3e14")
    add_setting_args(parser)
    parser.add_argument("--log-points", type=int, default=8, help="train.log_points: curve points (host reads)")
    parser.add_argument(
        "--compile",
        default="false,true",
        help="train.compile values to run, in turn, or train.compile_mode values (compiled), e.g. false,true,reduce-overhead",
    )
    parser.add_argument("--device", default="cuda", help="cuda, or cpu to check this script without a GPU")
    args = parser.parse_args()

    import torch

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("bench_gpu_sync: no CUDA GPU visible to torch")
    print_header("Host syncs in the trainer's step loop")
    if cuda:
        print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    summaries = []
    with tempfile.TemporaryDirectory() as tmp:
        from scaling.plan import plan_run
        from scaling.train_app import compose_config

        base = [
            f"model={args.model}",
            f"budget={args.budget}",
            "tracking=none",
            "data=bin",
            f"data.vocab_size={args.vocab}",
            "data.dtype=uint16",
            f"train.batch_size={args.batch_size}",
            f"train.seq_len={args.seq_len}",
            f"train.device={args.device}",
            "train.eval_tokens=262144",
            f"train.log_points={args.log_points}",
        ]
        corpus = random_corpus(Path(tmp) / "corpus", 1_000_000, args.vocab)  # to plan on; then the run's size
        tokens = plan_run(compose_config([*base, f"data.path={corpus}"])).tokens
        random_corpus(corpus, int(tokens * 1.2) + 1_000_000, args.vocab)
        for compiled in args.compile.split(","):
            how = [f"train.compile={compiled}"] if compiled in ("false", "true") else ["train.compile=true"]
            how += [] if compiled in ("false", "true") else [f"train.compile_mode={compiled}"]
            overrides = [*base, f"data.path={corpus}", *how, f"store={tmp}/store-{compiled}"]
            summary, rows = profile_run(overrides, cuda)
            summaries.append(summary)
            print(f"\n{' '.join(how)}: {summary}")
            print_table(list(rows.values()), [(k, k, "") for k in ("part", "entered", "sync calls", "sync warnings")])
    print()
    print_table(summaries, [(k, k, "") for k in summaries[0]])


if __name__ == "__main__":
    main()
