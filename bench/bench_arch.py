"""Architectures: the trainer's MFU of the llama block (model.arch=llama) against the GPT-2 block's
at the same width, same batches, same threads, timed in turns in one process.

    .venv/bin/python bench/bench_arch.py                        # d64 and d128, 1 thread (~2 min)
    .venv/bin/python bench/bench_arch.py --shapes d128 --threads 2 --profile
    .venv/bin/python bench/bench_arch.py --cpu-time           # 1 thread, CPU seconds: for a busy machine

Each variant is what `scaling train` runs per step (`scaling.byo.build_model`, `make_optimizer`,
`train_step`, a batch from the built-in corpus). Definitions as bench/bench_trainer.py:
  FLOPs/token  6·N + 12·n_layer·d_model·seq_len, N the parameters that multiply, per arch (model FLOPs:
               scaling.shapes.model_flops_per_token; gpt2's position table is only looked up, so it is
               not counted, as in nanoGPT's estimate_mfu; until 2026-11-25 N was the total, which
               credited gpt2 with 5.2% more FLOPs per token than it does at d64 and 1.7% at d128)
  MFU          achieved FLOP/s ÷ the fp32 matmul peak at the same thread count, measured in the same
               process just before (bench_peak.matmul_peak; with --cpu-time both per CPU second)
  ratio        llama MFU ÷ gpt2 MFU (the issue's bar: ≥ 0.9); the tokens/s ratio is shown beside it
  paired       the MFU ratio round by round (each round times both archs back to back), its median
               and the middle half of the rounds: steadier than the ratio of medians on a busy machine
--profile adds where each arch's step time goes (torch.profiler self times by op family).
"""

from __future__ import annotations

import argparse
import json
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from common import ROOT, cpu_time_peak, interleaved_medians, median, print_header, print_table

ARCHS = ("gpt2", "llama")
OP_FAMILIES = (
    ("GEMM", ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear")),
    ("attention", ("flash_attention", "scaleddotproduct")),
    ("GELU", ("gelu",)),
    ("SiLU·gate", ("silu",)),
    ("LayerNorm", ("layer_norm",)),
    ("RMSNorm", ("rms_norm", "rsqrt", "aten::pow", "aten::mean")),
    ("RoPE", ("aten::cat", "aten::neg", "aten::chunk", "aten::split")),
    ("loss", ("log_softmax", "nll_loss")),
    ("optimizer", ("optimizer.", "_foreach", "vector_norm", "adamw")),
    ("elementwise", ("aten::mul", "aten::add")),
)


def _stepper(arch: str, shape_name: str, batch_size: int, seq_len: int):
    """(step function, shape) training the arch's block of that width as `scaling train` does."""
    import torch
    from omegaconf import OmegaConf

    from scaling import data as data_lib
    from scaling.byo import build_model
    from scaling.config import OptimConfig
    from scaling.shapes import ladder_lr, shape_for_width
    from scaling.train import make_optimizer, train_step

    shape = shape_for_width(int(shape_name[1:]), seq_len=seq_len, arch=arch)
    corpus = data_lib.load_corpus(OmegaConf.load(ROOT / "conf" / "data" / "stdlib.yaml"))
    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    lr = ladder_lr(shape.name)
    torch.manual_seed(0)
    model = build_model(shape)
    optimizer = make_optimizer(model, cfg, lr)
    counter = iter(range(1 << 62))

    def autocast():
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False)

    def step():
        b = torch.from_numpy(data_lib.train_batch(corpus, next(counter), batch_size, seq_len, 0))
        return train_step(model, model, optimizer, b, lr, cfg.optim.grad_clip, autocast)

    return step, shape


def op_shares(step, steps: int = 4) -> dict[str, float]:
    """Fraction of a step's self CPU time per op family (the first family whose needle an op's name,
    or an enclosing scope's, contains)."""
    from torch.profiler import ProfilerActivity, profile

    def family(event) -> str:
        while event is not None:
            name = event.name.lower()
            for fam, needles in OP_FAMILIES:
                if any(n in name for n in needles):
                    return fam
            event = event.cpu_parent
        return "other"

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    totals: dict[str, float] = {}
    for event in prof.events():
        totals[family(event)] = totals.get(family(event), 0.0) + event.self_cpu_time_total
    whole = sum(totals.values())
    return {k: round(v / whole, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def measure(
    shape_name: str, threads: int, batch_size: int, seq_len: int, rounds: int, profile: bool, cpu_time: bool = False
) -> dict:
    import torch
    from bench_peak import matmul_peak

    from scaling.shapes import model_flops_per_token, param_counts

    torch.set_num_threads(threads)
    peak = cpu_time_peak() if cpu_time else matmul_peak(threads, min_seconds=0.1)["best"]
    steps, shapes = {}, {}
    for arch in ARCHS:
        steps[arch], shapes[arch] = _stepper(arch, shape_name, batch_size, seq_len)
        steps[arch]()  # warm-up
    clock = time.process_time if cpu_time else time.perf_counter
    one = {a: median(interleaved_medians({a: steps[a]}, 3, clock=clock)[a]) for a in ARCHS}
    calls = {a: max(1, round(0.5 / one[a])) for a in ARCHS}  # ~0.5 s of steps per turn
    samples = interleaved_medians(
        {a: (lambda a=a: [steps[a]() for _ in range(calls[a])]) for a in ARCHS}, rounds, clock=clock
    )  # the archs take turns, so a burst of load elsewhere hits both
    out = {"shape": shape_name, "threads": threads, "peak": peak, "archs": {}}
    for arch in ARCHS:
        shape = shapes[arch]
        n = param_counts(shape)["total"]
        per_token = model_flops_per_token(shape)
        step_s = median(samples[arch]) / calls[arch]
        tokens_per_s = batch_size * seq_len / step_s
        out["archs"][arch] = {
            "params": n,
            "flops_per_token": per_token,
            "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * per_token / peak,
            "spread": (max(samples[arch]) - min(samples[arch])) / median(samples[arch]),
        }
        if profile:
            out["archs"][arch]["shares"] = op_shares(steps[arch])
    a = out["archs"]
    out["ratio"] = a["llama"]["mfu"] / a["gpt2"]["mfu"]
    out["tokens_ratio"] = a["llama"]["tokens_per_s"] / a["gpt2"]["tokens_per_s"]
    # the same ratio round by round (the two turns of a round are seconds apart, so load that comes
    # and goes hits both): its median, and the middle half of the rounds' ratios
    per_round = sorted((g / calls["gpt2"]) / (ll / calls["llama"]) for g, ll in zip(samples["gpt2"], samples["llama"]))
    flops = a["llama"]["flops_per_token"] / a["gpt2"]["flops_per_token"]
    quart = [per_round[(len(per_round) - 1) * q // 4] * flops for q in (1, 3)]
    out["paired"], out["paired_iqr"] = median(per_round) * flops, quart
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="d64,d128")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time steps by this process's CPU time, not the wall clock (1 thread only): on a shared "
        "machine it leaves out the time other jobs hold the core, so it estimates the idle machine's rates",
    )
    args = parser.parse_args()
    if args.cpu_time and args.threads != "1":
        parser.exit(
            2,
            f"error: --cpu-time needs --threads 1 (got {args.threads}): CPU time is not wall time for several threads\n",
        )
    print_header("bench_arch: llama vs gpt2 block, trainer MFU at the same width")
    results, rows = [], []
    t0 = time.perf_counter()
    for shape_name in args.shapes.split(","):
        for threads in map(int, args.threads.split(",")):
            r = measure(shape_name, threads, args.batch_size, args.seq_len, args.rounds, args.profile, args.cpu_time)
            results.append(r)
            for arch, a in r["archs"].items():
                rows.append(
                    {
                        "shape": shape_name,
                        "threads": threads,
                        "arch": arch,
                        "N": a["params"],
                        "tok_s": a["tokens_per_s"],
                        "mfu": a["mfu"],
                        "ratio": r["ratio"] if arch == "llama" else 1.0,
                        "tok_ratio": r["tokens_ratio"] if arch == "llama" else 1.0,
                        "spread": a["spread"],
                        "paired": r["paired"] if arch == "llama" else None,
                        "iqr": "{:.2f}-{:.2f}".format(*r["paired_iqr"]) if arch == "llama" else None,
                    }
                )
                if "shares" in a:
                    print(
                        f"  {shape_name} t{threads} {arch}: "
                        + ", ".join(f"{k} {v:.0%}" for k, v in a["shares"].items())
                    )
    print_table(
        rows,
        [
            ("shape", "shape", "s"),
            ("threads", "threads", "d"),
            ("arch", "arch", "s"),
            ("N", "N total", ",d"),
            ("tok_s", "tokens/s", ",.0f"),
            ("mfu", "MFU", ".1%"),
            ("ratio", "MFU / gpt2", ".3f"),
            ("tok_ratio", "tok/s / gpt2", ".3f"),
            ("spread", "spread", ".0%"),
            ("paired", "paired MFU / gpt2", ".3f"),
            ("iqr", "middle half", "s"),
        ],
    )
    print(f"({time.perf_counter() - t0:.0f} s; peak = best fp32 torch.mm rate at that thread count, same process)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
