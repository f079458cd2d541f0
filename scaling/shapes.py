"""Model shapes as plain data: the named ladder and the aspect-ratio rule behind it.

The rule (one rule for every shape in ``conf/model/``)::

    d_model = 32 · n_layer,  d_head = 32  (so n_head = n_layer)

It keeps the aspect ratio d_model / n_layer = 32 fixed, so one number (the depth) names a shape,
and non-embedding parameters grow as 12·d²·L ≈ 12 288·L³. Kaplan et al. (2020, §3.1) found loss
depends only weakly on the aspect ratio over a wide range, so a fixed ratio is a fair one-dimensional
ladder. ``d<width>`` names the shape (``d128`` = 4 layers × 128 wide). The per-shape peak learning
rate lives beside the shape in its YAML file (smaller models tolerate larger rates; Porian et al.
2024 found per-size tuning matters at small scale).

This module imports no torch, so sweeps and the analysis can reason about shapes cheaply.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from scaling.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the Hydra config tree (conf/model/ is the ladder)
ASPECT_RATIO = 32  # d_model / n_layer
HEAD_DIM = 32
MAX_LAYERS = 24    # d768, ~1.7e8 non-embedding parameters: the top of the GPU ladder


@dataclass(frozen=True)
class ModelShape:
    """The architecture hyper-parameters that fix a model's parameter count."""

    n_layer: int
    d_model: int
    n_head: int
    vocab_size: int = 256
    seq_len: int = 128
    name: str = ""

    def __post_init__(self):
        for key in ("n_layer", "d_model", "n_head", "vocab_size", "seq_len"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"model.{key}: {value!r} is not valid; it must be a positive integer")
        if self.d_model % self.n_head:
            raise ConfigError(
                f"model.n_head: {self.n_head} does not divide model.d_model={self.d_model}; "
                f"valid n_head values are the divisors of {self.d_model}")


def shape_for_depth(n_layer: int, vocab_size: int = 256, seq_len: int = 128) -> ModelShape:
    """The ladder's shape of a given depth under the aspect-ratio rule."""
    d = ASPECT_RATIO * n_layer
    return ModelShape(n_layer=n_layer, d_model=d, n_head=d // HEAD_DIM, vocab_size=vocab_size,
                      seq_len=seq_len, name=f"d{d}")


def non_embedding_params(n_layer: int, d_model: int) -> int:
    """12·d²·L + 13·d·L + 2·d (see scaling/model.py for the derivation)."""
    return n_layer * (12 * d_model * d_model + 13 * d_model) + 2 * d_model


def total_params(n_layer: int, d_model: int, vocab_size: int, seq_len: int) -> int:
    return non_embedding_params(n_layer, d_model) + (vocab_size + seq_len) * d_model


def nearest_shape(target_params: float, *, kind: str = "non_embedding", vocab_size: int = 256,
                  seq_len: int = 128) -> ModelShape:
    """The ladder shape whose parameter count (``kind``: non_embedding or total) is nearest
    ``target_params`` in log space."""
    if not (isinstance(target_params, (int, float)) and math.isfinite(target_params) and target_params > 0):
        raise ConfigError(f"model.target_params: {target_params!r} is not valid; it must be a positive number of parameters")
    if kind not in ("non_embedding", "total"):
        raise ConfigError(f"param_count: {kind!r} is not valid; valid: total, non_embedding")

    def count(L: int) -> int:
        s = shape_for_depth(L, vocab_size, seq_len)
        if kind == "total":
            return total_params(L, s.d_model, vocab_size, seq_len)
        return non_embedding_params(L, s.d_model)

    best = min(range(1, MAX_LAYERS + 1), key=lambda L: abs(math.log(count(L) / target_params)))
    return shape_for_depth(best, vocab_size, seq_len)


def ladder_lr(name: str) -> float:
    """The peak learning rate stored with a ladder shape in conf/model/<name>.yaml."""
    import yaml

    path = CONF_DIR / "model" / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"model: no ladder file {str(path)!r}; valid names are the files in {CONF_DIR / 'model'}")
    return float(yaml.safe_load(path.read_text())["lr"])


def main(argv: list[str]) -> int:
    """`scaling shapes [--nearest N] [--kind total|non_embedding]`: print the ladder."""
    parser = argparse.ArgumentParser(prog="scaling shapes", description=main.__doc__)
    parser.add_argument("--nearest", type=float, help="print only the shape nearest this parameter count")
    parser.add_argument("--kind", default="non_embedding", choices=["non_embedding", "total"])
    parser.add_argument("--seq-len", type=int, default=128)
    args = parser.parse_args(argv)
    if args.nearest is not None:
        shapes = [nearest_shape(args.nearest, kind=args.kind, seq_len=args.seq_len)]
    else:
        shapes = [shape_for_depth(L, seq_len=args.seq_len) for L in range(1, MAX_LAYERS + 1)]
    print(f"{'name':<6} {'n_layer':>7} {'d_model':>7} {'n_head':>6} {'non-emb N':>11} {'total N':>11}")
    for s in shapes:
        print(f"{s.name:<6} {s.n_layer:>7} {s.d_model:>7} {s.n_head:>6} "
              f"{non_embedding_params(s.n_layer, s.d_model):>11,} "
              f"{total_params(s.n_layer, s.d_model, s.vocab_size, s.seq_len):>11,}")
    return 0
