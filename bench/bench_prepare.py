"""`scaling prepare` throughput (MB/s, tokens/s) with every core, against the tokenizer's own
`encode_batch` on the same documents in the same run.

    .venv/bin/python bench/bench_prepare.py               # BPE of 8,192 tokens, 2 interleaved rounds
    .venv/bin/python bench/bench_prepare.py --vocab 32768 --rounds 3

Data: this Python's standard-library `.py` files (scaling.data's stdlib corpus: no download, about
13 MB), one document per file. A byte-level BPE is trained on them first (`tokenizers`, timed apart).
Timed, taking turns round by round (bench.common.interleaved_medians):
  encode_batch   the library alone: `Tokenizer.encode_batch` over every document already in memory,
                 the library's own threads on every core; no reading, no writing
  encode_batch_fast  the same without character offsets (tokenizers >= 0.20), what prepare's workers call
  prepare        `scaling prepare DIR --ext .py --tokenizer tokenizer.json` end to end in a subprocess:
                 start-up, finding and hashing the files, a pool of one process per core encoding pieces,
                 writing the shards, the fingerprint and the manifest
  prepare bytes  the same with the built-in bytes tokenizer (the pipeline's own cost: no BPE)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from common import cores, interleaved_medians, median, print_header, print_table

from scaling.data import DEFAULTS, _python_files


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    print_header("scaling prepare throughput against the tokenizer's encode_batch")
    from tokenizers import Tokenizer

    from scaling.prepare.tokenizer import train_bpe

    root = Path(sysconfig.get_paths()["stdlib"]).resolve()
    files = _python_files(root, tuple(DEFAULTS["stdlib"]["exclude"]))
    texts = [path.read_text() for _, path, _, _ in files]
    megabytes = sum(size for _, _, size, _ in files) / 1e6
    print(f"data: {len(files)} .py files under {root}, {megabytes:.1f} MB; {cores()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, _, _ in files:  # the same files, in a tree of their own for prepare to read
            (Path(tmp, "corpus", name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(tmp, "corpus", name))
        started = time.perf_counter()
        spec = train_bpe(iter(texts), args.vocab, Path(tmp) / "tokenizer.json")
        print(f"BPE training ({spec.vocab_size:,} tokens): {time.perf_counter() - started:.1f} s")
        tokenizer = Tokenizer.from_file(str(Path(tmp) / "tokenizer.json"))
        tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
        scaling = str(Path(sys.executable).with_name("scaling"))

        def prepare(*extra: str) -> None:
            command = [scaling, "prepare", f"{tmp}/corpus", "--ext", ".py", "--out", f"{tmp}/out", *extra]
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr}")

        samples = interleaved_medians(
            {
                "encode_batch": lambda: tokenizer.encode_batch(texts, add_special_tokens=False),
                "encode_batch_fast": lambda: tokenizer.encode_batch_fast(texts, add_special_tokens=False),
                "prepare": lambda: prepare("--tokenizer", f"{tmp}/tokenizer.json"),
                "prepare bytes": lambda: prepare("--tokenizer", "bytes"),
            },
            rounds=args.rounds,
        )
        manifest = json.loads(Path(tmp, "out", "manifest.json").read_text())
    seconds = {name: median(values) for name, values in samples.items()}
    byte_tokens = sum(split["tokens"] for split in manifest["splits"].values())
    counts = {"encode_batch": tokens, "encode_batch_fast": tokens, "prepare": tokens, "prepare bytes": byte_tokens}
    rows = [
        {
            "name": name,
            "s": seconds[name],
            "mbs": megabytes / seconds[name],
            "ktoks": counts[name] / seconds[name] / 1e3,
            "ratio": seconds["encode_batch"] / seconds[name],
        }
        for name in samples
    ]
    print_table(
        rows,
        [
            ("name", "", ""),
            ("s", "median s", ".2f"),
            ("mbs", "MB/s", ".2f"),
            ("ktoks", "ktok/s", ".0f"),
            ("ratio", "speed / encode_batch", ".2f"),
        ],
    )
    print(f"rounds: {args.rounds}; BPE tokens {tokens:,} ({megabytes * 1e6 / tokens:.2f} bytes/token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
