"""GPU: the tied head and its loss without the logits in memory. Does a fused linear + cross-entropy
kernel from a library lift a small model's step (what holds d128 under 40% MFU: Benchmarks, 6)?

    python bench/bench_gpu_fused.py                   # d128, the gpu sweep's setting (~3 min on an H100)
    python bench/bench_gpu_fused.py --shapes d128,d256

Libraries (optional, imported if installed; neither is a dependency of the project):
  cce    Apple's Cut Cross-Entropy (`pip install cut-cross-entropy`, Wijmans et al. 2024): Triton
         kernels that compute the loss and its gradients tile by tile, never writing the logits out.
         `exact`: filter_eps=None (every gradient entry computed); `filtered`: the library's default
         "high", which skips gradient blocks whose softmax entries are all below a threshold.
  liger  LinkedIn's Liger kernels (`pip install liger-kernel`): the head and the loss in chunks of
         tokens, each chunk's logits and gradient made during the forward.
Rows: head+loss alone (forward + backward of h·Wᵀ and the mean cross-entropy, bf16, one run's batch)
and the whole training step of `scaling.model.GPT` (`scaling.train.train_step`, bf16 autocast, the
trunk under torch.compile, AdamW), torch's head+loss against each library's. MFU: tokens/s ×
`scaling.shapes.model_flops_per_token` ÷ the bf16 matmul peak measured first. Agreement: each
head+loss's (torch's own included) loss and gradients on bf16 inputs against torch's in fp32 on the
same inputs, upcast (relative max-abs error): what bf16 alone costs is torch's row.
"""

from __future__ import annotations

import argparse

import common  # noqa: F401  (puts the checkout on sys.path)
from bench_gpu import add_setting_args, start
from bench_gpu_pack import timed
from common import print_table


def head_losses() -> dict:
    """name -> fn(h [M, d], w [V, d], y [M]) -> mean loss, for torch and each importable library."""
    import torch.nn.functional as F

    fns = {"torch": lambda h, w, y: F.cross_entropy(F.linear(h, w).float(), y)}
    try:
        from cut_cross_entropy import linear_cross_entropy

        fns["cce exact"] = lambda h, w, y: linear_cross_entropy(h, w, y, filter_eps=None)
        fns["cce filtered"] = lambda h, w, y: linear_cross_entropy(h, w, y)
    except Exception as err:  # noqa: BLE001  (a missing or incompatible library: say which and go on)
        print(f"cut-cross-entropy unavailable: {type(err).__name__}: {err}")
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction

        fns["liger"] = lambda h, w, y: LigerFusedLinearCrossEntropyFunction.apply(h, w, y)[0]
    except Exception as err:  # noqa: BLE001
        print(f"liger-kernel unavailable: {type(err).__name__}: {err}")
    return fns


def agreement(fn, shape, batch_size: int) -> str:
    """Relative max-abs error of loss, dh and dw of ``fn`` (bf16 inputs) against torch in fp32."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device="cuda").manual_seed(1)
    M, d, V = batch_size * shape.seq_len, shape.d_model, shape.vocab_size
    h = torch.randn(M, d, device="cuda", generator=gen).bfloat16()
    w = (0.02 * torch.randn(V, d, device="cuda", generator=gen)).bfloat16()
    y = torch.randint(0, V, (M,), device="cuda", generator=gen)
    out = []
    for f, cast in ((lambda h, w, y: F.cross_entropy(F.linear(h, w), y), torch.float32), (fn, torch.bfloat16)):
        hh, ww = h.to(cast).requires_grad_(), w.to(cast).requires_grad_()
        loss = f(hh, ww, y)
        loss.backward()
        out.append((loss.detach().float(), hh.grad.float(), ww.grad.float()))
    errs = [((a - b).abs().max() / b.abs().max()).item() for a, b in zip(out[1], out[0])]
    return "loss {:.1e}, dh {:.1e}, dw {:.1e}".format(*errs)


def head_step(fn, shape, batch_size: int):
    import torch

    M = batch_size * shape.seq_len
    h = torch.randn(M, shape.d_model, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(shape.vocab_size, shape.d_model, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = torch.randint(0, shape.vocab_size, (M,), device="cuda")
    return lambda: fn(h, w, y).backward()


def model_step(fn, shape, batch_size: int):
    """`train_step` on a GPT whose trunk is compiled and whose head+loss is ``fn`` (torch's compiled with it)."""
    import torch
    from omegaconf import OmegaConf

    from scaling.config import OptimConfig
    from scaling.model import GPT
    from scaling.shapes import ladder_lr
    from scaling.train import make_optimizer, train_step

    cfg = OmegaConf.create({"optim": OmegaConf.structured(OptimConfig)})
    torch.manual_seed(0)
    model = GPT(shape).cuda()
    opt, lr = make_optimizer(model, cfg, ladder_lr(shape.name)), ladder_lr(shape.name)

    def bf16_hidden(idx):
        return model.hidden(idx).bfloat16()

    trunk = torch.compile(bf16_hidden)
    if fn is None:  # torch's head+loss: the whole forward compiled, as `train.compile=true`
        step_fn = torch.compile(model)
    else:

        def step_fn(idx, targets):
            h = trunk(idx)
            return None, fn(h.reshape(-1, h.size(-1)), model.head.weight.bfloat16(), targets.reshape(-1))

    gen = torch.Generator(device="cuda").manual_seed(0)
    batches = [torch.randint(0, shape.vocab_size, (batch_size, shape.seq_len + 1), device="cuda", generator=gen)]

    def autocast():
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)

    return lambda: train_step(model, step_fn, opt, batches[0], lr, cfg.optim.grad_clip, autocast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="d128")
    add_setting_args(parser)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    import torch

    from scaling.shapes import model_flops_per_token, shape_for_width

    peak = start("Fused head and loss on one GPU")
    print(f"bf16 matmul peak {peak / 1e12:.0f} TFLOP/s (best torch.mm on square n = 4096, 8192)", flush=True)
    fns, rows = head_losses(), []
    for name in args.shapes.split(","):
        shape = shape_for_width(int(name[1:]), vocab_size=args.vocab, seq_len=args.seq_len)
        tokens, fpt = args.batch_size * args.seq_len, model_flops_per_token(shape)
        head_flops = 6.0 * tokens * shape.d_model * shape.vocab_size
        for lib, fn in fns.items():
            row = {"shape": name, "head+loss": lib}
            try:
                row["agreement"] = agreement(fn, shape, args.batch_size)
                for compiled in (False, True) if lib == "torch" else (False,):
                    f = torch.compile(fn) if compiled else fn
                    s = timed(head_step(f, shape, args.batch_size), args.steps)
                    row["head ms" + (" (compiled)" if compiled else "")] = f"{s * 1e3:.2f}"
                    row["head % peak" + (" (compiled)" if compiled else "")] = f"{head_flops / s / peak:.1%}"
                torch.cuda.reset_peak_memory_stats()
                s = timed(model_step(None if lib == "torch" else fn, shape, args.batch_size), args.steps)
                row["step ms"] = f"{s * 1e3:.2f}"
                row["MFU"] = f"{tokens * fpt / s / peak:.1%}"
                row["peak GiB"] = f"{torch.cuda.max_memory_allocated() / 2**30:.1f}"
            except Exception as err:  # noqa: BLE001  (a library failing on this GPU is a result: print it)
                row["agreement"] = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:90]}"
            rows.append(row)
            print(row, flush=True)
            torch.cuda.empty_cache()
    cols = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    print()
    print(f"batch {args.batch_size} x {args.seq_len} tokens, vocabulary {args.vocab}")
    print_table([{k: r.get(k, "") for k in cols} for r in rows], [(k, k, "") for k in cols])


if __name__ == "__main__":
    main()
