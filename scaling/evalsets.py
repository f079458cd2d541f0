"""Named evaluation sets: the config group `eval` (conf/eval/), loaded, checked and recorded.

A run is scored at every evaluation point on each named set: ``val``, the held-out split of its
training corpus (always there), and every set of ``eval.sets``, each

  * a path: a prepared directory (`scaling prepare`'s output: its ``val.bin``, with
    ``manifest.json`` giving dtype, vocabulary and bytes per token) or one ``.bin`` file (all of it);
    ``{path: P, dtype: uint32}`` names the dtype of a file without a manifest (default uint16);
  * a data config with a ``source`` key (conf/data/*.yaml keys): that corpus's held-out split.

``eval.primary`` names the set whose loss is the run's ``val_loss`` (default ``val``). A set's
fingerprint is the training corpus's for ``val`` and a data config's corpus fingerprint for a
corpus set, else 16 hex digits of sha256 over its tokens as uint32 (any dtype reads the same).
The vocabulary of every set must be the training corpus's.

Runs with no extra set and the primary ``val`` are unchanged: their config, run id and record
carry nothing of this module (`configured`). numpy only: never imports torch.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scaling.corpus_cache import _HASH_CHUNK, cached, file_stamp
from scaling.errors import ConfigError, DataError
from scaling.manifest import tokenizer_of

DEFAULT = "val"  # the training corpus's held-out split
NAME = re.compile(r"^[A-Za-z0-9_-]+$")
BIN_DTYPES = ("uint16", "uint32")
MANIFEST = "manifest.json"
# Table and curve columns of a set (docs/CONTRACTS.md): `val_loss.NAME`, `eval_fingerprint.NAME`.
LOSS_PREFIX, FINGERPRINT_PREFIX = "val_loss.", "eval_fingerprint."


def loss_column(name: str) -> str:
    return LOSS_PREFIX + name


def fingerprint_column(name: str) -> str:
    return FINGERPRINT_PREFIX + name


@dataclass(frozen=True)
class EvalSet:
    name: str
    tokens: np.ndarray  # 1-D token ids, read-only
    fingerprint: str
    bytes_per_token: float  # NaN when unknown
    description: str


def _plain(eval_cfg) -> dict[str, Any]:
    if eval_cfg is None:
        return {"primary": DEFAULT, "sets": {}}
    if type(eval_cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(eval_cfg, resolve=True)
    return dict(eval_cfg)


def configured(eval_cfg) -> bool:
    """True when the config names any set beyond ``val``, or another primary set."""
    cfg = _plain(eval_cfg)
    return bool(cfg.get("sets")) or cfg.get("primary", DEFAULT) != DEFAULT


def check_config(eval_cfg) -> dict[str, Any]:
    """{"primary": name, "sets": {name: spec}} with names checked; ConfigError naming the key."""
    cfg = _plain(eval_cfg)
    sets = cfg.get("sets") or {}
    if not isinstance(sets, dict):
        raise ConfigError(
            f"eval.sets: {sets!r} is not a mapping; give {{NAME: PATH, ...}}, e.g. 'eval.sets={{heldout: data/web}}'"
        )
    for name, spec in sets.items():
        if name == DEFAULT:
            raise ConfigError(
                f"eval.sets.{name}: the name {DEFAULT!r} is the training corpus's held-out split; pick another"
            )
        if not NAME.match(str(name)):
            raise ConfigError(f"eval.sets.{name}: not a valid set name; use letters, digits, '_' and '-'")
        if not isinstance(spec, (str, dict)) or (isinstance(spec, dict) and not ({"path", "source"} & set(spec))):
            raise ConfigError(
                f"eval.sets.{name}: {spec!r} is not an evaluation set; give a path (a prepared directory or a "
                ".bin file), {path: P, dtype: uint16|uint32}, or a data config {source: ...}"
            )
    primary = cfg.get("primary", DEFAULT)
    if primary != DEFAULT and primary not in sets:
        raise ConfigError(f"eval.primary: {primary!r} is not an evaluation set; valid: {', '.join([DEFAULT, *sets])}")
    return {"primary": primary, "sets": sets}


def load_eval_sets(eval_cfg, corpus) -> list[EvalSet]:
    """``val`` then each of ``eval.sets`` in name order, each checked against the corpus's vocabulary.
    Raises ConfigError / DataError (one line naming eval.sets.NAME)."""
    cfg = check_config(eval_cfg)
    found = [EvalSet(DEFAULT, corpus.val, corpus.fingerprint, corpus.bytes_per_token, corpus.description)]
    for name in sorted(cfg["sets"]):
        spec = cfg["sets"][name]
        spec = {"path": spec} if isinstance(spec, str) else spec
        load = _corpus_set if "source" in spec else _path_set
        found.append(load(name, spec, corpus))
    return found


def primary_of(eval_cfg) -> str:
    return _plain(eval_cfg).get("primary", DEFAULT)


def _same_tokenizer(key: str, what: str, tokenizer: str | None, corpus) -> None:
    """An evaluation set's tokenizer (from its manifest) must be the training corpus's, when both are known:
    two BPEs trained apart share a vocabulary size, not their ids (the loss would be meaningless)."""
    if tokenizer and corpus.tokenizer and tokenizer != corpus.tokenizer:
        raise DataError(
            f"{key}: {what} was prepared with tokenizer {tokenizer}, the training corpus with {corpus.tokenizer}; "
            "an evaluation set must use the training tokenizer (scaling prepare --tokenizer DIR/tokenizer.json)"
        )


def _corpus_set(name: str, spec: dict, training) -> EvalSet:
    from scaling.data import load_corpus

    vocab = training.vocab_size

    try:
        other = load_corpus(spec)
    except (ConfigError, DataError) as err:
        raise type(err)(f"eval.sets.{name}: {err}") from None
    if other.vocab_size != vocab:
        raise DataError(
            f"eval.sets.{name}: corpus {other.name} has vocabulary {other.vocab_size}, the training corpus {vocab}; "
            "an evaluation set must use the training tokenizer"
        )
    _same_tokenizer(f"eval.sets.{name}", f"corpus {other.name}", other.tokenizer, training)
    return EvalSet(name, other.val, other.fingerprint, other.bytes_per_token, f"held-out split of {other.description}")


def read_manifest(directory: Path, key: str = "eval.sets") -> dict[str, Any]:
    """A prepared directory's manifest.json ({} when it has none); DataError when it is not one."""
    from scaling.manifest import read_manifest as read

    return read(directory, key) or {}


def _path_set(name: str, spec: dict, training) -> EvalSet:
    key, vocab = f"eval.sets.{name}", training.vocab_size
    path = Path(os.path.expanduser(str(spec["path"]))).resolve()
    if not path.exists():
        raise DataError(f"{key}: '{path}' does not exist; give a prepared directory (with val.bin) or a .bin file")
    manifest = read_manifest(path, key) if path.is_dir() else _beside(path, key)
    file = path / "val.bin" if path.is_dir() else path
    if not file.is_file():
        raise DataError(f"{key}: '{path}' has no val.bin; give a prepared directory (with val.bin) or a .bin file")
    dtype = spec.get("dtype") or manifest.get("dtype") or "uint16"
    if dtype not in BIN_DTYPES:
        raise ConfigError(f"{key}.dtype: {dtype!r} is not supported; valid: {', '.join(BIN_DTYPES)}")
    if manifest.get("vocab_size") not in (None, vocab):
        raise DataError(
            f"{key}: '{path}' has vocabulary {manifest['vocab_size']} ({MANIFEST}), the training corpus {vocab}; "
            "an evaluation set must use the training tokenizer"
        )
    _same_tokenizer(key, f"'{path}'", tokenizer_of(manifest), training)
    tokens = read_tokens(file, dtype, key)
    meta, _ = cached({"eval_set": dtype, "file": file_stamp(file)}, lambda: (_token_facts(tokens), {}))
    if meta["max_token"] >= vocab:
        raise DataError(
            f"{key}: '{file}' holds token id {meta['max_token']}, beyond the training vocabulary {vocab}; "
            f"an evaluation set must use the training tokenizer (or check its dtype, now {dtype})"
        )
    per_token = spec.get("bytes_per_token", manifest.get("bytes_per_token"))
    per_token = math.nan if per_token is None else float(per_token)
    description = f"{file} ({dtype}, {len(tokens):,} tokens)"
    return EvalSet(name, tokens, meta["fingerprint"], per_token, description)


def _beside(file: Path, key: str) -> dict[str, Any]:
    """The manifest of the prepared directory a .bin file lies in ({} when none, or another tool's manifest.json):
    its tokenizer is the file's (user22: data/bpeB/val.bin, of another BPE, skipped the check its directory got)."""
    try:
        return read_manifest(file.parent, key)
    except DataError:
        return {}


def read_tokens(file: Path, dtype: str, key: str) -> np.ndarray:
    """A .bin file of little-endian ids as a read-only memmap; DataError for an empty or ragged file."""
    itemsize, size = np.dtype(dtype).itemsize, file.stat().st_size
    if size == 0 or size % itemsize:
        raise DataError(f"{key}: '{file}' has {size} bytes, not a positive multiple of {itemsize} ({dtype})")
    return np.memmap(file, dtype=np.dtype(dtype).newbyteorder("<"), mode="r")


def _token_facts(tokens: np.ndarray) -> dict[str, Any]:
    digest, largest = hashlib.sha256(b"eval-set-v1"), 0
    for start in range(0, len(tokens), _HASH_CHUNK):
        chunk = np.asarray(tokens[start : start + _HASH_CHUNK])
        digest.update(chunk.astype("<u4").tobytes())
        largest = max(largest, int(chunk.max()))
    return {"fingerprint": digest.hexdigest()[:16], "max_token": largest}


def check_windows(sets: list[EvalSet], seq_len: int, n_tokens: int) -> int:
    """The number of windows per set; DataError naming a set too small for train.eval_tokens."""
    n_seq = n_tokens // seq_len
    for item in sets[1:]:  # val: scaling.data.check_windows
        if len(item.tokens) < n_seq * seq_len + 1:
            raise DataError(
                f"eval.sets.{item.name}: {len(item.tokens):,} tokens, but train.eval_tokens {n_tokens} at seq_len "
                f"{seq_len} needs {n_seq * seq_len + 1:,}; lower train.eval_tokens or give a larger set"
            )
    return n_seq


def check_evaluation(cfg) -> None:
    """The corpus's validation split, and each of ``eval.sets``, holds train.eval_tokens at train.seq_len
    (ConfigError/DataError naming the key; cached corpus reads): a run checks it before it writes anything
    (`scaling.train.preflight`), a sweep before it writes its plan (user32: a sweep refused for its eval_tokens had
    replaced the store's sweep.json first)."""
    from scaling import data

    corpus = data.load_corpus(cfg.data)
    data.check_windows(corpus, cfg.train.seq_len, cfg.train.eval_tokens)
    if configured(cfg.get("eval")):
        check_windows(load_eval_sets(cfg.eval, corpus), cfg.train.seq_len, cfg.train.eval_tokens)


def primary_set(eval_cfg, sets: list[EvalSet]) -> EvalSet:
    primary = primary_of(eval_cfg)
    return next(s for s in sets if s.name == primary)


def record_keys(eval_cfg, sets: list[EvalSet], curve: list[dict]) -> dict[str, Any]:
    """The record's keys of a run with evaluation sets: the last loss of each set on the curve."""

    def last(name: str) -> float:
        column = loss_column(name)
        return next((p[column] for p in reversed(curve) if math.isfinite(p.get(column, math.nan))), math.nan)

    return {
        "eval_primary": primary_of(eval_cfg),
        "eval_losses": {s.name: last(s.name) for s in sets},
        "eval_fingerprints": {s.name: s.fingerprint for s in sets},
        "eval_descriptions": {s.name: s.description for s in sets},
    }


def curve_losses(point: dict[str, Any]) -> dict[str, float]:
    """A curve point's per-set losses ({} for a run without evaluation sets)."""
    return {k: v for k, v in point.items() if k.startswith(LOSS_PREFIX)}


def curve_rows(record: dict[str, Any], columns: list[str]) -> list[dict]:
    """The record's curve points as rows of curves.csv: run_id, ``columns[1:]``, each set's loss."""
    return [
        {"run_id": record["run_id"], **{k: p.get(k) for k in columns[1:]}, **curve_losses(p)}
        for p in record.get("curve") or []
    ]


def extra_columns(rows: list[dict], columns: list[str]) -> list[str]:
    """``columns``, then the evaluation sets' columns any row has, sorted (store tables)."""
    return columns + sorted({key for row in rows for key in row} - set(columns))


def table_columns(record: dict[str, Any]) -> dict[str, Any]:
    """A record's per-set table columns ({} for a run without evaluation sets)."""
    losses, prints = record.get("eval_losses") or {}, record.get("eval_fingerprints") or {}
    columns = {loss_column(name): loss for name, loss in losses.items()}
    columns.update({fingerprint_column(name): value for name, value in prints.items()})
    return columns
