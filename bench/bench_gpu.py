"""GPU: the trainer's tokens/s, achieved FLOP/s and MFU per shape on one CUDA GPU, against the
GPU's measured matmul peak; the project's step against the textbook model, eager and compiled;
peak GPU memory.

    python bench/bench_gpu.py                               # d128..d768 at the gpu sweep's batch (~4 min on an H100)
    python bench/bench_gpu.py --shapes d256 --batch-size 8  # one shape

Setting: the `gpu` sweep's (sweeps/gpu.yaml): bf16 autocast (the trainer's `precision: auto` on
CUDA), batch 32 × 1,024 tokens, vocabulary 50,304; batches of random token ids already on the GPU,
so the figures are the step's own (the trainer adds a host-to-device copy of 32 K int64 ids a step).
Variants, as bench_trainer.py's: `project` (scaling.model.GPT stepped by scaling.train.train_step
with the trainer's fused AdamW and bf16 autocast, loss read back every step as the trainer does),
`compiled` (the same with torch.compile, as train.compile=true), `textbook` (separate q/k/v,
explicit mask and softmax, torch.optim.AdamW default, same autocast).
MFU = achieved FLOP/s (6·N + 12·n_layer·d_model·seq_len per token, N less the position table: the
model FLOPs of scaling.shapes.model_flops_per_token) ÷ the bf16 peak: the best torch.mm rate on
square bf16 matrices of side 4096 and 8192, measured just before.
"""

from __future__ import annotations

import argparse
import time

import common  # noqa: F401  (puts the checkout on sys.path)
from common import print_header, print_table


def cuda_rate(fn, flops: float, min_seconds: float = 0.5) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        fn()
        calls += 1
        if calls % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return flops * calls / (time.perf_counter() - t0)


def gpu_peak(dtype_name: str) -> float:
    import torch

    best = 0.0
    for n in (4096, 8192):
        dtype = getattr(torch, dtype_name)
        a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
        out = torch.empty(n, n, device="cuda", dtype=dtype)
        best = max(best, cuda_rate(lambda: torch.mm(a, b, out=out), 2.0 * n**3))
    return best


def add_setting_args(parser) -> None:
    """The gpu sweep's setting (sweeps/gpu.yaml) as command-line defaults: batch, sequence, vocabulary."""
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50304)


def start(title: str) -> float:
    """Header and GPU line of a GPU bench (SystemExit without CUDA); returns the measured bf16 peak."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit(f"{title}: no CUDA GPU visible to torch")
    torch.backends.cuda.matmul.allow_tf32 = True
    print_header(title)
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    return gpu_peak("bfloat16")


def measure(
    shape_name: str, batch_size: int, seq_len: int, vocab: int, variants: list[str], steps: int, peak: float
) -> list[dict]:
    import torch
    from omegaconf import OmegaConf
    from textbook_model import TextbookGPT

    from scaling.config import OptimConfig
    from scaling.model import GPT
    from scaling.shapes import ladder_lr, model_flops_per_token, param_counts, shape_for_width
    from scaling.train import make_optimizer, train_step

    shape = shape_for_width(int(shape_name[1:]), vocab_size=vocab, seq_len=seq_len)
    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    lr, clip = ladder_lr(shape.name), cfg.optim.grad_clip
    gen = torch.Generator(device="cuda").manual_seed(0)
    batches = [torch.randint(0, vocab, (batch_size, seq_len + 1), device="cuda", generator=gen) for _ in range(8)]
    counts = param_counts(shape)
    fpt = model_flops_per_token(shape)

    def autocast():
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)

    rows = []
    for name in variants:
        torch.manual_seed(0)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        model = GPT(shape).cuda()
        if name == "textbook":
            model = TextbookGPT.from_gpt(model).cuda()
            opt = torch.optim.AdamW(
                model.parameters(),
                lr=lr,
                betas=(cfg.optim.beta1, cfg.optim.beta2),
                eps=cfg.optim.eps,
                weight_decay=cfg.optim.weight_decay,
            )

            def step(b):
                opt.zero_grad()
                with autocast():
                    _, loss = model(b[:, :-1], b[:, 1:])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                opt.step()
                return loss.item()
        else:
            opt = make_optimizer(model, cfg, lr)
            step_fn = torch.compile(model) if name == "compiled" else model

            def step(b):
                return train_step(model, step_fn, opt, b, lr, clip, autocast)

        t0 = time.perf_counter()
        try:
            first_loss = step(batches[0])
        except torch.OutOfMemoryError:  # the textbook model's explicit T x T attention at the large shapes
            del model, opt
            rows.append(
                {
                    "shape": shape_name,
                    "variant": name,
                    "params": f"{counts['total'] / 1e6:.1f}M",
                    "step_ms": "out of GPU memory",
                    "_tok_s": None,
                }
            )
            continue
        torch.cuda.synchronize()
        warm_s = time.perf_counter() - t0
        for i in range(3):
            step(batches[i % 8])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            last_loss = step(batches[i % 8])
        torch.cuda.synchronize()
        step_s = (time.perf_counter() - t0) / steps
        tok_s = batch_size * seq_len / step_s
        rows.append(
            {
                "shape": shape_name,
                "variant": name,
                "params": f"{counts['total'] / 1e6:.1f}M",
                "step_ms": f"{step_s * 1e3:.1f}",
                "tok_s": f"{tok_s / 1e3:,.0f}k",
                "tflops": f"{tok_s * fpt / 1e12:.0f}",
                "mfu": f"{tok_s * fpt / peak:.1%}",
                "mem_gib": f"{torch.cuda.max_memory_allocated() / 2**30:.1f}",
                "first_s": f"{warm_s:.1f}",
                "loss": f"{first_loss:.2f}->{last_loss:.2f}",
                "_tok_s": tok_s,
            }
        )
        del model, opt
    base = {r["variant"]: r["_tok_s"] for r in rows}
    for r in rows:
        if r["_tok_s"] and base.get("textbook"):
            r["vs_textbook"] = f"{r['_tok_s'] / base['textbook']:.2f}x"
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="d128,d256,d512,d768")
    add_setting_args(parser)
    parser.add_argument("--variants", default="project,compiled,textbook")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant (after 4 warm-up steps)")
    args = parser.parse_args()

    peak = start("GPU trainer benchmark")
    tf32 = gpu_peak("float32")
    print(
        f"matmul peak: bf16 {peak / 1e12:.0f} TFLOP/s, fp32 (TF32) {tf32 / 1e12:.0f} TFLOP/s "
        f"(best torch.mm on square n = 4096, 8192)\n"
    )
    cols = [
        (k, k, "")
        for k in (
            "shape",
            "variant",
            "params",
            "step_ms",
            "tok_s",
            "tflops",
            "mfu",
            "vs_textbook",
            "mem_gib",
            "first_s",
            "loss",
        )
    ]
    for shape in args.shapes.split(","):  # a table per shape, printed as it is measured
        print_table(
            measure(shape, args.batch_size, args.seq_len, args.vocab, args.variants.split(","), args.steps, peak), cols
        )
        print(flush=True)


if __name__ == "__main__":
    main()
