"""The work of `scaling prepare`: pieces encoded by a pool of processes (every core), written in
order as they arrive, so the shards are the same for any number of workers.

Each worker runs the tokenizer with its own parallelism off (TOKENIZERS_PARALLELISM=false): the pool
is the parallelism, one process per core, and `encode_batch` encodes a piece's documents at once.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from scaling.manifest import SPLITS
from scaling.prepare.sources import Piece, documents, held_out
from scaling.prepare.tokenizer import Encoder, TokenizerSpec

_WORKER: dict = {}


@dataclass
class Encoded:
    """One piece's ids per split, its documents, their UTF-8 bytes, and the input bytes it covered."""

    ids: dict[str, np.ndarray]
    documents: dict[str, int]
    text_bytes: dict[str, int]
    input_bytes: int


@dataclass
class Totals:
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    documents: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    text_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    input_bytes: int = 0

    def add(self, piece: Encoded) -> None:
        for split in SPLITS:
            self.tokens[split] += len(piece.ids[split])
            self.documents[split] += piece.documents[split]
            self.text_bytes[split] += piece.text_bytes[split]
        self.input_bytes += piece.input_bytes


def _init(spec: TokenizerSpec, fields: dict[str, str], fraction: float, parallel: bool) -> None:
    if not parallel:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _WORKER.update(encoder=Encoder(spec), fields=fields, fraction=fraction)


def split_documents(piece: Piece, field_name: str, fraction: float, text: bool) -> Iterator[tuple[str, object, bool]]:
    """(split, document, ends a document?) for the non-empty documents of a piece, in order."""
    for doc, val, end in documents(piece, field_name, decode=text):
        if not doc:
            continue
        if val is None:  # a JSONL or Parquet document (str): its split from its own hash
            val = held_out(hashlib.sha256(doc.encode()).digest(), fraction)
        yield ("val" if val else "train"), (doc.encode() if isinstance(doc, str) and not text else doc), end


def encode_piece(piece: Piece) -> Encoded:
    encoder: Encoder = _WORKER["encoder"]
    docs: dict[str, list] = {split: [] for split in SPLITS}
    ends: dict[str, list[bool]] = {split: [] for split in SPLITS}
    text = encoder.tokenizer is not None
    field_name = _WORKER["fields"].get(piece.source.kind, "")
    for split, doc, end in split_documents(piece, field_name, _WORKER["fraction"], text):
        docs[split].append(doc)
        ends[split].append(end)
    size = lambda doc: len(doc.encode()) if isinstance(doc, str) else len(doc)
    return Encoded(
        ids={split: encoder.encode(docs[split], ends[split]) for split in SPLITS},
        documents={split: sum(ends[split]) for split in SPLITS},
        text_bytes={split: sum(map(size, docs[split])) for split in SPLITS},
        input_bytes=piece.input_bytes,
    )


def encoded_pieces(pieces: list[Piece], spec: TokenizerSpec, args, workers: int) -> Iterator[Encoded]:
    """Every piece encoded, in order: in this process for one worker, else a spawned pool."""
    if workers <= 1:
        _init(spec, args.fields, args.holdout, parallel=True)
        yield from map(encode_piece, pieces)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process whose tokenizer threads ran
    with context.Pool(workers, initializer=_init, initargs=(spec, args.fields, args.holdout, False)) as pool:
        yield from pool.imap(encode_piece, pieces, chunksize=1)


class Progress:
    """One line on stderr at most every `every` seconds: input read, tokens, rate, time left."""

    def __init__(self, total_bytes: int, every: float = 2.0):
        self.total, self.every = max(total_bytes, 1), every
        self.start = self.last = time.monotonic()

    def update(self, totals: Totals, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.every:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        done = totals.input_bytes / self.total
        tokens = sum(totals.tokens.values())
        eta = f", {elapsed * (1 - done) / done:.0f}s left" if 0 < done < 1 else ""
        print(
            f"prepare: {totals.input_bytes / 1e6:.1f} of {self.total / 1e6:.1f} MB ({done:.0%}), "
            f"{tokens:,} tokens, {totals.input_bytes / 1e6 / elapsed:.2f} MB/s, {tokens / elapsed:,.0f} tokens/s{eta}",
            file=sys.stderr,
            flush=True,
        )
