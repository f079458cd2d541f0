"""Trainer: tokens/s, achieved FLOP/s and MFU per ladder shape, the project's trainer against the
textbook model — same batches, same threads — in eager and compiled modes, with peak memory.

    .venv/bin/python bench/bench_trainer.py                           # the CPU ladder d32..d256, 1 and 2 threads (~15 min)
    .venv/bin/python bench/bench_trainer.py --shapes d128 --threads 1 --compile-shapes ''  # one shape, one thread count

Variants, timed in one process per (shape, threads), taking turns step by step-block (common.py):
  project   `scaling.model.GPT` stepped by `scaling.train.train_step` with `make_optimizer`: what
            `scaling train` runs each step (batch drawn from the corpus, forward, backward, clip, AdamW)
  textbook  bench/textbook_model.py (separate q/k/v, explicit mask and softmax) with a plain loop:
            torch.optim.AdamW, zero_grad, forward, backward, clip_grad_norm_, step; same batches
  compiled  the project's step with the model under torch.compile (train.compile=true); its compile
            time is reported apart and not in the rate
Definitions:
  FLOPs/token  6·N + 12·n_layer·d_model·seq_len, N the parameters that multiply: the total less the
               position table (PaLM App. B; nanoGPT's estimate_mfu; scaling.shapes.model_flops_per_token)
  MFU          achieved FLOP/s ÷ the fp32 matmul peak at the same thread count, measured in the same
               process just before: best torch.mm rate on square matrices n = 256..2048 (bench_peak.py)
  GEMM ceiling torch.mm rate of the model's largest GEMM, [B·T, d] × [d, 4d], at that thread count
  memory       peak resident set of a fresh process training the variant for 3 steps, above its
               resident set before the model was built (weights, gradients, AdamW state, activations)
Layout (on by default with 2+ cores): the project's tokens/s of one run on all cores against one
single-threaded run per core at once (summed): the measurement behind the sweep's thread and
worker layout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from common import ROOT, cores, interleaved_medians, median, print_header, print_table, rss_bytes

from scaling.flops import flops_6nd

CPU_LADDER = ("d32", "d48", "d64", "d96", "d128", "d160", "d192", "d256")


# ---------------------------------------------------------------- one process: building the variants
def _setup(shape_name: str, batch_size: int, seq_len: int):
    """Shape, corpus, optimizer config and batch source shared by every variant."""
    from omegaconf import OmegaConf

    from scaling import data as data_lib
    from scaling.config import OptimConfig
    from scaling.shapes import ladder_lr, shape_for_width

    shape = shape_for_width(int(shape_name[1:]), vocab_size=256, seq_len=seq_len)
    corpus = data_lib.load_corpus(OmegaConf.load(ROOT / "conf" / "data" / "stdlib.yaml"))
    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    lr = ladder_lr(shape.name)

    def batch(step: int):
        import torch

        return torch.from_numpy(data_lib.train_batch(corpus, step, batch_size, seq_len, 0))

    return shape, cfg, lr, batch


def _variant(name: str, shape, cfg, lr: float, batch):
    """(step function, model) of one variant; each call of the step function trains one step on
    the variant's next batch (the same sequence of batches for every variant)."""
    import torch
    from textbook_model import TextbookGPT

    from scaling.model import GPT
    from scaling.train import make_optimizer, train_step

    torch.manual_seed(0)
    model = GPT(shape)
    counter = iter(range(1 << 62))
    grad_clip = cfg.optim.grad_clip
    if name == "textbook":
        model = TextbookGPT.from_gpt(model)
        optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=lr,
            betas=(cfg.optim.beta1, cfg.optim.beta2),
            eps=cfg.optim.eps,
            weight_decay=cfg.optim.weight_decay,
        )

        def step():
            b = batch(next(counter))
            optimizer.zero_grad()
            _, loss = model(b[:, :-1], b[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            return loss.item()

        return step, model

    optimizer = make_optimizer(model, cfg, lr)
    step_fn = torch.compile(model) if name == "compiled" else model

    def autocast():  # as the trainer's on CPU at fp32: a disabled autocast
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False)

    def step():
        return train_step(model, step_fn, optimizer, batch(next(counter)), lr, grad_clip, autocast)

    return step, model


# Where a step's time goes: each profiled op's self time is charged to the first of these that
# matches its name or an enclosing scope's (autograd node, record_function, custom Function).
TIME_CATEGORIES = (
    ("GELU", ("gelu",)),
    ("attention", ("flash_attention", "scaleddotproduct")),
    ("GEMM", ("aten::mm", "aten::addmm", "aten::bmm")),
    ("LayerNorm", ("layer_norm",)),
    ("loss", ("log_softmax", "nll_loss")),
    ("optimizer", ("optimizer.", "_foreach", "vector_norm", "adamw")),
    ("embedding", ("embedding",)),
)


def _category(event) -> str:
    while event is not None:
        name = event.name.lower()
        for category, needles in TIME_CATEGORIES:
            if any(n in name for n in needles):
                return category
        event = event.cpu_parent
    return "other"


def step_time_shares(step, steps: int = 4) -> dict[str, float]:
    """Fraction of a training step's CPU time in each of TIME_CATEGORIES (torch.profiler, self
    times; the profiler's own overhead inflates the many small ops a little)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    totals: dict[str, float] = {}
    for event in prof.events():
        totals[_category(event)] = totals.get(_category(event), 0.0) + event.self_cpu_time_total
    whole = sum(totals.values())
    return {k: v / whole for k, v in totals.items()}


def measure(
    shape_name: str,
    threads: int,
    batch_size: int,
    seq_len: int,
    variants: list[str],
    seconds_per_round: float,
    rounds: int,
) -> dict:
    """Time the variants of one shape at one thread count, interleaved; rates and MFU."""
    import torch
    from bench_peak import gemm_rate, matmul_peak

    from scaling.shapes import model_flops_per_token, param_counts

    torch.set_num_threads(threads)
    peak = matmul_peak(threads, min_seconds=0.1)["best"]
    shape, cfg, lr, batch = _setup(shape_name, batch_size, seq_len)
    tokens_per_step = batch_size * seq_len
    gemm = gemm_rate(tokens_per_step, shape.d_model, 4 * shape.d_model, min_seconds=0.1)

    steps, models, compile_s = {}, {}, {}
    for name in variants:
        steps[name], models[name] = _variant(name, shape, cfg, lr, batch)
        t0 = time.perf_counter()
        steps[name]()  # warm-up (and, compiled, the compilation)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        steps[name]()
        if name == "compiled":
            compile_s[name] = first - (time.perf_counter() - t0)

    # the variants compute the same function: logits of the untrained copies agree
    check = {}
    if "textbook" in variants:
        from textbook_model import TextbookGPT

        from scaling.model import GPT

        torch.manual_seed(0)
        fresh = GPT(shape)
        x = batch(10**6)[:, :-1]
        with torch.no_grad():
            check["max_logit_diff"] = float((fresh(x)[0] - TextbookGPT.from_gpt(fresh)(x)[0]).abs().max())

    one = {name: median(interleaved_medians({name: steps[name]}, 3)[name]) for name in variants}
    calls = {name: max(1, round(seconds_per_round / one[name])) for name in variants}
    samples = {name: [] for name in variants}
    for r in range(rounds):  # variants take turns, each running ~seconds_per_round of steps
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for name in order:
            samples[name] += interleaved_medians({name: steps[name]}, 1, calls[name])[name]
    counts = param_counts(shape)
    flops_per_token = model_flops_per_token(shape)
    # the GEMMs of the weights (blocks' Linears and the tied head): 6 FLOPs per weight per token
    gemm_flops_per_step = flops_6nd(
        12 * shape.n_layer * shape.d_model**2 + shape.vocab_size * shape.d_model, tokens_per_step
    )
    shares = step_time_shares(steps["project"])
    result = {
        "shape": shape_name,
        "threads": threads,
        "params": counts["total"],
        "peak": peak,
        "gemm": gemm,
        "flops_per_token": flops_per_token,
        "tokens_per_step": tokens_per_step,
        **check,
        "shares": shares,
        "gemm_flops_per_step": gemm_flops_per_step,
        "variants": {},
    }
    for name in variants:
        step_s = median(samples[name])
        tokens_per_s = tokens_per_step / step_s
        result["variants"][name] = {
            "step_s": step_s,
            "tokens_per_s": tokens_per_s,
            "flops_per_s": tokens_per_s * flops_per_token,
            "mfu": tokens_per_s * flops_per_token / peak,
            "spread": (max(samples[name]) - min(samples[name])) / step_s,
            "compile_s": compile_s.get(name),
        }
    return result


def measure_memory(shape_name: str, variant: str, batch_size: int, seq_len: int) -> dict:
    """Peak resident-set growth of this (fresh) process while building and training one variant
    for 3 steps."""
    import torch

    torch.set_num_threads(1)
    shape, cfg, lr, batch = _setup(shape_name, batch_size, seq_len)
    batch(0)
    start = rss_bytes("VmRSS")
    step, _ = _variant(variant, shape, cfg, lr, batch)
    for _ in range(3):
        step()
    return {"memory": rss_bytes("VmHWM") - start}


def layout_worker(shape_name: str, threads: int, batch_size: int, seq_len: int, seconds: float) -> None:
    """Train the project's variant at ``threads`` threads in timed windows: say "ready", then for each
    "go" line on stdin train for ``seconds`` and print that window's tokens/s as JSON; "stop" ends."""
    import torch

    torch.set_num_threads(threads)
    shape, cfg, lr, batch = _setup(shape_name, batch_size, seq_len)
    step, _ = _variant("project", shape, cfg, lr, batch)
    step()
    step()
    print("ready", flush=True)
    while sys.stdin.readline().strip() == "go":
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            step()
            n += 1
        print(json.dumps({"tokens_per_s": n * batch_size * seq_len / (time.perf_counter() - t0)}), flush=True)


# ---------------------------------------------------------------- the parent: one child per measurement
def _child_args(kind: str, *args) -> list[str]:
    return [sys.executable, __file__, "--child", kind, *map(str, args)]


def _json_tail(text: str, what: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{what}: no result (output ended: {text.strip()[-500:]!r})")


def run_child(kind: str, *args) -> dict:
    proc = subprocess.run(_child_args(kind, *args), capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(
            f"{kind} {' '.join(map(str, args))} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return _json_tail(proc.stdout, kind)


def compare_layouts(shape_name: str, batch_size: int, seq_len: int, seconds: float, rounds: int) -> dict:
    """Median tokens/s of one run on every core against the sum of one 1-thread run per core at
    once, the two layouts taking turns for ``rounds`` rounds of ``seconds`` each (the idle side's
    processes wait on stdin meanwhile)."""

    def start(threads: int) -> subprocess.Popen:
        return subprocess.Popen(
            _child_args("worker", shape_name, threads, batch_size, seq_len, seconds),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def window(procs: list[subprocess.Popen]) -> float:
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        return sum(json.loads(p.stdout.readline())["tokens_per_s"] for p in procs)

    one, many = [start(cores())], [start(1) for _ in range(cores())]
    try:
        for p in one + many:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a layout worker for {shape_name} failed (exit {p.wait()})")
        samples = {"one": [], "many": []}
        for _ in range(rounds):
            samples["one"].append(window(one))
            samples["many"].append(window(many))
    finally:
        for p in one + many:
            p.stdin.close()
            p.wait()
    return {k: median(v) for k, v in samples.items()}


def child_main(argv: list[str]) -> None:
    kind, rest = argv[0], argv[1:]
    if kind == "measure":
        shape, threads, batch_size, seq_len, variants, seconds, rounds = rest
        out = measure(
            shape, int(threads), int(batch_size), int(seq_len), variants.split(","), float(seconds), int(rounds)
        )
    elif kind == "memory":
        shape, variant, batch_size, seq_len = rest
        out = measure_memory(shape, variant, int(batch_size), int(seq_len))
    else:
        shape, threads, batch_size, seq_len, seconds = rest
        layout_worker(shape, int(threads), int(batch_size), int(seq_len), float(seconds))
        return
    print(json.dumps(out), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(CPU_LADDER), help="ladder names, comma-separated")
    parser.add_argument("--threads", default=",".join(map(str, sorted({1, cores()}))), help="thread counts")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per step (the config's default 16)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument(
        "--compile-shapes",
        default="d128,d256",
        help="shapes that also get the torch.compile variant (20-40 s of compilation each); '' for none",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory processes")
    parser.add_argument("--no-layout", action="store_true", help="skip the 1-thread-per-core layout runs")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (variants take turns in each)")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds of steps per variant per round")
    args = parser.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    thread_counts = [int(t) for t in args.threads.split(",")]
    compile_shapes = {s.strip() for s in args.compile_shapes.split(",") if s.strip()}
    variants = ["project", "textbook"] + (["compiled"] if compile_shapes & set(shapes) else [])

    def variants_of(shape: str) -> list[str]:
        return [v for v in variants if v != "compiled" or shape in compile_shapes]

    print_header(
        f"trainer throughput: batch {args.batch_size} x seq {args.seq_len} = "
        f"{args.batch_size * args.seq_len:,} tokens/step, fp32"
    )
    print("bf16 not timed: bench_peak.py measures bf16 matmul far below fp32 on CPUs without avx512_bf16/AMX")

    rows, results = [], []
    for threads in thread_counts:
        for shape in shapes:
            r = run_child(
                "measure",
                shape,
                threads,
                args.batch_size,
                args.seq_len,
                ",".join(variants_of(shape)),
                args.seconds,
                args.rounds,
            )
            results.append(r)
            v = r["variants"]
            row = {
                "shape": shape,
                "threads": threads,
                "params": r["params"] / 1e6,
                "peak": r["peak"] / 1e9,
                "gemm": r["gemm"] / r["peak"],
                "diff": r.get("max_logit_diff"),
            }
            for name in v:
                row[f"{name}_tps"] = v[name]["tokens_per_s"] / 1e3
                row[f"{name}_mfu"] = v[name]["mfu"] * 100
            row["gflops"] = v["project"]["flops_per_s"] / 1e9
            row["vs_textbook"] = v["project"]["tokens_per_s"] / v["textbook"]["tokens_per_s"]
            if "compiled" in v:
                row["compiled_vs_eager"] = v["compiled"]["tokens_per_s"] / v["project"]["tokens_per_s"]
                row["compile_s"] = v["compiled"]["compile_s"]
            row["spread"] = max(x["spread"] for x in v.values()) * 100
            rows.append(row)
            print(f"  measured {shape} x {threads} thread(s); load average {common.load_average()}", flush=True)

    columns = [
        ("shape", "shape", ""),
        ("threads", "thr", "d"),
        ("params", "N (M)", ".2f"),
        ("peak", "peak GF/s", ".1f"),
        ("gemm", "GEMM/peak", ".2f"),
        ("project_tps", "project ktok/s", ".1f"),
        ("gflops", "GF/s", ".1f"),
        ("project_mfu", "MFU %", ".1f"),
        ("textbook_tps", "textbook ktok/s", ".1f"),
        ("textbook_mfu", "MFU %", ".1f"),
        ("vs_textbook", "project/textbook", ".2f"),
    ]
    if "compiled" in variants:
        columns += [
            ("compiled_tps", "compiled ktok/s", ".1f"),
            ("compiled_mfu", "MFU %", ".1f"),
            ("compiled_vs_eager", "compiled/eager", ".2f"),
            ("compile_s", "compile s", ".1f"),
        ]
    columns += [("spread", "spread %", ".0f"), ("diff", "logit diff", ".1e")]
    print()
    print_table(rows, columns)
    print(
        "spread: (slowest − fastest round) / median step of the noisiest variant; "
        "logit diff: max |project − textbook| logits at init (same function)"
    )

    print("\nwhere the project's step time goes (torch.profiler self time, %), and its weight GEMMs' rate:")
    share_rows = []
    for r in results:
        row = {"shape": r["shape"], "threads": r["threads"]}
        row.update({k: r["shares"].get(k, 0.0) * 100 for k, _ in TIME_CATEGORIES + (("other", ()),)})
        gemm_s = r["shares"].get("GEMM", 0.0) * r["variants"]["project"]["step_s"]
        row["gemm_eff"] = r["gemm_flops_per_step"] / gemm_s / r["peak"] * 100 if gemm_s else None
        share_rows.append(row)
    print_table(
        share_rows,
        [("shape", "shape", ""), ("threads", "thr", "d")]
        + [(k, k, ".1f") for k, _ in TIME_CATEGORIES + (("other", ()),)]
        + [("gemm_eff", "GEMM rate % of peak", ".0f")],
    )

    if not args.no_memory:
        print("\npeak memory (MiB above a fresh process's resident set: weights, gradients, AdamW state, activations):")
        mem_rows = []
        for shape in shapes:
            row = {"shape": shape}
            for name in variants_of(shape):
                row[name] = run_child("memory", shape, name, args.batch_size, args.seq_len)["memory"] / 2**20
            mem_rows.append(row)
        print_table(mem_rows, [("shape", "shape", "")] + [(n, n, ".0f") for n in variants])

    if not args.no_layout and cores() > 1:
        print(
            f"\nlayout: one run x {cores()} threads against {cores()} runs x 1 thread at once (project, eager; "
            f"median of {args.rounds} alternating windows of {2 * args.seconds:g} s):"
        )
        lay_rows = []
        for shape in shapes:
            rates = compare_layouts(shape, args.batch_size, args.seq_len, 2 * args.seconds, args.rounds)
            lay_rows.append(
                {
                    "shape": shape,
                    "one": rates["one"] / 1e3,
                    "many": rates["many"] / 1e3,
                    "ratio": rates["many"] / rates["one"],
                }
            )
        print_table(
            lay_rows,
            [
                ("shape", "shape", ""),
                ("one", f"1 run x {cores()} thr ktok/s", ".1f"),
                ("many", f"{cores()} runs x 1 thr ktok/s", ".1f"),
                ("ratio", "runs/threads", ".2f"),
            ],
        )
    print(f"\nfinished; load average {common.load_average()}")


if __name__ == "__main__":
    main()
