"""Data-constrained corpora: the training split cut to U unique tokens (data.max_train_tokens), for
repetition sweeps. A run that trains on more than U tokens repeats them.

`data.cut` says which U tokens:
  head    (the default) the first U tokens of the training split. On the stdlib corpus a small U is
          then also another part of the library (its first files in path order): the cut and the
          repetition are confounded.
  random  `ceil(U / CUT_BLOCK)` blocks of CUT_BLOCK consecutive tokens (the split's whole blocks,
          aligned at multiples of CUT_BLOCK), drawn without replacement by
          np.random.default_rng([data.cut_seed, CUT_STREAM]) over the whole split and kept in
          corpus order; the last block drawn is cut short so that exactly U tokens remain. A small U
          is a random sample of the same distribution as a large one, and with one seed the cut of
          a smaller U lies inside that of a larger U. data.cut_seed defaults to 0; a sweep ties it to
          the run's seed with `data: {cut_seed: ${seed}}` (sweeps/repeat.yaml).

The validation split is never cut: every run on one corpus is scored on the same windows. The cut
corpus's fingerprint is that of the full corpus with the cut's settings (the head cut's exactly as
before data.cut existed), so runs on it are other runs. numpy only.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from scaling.errors import ConfigError, DataError

CUTS = ("head", "random")
CUT_BLOCK = 1024  # tokens per block of a random cut (8 windows of the default seq_len 128)
CUT_STREAM = 0x637574  # "cut": the random cut's RNG stream, apart from the run's batch draws
MIN_TRAIN_TOKENS = 1024


def check_cut(cfg: dict, integer) -> None:
    """ConfigError naming data.cut / data.cut_seed when they are invalid or set without a cut;
    ``integer`` is scaling.data_config's integer check (it stores the value back as an int)."""
    if cfg.get("max_train_tokens") is not None:
        integer(cfg, "max_train_tokens", MIN_TRAIN_TOKENS)
    cut = cfg.get("cut")
    if cut is not None and cut not in CUTS:
        raise ConfigError(f"data.cut: {cut!r} is not a cut; valid: {', '.join(CUTS)}")
    if cut is not None and cfg.get("max_train_tokens") is None:
        raise ConfigError(f"data.cut: {cut} needs data.max_train_tokens (the unique tokens to keep)")
    if cfg.get("cut_seed") is not None:
        if cut != "random":
            raise ConfigError(f"data.cut_seed: {cfg['cut_seed']!r} is set but data.cut is {cut!r}; set data.cut=random")
        integer(cfg, "cut_seed", 0)


def cut_corpus(corpus, cfg: dict):
    """``corpus`` (a scaling.data.Corpus) with its training split cut as ``cfg`` (checked) says, or
    unchanged without data.max_train_tokens. DataError when the split is smaller than the cut."""
    unique = cfg.get("max_train_tokens")
    if unique is None:
        return corpus
    available = len(corpus.train)
    if (cfg.get("cut") or "head") == "head":  # null: the default, head
        _check_size(corpus, unique, available, "")
        digest = _digest(f"{corpus.fingerprint}:max_train_tokens={unique}")
        described = f"its first {unique / 1e6:.3g}M tokens"
        return _replace(corpus, corpus.train[:unique], digest, described)
    seed = cfg.get("cut_seed") or 0
    _check_size(corpus, unique, available // CUT_BLOCK * CUT_BLOCK, f" in whole blocks of {CUT_BLOCK}")
    train = random_cut(corpus.train, unique, seed)
    digest = _digest(f"{corpus.fingerprint}:max_train_tokens={unique}:cut=random:cut_seed={seed}:block={CUT_BLOCK}")
    described = f"{unique / 1e6:.3g}M tokens in random blocks of {CUT_BLOCK} (seed {seed})"
    return _replace(corpus, train, digest, described)


def random_blocks(n_blocks: int, unique: int, seed: int) -> np.ndarray:
    """The indices of the blocks a random cut of ``unique`` tokens draws, in the order drawn."""
    count = -(-unique // CUT_BLOCK)
    return np.random.default_rng([seed, CUT_STREAM]).permutation(n_blocks)[:count]


def random_cut(train: np.ndarray, unique: int, seed: int) -> np.ndarray:
    """``unique`` tokens of ``train`` in random whole blocks (the module docstring), in corpus order."""
    drawn = random_blocks(len(train) // CUT_BLOCK, unique, seed)
    lengths = np.full(len(drawn), CUT_BLOCK)
    lengths[-1] = unique - CUT_BLOCK * (len(drawn) - 1)
    order = np.argsort(drawn)
    pieces = [np.asarray(train[b * CUT_BLOCK : b * CUT_BLOCK + n]) for b, n in zip(drawn[order], lengths[order])]
    return np.concatenate(pieces)


def _check_size(corpus, unique: int, available: int, how: str) -> None:
    if unique > available:
        raise DataError(
            f"data.max_train_tokens: {unique:,} is more than the {available:,} training tokens{how} of corpus "
            f"{corpus.name}; give at most {available:,}, or leave it out"
        )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _replace(corpus, train: np.ndarray, digest: str, described: str):
    description = f"{corpus.description}; training split restricted to {described}"
    return dataclasses.replace(corpus, train=train, fingerprint=digest, description=description)
