"""Packed runs: K same-shape gpt2 runs in one batched step (scaling/packed.py) against the same K
runs trained one after another (scaling.train.train_step), timed in turns in one process.

    .venv/bin/python bench/bench_packed.py                          # d16,d32,d64; K 1,2,4,8; 1 thread
    .venv/bin/python bench/bench_packed.py --shapes d32 --ks 4 --vmap   # + torch.func.vmap's packing

Each variant trains K members (seeds 0..K-1, the ladder's LR, batches from the built-in corpus):
  separate   K models, each a full `scaling train` step (make_optimizer's fused AdamW, clipping)
  packed     one PackedGPT step: forward, backward, per-member clipping, PackedAdamW
  vmap       (--vmap) torch.func.stack_module_state + functional_call under vmap, same optimizer
Definitions as bench/bench_arch.py:
  FLOPs/token  scaling.shapes.model_flops_per_token (6·N + 12·n_layer·d_model·seq_len, N less the position table), per member
  MFU          achieved FLOP/s ÷ the fp32 matmul peak at the same thread count, measured in the
               same process just before (bench_peak.matmul_peak)
  speedup      packed tokens/s ÷ separate tokens/s (the same K, the same rounds)
  spread       (max − min) / median of the packed variant's per-round times
--clock cpu times by this process's CPU time (time.process_time), the peak too: on a machine
that other processes share, it counts the work this process did, not its waits for a core (with
2 threads it sums both threads' time, so a thread idling at a barrier counts only while it spins).
"""

from __future__ import annotations

import argparse
import json
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from common import ROOT, cpu_time_peak, load_average, median, print_header, print_table

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed_rounds(variants: dict, rounds: int, clock) -> dict[str, list[float]]:
    """`common.interleaved_medians` (one sample per round, the variants in rotating turns) on ``clock``."""
    names, samples = list(variants), {n: [] for n in variants}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = clock()
            variants[name]()
            samples[name].append(clock() - t0)
    return samples


def _batches(shape, k: int, batch_size: int):
    """A function of nothing returning the next step's [K, B, T+1] batches (each member its seed's)."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from scaling import data as data_lib

    corpus = data_lib.load_corpus(OmegaConf.load(ROOT / "conf" / "data" / "stdlib.yaml"))
    counter = iter(range(1 << 62))

    def next_batch():
        step = next(counter)
        rows = [data_lib.train_batch(corpus, step, batch_size, shape.seq_len, seed) for seed in range(k)]
        return torch.from_numpy(np.stack(rows))

    return next_batch


def steppers(shape, k: int, batch_size: int, with_vmap: bool) -> dict:
    """{variant: step function training all K members once}."""
    import torch
    from omegaconf import OmegaConf

    from scaling.config import OptimConfig
    from scaling.packed import PackedAdamW, PackedGPT, build_members, clip_per_member
    from scaling.shapes import ladder_lr
    from scaling.train import make_optimizer, train_step

    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    o, lr = cfg.optim, ladder_lr(shape.name)
    lrs = torch.full((k,), lr)
    next_batch = _batches(shape, k, batch_size)
    models = build_members(shape, range(k))
    optimizers = [make_optimizer(m, cfg, lr) for m in models]

    def no_autocast():
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False)

    def separate():
        b = next_batch()
        for i, (m, opt) in enumerate(zip(models, optimizers)):
            train_step(m, m, opt, b[i], lr, o.grad_clip, no_autocast)

    def packed_step(model, params, forward):
        opt = PackedAdamW(params, betas=(o.beta1, o.beta2), eps=o.eps, weight_decay=o.weight_decay)

        def step():
            b = next_batch()
            losses = forward(b[..., :-1], b[..., 1:])
            losses.sum().backward()
            clip_per_member(params, o.grad_clip)
            opt.step(lrs)
            opt.zero_grad()
            return losses.tolist()

        return step

    packed = PackedGPT(build_members(shape, range(k)))
    out = {"separate": separate, "packed": packed_step(packed, packed.params, packed)}
    if with_vmap:
        out["vmap"] = _vmap_step(build_members(shape, range(k)), packed_step)
    return out


def _vmap_step(members, packed_step):
    import warnings

    from torch.func import functional_call, stack_module_state, vmap

    params, buffers = stack_module_state(members)
    params = {name: p.detach().requires_grad_() for name, p in params.items()}
    base = members[0]
    warnings.filterwarnings("ignore", message=".*batching rule.*")  # SDPA falls back to a loop

    def loss(p, b, x, y):
        return functional_call(base, (p, b), (x, y))[1]

    def forward(x, y):
        return vmap(loss)(params, buffers, x, y)

    return packed_step(None, list(params.values()), forward)


def measure(shape_name: str, threads: int, k: int, args) -> dict:
    import torch

    from scaling.shapes import model_flops_per_token, param_counts, shape_for_width

    torch.set_num_threads(threads)
    batch_size, seq_len, clock = args.batch_size, args.seq_len, CLOCKS[args.clock]
    shape = shape_for_width(int(shape_name[1:]), seq_len=seq_len)
    steps = steppers(shape, k, batch_size, args.vmap)
    for step in steps.values():
        step()  # warm-up
    one = {v: median(timed_rounds({v: s}, 2, clock)[v]) for v, s in steps.items()}
    calls = {v: max(1, round(0.25 / one[v])) for v in steps}  # ~0.25 s of steps per turn
    samples = timed_rounds({v: (lambda v=v: [steps[v]() for _ in range(calls[v])]) for v in steps}, args.rounds, clock)
    n = param_counts(shape)["total"]
    per_token = model_flops_per_token(shape)
    rows = {}
    for v in steps:
        step_s = median(samples[v]) / calls[v]
        rows[v] = {
            "tokens_per_s": k * batch_size * seq_len / step_s,
            "spread": (max(samples[v]) - min(samples[v])) / median(samples[v]),
        }
    return {"shape": shape_name, "threads": threads, "k": k, "params": n, "flops_per_token": per_token, **rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="d16,d32,d64")
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vmap", action="store_true", help="also time torch.func.vmap's packing")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    from bench_peak import matmul_peak

    print_header("bench_packed: K runs in one batched step vs K separate steps")
    t0 = time.perf_counter()
    results, rows = [], []
    for threads in map(int, args.threads.split(",")):
        peak = cpu_time_peak(threads) if args.clock == "cpu" else matmul_peak(threads, min_seconds=0.1)["best"]
        print(f"peak fp32 matmul at {threads} thread(s), {args.clock} clock: {peak / 1e9:.1f} GFLOP/s", flush=True)
        for shape_name in args.shapes.split(","):
            for k in map(int, args.ks.split(",")):
                r = measure(shape_name, threads, k, args)
                r["peak"], r["load"] = peak, load_average()
                results.append(r)
                for v in ("separate", "packed", "vmap"):
                    if v in r:
                        rows.append(_row(r, v))
    columns = [("shape", "shape", "s"), ("threads", "threads", "d"), ("k", "K", "d"), ("variant", "variant", "s")]
    columns += [("tok_s", "tokens/s", ",.0f"), ("mfu", "MFU", ".1%"), ("speedup", "× separate", ".2f")]
    print_table(rows, columns + [("spread", "spread", ".0%"), ("load", "load avg", "s")])
    print(f"({time.perf_counter() - t0:.0f} s; peak = best fp32 torch.mm rate at that thread count, same process)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _row(r: dict, variant: str) -> dict:
    v = r[variant]
    return {
        "shape": r["shape"],
        "threads": r["threads"],
        "k": r["k"],
        "variant": variant,
        "tok_s": v["tokens_per_s"],
        "mfu": v["tokens_per_s"] * r["flops_per_token"] / r["peak"],
        "speedup": v["tokens_per_s"] / r["separate"]["tokens_per_s"],
        "spread": v["spread"],
        "load": r["load"].split(",")[0],
    }


if __name__ == "__main__":
    main()
