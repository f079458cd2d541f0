"""`scaling prepare` end to end: real text, JSONL and Parquet inputs, a BPE trained here with the
`tokenizers` library, shards checked against the library's own counts, the held-out rule, a kill
mid-way, a tiny training run on the result, and bad input."""

import hashlib
import json
import os
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, assert_one_line_error, run_cli
from tokenizers import Tokenizer, models

from scaling.data import load_corpus
from scaling.errors import ConfigError, DataError
from scaling.prepare import sources

HOLDOUT = 0.2
FAULTS = {"PYTHONPATH": f"{ROOT / 'tests' / 'fault_hooks'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
TINY_TRAIN = [
    "model=d16",
    "budget=3e9",
    "train.min_steps=5",
    "tracking=none",
    "train.eval_tokens=2048",
    "train.evals=2",
]


def _chunks(path: Path, lines: int) -> list[str]:
    text = path.read_text().splitlines(keepends=True)
    return ["".join(text[i : i + lines]) for i in range(0, len(text), lines)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Real text (this Python's email and json packages): text files in a directory tree, a JSONL
    file (field `text`, among others), and a Parquet file of two row groups (column `text`)."""
    root = tmp_path_factory.mktemp("inputs")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    email = sorted((stdlib / "email").glob("*.py"))
    (root / "texts" / "sub").mkdir(parents=True)
    for i, path in enumerate(email[:10]):
        (root / "texts" / ("sub" if i % 2 else "") / f"{path.stem}.txt").write_bytes(path.read_bytes())
    (root / "texts" / "unicode.md").write_text("naïve café — 東京 🙂\n" * 3)
    (root / "texts" / "ignored.bin").write_bytes(b"\x00\xff" * 10)  # not a text name ending: skipped
    docs = [doc for path in email[10:] for doc in _chunks(path, 40)]
    with open(root / "docs.jsonl", "w") as handle:
        for i, doc in enumerate(docs):
            handle.write(json.dumps({"id": i, "text": doc, "meta": {"n": len(doc)}}) + "\n")
            if i == 3:
                handle.write("\n")  # blank lines are skipped
    rows = [doc for path in sorted((stdlib / "json").glob("*.py")) for doc in _chunks(path, 30)]
    pq.write_table(pa.table({"text": rows, "n": list(range(len(rows)))}), root / "rows.parquet", row_group_size=10)
    return root


def _documents(inputs: Path) -> list[str]:
    """Every document, in the order prepare reads them, straight from the inputs."""
    texts = sorted(p for p in (inputs / "texts").rglob("*") if p.suffix in (".txt", ".md"))
    docs = [p.read_text() for p in sorted(texts, key=lambda p: p.relative_to(inputs / "texts").parts)]
    docs += [json.loads(line)["text"] for line in (inputs / "docs.jsonl").read_text().splitlines() if line.strip()]
    return docs + pq.read_table(inputs / "rows.parquet").column("text").to_pylist()


def _held_out(doc: str) -> bool:
    return int.from_bytes(hashlib.sha256(doc.encode()).digest()[:8], "big") < HOLDOUT * 2**64


def _prepare(inputs: Path, out: Path, *extra, env=None):
    args = [inputs / "texts", inputs / "docs.jsonl", inputs / "rows.parquet", "--out", out, "--holdout", HOLDOUT]
    return run_cli("prepare", *args, *extra, env=env, timeout=300)


@pytest.fixture(scope="module")
def prepared(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "corpus"
    proc = _prepare(inputs, out, "--train-bpe", 600, "--workers", 2)
    assert proc.returncode == 0, proc.stderr
    assert "prepare:" in proc.stderr and "tokens/s" in proc.stderr  # progress on stderr
    return out


def test_shards_hold_exactly_the_tokenizers_own_encoding(prepared, inputs):
    manifest = json.loads((prepared / "manifest.json").read_text())
    assert manifest["format"] == "scaling-shards-1" and manifest["dtype"] == "uint16"
    tokenizer = Tokenizer.from_file(str(prepared / "tokenizer.json"))
    assert manifest["vocab_size"] == tokenizer.get_vocab_size() <= 600
    separator = tokenizer.token_to_id("<|endoftext|>")
    expected = {"train": [], "val": []}
    for doc in _documents(inputs):
        expected["val" if _held_out(doc) else "train"].append(doc)
    for split, docs in expected.items():
        ids = np.fromfile(prepared / f"{split}.bin", dtype="<u2")
        counts = sum(len(tokenizer.encode(doc, add_special_tokens=False).ids) + 1 for doc in docs)
        assert len(ids) == counts == manifest["splits"][split]["tokens"]
        assert manifest["splits"][split]["documents"] == len(docs) > 0
        # the shard is the documents themselves, each followed by the separator
        cuts = np.flatnonzero(ids == separator)
        decoded = [tokenizer.decode(part.tolist()) for part in np.split(ids, cuts + 1)[:-1]]
        assert decoded == [doc for doc in docs], split
    assert [s["sha256"] for s in manifest["sources"]] == [
        hashlib.sha256(Path(s["path"]).read_bytes()).hexdigest() for s in manifest["sources"]
    ]
    assert not list(prepared.parent.glob("corpus.tmp-*"))


def test_holdout_is_stable_and_independent_of_workers_and_tokenizer_source(prepared, inputs, tmp_path):
    """The trained tokenizer given back as a file, one worker: the same shards and fingerprint."""
    again = tmp_path / "again"
    proc = _prepare(inputs, again, "--tokenizer", prepared / "tokenizer.json", "--workers", 1)
    assert proc.returncode == 0, proc.stderr
    for name in ("train.bin", "val.bin"):
        assert (again / name).read_bytes() == (prepared / name).read_bytes()
    first, second = (json.loads((d / "manifest.json").read_text()) for d in (prepared, again))
    assert first["fingerprint"] == second["fingerprint"] and second["tokenizer"]["kind"] == "tokenizers"


def test_data_bin_reads_the_manifest_and_a_tiny_run_trains(prepared, tmp_path):
    manifest = json.loads((prepared / "manifest.json").read_text())
    corpus = load_corpus({"source": "bin", "path": str(prepared)})
    assert corpus.fingerprint == manifest["fingerprint"] and corpus.vocab_size == manifest["vocab_size"]
    assert corpus.bytes_per_token == pytest.approx(manifest["bytes_per_token"])
    with pytest.raises(ConfigError, match=r"^data\.dtype: 'uint32' conflicts with 'uint16' in '.*manifest\.json'"):
        load_corpus({"source": "bin", "path": str(prepared), "dtype": "uint32"})
    changed = tmp_path / "changed"
    shutil.copytree(prepared, changed)
    ids = np.fromfile(changed / "val.bin", dtype="<u2")
    ids[0] ^= 1  # one token altered after prepare
    ids.tofile(changed / "val.bin")
    with pytest.raises(DataError, match=r"shards hash to fingerprint \w{16}, but its manifest\.json states"):
        load_corpus({"source": "bin", "path": str(changed)})
    run_cli("train", "data=bin", f"data.path={prepared}", *TINY_TRAIN, f"store={tmp_path / 'store'}", check=True)
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("store/runs/*/record.json")]
    assert record["status"] == "completed" and record["corpus_fingerprint"] == manifest["fingerprint"]
    assert record["vocab_size"] == manifest["vocab_size"] and np.isfinite(record["val_bpb"])
    proc = run_cli("train", "data=bin", f"data.path={prepared}", "data.vocab_size=1000", *TINY_TRAIN, "store=x")
    assert_one_line_error(proc, "data.vocab_size: 1000 conflicts with")


def test_a_killed_prepare_leaves_nothing_that_passes_for_a_corpus(inputs, tmp_path):
    out = tmp_path / "corpus"
    killed = _prepare(inputs, out, "--workers", 2, env={**FAULTS, "SCALING_FAULT_SIGKILL_PREPARE_AT_WRITE": "3"})
    assert killed.returncode == -9, killed.stderr
    (partial,) = tmp_path.glob("corpus.tmp-*")
    assert (partial / "train.bin").stat().st_size > 0 and not out.exists()
    refused = run_cli("train", "data=bin", f"data.path={out}", *TINY_TRAIN, f"store={tmp_path / 'store'}")
    assert_one_line_error(refused, "data.path:", "does not exist")
    assert not (tmp_path / "store").exists()
    rerun = _prepare(inputs, out, "--workers", 2)
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "manifest.json").is_file() and not list(tmp_path.glob("corpus.*-*"))
    assert load_corpus({"source": "bin", "path": str(out)}).vocab_size == 256  # bytes


def test_pieces_cut_at_line_ends_read_every_line_once(tmp_path, monkeypatch):
    """Inputs larger than a piece (4 MB; 7 bytes here) are read in pieces: whole lines, each once."""
    monkeypatch.setattr(sources, "PIECE_BYTES", 7)
    lines = [f"line {i} {'x' * (i % 13)}\n" for i in range(60)] + ["no newline at the end"]
    (tmp_path / "a.txt").write_text("".join(lines))
    texts = [f"doc {i} {'é' * (i % 17)}" for i in range(40)]
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    text, jsonl = sources.find_sources([str(tmp_path)], None)
    parts = [d for p in sources.pieces(text, "0" * 64, 0.1) for d in sources.documents(p, "", decode=True)]
    assert "".join(doc for doc, _, _ in parts) == "".join(lines) and len(parts) > 10
    assert [end for _, _, end in parts] == [False] * (len(parts) - 1) + [True]  # one document
    assert all(val for _, val, _ in parts)  # the file's split, from its hash ("00..." is held out)
    docs = [d for p in sources.pieces(jsonl, "", 0.1) for d, _, _ in sources.documents(p, "text", decode=True)]
    assert docs == texts


def _big_vocab_tokenizer(path: Path) -> Path:
    vocab = {f"w{i}": i for i in range(70_000)} | {"[UNK]": 70_000}
    Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")).save(str(path))
    return path


def test_bad_input_is_one_line_and_leaves_nothing(inputs, tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n{"body": "c", "id": 3}\n')
    (tmp_path / "fake.parquet").write_bytes(b"not a parquet file at all")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "book.txt").write_text("one long line\n" * 50)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    big = _big_vocab_tokenizer(tmp_path / "big.json")
    text = inputs / "texts"
    cases = [
        ([tmp_path / "nope.txt"], ["INPUT: '", "nope.txt' does not exist"]),
        ([tmp_path / "bad.jsonl"], ["bad.jsonl' line 3 has no field 'text' (--jsonl-field); it has: body, id"]),
        ([tmp_path / "fake.parquet"], ["fake.parquet' cannot be read as Parquet"]),
        ([text, "--tokenizer", big, "--dtype", "uint16"], ["--dtype: uint16", "70,001 tokens", "uint32"]),
        ([text, "--train-bpe", 70_000, "--dtype", "uint16"], ["--dtype: uint16", "--train-bpe 70000", "uint32"]),
        ([text, "--holdout", 0.7], ["--holdout: 0.7 must be in (0, 0.5)"]),
        ([tmp_path / "latin1.txt", "--tokenizer", big], ["latin1.txt' is not UTF-8 text (byte 3)"]),
        ([text, "--bogus"], ["unrecognized arguments: --bogus"]),
        # no --holdout splits fewer than 2 documents (before: "raise --holdout or give more documents")
        ([tmp_path / "empty.txt"], ["INPUT: no text in the inputs", "need at least 2"]),
        ([tmp_path / "book.txt"], ["INPUT: one document in the inputs", "a text file is one document"]),
    ]
    if os.geteuid() != 0:  # root reads a file whatever its mode (the CI runs as root)
        (tmp_path / "locked.txt").write_text("secret")
        (tmp_path / "locked.txt").chmod(0)
        cases.append(([tmp_path / "locked.txt"], ["locked.txt' cannot be read (Permission denied)"]))
    else:  # root reads any mode, but not a process's memory at address 0: a file no one can read
        (tmp_path / "unreadable.txt").symlink_to("/proc/self/mem")
        cases.append(([tmp_path / "unreadable.txt"], ["unreadable.txt' cannot be read (Input/output error)"]))
    for args, names in cases:
        proc = run_cli("prepare", *args, "--out", tmp_path / "out", timeout=120)
        assert_one_line_error(proc, *names)
        assert not list(tmp_path.glob("out*")), args
    proc = run_cli("prepare", text, "--out", tmp_path / "taken")
    assert_one_line_error(proc, "--out: '", "taken' exists and is not a prepared corpus")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]
