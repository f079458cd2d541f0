"""Corpora for the trainer: the Hydra group `data`, split, fingerprinted and cached.

Sources (`data.source`, one file each in conf/data/):
  stdlib     the running interpreter's standard-library `.py` files (no download), byte tokens
  synthetic  a seeded order-k Markov chain with an exactly known entropy rate (scaling.markov)
  text       a user's file of any encoding, byte tokens, the last `val_fraction` held out
  bin        nanoGPT's pre-tokenized uint16/uint32 `train.bin`/`val.bin` (or one file, tail held out)
  mixture    several prepared corpora, batches drawn by weight (scaling.mixture)

A `Corpus` carries a train and a validation token stream (disjoint, deterministic), its vocabulary,
bytes per token (for bits per byte: bpb = loss_nats / ln 2 / bytes_per_token) and a fingerprint:
the first 16 hex digits of sha256 over the split settings and every token. The config is checked
by scaling.data_config (no corpus read); what a load computes is cached by scaling.corpus_cache.

Batches and the evaluation set are pure functions of their arguments (no global RNG), so a resumed
run sees exactly the batches it would have seen, and every run on one corpus is scored on the same
windows. numpy only: importing this module never imports torch.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import platform
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import numpy as np

from scaling import data_cut, markov, mixture
from scaling.corpus_cache import _HASH_CHUNK, cache_dir, cached, file_stamp, fingerprint
from scaling.data_config import BIN_DTYPES, DEFAULTS, MISSING, _bin_files, _existing_path, check_source, vocab_size_of
from scaling.errors import ConfigError, DataError
from scaling.manifest import LARGER_HOLDOUT, MANIFEST, bin_dir_split, read_manifest, tokenizer_of

MORE_VAL = "write more tokens to it"  # a directory without a manifest: no `scaling prepare` wrote it

# Re-exported: callers read the data config's checks and the cache through this module too.
__all__ = ["BIN_DTYPES", "DEFAULTS", "MISSING", "Corpus", "cache_dir", "check_source", "check_windows"]
__all__ += ["eval_set", "fingerprint", "load_corpus", "train_batch", "vocab_size_of"]

FILE_SEPARATOR = 0x1C  # ASCII "file separator" joins stdlib files; it occurs in no stdlib source outside test/


@dataclass(frozen=True)
class Corpus:
    name: str  # "stdlib", "synthetic", "text:<file name>", "bin:<file or directory name>", "mixture:<a>+<b>"
    train: np.ndarray  # 1-D token ids (uint8/uint16/uint32; often a read-only memmap)
    val: np.ndarray  # 1-D, disjoint from train
    vocab_size: int
    fingerprint: str  # 16 hex digits of sha256(split settings, train tokens, val tokens)
    entropy_rate: float | None  # true entropy rate in nats/token (synthetic), else None
    bytes_per_token: float  # 1.0 for byte tokens; NaN for a .bin without data.bytes_per_token
    description: str  # one line for reports: origin and sizes
    context_entropies: tuple[float, ...] | None = None  # synthetic: H(X_t | t symbols before), t = 0..order
    parts: tuple = ()  # a mixture (scaling.mixture): (name, train split, weight) per part; `train` is empty
    tokenizer: str | None = None  # a prepared corpus's tokenizer (`scaling.manifest.tokenizer_of`); None: unknown
    val_advice: str = "data.val_fraction"  # how its validation split grows (named by the errors that need more)

    @property
    def train_tokens(self) -> int:
        """Tokens of the training split (a mixture: trained before some part repeats)."""
        return mixture.train_tokens(self.parts) if self.parts else len(self.train)

    def loss_floor(self, seq_len: int) -> float | None:
        """The lowest expected held-out loss (nats/token) any model can reach on windows of
        `seq_len` targets of this corpus, when known (synthetic), else None. It exceeds the
        entropy rate h because the first targets of a window have fewer than `order` symbols of
        context: floor = (1/T) sum_{t=1..T} H_min(t, order), i.e. h + (H_1 + ... + H_{k-1} -
        (k-1) h) / T. Compare a fitted irreducible loss E with this, at the run's seq_len."""
        if self.context_entropies is None:
            return None
        order = len(self.context_entropies) - 1
        return sum(self.context_entropies[min(t, order)] for t in range(1, seq_len + 1)) / seq_len


def _millions(n: int) -> str:
    return f"{n / 1e6:.3g}M"


# ---------------------------------------------------------------- sources
def _load_stdlib(cfg: dict) -> Corpus:
    """The standard library's `.py` files in sorted relative-path order, skipping every directory
    and file whose name matches a pattern of data.exclude (fnmatch). File-level split: in the order
    of sha256(relative path), each file joins val if val stays within val_fraction of all bytes.
    Each split is its files joined with FILE_SEPARATOR, one byte per token (vocab 256)."""
    root = Path(sysconfig.get_paths()["stdlib"]).resolve()
    files = _python_files(root, tuple(cfg["exclude"]))
    if not files:
        raise DataError(f"data.exclude: {cfg['exclude']!r} leaves no .py file under '{root}' (data=stdlib)")
    val_names = _file_level_split(files, cfg["val_fraction"])
    if not val_names:
        raise DataError(f"data.val_fraction: {cfg['val_fraction']!r} is smaller than every stdlib file; raise it")
    split = {
        "source": "stdlib",
        "val_fraction": cfg["val_fraction"],
        "exclude": list(cfg["exclude"]),
        "separator": FILE_SEPARATOR,
        "split": "file-level by sha256(relative path)",
    }

    def build():
        train, val = (
            _join([path for name, path, *_ in files if (name in val_names) == is_val]) for is_val in (False, True)
        )
        return {"fingerprint": fingerprint(split, train, val)}, {"train": train, "val": val}

    stamps = [[name, size, mtime] for name, _, size, mtime in files]
    meta, arrays = cached({"split": split, "root": str(root), "files": stamps}, build)
    train, val = arrays["train"], arrays["val"]
    description = (
        f"stdlib: Python {platform.python_version()} standard library at {root}, {len(files)} .py files "
        f"(excluding {', '.join(cfg['exclude'])}): {_millions(len(train) + len(val))} byte tokens, "
        f"train {_millions(len(train))} ({len(files) - len(val_names)} files) / "
        f"val {_millions(len(val))} ({len(val_names)} files)"
    )
    return Corpus("stdlib", train, val, 256, meta["fingerprint"], None, 1.0, description)


@functools.lru_cache(maxsize=8)
def _python_files(root: Path, exclude: tuple[str, ...]) -> tuple[tuple[str, Path, int, int], ...]:
    """(relative posix path, path, size, mtime_ns) of each `.py` file under root, sorted by
    relative path; directories matching a pattern are not entered. Walked once per process: a sweep's
    planning loads the corpus for each run (183 walks of the stdlib were 20 of quick-wsd16's 36 s dry run);
    the interpreter's own standard library does not change under it."""
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if not any(fnmatch(d, pattern) for pattern in exclude)]
        for name in names:
            if name.endswith(".py") and not any(fnmatch(name, pattern) for pattern in exclude):
                path = Path(directory, name)
                stat = path.stat()
                found.append((path.relative_to(root).as_posix(), path, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def _file_level_split(files: list[tuple[str, Path, int, int]], val_fraction: float) -> set[str]:
    budget = val_fraction * sum(file[2] for file in files)
    val, used = set(), 0
    for name, _, size, _ in sorted(files, key=lambda f: hashlib.sha256(f[0].encode()).hexdigest()):
        if used + size <= budget:
            val.add(name)
            used += size
    return val


def _join(paths: list[Path]) -> np.ndarray:
    return np.frombuffer(bytes([FILE_SEPARATOR]).join(path.read_bytes() for path in paths), dtype=np.uint8)


def _load_synthetic(cfg: dict) -> Corpus:
    """Train and val are independent samples of one random Markov chain (scaling.markov), drawn
    with seeds [seed, 1] and [seed, 2]; the chain itself comes from [seed, 0]."""
    keys = ("vocab_size", "order", "concentration", "seed", "train_tokens", "val_tokens")
    split = {"source": "synthetic", **{key: cfg[key] for key in keys}, "sampler": markov.SAMPLER_VERSION}

    def build():
        chain = markov.random_markov_chain(cfg["vocab_size"], cfg["order"], cfg["concentration"], cfg["seed"])
        train = markov.sample_stream(chain, cfg["train_tokens"], [cfg["seed"], 1])
        val = markov.sample_stream(chain, cfg["val_tokens"], [cfg["seed"], 2])
        meta = {
            "fingerprint": fingerprint(split, train, val),
            "entropy_rate": chain.entropy_rate,
            "context_entropies": chain.context_entropies(),
        }
        return meta, {"train": train, "val": val}

    meta, arrays = cached({"split": split}, build)
    train, val = arrays["train"], arrays["val"]
    description = (
        f"synthetic: order-{cfg['order']} Markov chain over {cfg['vocab_size']} symbols, Dirichlet("
        f"{cfg['concentration']}) rows, seed {cfg['seed']}: entropy rate {meta['entropy_rate']:.4f} "
        f"nats/token; train {_millions(len(train))} / val {_millions(len(val))} tokens"
    )
    return Corpus(
        "synthetic",
        train,
        val,
        cfg["vocab_size"],
        meta["fingerprint"],
        meta["entropy_rate"],
        1.0,
        description,
        tuple(meta["context_entropies"]),
        val_advice="data.val_tokens",
    )


def _tail_split(tokens: np.ndarray, val_fraction: float, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The last ceil(val_fraction * n) tokens are val, the rest train (views, no copy)."""
    n_val = math.ceil(val_fraction * len(tokens))
    if len(tokens) - n_val < 2:
        raise DataError(
            f"data.path: '{path}' has {len(tokens)} tokens, too few to split (data.val_fraction {val_fraction})"
        )
    return tokens[:-n_val], tokens[-n_val:]


def _load_text(cfg: dict) -> Corpus:
    """The file's bytes are its tokens (vocab 256, any encoding); the tail is val."""
    path = _existing_path(cfg, "an existing text file")
    train, val = _tail_split(np.memmap(path, dtype=np.uint8, mode="r"), cfg["val_fraction"], path)
    split = {"source": "text", "val_fraction": cfg["val_fraction"], "split": "tail"}
    meta, _ = cached(
        {"split": split, "file": file_stamp(path)}, lambda: ({"fingerprint": fingerprint(split, train, val)}, {})
    )
    description = (
        f"text: {path}, {_millions(len(train) + len(val))} byte tokens, train {_millions(len(train))} / "
        f"val {_millions(len(val))} (the last {cfg['val_fraction']:.0%})"
    )
    return Corpus(f"text:{path.name}", train, val, 256, meta["fingerprint"], None, 1.0, description)


def _load_bin(cfg: dict) -> Corpus:
    """nanoGPT's format: raw little-endian token ids, `train.bin` and `val.bin` in a directory
    (its own split), or one file whose tail is val. Every token is checked against vocab_size once
    per file version (the maxima are cached with the fingerprint)."""
    files = _bin_files(cfg)
    dtype = np.dtype(cfg["dtype"]).newbyteorder("<")
    maps = {split: np.memmap(path, dtype=dtype, mode="r") for split, path in files.items()}
    if "all" in maps:
        train, val = _tail_split(maps["all"], cfg["val_fraction"], files["all"])
        split = {"source": "bin", "dtype": cfg["dtype"], "val_fraction": cfg["val_fraction"], "split": "tail"}
    else:
        train, val = maps["train"], maps["val"]
        split = bin_dir_split(cfg["dtype"])

    def build():
        maxima = {
            name: int(max(array[i : i + _HASH_CHUNK].max() for i in range(0, len(array), _HASH_CHUNK)))
            for name, array in maps.items()
        }
        return {"fingerprint": fingerprint(split, train, val), "max_token": maxima}, {}

    meta, _ = cached({"split": split, "files": [file_stamp(path) for path in files.values()]}, build)
    _check_manifest_fingerprint(cfg, meta["fingerprint"])
    vocab = cfg["vocab_size"]
    for name, largest in meta["max_token"].items():
        if largest >= vocab:
            raise DataError(
                f"data.vocab_size: {vocab} but '{files[name]}' holds token id {largest}; "
                f"set data.vocab_size > {largest} (or check data.dtype, now {cfg['dtype']})"
            )
    per_token = math.nan if cfg["bytes_per_token"] is None else cfg["bytes_per_token"]
    root = Path(cfg["path"]).expanduser().resolve()
    description = (
        f"bin: {root} ({cfg['dtype']}, vocab {vocab}): train {_millions(len(train))} / val {_millions(len(val))} tokens"
    )
    manifest = read_manifest(root) if root.is_dir() else None
    tokenizer = tokenizer_of(manifest)
    # one file's tail, `scaling prepare`'s directory (its manifest), or a plain nanoGPT train.bin/val.bin
    advice = "data.val_fraction" if "all" in maps else f"its val.bin: {LARGER_HOLDOUT if manifest else MORE_VAL}"
    return Corpus(
        f"bin:{root.name}",
        train,
        val,
        vocab,
        meta["fingerprint"],
        None,
        per_token,
        description,
        tokenizer=tokenizer,
        val_advice=advice,
    )


def _check_manifest_fingerprint(cfg: dict, computed: str) -> None:
    """A prepared directory's shards must hash to its manifest's fingerprint (else they changed)."""
    path = Path(cfg["path"]).expanduser()
    stated = read_manifest(path) if path.is_dir() else None
    if stated is not None and stated["fingerprint"] != computed:
        raise DataError(
            f"data.path: '{path}' shards hash to fingerprint {computed}, but its {MANIFEST} states "
            f"{stated['fingerprint']}: the files changed after scaling prepare; prepare the corpus again"
        )


_LOADERS: dict[str, Callable[[dict], Corpus]] = {
    "stdlib": _load_stdlib,
    "synthetic": _load_synthetic,
    "text": _load_text,
    "bin": _load_bin,
    "mixture": mixture.load_mixture,
}


def load_corpus(data_cfg) -> Corpus:
    """The corpus a data config names (conf/data/<source>.yaml keys, a DictConfig or a plain dict).
    Raises ConfigError / DataError (one line naming the key, the value and what is valid)."""
    cfg = check_source(data_cfg)
    corpus = _LOADERS[cfg["source"]](cfg)
    return data_cut.cut_corpus(corpus, cfg)  # data.max_train_tokens, data.cut: scaling.data_cut


# ---------------------------------------------------------------- batches and evaluation
def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> np.ndarray:
    return np.asarray(tokens[starts[:, None] + np.arange(seq_len + 1)]).astype(np.int64)


def train_batch(corpus: Corpus, step: int, batch_size: int, seq_len: int, seed: int) -> np.ndarray:
    """int64 [batch_size, seq_len + 1]: windows of corpus.train starting at positions drawn
    uniformly by np.random.default_rng([seed, step]), so batch `step` is the same in any process,
    resumed or not. Inputs are [:, :-1], targets [:, 1:]."""
    _check_train_windows(corpus, seq_len)
    if corpus.parts:
        return mixture.mixture_batch(corpus.parts, step, batch_size, seq_len, seed)
    starts = np.random.default_rng([seed, step]).integers(0, len(corpus.train) - seq_len, size=batch_size)
    return _windows(corpus.train, starts, seq_len)


def eval_set(corpus: Corpus, seq_len: int, n_tokens: int) -> np.ndarray:
    """int64 [n_seq, seq_len + 1] with n_seq = n_tokens // seq_len: windows of corpus.val at evenly
    spaced starts (the first at 0, the last ending at or before val's end), no randomness. The
    scored targets of different windows never overlap, and the set is identical for every run on
    the same corpus, seq_len and n_tokens."""
    return evenly_spaced_windows(corpus.val, seq_len, _check_eval_windows(corpus, seq_len, n_tokens))


def evenly_spaced_windows(tokens: np.ndarray, seq_len: int, n_seq: int) -> np.ndarray:
    """int64 [n_seq, seq_len + 1]: windows of ``tokens`` at evenly spaced starts, the first at 0
    (every evaluation set's windows, `eval_set`'s and scaling.evalsets')."""
    stride = (len(tokens) - seq_len - 1) // max(n_seq - 1, 1)
    return _windows(tokens, np.arange(n_seq) * stride, seq_len)


def check_windows(corpus: Corpus, seq_len: int, eval_tokens: int | None = None) -> None:
    """DataError/ConfigError naming train.seq_len or train.eval_tokens when the corpus is too small
    for a training window or (given eval_tokens) for the evaluation set."""
    _check_train_windows(corpus, seq_len)
    if eval_tokens is not None:
        _check_eval_windows(corpus, seq_len, eval_tokens)


def _check_train_windows(corpus: Corpus, seq_len: int) -> None:
    if corpus.parts:
        return mixture.check_windows(corpus.parts, seq_len)
    if len(corpus.train) < seq_len + 1:
        raise DataError(
            f"train.seq_len: {seq_len} needs at least {seq_len + 1} training tokens, but corpus "
            f"{corpus.name} has {len(corpus.train)}; lower train.seq_len or use a larger corpus"
        )


def _check_eval_windows(corpus: Corpus, seq_len: int, n_tokens: int) -> int:
    n_seq = n_tokens // seq_len
    if n_seq < 1:
        raise ConfigError(
            f"train.eval_tokens: {n_tokens} is less than train.seq_len {seq_len}; "
            "the evaluation set needs at least one window"
        )
    needed = n_seq * seq_len + 1
    if len(corpus.val) < needed:
        raise DataError(
            f"train.eval_tokens: {n_tokens} needs {needed} validation tokens at seq_len {seq_len}, "
            f"but corpus {corpus.name} has {len(corpus.val)}; lower train.eval_tokens or enlarge "
            f"the validation split ({corpus.val_advice})"
        )
    return n_seq
