"""GPU: small models, three ways to fill one GPU: packed runs (K members in one batched step,
scaling/packed.py), runs side by side (P processes on one GPU, as `hydra.sweeper.runs_per_gpu`), and
one run alone, eager and compiled. Where a small model's step goes: the tied head and its loss.

    python bench/bench_gpu_pack.py                          # d128, K 1,2,4,8, P 1,2,4 (~3 min on an H100)
    python bench/bench_gpu_pack.py --shape d64 --ks 1,4 --procs 1,2 --batch-size 16

Setting: the gpu sweep's (bf16 autocast, sequences of 1,024 tokens, vocabulary 50,304), batches of
random ids already on the GPU, `--batch-size` sequences per run (each packed member has its own).
  alone      `scaling.train.train_step` on `scaling.model.GPT` (eager; `compiled`: torch.compile)
  packed K   one step of K members: PackedGPT forward under bf16 autocast, backward, per-member
             clipping, PackedAdamW (as `scaling.packed_train.PackedRun.train_step`); its timed steps
             run under torch.cuda.set_sync_debug_mode("error"), so a step that waits for the GPU fails
             (`packed compiled`: the forward under torch.compile)
  procs P    P processes on the GPU, each training its own `alone` model; tokens/s summed
MFU: all runs' tokens/s × scaling.shapes.model_flops_per_token ÷ the bf16 matmul peak measured first
(bench_gpu.gpu_peak). head+loss: forward and backward of the tied head and cross-entropy alone, at
one run's batch, eager and compiled, as a share of `alone`'s step, eager and compiled.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from bench_gpu import add_setting_args, cuda_rate, start
from common import print_table


def timed(step, steps: int, sync_free: bool = False) -> float:
    """Seconds per call of ``step`` after 3 warm-up calls (the first may compile); ``sync_free``:
    the timed calls run under torch.cuda.set_sync_debug_mode("error"), so a host sync in one raises."""
    import torch

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        if sync_free:
            torch.cuda.set_sync_debug_mode("error")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def alone_step(shape, batch_size: int, compiled: bool, seed: int = 0):
    import torch
    from omegaconf import OmegaConf

    from scaling.config import OptimConfig
    from scaling.model import GPT
    from scaling.shapes import ladder_lr
    from scaling.train import make_optimizer, train_step

    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    torch.manual_seed(seed)
    model = GPT(shape).cuda()
    opt, lr = make_optimizer(model, cfg, ladder_lr(shape.name)), ladder_lr(shape.name)
    step_fn = torch.compile(model) if compiled else model
    gen = torch.Generator(device="cuda").manual_seed(seed)
    batches = [torch.randint(0, shape.vocab_size, (batch_size, shape.seq_len + 1), device="cuda", generator=gen)]
    batches *= 4

    def autocast():
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)

    counter = iter(range(1 << 62))
    return lambda: train_step(model, step_fn, opt, batches[next(counter) % 4], lr, cfg.optim.grad_clip, autocast)


def packed_step(shape, k: int, batch_size: int, compiled: bool = False):
    import torch
    from omegaconf import OmegaConf

    from scaling.config import OptimConfig
    from scaling.packed import PackedAdamW, PackedGPT, build_members, clip_per_member
    from scaling.shapes import ladder_lr

    o = OmegaConf.structured(OptimConfig)
    model = PackedGPT(build_members(shape, range(k))).cuda()
    opt = PackedAdamW(model.params, betas=(o.beta1, o.beta2), eps=o.eps, weight_decay=o.weight_decay)
    lrs = torch.full((k,), ladder_lr(shape.name), device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    batch = torch.randint(0, shape.vocab_size, (k, batch_size, shape.seq_len + 1), device="cuda", generator=gen)
    forward = torch.compile(model) if compiled else model

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            losses = forward(batch[..., :-1], batch[..., 1:])
        losses.sum().backward()
        clip_per_member(model.params, o.grad_clip)
        opt.step(lrs)
        opt.zero_grad()
        return losses.detach()

    return step


def head_step(shape, batch_size: int, compiled: bool = False):
    """Forward and backward of the tied head and the loss alone, on one run's batch."""
    import torch
    import torch.nn.functional as F

    h = torch.randn(batch_size * shape.seq_len, shape.d_model, device="cuda", requires_grad=True)
    wte = torch.randn(shape.vocab_size, shape.d_model, device="cuda", requires_grad=True)
    y = torch.randint(0, shape.vocab_size, (batch_size * shape.seq_len,), device="cuda")

    def head(h, wte, y):
        return F.cross_entropy(F.linear(h, wte), y)

    forward = torch.compile(head) if compiled else head

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = forward(h, wte, y)
        loss.backward()

    return step


def _proc(shape, batch_size: int, seconds: float, start, out) -> None:
    step = alone_step(shape, batch_size, compiled=False)
    for _ in range(3):
        step()
    start.wait()
    out.put(cuda_rate(step, batch_size * shape.seq_len, seconds))  # tokens/s


def side_by_side(shape, batch_size: int, procs: int, seconds: float) -> float:
    """Summed tokens/s of ``procs`` processes each training its own model on the GPU at once."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_proc, args=(shape, batch_size, seconds, start, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    rates = [out.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    return sum(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="d128")
    add_setting_args(parser)
    parser.add_argument("--ks", default="1,2,4,8")
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--packed-compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per side-by-side process count")
    args = parser.parse_args()

    import torch

    from scaling.shapes import model_flops_per_token, shape_for_width

    peak = start("Small models on one GPU: packed, side by side, alone")
    print(f"bf16 matmul peak {peak / 1e12:.0f} TFLOP/s (best torch.mm on square n = 4096, 8192)", flush=True)
    shape = shape_for_width(int(args.shape[1:]), vocab_size=args.vocab, seq_len=args.seq_len)
    fpt, tokens = model_flops_per_token(shape), args.batch_size * args.seq_len
    rows = []

    def row(variant: str, runs: int, seconds_per_step: float | None, note: str = "") -> None:
        tok_s = runs * tokens / seconds_per_step if seconds_per_step else None
        rows.append(
            {
                "variant": variant,
                "runs": runs,
                "step_ms": f"{seconds_per_step * 1e3:.1f}" if seconds_per_step else note,
                "tok_s": f"{tok_s / 1e3:,.0f}k" if tok_s else "",
                "mfu": f"{tok_s * fpt / peak:.1%}" if tok_s else "",
                "mem_gib": f"{torch.cuda.max_memory_allocated() / 2**30:.1f}",
            }
        )
        print(rows[-1], flush=True)

    alone_s = {}
    for compiled in (False, True):
        torch.cuda.reset_peak_memory_stats()
        alone_s[compiled] = timed(alone_step(shape, args.batch_size, compiled), args.steps)
        row("alone compiled" if compiled else "alone", 1, alone_s[compiled])
    for compiled in (False, True):
        head_s = timed(head_step(shape, args.batch_size, compiled), args.steps)
        what = "compiled" if compiled else "eager"
        print(f"head+loss alone, {what}: {head_s * 1e3:.1f} ms = {head_s / alone_s[compiled]:.0%} of the {what} step")
    for compiled in [False, True] if args.packed_compile else [False]:
        for k in (int(x) for x in args.ks.split(",")):
            name = f"packed{' compiled' if compiled else ''} K={k}"
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            try:
                row(name, k, timed(packed_step(shape, k, args.batch_size, compiled), args.steps, sync_free=True))
            except torch.OutOfMemoryError:
                row(name, k, None, "out of GPU memory")
            except RuntimeError as err:  # a host sync in the step, under sync debug mode "error"
                row(name, k, None, f"failed: {str(err).splitlines()[0][:100]}")
    torch.cuda.empty_cache()
    for p in (int(x) for x in args.procs.split(",") if x):
        tok_s = side_by_side(shape, args.batch_size, p, args.seconds)
        row(f"procs P={p}", p, p * tokens / tok_s)
    print()
    print(f"{shape.name}: {fpt / 1e6:.1f} MFLOPs per token; batch {args.batch_size} x {args.seq_len} per run")
    print_table(rows, [(k, k, "") for k in rows[0]])


if __name__ == "__main__":
    main()
