"""`scaling prepare`: text files, directories, JSONL or Parquet -> a prepared corpus that
`scaling train data=bin data.path=DIR` reads (train.bin, val.bin, manifest.json; scaling.manifest).

  scaling prepare INPUT... --out DIR [--tokenizer bytes|PATH/tokenizer.json | --train-bpe VOCAB]
                  [--jsonl-field text] [--parquet-column text] [--holdout 0.01] [--workers N]

Inputs are read in pieces (scaling.prepare.sources), encoded by a pool of processes, one per usable
core (scaling.prepare.pipeline), and written as they arrive into DIR.tmp-<pid>, which becomes DIR
with its manifest last (scaling.prepare.staging): an interrupted prepare leaves no DIR.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaling.errors import ConfigError, DataError, Parser
from scaling.machine import usable_cores
from scaling.manifest import FORMAT, SPLITS
from scaling.prepare import sources as src
from scaling.prepare import tokenizer as tok
from scaling.prepare.pipeline import Progress, Totals, encoded_pieces, split_documents
from scaling.prepare.staging import Staging, check_out, remove_leftovers

DTYPES = {"uint16": tok.UINT16_VOCAB, "uint32": 1 << 32}


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="scaling prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="text/JSONL/Parquet files or directories")
    p.add_argument("--out", required=True, help="the prepared corpus directory to write")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--tokenizer", default="bytes", help="bytes (default) or the path of a tokenizer.json")
    how.add_argument("--train-bpe", type=int, metavar="VOCAB", help="train a byte-level BPE of VOCAB tokens here")
    p.add_argument("--jsonl-field", default="text", help="the field of each JSONL line holding its text")
    p.add_argument("--parquet-column", default="text", help="the Parquet column holding the text")
    p.add_argument("--holdout", type=float, default=0.01, help="fraction of documents held out into val.bin")
    p.add_argument("--workers", type=int, default=None, help="processes (default: every usable core)")
    p.add_argument("--dtype", choices=tuple(DTYPES), help="default: uint16 when the vocabulary fits, else uint32")
    p.add_argument(
        "--ext",
        default=",".join(src.DEFAULT_SUFFIXES),
        help="name endings taken from directories, comma-separated, or '*' for every file (default: %(default)s)",
    )
    return p


def _dtype(vocab: int, asked: str | None, what: str) -> str:
    if asked and vocab > DTYPES[asked]:
        raise ConfigError(
            f"--dtype: {asked} holds ids below {DTYPES[asked]:,}, but {what} has {vocab:,} tokens; use --dtype uint32"
        )
    return asked or ("uint16" if vocab <= tok.UINT16_VOCAB else "uint32")


def _check_args(args) -> None:
    if not 0 < args.holdout < 0.5:
        raise ConfigError(f"--holdout: {args.holdout!r} must be in (0, 0.5)")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers: {args.workers} must be >= 1")
    if args.train_bpe is not None:
        if not 257 <= args.train_bpe <= 1 << 24:
            raise ConfigError(f"--train-bpe: {args.train_bpe} must be in [257, 16777216] (256 bytes + merges)")
        _dtype(args.train_bpe, args.dtype, f"--train-bpe {args.train_bpe}")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    _check_args(args)
    out = Path(args.out).expanduser().resolve()
    check_out(out)
    remove_leftovers(out)
    suffixes = None if args.ext.strip() == "*" else tuple(e.strip().lower() for e in args.ext.split(",") if e.strip())
    found = src.find_sources(args.inputs, suffixes)
    spec = tok.from_file(args.tokenizer) if args.train_bpe is None and args.tokenizer != "bytes" else None
    if spec is not None:
        _dtype(spec.vocab_size, args.dtype, f"'{args.tokenizer}'")
    args.fields = {"jsonl": args.jsonl_field, "parquet": args.parquet_column}
    print(f"prepare: {len(found)} input files, {sum(s.size for s in found) / 1e6:.1f} MB; hashing", file=sys.stderr)
    hashes = [src.file_sha256(source.path) for source in found]
    pieces = [p for source, sha in zip(found, hashes) for p in src.pieces(source, sha, args.holdout)]
    staging = Staging(out)
    try:
        spec = spec or _train_or_bytes(args, pieces, staging.tmp)
        dtype = _dtype(spec.vocab_size, args.dtype, "the tokenizer")
        totals = _encode(pieces, spec, args, staging, dtype, sum(s.size for s in found))
        manifest = _manifest(args, spec, dtype, totals, found, hashes, staging.fingerprint())
        staging.commit(manifest)
    except BaseException:
        staging.abort()
        raise
    _summary(out, manifest)
    return 0


def _train_or_bytes(args, pieces: list[src.Piece], directory: Path) -> tok.TokenizerSpec:
    if args.train_bpe is None:
        return tok.BYTES
    print(f"prepare: training a byte-level BPE of {args.train_bpe:,} tokens on the training documents", file=sys.stderr)
    texts = (
        doc
        for piece in pieces
        for split, doc, _ in split_documents(piece, args.fields.get(piece.source.kind), args.holdout, True)
        if split == "train"
    )
    return tok.train_bpe(texts, args.train_bpe, directory / "tokenizer.json")


def _encode(pieces, spec, args, staging: Staging, dtype: str, total_bytes: int) -> Totals:
    workers = min(args.workers or usable_cores(), len(pieces))
    print(f"prepare: encoding {len(pieces)} pieces with {workers} worker processes", file=sys.stderr)
    staging.open(dtype)
    totals, progress = Totals(), Progress(total_bytes)
    for encoded in encoded_pieces(pieces, spec, args, workers):
        for split in SPLITS:
            staging.write(split, encoded.ids[split])
        totals.add(encoded)
        progress.update(totals)
    progress.update(totals, final=True)
    documents = sum(totals.documents.values())
    if documents < 2:  # no --holdout can make two non-empty splits of it
        raise DataError(
            f"INPUT: {'no text' if documents == 0 else 'one document'} in the inputs (a text file is one "
            "document, a JSONL line or a Parquet row one; empty ones are skipped); a train and a val split "
            "need at least 2: give more files, or split a single text file into several"
        )
    for split in SPLITS:
        if totals.tokens[split] == 0:
            raise DataError(
                f"--holdout: {args.holdout} leaves the {split} split empty ({documents} documents in all); "
                + ("raise --holdout or give more documents" if split == "val" else "lower --holdout")
            )
    return totals


def _manifest(args, spec, dtype, totals: Totals, found, hashes, fingerprint: str) -> dict:
    tokens = sum(totals.tokens.values())
    return {
        "format": FORMAT,
        "tokenizer": spec.manifest(),
        "vocab_size": spec.vocab_size,
        "dtype": dtype,
        "splits": {
            split: {
                "tokens": totals.tokens[split],
                "documents": totals.documents[split],
                "text_bytes": totals.text_bytes[split],
                "file": f"{split}.bin",
            }
            for split in SPLITS
        },
        "sources": [{"path": str(s.path), "sha256": h, "bytes": s.size} for s, h in zip(found, hashes)],
        "fields": {"jsonl": args.jsonl_field, "parquet": args.parquet_column},
        "holdout": {"fraction": args.holdout, "rule": src.HOLDOUT_RULE},
        "fingerprint": fingerprint,
        "bytes_per_token": sum(totals.text_bytes.values()) / tokens,
    }


def _summary(out: Path, manifest: dict) -> None:
    splits = manifest["splits"]
    print(
        f"prepared {out}: train {splits['train']['tokens']:,} tokens ({splits['train']['documents']:,} documents), "
        f"val {splits['val']['tokens']:,} ({splits['val']['documents']:,}); {manifest['dtype']}, "
        f"vocab {manifest['vocab_size']:,}, {manifest['bytes_per_token']:.3f} bytes/token, "
        f"fingerprint {manifest['fingerprint']}"
    )
    print(f"train on it: scaling train data=bin data.path={out}")
