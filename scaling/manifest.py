"""The prepared-corpus manifest: what `scaling prepare` writes last and `data=bin` reads first.

A prepared corpus is a directory holding `train.bin` and `val.bin` (nanoGPT's format: raw
little-endian token ids) and `manifest.json`, written last and atomically: a directory without a
manifest is not a prepared corpus. The manifest states the dtype, the vocabulary, the tokenizer,
the sources and their hashes, the held-out rule, bytes per token, and the fingerprint, computed by
the same rule (`bin_dir_split` + scaling.corpus_cache.fingerprint) that `data=bin` applies to the
shards, so a run's record carries the manifest's fingerprint.
numpy-free and torch-free: scaling.data_config reads it while checking a config.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scaling.errors import ConfigError, DataError

FORMAT = "scaling-shards-1"
MANIFEST = "manifest.json"
SPLITS = ("train", "val")
MISSING = "???"  # the YAML's `???` (scaling.data_config.MISSING)
# data=bin keys a manifest fixes: left unset (null / ???) they are read from it; set, they must agree.
MANIFEST_KEYS = ("dtype", "vocab_size", "bytes_per_token")
# how a prepared corpus's val split grows (the errors that ask for more validation tokens say it)
LARGER_HOLDOUT = "run scaling prepare again with a larger --holdout"
_REQUIRED = ("format", "tokenizer", "vocab_size", "dtype", "splits", "sources", "holdout", "fingerprint")


def bin_dir_split(dtype: str) -> dict[str, str]:
    """The split settings hashed into the fingerprint of a train.bin / val.bin directory (data=bin)."""
    return {"source": "bin", "dtype": dtype, "split": "train.bin / val.bin"}


def read_manifest(directory: Path, key: str = "data.path") -> dict[str, Any] | None:
    """The manifest of a prepared corpus directory, None when it has none (a plain nanoGPT
    directory). DataError (one line) when the file is there but is not a manifest of this format."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"{key}: '{path}' cannot be read as JSON ({err}); re-run scaling prepare") from None
    missing = [key for key in _REQUIRED if key not in manifest] if isinstance(manifest, dict) else list(_REQUIRED)
    if missing or manifest.get("format") != FORMAT:
        what = f"lacks {missing[0]!r}" if missing else f"has format {manifest.get('format')!r}"
        raise DataError(f"{key}: '{path}' {what}; a {FORMAT} manifest is needed (re-run scaling prepare)")
    return manifest


def tokenizer_of(manifest: dict[str, Any] | None) -> str | None:
    """What makes two prepared corpora's token ids mean the same: the tokenizer's kind and, for a
    tokenizer file, its sha256 (two BPEs trained apart share a vocabulary size, not their ids).
    None without a manifest."""
    tokenizer = (manifest or {}).get("tokenizer")
    if not isinstance(tokenizer, dict):
        return None
    sha = tokenizer.get("sha256")  # one file, whether trained here (kind bpe) or given (kind tokenizers)
    return f"tokenizer.json sha256 {sha[:12]}" if sha else str(tokenizer.get("kind"))


def _agrees(given: Any, stated: Any) -> bool:
    if isinstance(stated, (int, float)) and isinstance(given, (int, float)) and not isinstance(given, bool):
        return math.isclose(float(given), float(stated), rel_tol=1e-12)
    return given == stated


def apply_manifest(cfg: dict[str, Any]) -> dict[str, Any]:
    """A data=bin config with the keys a manifest fixes filled from it (when data.path is a
    prepared directory); an explicit value that disagrees is a ConfigError naming the key.
    Without a manifest, an unset dtype means uint16 (nanoGPT's)."""
    cfg = dict(cfg)
    path = cfg.get("path")
    manifest = None
    if path not in (None, MISSING):
        directory = Path(str(path)).expanduser()
        if not directory.exists():  # e.g. a prepare that never finished: say so before any other key
            raise DataError(
                f"data.path: '{directory}' does not exist (data=bin needs a directory made by scaling prepare, "
                "a directory with train.bin and val.bin, or a .bin file)"
            )
        manifest = read_manifest(directory) if directory.is_dir() else None
    if manifest is None:
        cfg["dtype"] = cfg.get("dtype") or "uint16"
        return cfg
    for key in MANIFEST_KEYS:
        given, stated = cfg.get(key), manifest.get(key)
        if given not in (None, MISSING) and not _agrees(given, stated):
            raise ConfigError(
                f"data.{key}: {given!r} conflicts with {stated!r} in '{directory / MANIFEST}'; "
                f"leave data.{key} unset (or set data.{key}=null) to use the manifest's"
            )
        cfg[key] = stated
    return cfg
