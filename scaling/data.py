"""Corpora for the trainer: the Hydra group `data`, split, fingerprinted and cached.

Sources (`data.source`, one file each in conf/data/):
  stdlib     the running interpreter's standard-library `.py` files (no download), byte tokens
  synthetic  a seeded order-k Markov chain with an exactly known entropy rate (scaling.markov)
  text       a user's file of any encoding, byte tokens, the last `val_fraction` held out
  bin        nanoGPT's pre-tokenized uint16/uint32 `train.bin`/`val.bin` (or one file, tail held out)

A `Corpus` carries a train and a validation token stream (disjoint, deterministic), its vocabulary,
bytes per token (for bits per byte: bpb = loss_nats / ln 2 / bytes_per_token) and a fingerprint:
the first 16 hex digits of sha256 over the split settings and every token. What a load computes
is cached under $SCALING_CACHE (default ~/.cache/scaling)/corpora, keyed by the source's settings
and the size and mtime of each input file, so a run in a fresh process neither re-reads nor
re-generates the corpus: it memory-maps the tokens and reads the fingerprint.

Batches and the evaluation set are pure functions of their arguments (no global RNG), so a resumed
run sees exactly the batches it would have seen, and every run on one corpus is scored on the same
windows. numpy only: importing this module never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sysconfig
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import numpy as np

from scaling import markov
from scaling.errors import ConfigError, DataError
from scaling.store import atomic_write_bytes

FILE_SEPARATOR = 0x1C  # ASCII "file separator" joins stdlib files; it occurs in no stdlib source outside test/
CACHE_FORMAT = 2  # bump when the layout or meaning of cached entries changes
_HASH_CHUNK = 1 << 24  # elements hashed at a time, to bound memory on huge .bin files

# Every key of every source with its default: conf/data/*.yaml mirror these (tests/test_data.py
# checks that), and a plain dict given to load_corpus may leave any key but `source` out.
# MISSING marks a key without a default (the YAML's `???`).
MISSING = "???"
DEFAULTS: dict[str, dict[str, Any]] = {
    "stdlib": {
        "val_fraction": 0.03,
        "exclude": ["site-packages", "test", "tests", "idle_test", "__pycache__", "_sysconfigdata_*"],
    },
    "synthetic": {
        "vocab_size": 64,
        "order": 2,
        "concentration": 0.1,
        "seed": 0,
        "train_tokens": 1 << 24,
        "val_tokens": 1 << 20,
    },
    "text": {"path": MISSING, "val_fraction": 0.05},
    "bin": {"path": MISSING, "dtype": "uint16", "vocab_size": MISSING, "val_fraction": 0.05, "bytes_per_token": None},
}
BIN_DTYPES = ("uint16", "uint32")


@dataclass(frozen=True)
class Corpus:
    name: str  # "stdlib", "synthetic", "text:<file name>", "bin:<file or directory name>"
    train: np.ndarray  # 1-D token ids (uint8/uint16/uint32; often a read-only memmap)
    val: np.ndarray  # 1-D, disjoint from train
    vocab_size: int
    fingerprint: str  # 16 hex digits of sha256(split settings, train tokens, val tokens)
    entropy_rate: float | None  # true entropy rate in nats/token (synthetic), else None
    bytes_per_token: float  # 1.0 for byte tokens; NaN for a .bin without data.bytes_per_token
    description: str  # one line for reports: origin and sizes
    context_entropies: tuple[float, ...] | None = None  # synthetic: H(X_t | t symbols before), t = 0..order

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


# ---------------------------------------------------------------- config checking
def _as_dict(data_cfg) -> dict[str, Any]:
    if type(data_cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(data_cfg, resolve=True, throw_on_missing=False)
    return dict(data_cfg)


def check_source(data_cfg) -> dict[str, Any]:
    """The data config with defaults filled in, checked without reading any corpus: every key
    is known and well-typed, and the input files exist and have a plausible size. Raises
    ConfigError / DataError with one line naming the key and value. Cheap: call it before compute."""
    given = _as_dict(data_cfg)
    source = given.get("source")
    if source not in DEFAULTS:
        raise ConfigError(f"data.source: {source!r} is not a data source; valid: {', '.join(DEFAULTS)}")
    unknown = sorted(set(given) - set(DEFAULTS[source]) - {"source"})
    if unknown:
        raise ConfigError(
            f"data.{unknown[0]}: not a key of data={source}; valid keys: {', '.join(['source', *DEFAULTS[source]])}"
        )
    cfg = {**DEFAULTS[source], **given}
    for key, value in cfg.items():
        if value == MISSING:
            raise ConfigError(f"data.{key}: missing; data={source} needs it (e.g. data.{key}=...)")
    if "val_fraction" in cfg:
        fraction = _number(cfg, "val_fraction")
        if not 0 < fraction < 0.5:
            raise ConfigError(f"data.val_fraction: {fraction!r} must be in (0, 0.5)")
    _CHECKS[source](cfg)
    return cfg


def vocab_size_of(data_cfg) -> int:
    """The vocabulary a model for this corpus needs, from the config alone (no data read)."""
    cfg = check_source(data_cfg)
    return cfg.get("vocab_size", 256)


# The two helpers below store the checked value back in cfg as a plain float / int, so that 64
# and 64.0 (or 1.6e7 from a command line) make the same corpus, cache key and fingerprint.
def _number(cfg: dict, key: str) -> float:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"data.{key}: {value!r} is not a finite number")
    cfg[key] = float(value)
    return cfg[key]


def _integer(cfg: dict, key: str, low: int, high: int | None = None) -> int:
    value = cfg[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
    if not ok or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"data.{key}: {value!r} must be an integer {bounds}")
    cfg[key] = int(value)
    return cfg[key]


def _existing_path(cfg: dict, what: str) -> Path:
    path = Path(os.path.expanduser(str(cfg["path"])))
    if not path.exists():
        raise DataError(f"data.path: '{path}' does not exist (data={cfg['source']} needs {what})")
    return path.resolve()


def _check_stdlib(cfg: dict) -> None:
    if not isinstance(cfg["exclude"], (list, tuple)) or not all(isinstance(p, str) for p in cfg["exclude"]):
        raise ConfigError(f"data.exclude: {cfg['exclude']!r} must be a list of name patterns")


def _check_synthetic(cfg: dict) -> None:
    vocab = _integer(cfg, "vocab_size", 2, 256)
    order = _integer(cfg, "order", 1, 8)
    if vocab ** (order + 1) > markov.MAX_TABLE_ENTRIES:
        raise ConfigError(
            f"data.order: {order} with data.vocab_size {vocab} makes a table of {vocab}^{order + 1} "
            f"entries; vocab_size^(order+1) must be <= {markov.MAX_TABLE_ENTRIES:,}"
        )
    concentration = _number(cfg, "concentration")
    if not markov.MIN_CONCENTRATION <= concentration <= 1e3:
        raise ConfigError(
            f"data.concentration: {concentration!r} must be in [{markov.MIN_CONCENTRATION}, 1000] "
            "(smaller values give rows with exact zeros and a chain that may not mix)"
        )
    _integer(cfg, "seed", 0)
    _integer(cfg, "train_tokens", 1024)
    _integer(cfg, "val_tokens", 1024)


def _check_text(cfg: dict) -> None:
    path = _existing_path(cfg, "an existing text file")
    if not path.is_file():
        raise DataError(f"data.path: '{path}' is not a file (data=text needs a text file)")
    if path.stat().st_size < 2:
        raise DataError(f"data.path: '{path}' is empty or has a single byte (data=text needs text to train on)")


def _check_bin(cfg: dict) -> None:
    if cfg["dtype"] not in BIN_DTYPES:
        raise ConfigError(f"data.dtype: {cfg['dtype']!r} is not supported; valid: {', '.join(BIN_DTYPES)}")
    _integer(cfg, "vocab_size", 2, np.iinfo(cfg["dtype"]).max + 1)
    per_token = cfg["bytes_per_token"]
    if per_token is not None and not _number(cfg, "bytes_per_token") > 0:
        raise ConfigError(f"data.bytes_per_token: {per_token!r} must be > 0 (or null: bits per byte unknown)")
    itemsize = np.dtype(cfg["dtype"]).itemsize
    for path in _bin_files(cfg).values():
        size = path.stat().st_size
        if size == 0:
            raise DataError(f"data.path: '{path}' is empty (data=bin needs tokens)")
        if size % itemsize:
            raise DataError(
                f"data.path: '{path}' has {size} bytes, not a multiple of {itemsize} "
                f"(data.dtype {cfg['dtype']}); check data.dtype"
            )


def _bin_files(cfg: dict) -> dict[str, Path]:
    """{"train": path, "val": path} for a nanoGPT directory, {"all": path} for a single file."""
    path = _existing_path(cfg, "a directory with train.bin and val.bin, or a .bin file")
    if path.is_file():
        return {"all": path}
    files = {split: path / f"{split}.bin" for split in ("train", "val")}
    for file in files.values():
        if not file.is_file():
            raise DataError(
                f"data.path: '{path}' has no {file.name} (data=bin needs train.bin and val.bin "
                "in a directory, or the path of one .bin file)"
            )
    return files


_CHECKS: dict[str, Callable[[dict], None]] = {
    "stdlib": _check_stdlib,
    "synthetic": _check_synthetic,
    "text": _check_text,
    "bin": _check_bin,
}


# ---------------------------------------------------------------- cache and fingerprint
def cache_dir() -> Path:
    """$SCALING_CACHE/corpora, default ~/.cache/scaling/corpora."""
    return Path(os.environ.get("SCALING_CACHE") or Path.home() / ".cache" / "scaling") / "corpora"


def _cached(
    key_material: dict, build: Callable[[], tuple[dict, dict[str, np.ndarray]]]
) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) from the cache entry for `key_material`, else from `build()`, then stored.

    An entry is `<key>.json` (meta, plus each array's dtype and length) and one raw `<key>.<name>`
    file per array, each written atomically, the JSON last: an entry without its JSON is
    incomplete and is rebuilt. Cached arrays come back as read-only memmaps. Concurrent builders
    write identical bytes, so the last `os.replace` wins harmlessly."""
    blob = json.dumps({"format": CACHE_FORMAT, **key_material}, sort_keys=True, default=str)
    key = hashlib.sha256(blob.encode()).hexdigest()[:32]
    root = cache_dir()
    meta_path = root / f"{key}.json"
    try:
        meta = json.loads(meta_path.read_text())
        arrays = {
            name: np.memmap(root / f"{key}.{name}", dtype=dtype, mode="r", shape=(length,))
            for name, (dtype, length) in meta["arrays"].items()
        }
        return meta, arrays
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no entry yet, or an incomplete one: build it
    meta, arrays = build()
    meta["arrays"] = {name: (array.dtype.str, len(array)) for name, array in arrays.items()}
    try:
        for name, array in arrays.items():
            atomic_write_bytes(root / f"{key}.{name}", memoryview(np.ascontiguousarray(array)).cast("B"))
        atomic_write_bytes(meta_path, json.dumps(meta).encode())
    except OSError as err:
        warnings.warn(f"corpus cache not written ({err}); set SCALING_CACHE to a writable directory", stacklevel=2)
    return meta, arrays


def fingerprint(split_settings: dict, train: np.ndarray, val: np.ndarray) -> str:
    """16 hex digits of sha256 over the canonical JSON of the split settings, then each split's
    dtype, length and token bytes: any change to a token, to the split or to the dtype changes it."""
    digest = hashlib.sha256(json.dumps(split_settings, sort_keys=True).encode())
    for part in (train, val):
        digest.update(f"|{part.dtype.str}:{len(part)}|".encode())
        for start in range(0, len(part), _HASH_CHUNK):
            digest.update(np.ascontiguousarray(part[start : start + _HASH_CHUNK]))
    return digest.hexdigest()[:16]


def _file_stamp(path: Path) -> list:
    """What identifies a file's version without reading it: path, size, modification time."""
    stat = path.stat()
    return [str(path), stat.st_size, stat.st_mtime_ns]


def _millions(n: int) -> str:
    return f"{n / 1e6:.3g}M"


# ---------------------------------------------------------------- sources
def _load_stdlib(cfg: dict) -> Corpus:
    """The standard library's `.py` files in sorted relative-path order, skipping every directory
    and file whose name matches a pattern of data.exclude (fnmatch). File-level split: in the order
    of sha256(relative path), each file joins val if val stays within val_fraction of all bytes.
    Each split is its files joined with FILE_SEPARATOR, one byte per token (vocab 256)."""
    root = Path(sysconfig.get_paths()["stdlib"]).resolve()
    files = _python_files(root, cfg["exclude"])
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
    meta, arrays = _cached({"split": split, "root": str(root), "files": stamps}, build)
    train, val = arrays["train"], arrays["val"]
    description = (
        f"stdlib: Python {platform.python_version()} standard library at {root}, {len(files)} .py files "
        f"(excluding {', '.join(cfg['exclude'])}): {_millions(len(train) + len(val))} byte tokens, "
        f"train {_millions(len(train))} ({len(files) - len(val_names)} files) / "
        f"val {_millions(len(val))} ({len(val_names)} files)"
    )
    return Corpus("stdlib", train, val, 256, meta["fingerprint"], None, 1.0, description)


def _python_files(root: Path, exclude: list[str]) -> list[tuple[str, Path, int, int]]:
    """(relative posix path, path, size, mtime_ns) of each `.py` file under root, sorted by
    relative path; directories matching a pattern are not entered."""
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if not any(fnmatch(d, pattern) for pattern in exclude)]
        for name in names:
            if name.endswith(".py") and not any(fnmatch(name, pattern) for pattern in exclude):
                path = Path(directory, name)
                stat = path.stat()
                found.append((path.relative_to(root).as_posix(), path, stat.st_size, stat.st_mtime_ns))
    return sorted(found)


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

    meta, arrays = _cached({"split": split}, build)
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
    meta, _ = _cached(
        {"split": split, "file": _file_stamp(path)}, lambda: ({"fingerprint": fingerprint(split, train, val)}, {})
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
        split = {"source": "bin", "dtype": cfg["dtype"], "split": "train.bin / val.bin"}

    def build():
        maxima = {
            name: int(max(array[i : i + _HASH_CHUNK].max() for i in range(0, len(array), _HASH_CHUNK)))
            for name, array in maps.items()
        }
        return {"fingerprint": fingerprint(split, train, val), "max_token": maxima}, {}

    meta, _ = _cached({"split": split, "files": [_file_stamp(path) for path in files.values()]}, build)
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
    return Corpus(f"bin:{root.name}", train, val, vocab, meta["fingerprint"], None, per_token, description)


_LOADERS: dict[str, Callable[[dict], Corpus]] = {
    "stdlib": _load_stdlib,
    "synthetic": _load_synthetic,
    "text": _load_text,
    "bin": _load_bin,
}


def load_corpus(data_cfg) -> Corpus:
    """The corpus a data config names (conf/data/<source>.yaml keys, a DictConfig or a plain dict).
    Raises ConfigError / DataError (one line naming the key, the value and what is valid)."""
    cfg = check_source(data_cfg)
    return _LOADERS[cfg["source"]](cfg)


# ---------------------------------------------------------------- batches and evaluation
def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> np.ndarray:
    return np.asarray(tokens[starts[:, None] + np.arange(seq_len + 1)]).astype(np.int64)


def train_batch(corpus: Corpus, step: int, batch_size: int, seq_len: int, seed: int) -> np.ndarray:
    """int64 [batch_size, seq_len + 1]: windows of corpus.train starting at positions drawn
    uniformly by np.random.default_rng([seed, step]), so batch `step` is the same in any process,
    resumed or not. Inputs are [:, :-1], targets [:, 1:]."""
    if len(corpus.train) < seq_len + 1:
        raise DataError(
            f"train.seq_len: {seq_len} needs at least {seq_len + 1} training tokens, but corpus "
            f"{corpus.name} has {len(corpus.train)}"
        )
    starts = np.random.default_rng([seed, step]).integers(0, len(corpus.train) - seq_len, size=batch_size)
    return _windows(corpus.train, starts, seq_len)


def eval_set(corpus: Corpus, seq_len: int, n_tokens: int) -> np.ndarray:
    """int64 [n_seq, seq_len + 1] with n_seq = n_tokens // seq_len: windows of corpus.val at evenly
    spaced starts (the first at 0, the last ending at or before val's end), no randomness. The
    scored targets of different windows never overlap, and the set is identical for every run on
    the same corpus, seq_len and n_tokens."""
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
            "the validation split (data.val_fraction, or data.val_tokens for data=synthetic)"
        )
    stride = (len(corpus.val) - seq_len - 1) // max(n_seq - 1, 1)
    return _windows(corpus.val, np.arange(n_seq) * stride, seq_len)
