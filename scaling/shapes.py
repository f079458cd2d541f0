"""Model shapes as plain data: the named ladder and the aspect-ratio rule behind it.

The rule (one rule for every shape in ``conf/model/``; widths are multiples of the head size)::

    n_layer = max(1, floor(d_model / 32 + 1/2))      aspect ratio d_model / n_layer ≈ 32
    d_head  = 8 below d_model 32, 16 below 128, 32 below 512, 64 from 512 up;  n_head = d_model / d_head
    lr      = 4e-3 · sqrt(32 / d_model)              peak learning rate (smaller models take larger steps)

Kaplan et al. (2020, §3.1) found loss depends only weakly on the aspect ratio over a wide range, so
a fixed ratio gives a fair one-dimensional ladder; width steps of one head size (8/16/32/64) keep neighbours
within about 2× in parameters even at the small end, which IsoFLOP profiles at CPU-sized budgets
need. ``d<width>`` names a shape (``d128`` = 4 layers × 128 wide). The learning rate is written into
each ladder file, so it can be tuned per size (Porian et al. 2024: per-size tuning matters at small
scale). Non-embedding parameters grow as 12·d²·L.

This module imports no torch, so sweeps and the analysis can reason about shapes cheaply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from scaling.errors import ConfigError, Parser
from scaling.flops import flops_per_token_with_attention

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the Hydra config tree (conf/model/ is the ladder)
ASPECT_RATIO = 32  # d_model / n_layer, rounded
WIDTH_STEP = 8
MIN_WIDTH = 16
MAX_WIDTH = 768  # d768: 24 layers, ~1.7e8 non-embedding parameters, the top of the GPU ladder


# The model's architecture, by version: part of every run's identity (scaling/plan.py), so runs of a
# changed architecture never share a run id with older ones. Bump an entry with any change to
# scaling/model.py (gpt2) or scaling/llama.py (llama) that changes what a run computes.
#   gpt2-v1   pre-LN GPT-2, tanh-approximate GELU
#   gpt2-v2   exact (erf) GELU, as nanoGPT
#   llama-v1  pre-RMSNorm, rotary positions, SwiGLU MLP (hidden: swiglu_hidden), no biases
ARCHITECTURES = {"gpt2": "gpt2-v2", "llama": "llama-v1"}
ARCHITECTURE = ARCHITECTURES["gpt2"]  # the default block's (model.arch=gpt2)


@dataclass(frozen=True)
class ModelShape:
    """The architecture hyper-parameters that fix a model's parameter count."""

    n_layer: int
    d_model: int
    n_head: int
    vocab_size: int = 256
    seq_len: int = 128
    name: str = ""
    arch: str = "gpt2"  # model.arch: a key of ARCHITECTURES
    tied_head: bool = True  # the output head shares the token embedding (gpt2: always)

    def __post_init__(self):
        if self.arch not in ARCHITECTURES:
            raise ConfigError(f"model.arch: {self.arch!r} is not valid; valid: {', '.join(ARCHITECTURES)}")
        if self.arch == "gpt2" and not self.tied_head:
            raise ConfigError("model.tied_head: false is not valid with model.arch=gpt2 (always tied); valid: true")
        for key in ("n_layer", "d_model", "n_head", "vocab_size", "seq_len"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"model.{key}: {value!r} is not valid; it must be a positive integer")
        if self.d_model % self.n_head:
            raise ConfigError(
                f"model.n_head: {self.n_head} does not divide model.d_model={self.d_model}; "
                f"valid n_head values are the divisors of {self.d_model}"
            )


def head_dim(d_model: int) -> int:
    return 8 if d_model < 32 else 16 if d_model < 128 else 32 if d_model < 512 else 64


def shape_for_width(
    d_model: int, vocab_size: int = 256, seq_len: int = 128, arch: str = "gpt2", tied_head: bool = True
) -> ModelShape:
    """The ladder's shape of a given width under the aspect-ratio rule (width a multiple of its head size)."""
    if d_model not in ladder_widths():
        raise ConfigError(
            f"d_model: {d_model} is not on the ladder; valid: multiples of its head size "
            f"(8 below 32, 16 below 128, 32 below 512, 64 above) from {MIN_WIDTH} to {MAX_WIDTH}"
        )
    n_layer = max(1, math.floor(d_model / ASPECT_RATIO + 0.5))
    return ModelShape(
        n_layer=n_layer,
        d_model=d_model,
        n_head=d_model // head_dim(d_model),
        vocab_size=vocab_size,
        seq_len=seq_len,
        name=f"d{d_model}",
        arch=arch,
        tied_head=tied_head,
    )


def ladder_widths() -> list[int]:
    """Every width the rule allows: multiples of the head size, 16 … 768."""
    return [d for d in range(MIN_WIDTH, MAX_WIDTH + 1, WIDTH_STEP) if d % head_dim(d) == 0]


def default_lr(d_model: int) -> float:
    """4e-3 · sqrt(32 / d_model), rounded to 2 significant digits."""
    return float(f"{4e-3 * math.sqrt(32 / d_model):.2g}")


def non_embedding_params(n_layer: int, d_model: int) -> int:
    """12·d²·L + 13·d·L + 2·d (see scaling/model.py for the derivation)."""
    return n_layer * (12 * d_model * d_model + 13 * d_model) + 2 * d_model


def total_params(n_layer: int, d_model: int, vocab_size: int, seq_len: int) -> int:
    """non_embedding + V·d + T·d (token and position embeddings; the output head is tied)."""
    return non_embedding_params(n_layer, d_model) + (vocab_size + seq_len) * d_model


def swiglu_hidden(d_model: int) -> int:
    """The llama block's SwiGLU hidden width: 8/3·d rounded to the nearest multiple of 8 (= 8·round(d/3)).
    Its three d×h matrices then hold 3·d·h ≈ 8·d² weights, as GPT-2's 4x MLP (two d×4d): the same
    FLOPs per token (LLaMA, Touvron et al. 2023, §2.2 uses 2/3·4d, rounded up to a multiple of 256)."""
    return 8 * round(d_model / 3)


def llama_non_embedding_params(n_layer: int, d_model: int, vocab_size: int, tied_head: bool = True) -> int:
    """L·(4·d² + 3·d·h + 2·d) + d, plus V·d for an untied head (see scaling/llama.py)."""
    block = 4 * d_model * d_model + 3 * d_model * swiglu_hidden(d_model) + 2 * d_model
    return n_layer * block + d_model + (0 if tied_head else vocab_size * d_model)


def param_counts(shape: ModelShape) -> dict[str, int]:
    """Closed-form parameter counts ``{"total": ..., "non_embedding": ...}`` of the built module:
    `scaling.model.GPT` (arch gpt2) or `scaling.llama.Llama` (arch llama)."""
    if shape.arch == "llama":
        ne = llama_non_embedding_params(shape.n_layer, shape.d_model, shape.vocab_size, shape.tied_head)
        return {"total": ne + shape.vocab_size * shape.d_model, "non_embedding": ne}
    return {
        "total": total_params(shape.n_layer, shape.d_model, shape.vocab_size, shape.seq_len),
        "non_embedding": non_embedding_params(shape.n_layer, shape.d_model),
    }


def lookup_only_params(shape: ModelShape) -> int:
    """Weights a token only looks up, never multiplies: GPT-2's position table (T·d), and an untied
    llama's token embedding (V·d; its separate head multiplies). A tied embedding is also the head's
    matmul, so it is not one."""
    if shape.arch == "llama":
        return 0 if shape.tied_head else shape.vocab_size * shape.d_model
    return shape.seq_len * shape.d_model


def model_flops_per_token(shape: ModelShape) -> float:
    """Model FLOPs per trained token, the numerator of every MFU the benchmarks print: 6·N + 12·L·d·T
    with N the parameters that multiply (total less `lookup_only_params`), as nanoGPT's
    ``estimate_mfu``, which leaves out the position table. Budgets keep C = 6·N·D with the run's
    ``param_count`` (scaling/flops.py): this count is only for rates against a peak."""
    n = param_counts(shape)["total"] - lookup_only_params(shape)
    return flops_per_token_with_attention(n, shape.n_layer, shape.d_model, shape.seq_len)


def nearest_shape(
    target_params: float,
    *,
    kind: str = "non_embedding",
    vocab_size: int = 256,
    seq_len: int = 128,
    arch: str = "gpt2",
    tied_head: bool = True,
) -> ModelShape:
    """The ladder shape whose parameter count (``kind``: non_embedding or total) is nearest
    ``target_params`` in log space."""
    if not (isinstance(target_params, (int, float)) and math.isfinite(target_params) and target_params > 0):
        raise ConfigError(
            f"model.target_params: {target_params!r} is not valid; it must be a positive number of parameters"
        )
    if kind not in ("non_embedding", "total"):
        raise ConfigError(f"param_count: {kind!r} is not valid; valid: total, non_embedding")

    shapes = [shape_for_width(d, vocab_size, seq_len, arch, tied_head) for d in ladder_widths()]
    return min(shapes, key=lambda s: abs(math.log(param_counts(s)[kind] / target_params)))


def ladder_lr(name: str) -> float:
    """The peak learning rate stored with a ladder shape in conf/model/<name>.yaml (the rule's
    value for a width that has no file)."""
    import yaml

    path = CONF_DIR / "model" / f"{name}.yaml"
    if not path.exists():
        return default_lr(int(name[1:]))
    return float(yaml.safe_load(path.read_text())["lr"])


def _shape_overrides(items: list[str]) -> dict:
    """``model.arch=llama model.tied_head=false`` as keyword arguments of `shape_for_width`."""
    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if key == "model.arch" and sep:
            out["arch"] = value
        elif key == "model.tied_head" and value.lower() in ("true", "false"):
            out["tied_head"] = value.lower() == "true"
        else:
            raise ConfigError(f"{item!r} is not a valid override; valid: model.arch=NAME, model.tied_head=true|false")
    ModelShape(1, 8, 1, **out)  # checks the values, naming the key
    return out


def main(argv: list[str]) -> int:
    """`scaling shapes [model.arch=llama] [model.tied_head=false] [--nearest N] [--kind total|non_embedding]`:
    print the ladder (parameter counts of the chosen architecture)."""
    parser = Parser(prog="scaling shapes", description=main.__doc__)
    parser.add_argument("overrides", nargs="*", help="model.arch=gpt2|llama, model.tied_head=true|false")
    parser.add_argument("--nearest", type=float, help="print only the shape nearest this parameter count")
    parser.add_argument("--kind", default="non_embedding", choices=["non_embedding", "total"])
    parser.add_argument("--seq-len", type=int, default=128)
    args = parser.parse_args(argv)
    arch = _shape_overrides(args.overrides)
    if args.nearest is not None:
        shapes = [nearest_shape(args.nearest, kind=args.kind, seq_len=args.seq_len, **arch)]
    else:
        names = sorted((p.stem for p in (CONF_DIR / "model").glob("d*.yaml")), key=lambda n: int(n[1:]))
        shapes = [shape_for_width(int(n[1:]), seq_len=args.seq_len, **arch) for n in names]
    print(f"architecture {ARCHITECTURES[shapes[0].arch]}" + ("" if shapes[0].tied_head else ", untied head"))
    print(f"{'name':<6} {'n_layer':>7} {'d_model':>7} {'n_head':>6} {'non-emb N':>11} {'total N':>11}")
    for s in shapes:
        counts = param_counts(s)
        print(
            f"{s.name:<6} {s.n_layer:>7} {s.d_model:>7} {s.n_head:>6} "
            f"{counts['non_embedding']:>11,} {counts['total']:>11,}"
        )
    return 0
