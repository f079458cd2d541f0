"""The data layer: splits, fingerprints, batches, the evaluation set, the cache, every source's
round trip, the synthetic source's entropy rate against independent estimates, and bad input.
Runtime: about 6 s on 2 CPU cores (the largest part samples 3M tokens of Markov chains)."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from scaling import data, markov
from scaling.data import DEFAULTS, FILE_SEPARATOR, eval_set, load_corpus, train_batch
from scaling.errors import ConfigError, DataError, UserError

CONF_DATA = Path(__file__).resolve().parents[1] / "conf" / "data"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own empty corpus cache."""
    monkeypatch.setenv("SCALING_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "corpora"


@pytest.fixture(scope="module")
def stdlib_corpus(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCALING_CACHE", str(tmp_path_factory.mktemp("stdlib-cache")))
        return load_corpus({"source": "stdlib"})


def small_synthetic(**overrides) -> dict:
    return {"source": "synthetic", "train_tokens": 1 << 14, "val_tokens": 1 << 12, **overrides}


def write_text(path: Path, content: bytes) -> dict:
    path.write_bytes(content)
    return {"source": "text", "path": str(path)}


# ---------------------------------------------------------------- config files
@pytest.mark.parametrize("source", sorted(DEFAULTS))
def test_yaml_files_state_the_code_defaults(source):
    assert OmegaConf.to_container(OmegaConf.load(CONF_DATA / f"{source}.yaml")) == {
        "source": source,
        **DEFAULTS[source],
    }


def test_vocab_size_is_known_from_the_config_alone(tmp_path):
    assert data.vocab_size_of({"source": "stdlib"}) == 256
    assert data.vocab_size_of(small_synthetic(vocab_size=17)) == 17
    (tmp_path / "t.bin").write_bytes(np.arange(10, dtype=np.uint16).tobytes())
    assert data.vocab_size_of({"source": "bin", "path": str(tmp_path / "t.bin"), "vocab_size": 300}) == 300


# ---------------------------------------------------------------- stdlib
def test_stdlib_split_is_file_level_disjoint_and_near_the_fraction(stdlib_corpus):
    root = Path(sysconfig.get_paths()["stdlib"]).resolve()
    files = data._python_files(root, tuple(DEFAULTS["stdlib"]["exclude"]))
    val_names = data._file_level_split(files, DEFAULTS["stdlib"]["val_fraction"])
    train_names = {name for name, *_ in files} - val_names
    assert val_names and train_names and not (val_names & train_names)
    assert not any(part in ("test", "tests", "site-packages") for name, *_ in files for part in name.split("/"))
    sep = bytes([FILE_SEPARATOR])
    for names, tokens in ((train_names, stdlib_corpus.train), (val_names, stdlib_corpus.val)):
        assert tokens.tobytes() == sep.join((root / name).read_bytes() for name in sorted(names))
    total = len(stdlib_corpus.train) + len(stdlib_corpus.val)
    assert 0.025 < len(stdlib_corpus.val) / total <= 0.03
    assert stdlib_corpus.vocab_size == 256 and stdlib_corpus.bytes_per_token == 1.0
    assert stdlib_corpus.entropy_rate is None and stdlib_corpus.name == "stdlib"


def test_stdlib_fingerprint_is_stable_and_follows_the_split(stdlib_corpus, private_cache):
    cold = load_corpus({"source": "stdlib"})  # rebuilt from the files into a fresh cache
    warm = load_corpus({"source": "stdlib"})  # from the cache
    assert stdlib_corpus.fingerprint == cold.fingerprint == warm.fingerprint
    assert len(stdlib_corpus.fingerprint) == 16 and int(stdlib_corpus.fingerprint, 16) >= 0
    assert load_corpus({"source": "stdlib", "val_fraction": 0.05}).fingerprint != cold.fingerprint


def test_stdlib_fingerprint_follows_the_content_read(tmp_path, monkeypatch):
    tree = tmp_path / "lib"
    (tree / "pkg").mkdir(parents=True)
    (tree / "test").mkdir()
    for i in range(40):
        (tree / "pkg" / f"m{i:02d}.py").write_text(f"x = {i}\n" * 50)
    (tree / "test" / "t.py").write_text("excluded\n")
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": str(tree)})
    before = load_corpus({"source": "stdlib", "val_fraction": 0.1})
    assert b"excluded" not in before.train.tobytes() + before.val.tobytes()
    target = tree / "pkg" / "m07.py"
    target.write_text(target.read_text().replace("x", "z"))  # same size, new content
    os.utime(target, ns=(1, 1))
    data._python_files.cache_clear()  # the walk is once per process (`_python_files`): a new process walks again
    after = load_corpus({"source": "stdlib", "val_fraction": 0.1})
    assert after.fingerprint != before.fingerprint
    assert b"z = 7\n" * 50 in after.train.tobytes() + after.val.tobytes()


# ---------------------------------------------------------------- the cache
def test_cache_is_written_and_used_instead_of_the_sources(private_cache, monkeypatch):
    first = load_corpus(small_synthetic())
    assert sorted(p.suffix for p in private_cache.iterdir()) == [".json", ".train", ".val"]

    def no_regeneration(*args, **kwargs):
        raise AssertionError("the corpus was generated again")

    monkeypatch.setattr(markov, "sample_stream", no_regeneration)
    second = load_corpus(small_synthetic())
    assert isinstance(second.train, np.memmap) and Path(second.train.filename).parent == private_cache
    assert second.fingerprint == first.fingerprint and np.array_equal(second.val, first.val)
    assert second.entropy_rate == first.entropy_rate


def test_stdlib_cache_skips_reading_the_files(stdlib_corpus, monkeypatch):
    load_corpus({"source": "stdlib"})
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"re-read {self}"))
    assert load_corpus({"source": "stdlib"}).fingerprint == stdlib_corpus.fingerprint


def test_an_incomplete_cache_entry_is_rebuilt(private_cache):
    first = load_corpus(small_synthetic())
    for meta in private_cache.glob("*.json"):
        meta.unlink()  # as if the writer died before finishing the entry
    again = load_corpus(small_synthetic())
    assert again.fingerprint == first.fingerprint and list(private_cache.glob("*.json"))


# ---------------------------------------------------------------- batches and evaluation
def counting_corpus(n_train: int = 10_000, n_val: int = 5_000) -> data.Corpus:
    """Tokens equal to their position, so a window's origin can be read off its first token."""
    tokens = np.arange(n_train + n_val, dtype=np.uint32)
    return data.Corpus("count", tokens[:n_train], tokens[n_train:], n_train + n_val, "0" * 16, None, 1.0, "")


def test_train_batches_are_a_pure_function_of_seed_and_step():
    corpus = counting_corpus()
    batch = train_batch(corpus, step=5, batch_size=8, seq_len=32, seed=1)
    assert batch.shape == (8, 33) and batch.dtype == np.int64
    assert np.array_equal(batch, train_batch(corpus, 5, 8, 32, 1))
    assert not np.array_equal(batch, train_batch(corpus, 6, 8, 32, 1))
    assert not np.array_equal(batch, train_batch(corpus, 5, 8, 32, 2))
    assert (np.diff(batch, axis=1) == 1).all() and batch.max() < 10_000  # contiguous windows of train


def test_eval_set_is_fixed_evenly_spaced_and_non_overlapping():
    corpus = counting_corpus()
    windows = eval_set(corpus, seq_len=64, n_tokens=2048)
    assert windows.shape == (32, 65) and windows.dtype == np.int64
    assert np.array_equal(windows, eval_set(corpus, 64, 2048))
    starts = windows[:, 0] - 10_000
    assert starts[0] == 0 and len(set(np.diff(starts))) == 1 and np.diff(starts)[0] >= 64
    assert windows.max() < 15_000 and (np.diff(windows, axis=1) == 1).all()


def test_eval_set_too_large_for_val_names_the_setting():
    with pytest.raises(DataError, match=r"train\.eval_tokens: 8192 needs 8193 validation tokens .* has 5000"):
        eval_set(counting_corpus(), seq_len=64, n_tokens=8192)
    with pytest.raises(ConfigError, match=r"train\.eval_tokens: 10 is less than train\.seq_len 64"):
        eval_set(counting_corpus(), seq_len=64, n_tokens=10)


# ---------------------------------------------------------------- synthetic
def test_entropy_rate_of_a_two_state_chain_matches_the_closed_form():
    a, b = 0.3, 0.1  # P(0 -> 1) = a, P(1 -> 0) = b; pi = (b, a) / (a + b)
    transition = np.array([[1 - a, a], [b, 1 - b]])
    pi = markov.stationary_distribution(transition, order=1)
    binary = lambda p: -p * np.log(p) - (1 - p) * np.log(1 - p)  # noqa: E731
    assert np.allclose(pi, [b / (a + b), a / (a + b)], atol=1e-14)
    assert markov.entropy_rate(transition, pi) == pytest.approx((b * binary(a) + a * binary(b)) / (a + b), abs=1e-14)


def test_alias_tables_reproduce_every_row():
    chain = markov.random_markov_chain(vocab_size=16, order=2, concentration=0.1, seed=3)
    keep, alias = markov.alias_tables(chain.transition)
    rebuilt = keep / 16
    np.add.at(rebuilt, (np.arange(len(keep))[:, None].repeat(16, axis=1), alias), (1 - keep) / 16)
    assert np.abs(rebuilt - chain.transition).max() < 1e-14


def test_synthetic_entropy_rate_matches_the_plug_in_estimate():
    """Independent of the chain's parameters: count (context, next) pairs in the sampled stream
    and take the plug-in conditional entropy with the Miller-Madow bias correction
    (+ (cells seen - contexts seen) / 2n). 16 contexts x 4 symbols over 2M tokens: standard error
    about 5e-4 nats, tolerance 5e-3."""
    corpus = load_corpus(small_synthetic(vocab_size=4, order=2, concentration=0.5, seed=7, train_tokens=1 << 21))
    x = np.asarray(corpus.train, dtype=np.int64)
    counts = np.bincount((x[:-2] * 4 + x[1:-1]) * 4 + x[2:], minlength=64).reshape(16, 4).astype(float)
    n = counts.sum()
    nonzero = counts > 0
    conditional = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    plug_in = -(counts[nonzero] * np.log(conditional[nonzero])).sum() / n
    miller_madow = (nonzero.sum() - (counts.sum(axis=1) > 0).sum()) / (2 * n)
    assert corpus.entropy_rate == pytest.approx(plug_in + miller_madow, abs=5e-3)
    assert 0.3 < corpus.entropy_rate < np.log(4)
    # with less context: H(X) and H(X_t | X_{t-1}) from the same counts, marginalised
    by_pair = counts.reshape(4, 4, 4)  # (x_{t-2}, x_{t-1}, x_t)
    for t, cells in ((0, by_pair.sum(axis=(0, 1))[None, :]), (1, by_pair.sum(axis=0))):
        p_cell, p_context = cells / n, cells.sum(axis=1) / n
        estimate = -(p_cell * np.log(p_cell)).sum() + (p_context * np.log(p_context)).sum()
        assert corpus.context_entropies[t] == pytest.approx(estimate, abs=5e-3)
    assert corpus.context_entropies[2] == pytest.approx(corpus.entropy_rate, abs=1e-12)


def test_loss_floor_adds_the_cost_of_a_window_start():
    corpus = load_corpus(small_synthetic())
    h, h0, h1 = corpus.entropy_rate, *corpus.context_entropies[:2]
    assert h0 > h1 > h  # less context, more surprise
    assert corpus.loss_floor(128) == pytest.approx(h + (h1 - h) / 128, abs=1e-12)
    assert corpus.loss_floor(1) == pytest.approx(h1)
    assert counting_corpus().loss_floor(128) is None


def test_default_synthetic_entropy_rate_matches_the_sampled_surprisal():
    """Shannon-McMillan-Breiman: the mean -ln P(x_t | context) along the default config's
    validation stream (1M tokens) converges to h. Standard error about 1.1e-3; tolerance 6e-3."""
    cfg = {"source": "synthetic", "train_tokens": 4096}  # the chain and val are the default's
    corpus = load_corpus(cfg)
    defaults = DEFAULTS["synthetic"]
    assert len(corpus.val) == defaults["val_tokens"] and corpus.vocab_size == defaults["vocab_size"]
    chain = markov.random_markov_chain(
        defaults["vocab_size"], defaults["order"], defaults["concentration"], defaults["seed"]
    )
    x = np.asarray(corpus.val, dtype=np.int64)
    surprisal = -np.log(chain.transition[x[:-2] * 64 + x[1:-1], x[2:]])
    assert corpus.entropy_rate == pytest.approx(chain.entropy_rate, abs=1e-12)
    assert surprisal.mean() == pytest.approx(corpus.entropy_rate, abs=6e-3)
    assert corpus.entropy_rate == pytest.approx(2.3585, abs=1e-4)  # the value conf/data/synthetic.yaml states


def test_synthetic_corpus_is_deterministic_and_seeded():
    a, b = load_corpus(small_synthetic()), load_corpus(small_synthetic())
    assert a.fingerprint == b.fingerprint and np.array_equal(a.train, b.train)
    assert not np.array_equal(a.train[:1000], a.val[:1000])
    other = load_corpus(small_synthetic(seed=1))
    assert other.fingerprint != a.fingerprint and other.entropy_rate != a.entropy_rate
    assert load_corpus(small_synthetic(train_tokens=float(1 << 14))).fingerprint == a.fingerprint


# ---------------------------------------------------------------- text and bin
def test_text_round_trip_with_a_tail_split(tmp_path):
    content = bytes(range(256)) * 40  # 10,240 bytes, any encoding
    corpus = load_corpus({**write_text(tmp_path / "notes.txt", content), "val_fraction": 0.1})
    assert corpus.name == "text:notes.txt" and corpus.vocab_size == 256
    assert corpus.train.tobytes() == content[:-1024] and corpus.val.tobytes() == content[-1024:]
    same = load_corpus({**write_text(tmp_path / "notes.txt", content), "val_fraction": 0.1})
    assert same.fingerprint == corpus.fingerprint
    other_split = load_corpus({"source": "text", "path": str(tmp_path / "notes.txt"), "val_fraction": 0.2})
    assert other_split.fingerprint != corpus.fingerprint
    changed = load_corpus({**write_text(tmp_path / "notes.txt", content[::-1]), "val_fraction": 0.1})
    assert changed.fingerprint != corpus.fingerprint


def test_bin_directory_round_trip(tmp_path):
    train, val = np.arange(5000, dtype=np.uint16) % 1000, np.arange(700, dtype=np.uint16)
    train.tofile(tmp_path / "train.bin")
    val.tofile(tmp_path / "val.bin")
    corpus = load_corpus({"source": "bin", "path": str(tmp_path), "vocab_size": 1000, "bytes_per_token": 4.0})
    assert np.array_equal(corpus.train, train) and np.array_equal(corpus.val, val)
    assert corpus.vocab_size == 1000 and corpus.bytes_per_token == 4.0 and corpus.name == f"bin:{tmp_path.name}"
    unknown_bpb = load_corpus({"source": "bin", "path": str(tmp_path), "vocab_size": 1000})
    assert np.isnan(unknown_bpb.bytes_per_token) and unknown_bpb.fingerprint == corpus.fingerprint


def test_single_uint32_bin_file_splits_by_tail(tmp_path):
    tokens = np.arange(2000, dtype=np.uint32) * 1000
    tokens.tofile(tmp_path / "all.bin")
    corpus = load_corpus(
        {
            "source": "bin",
            "path": str(tmp_path / "all.bin"),
            "dtype": "uint32",
            "vocab_size": 2_000_000,
            "val_fraction": 0.25,
        }
    )
    assert np.array_equal(corpus.train, tokens[:1500]) and np.array_equal(corpus.val, tokens[1500:])


# ---------------------------------------------------------------- bad input
def test_an_out_of_range_token_names_the_file_and_the_id(tmp_path):
    (np.arange(100, dtype=np.uint16) + 5).tofile(tmp_path / "t.bin")
    with pytest.raises(DataError, match=r"data\.vocab_size: 100 but '.*t\.bin' holds token id 104"):
        load_corpus({"source": "bin", "path": str(tmp_path / "t.bin"), "vocab_size": 100})


def bad_configs(tmp: Path) -> list[tuple[dict, str]]:
    """(config, pattern its error must match): every message names the key and the bad value."""
    (tmp / "odd.bin").write_bytes(b"\x01\x02\x03")
    (tmp / "empty.bin").write_bytes(b"")
    (tmp / "empty.txt").write_bytes(b"")
    (tmp / "only_train").mkdir()
    (tmp / "only_train" / "train.bin").write_bytes(b"\x01\x00")
    ok_bin = {"source": "bin", "path": str(tmp / "only_train" / "train.bin"), "vocab_size": 10}
    return [
        ({"source": "wiki"}, r"data\.source: 'wiki' is not a data source; valid: stdlib, synthetic, text, bin"),
        ({"source": "text", "path": str(tmp / "nope.txt")}, r"data\.path: '.*nope\.txt' does not exist .*data=text"),
        ({"source": "text", "path": str(tmp / "empty.txt")}, r"data\.path: '.*empty\.txt' is empty"),
        ({"source": "text", "path": str(tmp)}, r"data\.path: '.*' is not a file"),
        ({"source": "text"}, r"data\.path: missing"),
        ({"source": "stdlib", "val_fraction": -0.1}, r"data\.val_fraction: -0\.1 must be in \(0, 0\.5\)"),
        ({"source": "stdlib", "val_fraction": "lots"}, r"data\.val_fraction: 'lots' is not a finite number"),
        ({"source": "stdlib", "exclude": "test"}, r"data\.exclude: 'test' must be a list"),
        ({"source": "stdlib", "seq_len": 5}, r"data\.seq_len: not a key of data=stdlib; valid keys: source, "),
        ({**ok_bin, "dtype": "int8"}, r"data\.dtype: 'int8' is not supported; valid: uint16, uint32"),
        ({**ok_bin, "vocab_size": 70_000}, r"data\.vocab_size: 70000 must be an integer in \[2, 65536\]"),
        ({**ok_bin, "bytes_per_token": 0}, r"data\.bytes_per_token: 0 must be > 0"),
        ({**ok_bin, "path": str(tmp / "odd.bin")}, r"data\.path: '.*odd\.bin' has 3 bytes, not a multiple of 2"),
        ({**ok_bin, "path": str(tmp / "empty.bin")}, r"data\.path: '.*empty\.bin' is empty"),
        ({**ok_bin, "path": str(tmp / "only_train")}, r"data\.path: '.*only_train' has no val\.bin"),
        ({"source": "bin", "path": str(tmp / "odd.bin")}, r"data\.vocab_size: missing"),
        (small_synthetic(vocab_size=1000), r"data\.vocab_size: 1000 must be an integer in \[2, 256\]"),
        (small_synthetic(order=0), r"data\.order: 0 must be an integer in \[1, 8\]"),
        (small_synthetic(vocab_size=256, order=3), r"data\.order: 3 with data\.vocab_size 256 makes a table"),
        (small_synthetic(concentration=0.001), r"data\.concentration: 0\.001 must be in \[0\.05, 1000\]"),
        (small_synthetic(train_tokens=2.5), r"data\.train_tokens: 2\.5 must be an integer >= 1024"),
        (small_synthetic(seed=-1), r"data\.seed: -1 must be an integer >= 0"),
    ]


def test_every_bad_input_is_one_line_naming_key_and_value(tmp_path):
    for cfg, pattern in bad_configs(tmp_path):
        with pytest.raises(UserError, match=pattern) as caught:
            load_corpus(cfg)
        assert "\n" not in str(caught.value), cfg


def test_a_missing_value_in_a_hydra_config_is_reported():
    cfg = OmegaConf.load(CONF_DATA / "bin.yaml")
    with pytest.raises(ConfigError, match=r"data\.path: missing; data=bin needs it"):
        load_corpus(cfg)
    with pytest.raises(ConfigError, match=r"data\.path: missing"):
        data.check_source(cfg)


def test_a_too_small_training_split_names_seq_len(tmp_path):
    corpus = load_corpus(write_text(tmp_path / "tiny.txt", b"abcdefghij" * 3))
    with pytest.raises(DataError, match=r"train\.seq_len: 64 needs at least 65 training tokens"):
        train_batch(corpus, 0, 4, 64, 0)


# ---------------------------------------------------------------- data-constrained cuts (scaling.data_cut)
def test_head_cut_keeps_the_first_tokens_and_its_old_fingerprint(stdlib_corpus):
    import hashlib

    head = load_corpus({"source": "stdlib", "max_train_tokens": 64_000})
    same = load_corpus({"source": "stdlib", "max_train_tokens": 64_000, "cut": "head"})
    assert np.array_equal(head.train, stdlib_corpus.train[:64_000]) and np.array_equal(head.val, stdlib_corpus.val)
    # the fingerprint made before data.cut existed: runs on head cuts keep their ids
    old = hashlib.sha256(f"{stdlib_corpus.fingerprint}:max_train_tokens=64000".encode()).hexdigest()[:16]
    assert head.fingerprint == same.fingerprint == old


def test_cut_keys_need_no_plus_and_stay_out_of_the_run_id_while_null():
    """The schema gives every data config data.max_train_tokens, data.cut and data.cut_seed at null
    (scaling/config.py), so a command line sets them without `+` (with it too, as before); while null
    they are left out of a run's identity, so runs without a cut keep the ids they had before."""
    from scaling.data_config import OPTIONAL
    from scaling.plan import identity, plan_run, resolve_shape
    from scaling.train_app import compose_config

    base = ["budget=1e11", "model=d16", "data=synthetic", "data.train_tokens=16384", "data.val_tokens=4096"]
    cfg = compose_config(base)
    assert {key: cfg.data[key] for key in OPTIONAL} == dict.fromkeys(OPTIONAL)
    shape, lr = resolve_shape(cfg)
    assert identity(cfg, shape, lr)["data"] == {**small_synthetic(), **DEFAULTS["synthetic"], **small_synthetic()}
    cut = ["data.max_train_tokens=4096", "data.cut=random", "data.cut_seed=2"]
    plain = plan_run(compose_config([*base, *cut]))
    assert plain.corpus_train_tokens == 4096
    assert plain.run_id == plan_run(compose_config([*base, *(f"+{o}" for o in cut)])).run_id
    want = load_corpus({**small_synthetic(), "max_train_tokens": 4096, "cut": "random", "cut_seed": 2})
    assert load_corpus(compose_config([*base, *cut]).data).fingerprint == want.fingerprint
    # a null data.cut is the head cut, with the fingerprint a head cut always had
    head = load_corpus(compose_config([*base, "data.max_train_tokens=4096"]).data)
    assert head.fingerprint == load_corpus({**small_synthetic(), "max_train_tokens": 4096}).fingerprint


def test_random_cut_draws_exactly_u_tokens_in_blocks_from_across_the_split(stdlib_corpus):
    from scaling.data_cut import CUT_BLOCK, random_blocks

    full = stdlib_corpus
    cut = {"source": "stdlib", "max_train_tokens": 64_000, "cut": "random", "cut_seed": 3}
    one, again = load_corpus(cut), load_corpus(cut)
    assert len(one.train) == 64_000 and np.array_equal(one.train, again.train) and one.fingerprint == again.fingerprint
    assert np.array_equal(one.val, full.val)  # the evaluation split is never cut
    other = load_corpus({**cut, "cut_seed": 4})
    assert not np.array_equal(one.train, other.train) and other.fingerprint != one.fingerprint
    head = load_corpus({"source": "stdlib", "max_train_tokens": 64_000})
    assert one.fingerprint != head.fingerprint
    # the cut is its drawn blocks in corpus order, the last drawn cut short; they span the whole split
    n_blocks = len(full.train) // CUT_BLOCK
    drawn = random_blocks(n_blocks, 64_000, 3)
    assert len(drawn) == 63 and len(set(drawn.tolist())) == 63
    position = 0
    for block in np.sort(drawn):
        length = CUT_BLOCK if block != drawn[-1] else 64_000 - 62 * CUT_BLOCK
        start = block * CUT_BLOCK
        assert np.array_equal(one.train[position : position + length], full.train[start : start + length])
        position += length
    assert drawn.min() < n_blocks / 10 and drawn.max() > 0.9 * n_blocks
    # with one seed a smaller cut's blocks are among a larger cut's
    assert set(random_blocks(n_blocks, 16_000, 3).tolist()) <= set(drawn.tolist())


def test_random_cut_bad_settings_name_the_key():
    stdlib = {"source": "stdlib"}
    with pytest.raises(ConfigError, match=r"^data.cut: 'middle' is not a cut; valid: head, random$"):
        load_corpus({**stdlib, "max_train_tokens": 4096, "cut": "middle"})
    with pytest.raises(ConfigError, match=r"^data.cut: random needs data.max_train_tokens"):
        load_corpus({**stdlib, "cut": "random"})
    with pytest.raises(ConfigError, match=r"^data.cut_seed: 1 is set but data.cut is None"):
        load_corpus({**stdlib, "max_train_tokens": 4096, "cut_seed": 1})
    with pytest.raises(ConfigError, match=r"^data.cut_seed: -1 must be an integer >= 0$"):
        load_corpus({**stdlib, "max_train_tokens": 4096, "cut": "random", "cut_seed": -1})
    with pytest.raises(DataError, match=r"^data.max_train_tokens: 10,000,000,000 is more than the .* in whole blocks"):
        load_corpus({**stdlib, "max_train_tokens": 10**10, "cut": "random"})
