"""Tokenizers for `scaling prepare`: the built-in bytes, a Hugging Face `tokenizers` file, or a
byte-level BPE trained on the corpus itself with the same library (nothing is downloaded).

Each document's tokens are followed by one separator token: the byte 0x1C (scaling.data's
FILE_SEPARATOR) for bytes; `<|endoftext|>` for a trained BPE (its id 0) and for a tokenizer file
that has it (else no separator). Documents are encoded without the tokenizer's own special tokens
(add_special_tokens=False), so counts equal `len(tokenizer.encode(doc, add_special_tokens=False).ids)`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaling.data import FILE_SEPARATOR
from scaling.errors import DataError

SEPARATOR = "<|endoftext|>"
UINT16_VOCAB = 1 << 16  # ids 0..65535 fit uint16


@dataclass(frozen=True)
class TokenizerSpec:
    kind: str  # "bytes" | "tokenizers" | "bpe"
    vocab_size: int
    separator_id: int | None
    json: str | None = None  # the tokenizer serialized (kinds "tokenizers" and "bpe")
    path: str | None = None  # its file
    sha256: str | None = None  # of the file

    def manifest(self) -> dict:
        entry = {"kind": self.kind, "vocab_size": self.vocab_size, "separator_id": self.separator_id}
        if self.path:
            entry.update(path=self.path, sha256=self.sha256)
        return entry


def _library():
    try:
        import tokenizers
    except ImportError:  # a dependency in pyproject.toml; this guards a broken environment
        raise DataError("--tokenizer: the `tokenizers` library is not installed (pip install tokenizers)") from None
    return tokenizers


BYTES = TokenizerSpec("bytes", 256, FILE_SEPARATOR)


def from_file(path: str) -> TokenizerSpec:
    """A `tokenizer.json` saved by the Hugging Face `tokenizers` library."""
    tokenizers = _library()
    file = Path(path).expanduser()
    try:
        text = file.read_text()
        tokenizer = tokenizers.Tokenizer.from_str(text)
    except OSError as err:
        raise DataError(f"--tokenizer: '{file}' cannot be read ({err.strerror or err})") from None
    except Exception as err:  # the library raises a plain Exception for a file it cannot parse
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"--tokenizer: '{file}' is not a tokenizers JSON file ({first})") from None
    digest = hashlib.sha256(text.encode()).hexdigest()
    return TokenizerSpec(
        "tokenizers",
        tokenizer.get_vocab_size(with_added_tokens=True),
        tokenizer.token_to_id(SEPARATOR),
        text,
        str(file.resolve()),
        digest,
    )


def train_bpe(texts: Iterable[str], vocab_size: int, out: Path) -> TokenizerSpec:
    """A byte-level BPE (GPT-2's pre-tokenization, every byte in the alphabet, so no text is
    unknown) of at most `vocab_size` tokens, `<|endoftext|>` id 0, trained on `texts`, saved at `out`."""
    tokenizers = _library()
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SEPARATOR],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.save(str(out))
    text = out.read_text()
    return TokenizerSpec(
        "bpe",
        tokenizer.get_vocab_size(with_added_tokens=True),
        tokenizer.token_to_id(SEPARATOR),
        text,
        str(out.name),  # inside the prepared directory
        hashlib.sha256(text.encode()).hexdigest(),
    )


class Encoder:
    """Encodes batches of documents to one id array with a separator after each document."""

    def __init__(self, spec: TokenizerSpec):
        self.spec = spec
        self.tokenizer = _library().Tokenizer.from_str(spec.json) if spec.json else None

    def encode(self, docs: list[bytes | str], ends: list[bool]) -> np.ndarray:
        """The ids of `docs` in order (uint16, or uint32 for a larger vocabulary); the separator follows each doc whose `ends` is True."""
        if self.tokenizer is None:
            parts = [np.frombuffer(doc if isinstance(doc, bytes) else doc.encode(), np.uint8) for doc in docs]
        else:
            texts = [doc.decode() if isinstance(doc, bytes) else doc for doc in docs]
            # encode_batch_fast (tokenizers >= 0.20): the same ids, without computing character offsets
            batch = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
            parts = [np.asarray(e.ids, dtype=np.int64) for e in batch(texts, add_special_tokens=False)]
        sep = self.spec.separator_id
        out: list[np.ndarray] = []
        for part, end in zip(parts, ends):
            out.append(part.astype(np.int64, copy=False))
            if end and sep is not None:
                out.append(np.array([sep], np.int64))
        ids = np.concatenate(out) if out else np.zeros(0, np.int64)
        return ids.astype(np.uint16 if self.spec.vocab_size <= UINT16_VOCAB else np.uint32)  # 4x less to pass on
