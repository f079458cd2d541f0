"""The output directory of `scaling prepare`, built out of sight and moved into place whole.

Shards are written into `DIR.tmp-<pid>` beside DIR as the tokens arrive (streaming), then the
fingerprint is computed from the files, manifest.json is written last (atomically), and the
directory is renamed to DIR. A killed prepare leaves only `DIR.tmp-<pid>`, which no reader takes
for a corpus and the next prepare into DIR removes. An existing DIR is replaced only when it is a
prepared corpus itself (it has a manifest.json) or empty; anything else is refused, untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from scaling.corpus_cache import fingerprint
from scaling.errors import DataError
from scaling.manifest import MANIFEST, SPLITS, bin_dir_split
from scaling.store import atomic_write_bytes

_LEFTOVERS = (".tmp-", ".old-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(out: Path) -> list[Path]:
    """`DIR.tmp-<pid>` / `DIR.old-<pid>` of prepares whose process is gone (killed mid-way)."""
    removed = []
    for tag in _LEFTOVERS:
        for path in out.parent.glob(f"{out.name}{tag}*"):
            pid = path.name[len(out.name) + len(tag) :]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def check_out(out: Path) -> None:
    """DataError when DIR exists and is neither a prepared corpus nor an empty directory."""
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file()):
        raise DataError(
            f"--out: '{out}' exists and is not a prepared corpus (no {MANIFEST}); "
            "choose a new directory or remove it (a prepared corpus is replaced whole)"
        )


class Staging:
    """`DIR.tmp-<pid>` with train.bin and val.bin open for appending ids of one dtype."""

    def __init__(self, out: Path):
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = out.parent / f"{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()
        self.files: dict = {}

    def open(self, dtype: str) -> None:
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.dtype_name = dtype
        self.files = {split: open(self.tmp / f"{split}.bin", "wb") for split in SPLITS}

    def write(self, split: str, ids: np.ndarray) -> None:
        self.files[split].write(ids.astype(self.dtype).tobytes())

    def fingerprint(self) -> str:
        """The fingerprint data=bin computes for these shards (same split settings, same hash)."""
        for handle in self.files.values():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        maps = [np.memmap(self.tmp / f"{split}.bin", dtype=self.dtype, mode="r") for split in SPLITS]
        return fingerprint(bin_dir_split(self.dtype_name), *maps)

    def commit(self, manifest: dict) -> None:
        """manifest.json last, then the directory moves into place (replacing a prepared DIR)."""
        atomic_write_bytes(self.tmp / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
        old = self.out.parent / f"{self.out.name}.old-{os.getpid()}"
        if self.out.exists():
            os.rename(self.out, old)
        os.rename(self.tmp, self.out)
        shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        for handle in self.files.values():
            handle.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
