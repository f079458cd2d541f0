"""Mixtures: `data=mixture`, training batches drawn by weight from several prepared corpora.

    scaling train data=mixture 'data.mixture={web: {path: data/web, weight: 0.7}, code: {path: data/code, weight: 0.3}}'

Each part is a prepared directory (`scaling prepare`'s output, or nanoGPT's: train.bin and val.bin;
its manifest.json, when present, gives dtype, vocabulary and bytes per token), read as `data=bin`
reads it. Weights are normalised to sum to 1. Batch ``step`` draws, with
``np.random.default_rng([seed, step])``, each sequence's part by weight, then each part's windows
uniformly within that part's training split: a pure function of (seed, step), so a resumed run sees
exactly the batches it would have seen. The corpus fingerprint is sha256 over the parts' names,
fingerprints and normalised weights; its ``val`` split is the parts' held-out splits joined in name
order (compare mixtures on a fixed evaluation set: scaling.evalsets). numpy only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from scaling.errors import ConfigError, DataError

PART_KEYS = ("path", "weight")


def _manifest(path: Path) -> dict[str, Any]:
    from scaling.manifest import read_manifest

    return (read_manifest(path, "data.mixture") or {}) if path.is_dir() else {}


def check_mixture(cfg: dict) -> None:
    """Every part a directory with train.bin and val.bin and a weight > 0; one vocabulary (data.vocab_size,
    else the manifests'). Fills cfg["vocab_size"] and each part's dtype; ConfigError / DataError."""
    parts = cfg["mixture"]
    if not isinstance(parts, dict) or not parts:
        raise ConfigError(
            f"data.mixture: {parts!r} is not a mixture; give {{NAME: {{path: DIR, weight: W}}, ...}} with one or more parts"
        )
    parts = cfg["mixture"] = {name: dict(part) if isinstance(part, dict) else part for name, part in parts.items()}
    from scaling.manifest import tokenizer_of

    vocabs, tokenizers = {}, {}
    for name, part in parts.items():
        key = f"data.mixture.{name}"
        if not isinstance(part, dict) or sorted(part) != sorted(PART_KEYS):
            raise ConfigError(f"{key}: {part!r} is not a part; give {{path: DIR, weight: W}}")
        weight = part["weight"]
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not (math.isfinite(weight) and weight > 0)
        ):
            raise ConfigError(f"{key}.weight: {weight!r} must be a finite number > 0")
        path = Path(os.path.expanduser(str(part["path"]))).resolve()
        if not all((path / f"{split}.bin").is_file() for split in ("train", "val")):
            raise DataError(f"{key}.path: '{path}' is not a directory with train.bin and val.bin (a prepared corpus)")
        manifest = _manifest(path)
        if manifest.get("vocab_size") is not None:
            vocabs[name] = int(manifest["vocab_size"])
        if tokenizer_of(manifest) is not None:
            tokenizers[name] = tokenizer_of(manifest)
        part.update(path=str(path), weight=float(weight), dtype=cfg["dtype"] or manifest.get("dtype") or "uint16")
    if len(set(vocabs.values())) > 1:
        shown = ", ".join(f"{name} {vocab}" for name, vocab in vocabs.items())
        raise DataError(f"data.mixture: the parts' vocabularies differ ({shown}); a mixture needs one tokenizer")
    if len(set(tokenizers.values())) > 1:  # equal vocabularies, different ids: silently meaningless batches
        shown = ", ".join(f"{name} {tokenizer}" for name, tokenizer in tokenizers.items())
        raise DataError(
            f"data.mixture: the parts were prepared with different tokenizers ({shown}); a mixture needs one: "
            "prepare every part with the same --tokenizer DIR/tokenizer.json"
        )
    if cfg["vocab_size"] is None:
        if not vocabs:
            raise ConfigError(
                "data.vocab_size: missing; no part has a manifest.json naming it (e.g. data.vocab_size=50304)"
            )
        cfg["vocab_size"] = next(iter(vocabs.values()))
    elif vocabs and int(cfg["vocab_size"]) != next(iter(vocabs.values())):
        raise DataError(
            f"data.vocab_size: {cfg['vocab_size']} but the parts' manifests say {next(iter(vocabs.values()))}"
        )


def load_mixture(cfg: dict):
    """The mixture's Corpus (config checked by `check_mixture`): ``parts`` holds (name, train, weight)."""
    from scaling.data import Corpus, load_corpus
    from scaling.manifest import LARGER_HOLDOUT

    names = sorted(cfg["mixture"])
    total = sum(cfg["mixture"][n]["weight"] for n in names)
    loaded, parts = {}, []
    for name in names:
        part = cfg["mixture"][name]
        bin_cfg = {"source": "bin", "path": part["path"], "dtype": part["dtype"], "vocab_size": cfg["vocab_size"]}
        try:
            loaded[name] = load_corpus(bin_cfg)
        except (ConfigError, DataError) as err:
            raise type(err)(f"data.mixture.{name}: {err}") from None
        parts.append((name, loaded[name].train, part["weight"] / total))
    digest = json.dumps([[name, loaded[name].fingerprint, weight] for name, _, weight in parts])
    fingerprint = hashlib.sha256(f"mixture|{digest}".encode()).hexdigest()[:16]
    val = np.concatenate([np.asarray(loaded[name].val) for name in names])
    per_token = _bytes_per_token(cfg, names, loaded)
    shown = ", ".join(f"{name} {weight:.3g} ({loaded[name].fingerprint})" for name, _, weight in parts)
    description = (
        f"mixture of {len(parts)} prepared corpora, by weight: {shown}; train "
        f"{sum(len(t) for _, t, _ in parts) / 1e6:.3g}M / val {len(val) / 1e6:.3g}M tokens"
    )
    return Corpus(
        "mixture:" + "+".join(names),
        np.empty(0, dtype=val.dtype),  # the parts' training splits are in `parts`
        val,
        cfg["vocab_size"],
        fingerprint,
        None,
        per_token,
        description,
        parts=tuple(parts),
        tokenizer=next((loaded[name].tokenizer for name in names if loaded[name].tokenizer), None),  # one (checked)
        val_advice=f"the parts' val.bin: {LARGER_HOLDOUT}",
    )


def _bytes_per_token(cfg: dict, names: list[str], loaded: dict) -> float:
    """Bytes per token of the joined val split, from the parts' manifests (NaN when one is unknown)."""
    total_bytes = 0.0
    for name in names:
        per_token = _manifest(Path(cfg["mixture"][name]["path"])).get("bytes_per_token")
        if per_token is None:
            return math.nan
        total_bytes += float(per_token) * len(loaded[name].val)
    return total_bytes / sum(len(loaded[name].val) for name in names)


def train_tokens(parts) -> int:
    """Tokens a run may train on before some part's training split is seen twice (in expectation)."""
    return int(min(len(train) / weight for _, train, weight in parts))


def check_windows(parts, seq_len: int) -> None:
    for name, train, _ in parts:
        if len(train) < seq_len + 1:
            raise DataError(
                f"train.seq_len: {seq_len} needs at least {seq_len + 1} training tokens, but data.mixture.{name} has "
                f"{len(train)}; lower train.seq_len or use a larger corpus"
            )


def mixture_batch(parts, step: int, batch_size: int, seq_len: int, seed: int) -> np.ndarray:
    """int64 [batch_size, seq_len + 1]: each row's part drawn by weight, then its window uniformly in
    that part's training split, all from np.random.default_rng([seed, step])."""
    rng = np.random.default_rng([seed, step])
    weights = np.array([weight for _, _, weight in parts])
    which = rng.choice(len(parts), size=batch_size, p=weights / weights.sum())
    batch = np.empty((batch_size, seq_len + 1), dtype=np.int64)
    for index, (_, train, _) in enumerate(parts):
        rows = np.flatnonzero(which == index)
        starts = rng.integers(0, len(train) - seq_len, size=len(rows))
        batch[rows] = np.asarray(train[starts[:, None] + np.arange(seq_len + 1)]).astype(np.int64)
    return batch
