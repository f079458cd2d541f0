"""The `data` config checked without reading any corpus: every key known and well-typed, the input
files present and of a plausible size (`check_source`). conf/data/*.yaml mirror `DEFAULTS`.
numpy only: importing this module never imports torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scaling import data_cut, manifest, markov
from scaling.errors import ConfigError, DataError

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
    "bin": {"path": MISSING, "dtype": None, "vocab_size": MISSING, "val_fraction": 0.05, "bytes_per_token": None},
    "mixture": {"mixture": MISSING, "vocab_size": None, "dtype": None},
}
BIN_DTYPES = ("uint16", "uint32")
# Keys every source takes, null by default (scaling/config.py's schema gives every data config
# them, so `data.cut=random` needs no `+`) and left out of a run's identity while null: data.max_train_tokens
# keeps only k tokens of the training split (a data-constrained corpus of k unique tokens: repetition
# sweeps), the first k or (data.cut=random, data.cut_seed) random blocks: `scaling.data_cut`.
OPTIONAL = ("max_train_tokens", "cut", "cut_seed")


def drop_unset_from_identity(data: dict[str, Any]) -> None:
    """Leave the `OPTIONAL` keys out of a run's identity (its ``data`` part) while they are null, so
    that runs without a cut keep the ids they had before the schema gave every data config them."""
    for key in OPTIONAL:
        if data.get(key) is None:
            data.pop(key, None)


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
    unknown = sorted(set(given) - set(DEFAULTS[source]) - {"source", *OPTIONAL})
    if unknown:
        raise ConfigError(
            f"data.{unknown[0]}: not a key of data={source}; valid keys: "
            f"{', '.join(['source', *DEFAULTS[source], *OPTIONAL])}"
        )
    cfg = {**DEFAULTS[source], **given}
    if source == "bin":  # a prepared directory's manifest.json fixes dtype, vocab_size, bytes_per_token
        cfg = manifest.apply_manifest(cfg)
    data_cut.check_cut(cfg, _integer)
    missing = [key for key, value in cfg.items() if value == MISSING]
    if missing:
        if source == "bin" and "path" not in missing:
            _bin_files(cfg)  # a directory without shards: that, not a missing vocab_size, is what is wrong
        raise ConfigError(f"data.{missing[0]}: missing; data={source} needs it (e.g. data.{missing[0]}=...)")
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
    files = {"all": path} if path.is_file() else {split: path / f"{split}.bin" for split in ("train", "val")}
    for file in files.values():
        if not file.is_file():
            raise DataError(
                f"data.path: '{path}' has no {file.name} (data=bin needs train.bin and val.bin "
                "in a directory, or the path of one .bin file)"
            )
        if _looks_like_text(file):
            raise DataError(
                f"data.path: '{file}' looks like text (its start is printable UTF-8), not token ids: give "
                "data=text data.path=... for text, or tokenize it with scaling prepare"
            )
    return files


def _looks_like_text(path: Path, size: int = 65536) -> bool:
    """Whether a file's first ``size`` bytes decode as UTF-8 that is almost all printable: token ids
    never do (uint16 ids below 256 are every other byte NUL; larger ones are not valid UTF-8)."""
    with path.open("rb") as f:
        head = f.read(size)
    try:
        text = head.decode("utf-8", errors="strict")
    except UnicodeDecodeError as err:  # a multi-byte character cut at the end is still text
        if err.start < len(head) - 3:
            return False
        text = head[: err.start].decode("utf-8")
    return len(text) > 0 and sum(c.isprintable() or c in "\n\r\t" for c in text) >= 0.99 * len(text)


def _check_mixture(cfg: dict) -> None:
    from scaling.mixture import check_mixture

    if cfg["dtype"] is not None and cfg["dtype"] not in BIN_DTYPES:
        raise ConfigError(f"data.dtype: {cfg['dtype']!r} is not supported; valid: null, {', '.join(BIN_DTYPES)}")
    check_mixture(cfg)


_CHECKS: dict[str, Callable[[dict], None]] = {
    "stdlib": _check_stdlib,
    "synthetic": _check_synthetic,
    "text": _check_text,
    "bin": _check_bin,
    "mixture": _check_mixture,
}
