"""The inputs of `scaling prepare`: files found, hashed, cut into pieces, and read as documents.

A text file is one document (its bytes). A JSONL file holds one document per line (the string in
a named field); a Parquet file one per row (a named string column). Empty documents and null values
are skipped. Work is cut into pieces of about PIECE_BYTES (a text or JSONL file at line ends, a
Parquet file by row groups), so no piece, and never the whole corpus, is held in memory at once.
A text file larger than PIECE_BYTES is encoded piece by piece, cut after a newline.

Held out (the `val` split): a document whose sha256 (of its UTF-8 bytes; a text file: of the
file) read as a fraction, its first 8 bytes big-endian / 2^64, is below the holdout fraction.
The rule depends on the content only: a document is in the same split in every run, whatever its
file, position or the number of workers, and two copies of one document share a split.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scaling.errors import DataError

TEXT_SUFFIXES = (".txt", ".text", ".md", ".markdown", ".rst")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet",)
DEFAULT_SUFFIXES = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES
PIECE_BYTES = 4 << 20
HOLDOUT_RULE = (
    "sha256 of each document's UTF-8 bytes (a text file: of the file); held out when its first 8 bytes, "
    "big-endian, divided by 2^64, are below the fraction"
)


@dataclass(frozen=True)
class Source:
    path: Path
    kind: str  # "text" | "jsonl" | "parquet"
    size: int


@dataclass(frozen=True)
class Piece:
    """A unit of work: bytes [start, end) of a text/JSONL file (moved to line ends), or one Parquet row group."""

    source: Source
    start: int
    end: int
    whole_file_val: bool | None = None  # text files: the file's split, from its hash (decided up front)
    input_bytes: int = 0  # the share of the file's bytes this piece stands for (progress)


def held_out(digest: bytes, fraction: float) -> bool:
    return int.from_bytes(digest[:8], "big") < fraction * 2.0**64


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return "parquet" if name.endswith(PARQUET_SUFFIXES) else "text"


def find_sources(inputs: list[str], suffixes: tuple[str, ...] | None) -> list[Source]:
    """Every input file in order: a file as given (any name), a directory's files recursively in
    sorted relative-path order (names ending in one of `suffixes`, all when None; hidden files and directories
    skipped). Each is checked readable here, before any work."""
    found: dict[Path, Source] = {}
    for given in inputs:
        path = Path(os.path.expanduser(given))
        if not path.exists():
            raise DataError(f"INPUT: '{given}' does not exist (give text, JSONL or Parquet files or directories)")
        files = [path] if path.is_file() else _walk(path, suffixes)
        for file in files:
            _check_readable(file)
            found.setdefault(file.resolve(), Source(file.resolve(), _kind(file), file.stat().st_size))
    if not found:
        endings = ", ".join(suffixes) if suffixes else "any"
        raise DataError(f"INPUT: no input files in {', '.join(inputs)} (directories are searched for {endings})")
    return list(found.values())


def _walk(root: Path, suffixes: tuple[str, ...] | None) -> list[Path]:
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and (suffixes is None or name.lower().endswith(suffixes)):
                files.append(Path(directory, name))
    return sorted(files, key=lambda path: path.relative_to(root).parts)


def _check_readable(path: Path) -> None:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as err:
        raise DataError(f"INPUT: '{path}' cannot be read ({err.strerror or err})") from None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    except OSError as err:
        raise DataError(f"INPUT: '{path}' cannot be read ({err.strerror or err})") from None
    return digest.hexdigest()


def pieces(source: Source, sha256: str, fraction: float) -> list[Piece]:
    """The pieces of one source (a text file's split decided here, from the whole file's hash)."""
    if source.kind == "parquet":
        count = _parquet_file(source.path).metadata.num_row_groups
        share = lambda g: source.size * (g + 1) // count - source.size * g // count
        return [Piece(source, group, group + 1, None, share(group)) for group in range(count)]
    val = held_out(bytes.fromhex(sha256), fraction) if source.kind == "text" else None
    bounds = [(start, min(start + PIECE_BYTES, source.size)) for start in range(0, max(source.size, 1), PIECE_BYTES)]
    return [Piece(source, start, end, val, end - start) for start, end in bounds]


def _parquet_file(path: Path):
    try:
        import pyarrow.parquet as pq

        return pq.ParquetFile(path)
    except ImportError:
        raise DataError("INPUT: Parquet input needs pyarrow (pip install pyarrow)") from None
    except Exception as err:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        raise DataError(f"INPUT: '{path}' cannot be read as Parquet ({str(err).splitlines()[0]})") from None


def _line_range(path: Path, start: int, end: int) -> tuple[bytes, int]:
    """The bytes of whole lines owned by [start, end): a line belongs to the piece where it starts
    (the first piece of a file owns its first line). Returns (data, offset of data in the file)."""
    with open(path, "rb") as handle:
        if start > 0:
            handle.seek(start - 1)
            handle.readline()  # finish the line that began before start (the previous piece's)
        begin = handle.tell()
        if begin >= end and start > 0:
            return b"", begin
        data = handle.read(max(end - begin, 0))
        if data and not data.endswith(b"\n"):
            data += handle.readline()
    return data, begin


def documents(piece: Piece, field: str, decode: bool) -> Iterator[tuple[bytes | str, bool | None, bool]]:
    """(document, held out?, ends a document?) for each document or document part of a piece. Text
    parts carry the file's split, as bytes, or as str when `decode` (UTF-8, strictly); JSONL/Parquet
    documents are whole strings and their split is left to the caller (None)."""
    source = piece.source
    if source.kind == "parquet":
        yield from ((text, None, True) for text in _parquet_texts(piece, field))
        return
    data, offset = _line_range(source.path, piece.start, piece.end)
    if source.kind == "text":
        if data:
            yield (
                (_utf8(data, source.path, offset) if decode else data),
                piece.whole_file_val,
                (offset + len(data) >= source.size),
            )
        return
    for number, line in enumerate(data.splitlines()):
        if line.strip():
            yield _jsonl_text(line, field, source.path, offset, data, number), None, True


def _utf8(data: bytes, path: Path, offset: int) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as err:
        raise DataError(
            f"INPUT: '{path}' is not UTF-8 text (byte {offset + err.start}); "
            "a tokenizer reads UTF-8 (--tokenizer bytes takes any bytes)"
        ) from None


def _jsonl_text(line: bytes, field: str, path: Path, offset: int, data: bytes, number: int) -> str:
    def where() -> str:  # the line's number in the file, counted only when an error needs it
        with open(path, "rb") as handle:
            before = handle.read(offset).count(b"\n")
        return f"'{path}' line {before + number + 1}"

    try:
        record = json.loads(line)
    except ValueError as err:
        raise DataError(f"INPUT: {where()} is not JSON ({err})") from None
    if not isinstance(record, dict) or field not in record:
        keys = ", ".join(map(str, record)) if isinstance(record, dict) else type(record).__name__
        raise DataError(f"INPUT: {where()} has no field {field!r} (--jsonl-field); it has: {keys or 'no keys'}")
    value = record[field]
    if value is not None and not isinstance(value, str):
        raise DataError(f"INPUT: {where()} field {field!r} is {type(value).__name__}, not a string")
    return value or ""


def _parquet_texts(piece: Piece, column: str) -> list[str]:
    parquet = _parquet_file(piece.source.path)
    names = parquet.schema_arrow.names
    if column not in names:
        raise DataError(
            f"INPUT: '{piece.source.path}' has no column {column!r} (--parquet-column); it has: {', '.join(names)}"
        )
    values = parquet.read_row_group(piece.start, columns=[column]).column(0).to_pylist()
    bad = next((v for v in values if v is not None and not isinstance(v, str)), None)
    if bad is not None:
        raise DataError(f"INPUT: '{piece.source.path}' column {column!r} holds {type(bad).__name__}, not strings")
    return [value or "" for value in values]
