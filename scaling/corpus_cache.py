"""The corpus cache and fingerprint.

What a corpus load computes is cached under $SCALING_CACHE (default ~/.cache/scaling)/corpora, keyed
by the source's settings and the size and mtime of each input file, so a run in a fresh process
neither re-reads nor re-generates the corpus: it memory-maps the tokens and reads the fingerprint.
The fingerprint is the first 16 hex digits of sha256 over the split settings and every token.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from scaling.store import atomic_write_bytes

CACHE_FORMAT = 2  # bump when the layout or meaning of cached entries changes
_HASH_CHUNK = 1 << 24  # elements hashed at a time, to bound memory on huge .bin files


def cache_dir() -> Path:
    """$SCALING_CACHE/corpora, default ~/.cache/scaling/corpora."""
    return Path(os.environ.get("SCALING_CACHE") or Path.home() / ".cache" / "scaling") / "corpora"


def cached(
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


def file_stamp(path: Path) -> list:
    """What identifies a file's version without reading it: path, size, modification time."""
    stat = path.stat()
    return [str(path), stat.st_size, stat.st_mtime_ns]
