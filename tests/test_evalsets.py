"""Named evaluation sets and mixtures (issue 18): two tiny sweeps trained on different corpora (a
Markov corpus; a mixture of two prepared corpora) and scored on one shared prepared evaluation set,
fitted and compared on it; the records' per-set losses; the guard on evaluation data; mixtures'
batches (by weight, a pure function of seed and step, so resumed exactly)."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.sources.evalsets import columns_of
from scaling import data as data_lib
from scaling import markov
from scaling.corpus_cache import fingerprint
from scaling.errors import DataError, UserError
from scaling.manifest import bin_dir_split
from scaling.plan import job_config, plan_run
from scaling.train_app import compose_config
from tests.conftest import TINY_TRAIN, assert_one_line_error, built_once, run_cli, run_main

VOCAB = 64
TINY = [
    "model=d16,d24",
    "budget=5e7,1e8,2e8",
    "hydra.sweeper.tokens_per_param=[0.05,2000]",
    *TINY_TRAIN,
    "tracking=none",
]
MARKOV = ["data=synthetic", "data.order=1", "data.train_tokens=65536", "data.val_tokens=4096"]


def prepared(root: Path, chain, sample_seed: int, offset: int = 0, vocab: int = VOCAB, tokenizer=None) -> Path:
    """A directory as `scaling prepare` writes it: train.bin, val.bin (uint16) and manifest.json,
    holding samples of a Markov chain (token ids shifted by ``offset``)."""
    root.mkdir(parents=True)
    sizes = {"train": 40_000, "val": 4_000}
    shards = {}
    for i, (split, n) in enumerate(sizes.items()):
        shards[split] = markov.sample_stream(chain, n, [sample_seed, i]).astype(np.uint16) + offset
        shards[split].tofile(root / f"{split}.bin")
    manifest = {
        "format": "scaling-shards-1",
        "vocab_size": vocab,
        "dtype": "uint16",
        "splits": {split: {"tokens": n} for split, n in sizes.items()},
        "fingerprint": fingerprint(bin_dir_split("uint16"), shards["train"], shards["val"]),  # as prepare writes it
        "bytes_per_token": 1.0,
        "tokenizer": tokenizer or {"kind": "test"},
        "sources": [],
        "holdout": {"fraction": 0.1, "rule": "test data: splits sampled apart"},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def records(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(store.glob("runs/*/record.json"))]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Store `a` trained on the Markov corpus data=synthetic (order 1, seed 0); store `b` on a 0.7/0.3
    mixture of a new sample of that chain and of another chain; both scored on `shared`, a third
    sample of the first chain. For the mixture's own tests: `low` and `high`, chains over tokens
    0..31 and 32..63."""
    root = built_once(tmp_path_factory, "evalsets", build_sweeps)
    return {"root": root} | {name: root / name for name in ("a", "b", "shared", "low", "high")}  # `build_sweeps`'s


def build_sweeps(root: Path) -> None:
    """The stores and corpora of `sweeps`, built in ``root``."""
    chain = markov.random_markov_chain(VOCAB, 1, 0.1, 0)  # data=synthetic's with data.order=1
    shared = prepared(root / "shared", chain, 99)
    same, other = (
        prepared(root / "same", chain, 98),
        prepared(root / "other", markov.random_markov_chain(VOCAB, 1, 0.1, 5), 5),
    )
    half = markov.random_markov_chain(32, 1, 0.3, 3)
    prepared(root / "low", half, 3), prepared(root / "high", half, 4, offset=32)
    mixture = f"data.mixture={{same: {{path: '{same}', weight: 0.7}}, other: {{path: '{other}', weight: 0.3}}}}"
    evals = [f"eval.sets={{shared: '{shared}'}}"]
    run_cli("sweep", "tiny", *TINY, *MARKOV, *evals, f"store={root / 'a'}", check=True)
    run_cli("sweep", "tiny", *TINY, "data=mixture", mixture, *evals, f"store={root / 'b'}", check=True)


# ---------------------------------------------------------------- records
def test_records_carry_each_sets_loss_and_fingerprint(sweeps):
    a, b = records(sweeps["a"]), records(sweeps["b"])
    assert len(a) == len(b) == 6 and all(r["status"] == "completed" for r in a + b)
    for rec in a + b:
        assert set(rec["eval_losses"]) == {"val", "shared"} and rec["eval_primary"] == "val"
        assert rec["val_loss"] == rec["eval_losses"]["val"]  # val_loss stays the primary set's loss
        assert rec["curve"][-1]["val_loss.shared"] == rec["eval_losses"]["shared"] > 0
        assert rec["eval_fingerprints"]["val"] == rec["corpus_fingerprint"]
        assert rec["config"]["eval"]["sets"] == {"shared": str(sweeps["shared"])}
    # one shared set, two training corpora
    assert len({r["eval_fingerprints"]["shared"] for r in a + b}) == 1
    assert {r["corpus_fingerprint"] for r in a}.isdisjoint(r["corpus_fingerprint"] for r in b)
    # the mixture is said: its name, parts, weights and the parts' fingerprints
    assert b[0]["corpus"] == "mixture:other+same"
    assert "same 0.7" in b[0]["corpus_description"] and "other 0.3" in b[0]["corpus_description"]
    table = pd.read_csv(sweeps["a"] / "table.csv")
    assert {"val_loss.shared", "eval_fingerprint.shared", "val_loss.val"} <= set(table.columns)
    assert "val_loss.shared" in pd.read_csv(sweeps["a"] / "curves.csv").columns


def test_runs_without_evaluation_sets_keep_their_config_and_run_id(sweeps):
    base = ["budget=1e9", "model=d16", "train.min_steps=1", *MARKOV, f"store={sweeps['root'] / 'x'}"]
    plain = compose_config(base)
    assert "eval" not in job_config(plain)  # the record's and config.yaml's config are unchanged
    with_set = compose_config([*base, f"+eval.sets.shared={sweeps['shared']}"])
    assert job_config(with_set)["eval"]["sets"] == {"shared": str(sweeps["shared"])}
    assert plan_run(plain).run_id != plan_run(with_set).run_id
    # naming the default explicitly is the default: the same run
    assert plan_run(compose_config([*base, "eval.primary=val"])).run_id == plan_run(plain).run_id


# ---------------------------------------------------------------- analysis: --eval NAME
def test_fit_and_plot_read_the_named_sets_losses(sweeps, tmp_path, capsys):
    fit = run_main(
        capsys, "fit", sweeps["a"], "--eval", "shared", "--approach", "3", "--bootstrap", "0", "--json", check=True
    )
    assert "loss = column 'val_loss.shared'" in fit.stderr
    shared = {r["run_id"]: r["eval_losses"]["shared"] for r in records(sweeps["a"])}
    assert {r["run_id"]: r["loss"] for r in json.loads(fit.stdout)["table"]["rows"]} == pytest.approx(shared)
    plot = run_main(capsys, "plot", sweeps["b"], "--eval", "shared", "--bootstrap", "0", "--out", tmp_path, check=True)
    assert any(tmp_path.glob("*.png")), plot.stderr


def test_compare_on_a_shared_set_and_the_guard(sweeps, tmp_path, capsys):
    a, b = sweeps["a"], sweeps["b"]
    # different training corpora: their own held-out splits are different data
    assert_one_line_error(
        run_main(capsys, "compare", a, b, "--bootstrap", "0"), "corpus_fingerprint", "--allow-different-eval"
    )
    assert_one_line_error(
        run_main(capsys, "compare", a, b, "--eval", "val", "--bootstrap", "0"), "evaluated on different data"
    )
    # ... but on one evaluation set the data guard lets them through: with two shapes (2 distinct N)
    # approach 3 cannot identify alpha together with E, so the comparison is refused for that instead
    shared = run_main(capsys, "compare", a, b, "--eval", "shared", "--bootstrap", "0", "--json")
    assert_one_line_error(shared, "approach 3's law is unidentified", "only 2 distinct N values")
    # another set under the same name is refused
    other = pd.read_csv(b / "table.csv").assign(**{"eval_fingerprint.shared": "0123456789abcdef"})
    other.to_csv(tmp_path / "other.csv", index=False)
    refused = run_main(capsys, "compare", a, tmp_path / "other.csv", "--eval", "shared", "--bootstrap", "0")
    assert_one_line_error(refused, "eval_fingerprint.shared", "different data")


def test_an_unknown_set_name_lists_the_sets(sweeps, capsys):
    assert_one_line_error(run_main(capsys, "fit", sweeps["a"], "--eval", "nosuch"), "'nosuch'", "val, shared")
    assert_one_line_error(run_main(capsys, "compare", sweeps["a"], sweeps["b"], "--eval", "nosuch"), "val, shared")


def test_eval_val_on_runs_without_sets_is_their_val_loss_and_corpus():
    frame = pd.DataFrame({"val_loss": [3.0], "corpus_fingerprint": ["0123"], "val_loss.code": [2.0]})
    assert columns_of(frame.drop(columns="val_loss.code"), "val", "t.csv") == (None, "corpus_fingerprint")
    assert columns_of(frame, "code", "t.csv") == ("val_loss.code", None)  # no fingerprint column: unchecked
    with pytest.raises(DataError, match="'t.csv' has no evaluation set 'web'; its sets: val, code$"):
        columns_of(frame, "web", "t.csv")


# ---------------------------------------------------------------- bad input
def test_a_set_of_another_vocabulary_is_one_line(sweeps, tmp_path):
    other = prepared(tmp_path / "wide", markov.random_markov_chain(VOCAB, 1, 0.1, 9), 9, vocab=128)
    proc = run_cli(
        "train", "model=d16", *MARKOV, f"+eval.sets.wide={other}", f"store={tmp_path / 's'}", "tracking=none"
    )
    assert_one_line_error(proc, "eval.sets.wide", "vocabulary 128", "64")
    assert not (tmp_path / "s" / "runs").exists()


@pytest.mark.parametrize(
    "override, must",
    [
        ("eval.primary=nosuch", "eval.primary"),
        ("+eval.sets.val=/tmp", "eval.sets.val"),
        ("+eval.sets.gone=/nonexistent/dir", "does not exist"),
        ("eval.sets=7", "eval.sets"),
        ("+eval.sets.big={tmp}/big.bin", "holds token id 100, beyond the training vocabulary 64"),
    ],
)
def test_bad_evaluation_sets_name_the_key(override, must, tmp_path):
    np.array([1, 2, 100], dtype=np.uint16).tofile(tmp_path / "big.bin")
    override = override.replace("{tmp}", str(tmp_path))
    with pytest.raises(UserError, match=must):
        plan_run(
            compose_config(["budget=1e9", "model=d16", "train.min_steps=1", *MARKOV, override, f"store={tmp_path}"])
        )


BPE_A = {"kind": "bpe", "path": "tokenizer.json", "sha256": "a" * 64}  # two BPEs trained apart: one vocabulary,
BPE_B = {"kind": "bpe", "path": "tokenizer.json", "sha256": "b" * 64}  # different ids
GIVEN_A = {"kind": "tokenizers", "path": "/elsewhere/tokenizer.json", "sha256": "a" * 64}  # BPE_A's file, given


@pytest.mark.parametrize("second, refused", [(BPE_B, True), (GIVEN_A, False)])
def test_a_set_or_part_of_another_tokenizer_with_the_same_vocabulary(tmp_path, second, refused):
    """Before: accepted (only vocabulary sizes were compared), a loss on ids that mean other text."""
    chain = markov.random_markov_chain(VOCAB, 1, 0.1, 9)
    a, b = prepared(tmp_path / "a", chain, 1, tokenizer=BPE_A), prepared(tmp_path / "b", chain, 2, tokenizer=second)
    common = ["budget=1e9", "model=d16", "train.min_steps=1", f"store={tmp_path}"]
    as_set = common + ["data=bin", f"data.path={a}", f"+eval.sets.b={b}"]
    as_part = common + [
        "data=mixture",
        f"data.mixture={{a: {{path: '{a}', weight: 1}}, b: {{path: '{b}', weight: 1}}}}",
    ]
    as_file = common + ["data=bin", f"data.path={a}", f"+eval.sets.b={b}/val.bin"]  # user22: its .bin alone passed
    for overrides, must in [
        (as_set, "eval.sets.b: '"),
        (as_file, "eval.sets.b: '"),
        (as_part, "data.mixture: the parts were prepared with"),
    ]:
        if not refused:
            plan_run(compose_config(overrides))
            continue
        with pytest.raises(UserError, match=re.escape(must)) as err:
            plan_run(compose_config(overrides))
        assert "sha256 aaaaaaaaaaaa" in str(err.value) and "sha256 bbbbbbbbbbbb" in str(err.value)


# ---------------------------------------------------------------- mixtures
def _mixture(sweeps, low: float = 0.7, high: float = 0.3) -> data_lib.Corpus:
    parts = {"low": {"path": str(sweeps["low"]), "weight": low}, "high": {"path": str(sweeps["high"]), "weight": high}}
    return data_lib.load_corpus({"source": "mixture", "mixture": parts})


def test_mixture_batches_follow_the_weights_and_the_seed_alone(sweeps):
    corpus = _mixture(sweeps)
    batches = [data_lib.train_batch(corpus, step, 64, 16, seed=0) for step in range(20)]
    from_low = np.mean([(row < 32).all() for batch in batches for row in batch])
    assert all(((row < 32).all() or (row >= 32).all()) for batch in batches for row in batch)  # one part a row
    assert 0.6 < from_low < 0.8
    again = _mixture(sweeps)  # a fresh load, steps out of order: the same batches (a resume sees them)
    for step in (7, 3, 19):
        assert np.array_equal(data_lib.train_batch(again, step, 64, 16, seed=0), batches[step])
    assert not np.array_equal(data_lib.train_batch(corpus, 3, 64, 16, seed=1), batches[3])


def test_the_mixture_is_the_corpus_fingerprint(sweeps):
    assert _mixture(sweeps).fingerprint == _mixture(sweeps, 7, 3).fingerprint  # weights are normalised
    assert _mixture(sweeps).fingerprint != _mixture(sweeps, 0.5, 0.5).fingerprint
    assert _mixture(sweeps).train_tokens == int(40_000 / 0.7)  # the heavier part repeats first


@pytest.mark.parametrize(
    "part, must",
    [
        ("{path: '{low}', weight: -1}", "data.mixture.a.weight"),
        ("{path: '{low}'}", "data.mixture.a: "),
        ("{path: '{wide}', weight: 1}", "vocabularies differ (a 128, b 64)"),
        ("{path: /nonexistent, weight: 1}", "not a directory with train.bin and val.bin"),
    ],
)
def test_a_bad_mixture_names_the_key(part, must, sweeps, tmp_path):
    wide = prepared(tmp_path / "wide", markov.random_markov_chain(VOCAB, 1, 0.1, 9), 9, vocab=128)
    part = part.replace("{low}", str(sweeps["low"])).replace("{wide}", str(wide))
    mixture = f"data.mixture={{a: {part}, b: {{path: '{sweeps['high']}', weight: 1}}}}"
    with pytest.raises(UserError, match=re.escape(must)):
        plan_run(
            compose_config(
                ["budget=1e9", "model=d16", "train.min_steps=1", "data=mixture", mixture, f"store={tmp_path}"]
            )
        )
