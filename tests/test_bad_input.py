"""Bad input across the verbs (train, sweep, fit, optimal, plot, report, status): each case is
answered by one line `error: ...` naming what is wrong and what is valid, exit status 2, no
traceback, and nothing already written is changed (no file changed, none added).

The cases run against a real results store (the fault tests' reference sweep, copied) and files
derived from it. Cases that fail before Hydra starts are run in this process through
`scaling.cli.main`, the console script's own function (Hydra is made to fail the test if a case
reaches it); the cases only the sweeper can detect, and a sample of the others, run as real
subprocesses. About 30 s on an idle 2-core machine, plus the reference sweep (~15 s) when this
module runs alone.
"""

import json
import math
import os
import shutil

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli
from faults_support import SWEEP, copy_store, reference_store, snapshot

from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs
from scaling.prepare import main as prepare

S = "{store}"  # placeholders, filled in from the `files` fixture

TRAIN = [
    ("unknown nested key", ["train.lr=3", f"store={S}"], ["train.lr", "not in 'TrainConfig'"]),
    (  # user18: a sweep dropped it, `scaling train` trained 4.5 epochs of repeated data silently
        "repeated data unasked",
        ["budget=3e10", "model=d16", "data.max_train_tokens=100000", f"store={S}"],
        ["train.allow_repeat", "needs 528,384 tokens", "holds 100,000", "set train.allow_repeat=true"],
    ),
    (  # Hydra's own advice (`+train.min_stpes=3`) would add a key nothing reads: the close key instead
        "a typo in a typed section",
        ["train.min_stpes=3", f"store={S}"],
        ["train.min_stpes", "did you mean min_steps?", "valid keys of train:"],
    ),
    (  # the `+` bypasses struct mode: before, the run trained with min_steps=100 under a new run id
        "a `+` key the schema lacks",
        ["+train.min_stpes=3", f"store={S}"],
        ["train.min_stpes: not a key of the config", "did you mean min_steps?"],
    ),
    (  # a free dict (model.kwargs): Hydra's own advice is the way forward, so it stays (review3)
        "a new key of a free dict without `+`",
        ["model.kwargs.x=1", f"store={S}"],
        ["model.kwargs.x", "To append to your config use +model.kwargs.x=1"],
    ),
    (  # before: trained the ladder's d32, the kwargs silently unused (review3)
        "model.kwargs without a model of your own",
        ["+model.kwargs.y=2", f"store={S}"],
        ["model.kwargs:", "are read by a model of your own only", "model._target_"],
    ),
    (  # before: trained eagerly, the mode silently unused (review3)
        "train.compile_mode without train.compile",
        ["train.compile_mode=reduce-overhead", f"store={S}"],
        ["train.compile_mode: reduce-overhead is read only with train.compile=true"],
    ),
    (  # user24: trained cosine, the cooldown silently unused
        "train.cooldown_frac without train.schedule=wsd",
        ["train.cooldown_frac=0.5", f"store={S}"],
        ["train.cooldown_frac: 0.5 is read by train.schedule=wsd only, not cosine"],
    ),
    ("unknown model name", ["model=d1000", f"store={S}"], ["model/d1000", "d32", "d48"]),
    ("wrong type", ["train.threads=two", f"store={S}"], ["train.threads", "two", "Integer"]),
    (  # before: trained 40x slower, silently
        "more threads than cores",
        ["train.threads=100000", f"store={S}"],
        ["train.threads: 100000 is more than the", "cores this process may use"],
    ),
    ("a float for an integer", ["train.threads=1.5", f"store={S}"], ["train.threads", "'1.5'", "Integer"]),
    ("zero budget", ["budget=0", f"store={S}"], ["budget", "0.0", "positive number"]),
    ("NaN budget", ["budget=nan", f"store={S}"], ["budget", "nan", "positive number"]),
    (
        "impossible budget",
        ["model=d768", "budget=1e12", f"store={S}"],
        ["budget", "d768", "0 optimizer steps", "train.min_steps", "use budget >="],
    ),
    ("value out of range", ["optim.beta2=1.5", f"store={S}"], ["optim.beta2", "1.5", "[0, 1)"]),
    (
        "missing data file",
        ["data=bin", "data.path={workdir}/missing.bin", "data.vocab_size=256", f"store={S}"],
        ["data.path", "missing.bin", "does not exist"],
    ),
    (  # before: "data.vocab_size: missing"
        "a directory without shards",
        ["data=bin", "data.path={empty}", f"store={S}"],
        ["data.path", "has no train.bin"],
    ),
    (  # before: a trunk id of its own, beside the same trunk's with the budget once
        "a branch budget twice",
        ["train.schedule=wsd", "train.branches=[5e10,5e10]", "budget=1e12", f"store={S}"],
        ["train.branches", "give each budget once"],
    ),
    (  # before: trained on the text's bytes read as uint16 token ids
        "a text file as token ids",
        ["data=bin", "data.path={workdir}/small.txt", "data.vocab_size=256", f"store={S}"],
        ["data.path", "small.txt", "looks like text", "data=text data.path=..."],
    ),
    (
        "garbled data file",
        ["data=bin", "data.path={workdir}/odd.bin", "data.vocab_size=256", f"store={S}"],
        ["data.path", "odd.bin", "1001 bytes", "data.dtype"],
    ),
    (
        "unwritable store",
        ["model=d32", "budget=4e10", "store={afile}/store"],
        ["store", "afile", "Not a directory", "writable directory"],
    ),
    (
        "evaluation set beyond the corpus",
        ["data=text", "data.path={workdir}/small.txt", "train.eval_tokens=100000", f"store={S}"],
        ["train.eval_tokens", "100000", "text:small.txt", "data.val_fraction"],
    ),
    (  # before: named data.val_fraction, which a prepared directory's own val.bin does not read
        "evaluation set beyond a prepared corpus's val.bin",
        ["data=bin", "data.path={prepared}", "train.eval_tokens=100000", f"store={S}"],
        ["train.eval_tokens", "100000", "bin:prepared", "scaling prepare again with a larger --holdout"],
    ),
    (  # before: told a plain nanoGPT directory (no manifest) to rerun `scaling prepare`
        "evaluation set beyond a nanoGPT directory's val.bin",
        ["data=bin", "data.path={nanogpt}", "data.vocab_size=256", "train.eval_tokens=100000", f"store={S}"],
        ["train.eval_tokens", "100000", "bin:nanogpt", "its val.bin: write more tokens to it"],
    ),
    (
        "3-byte text corpus",
        ["data=text", "data.path={workdir}/tiny.txt", f"store={S}"],
        ["train.seq_len", "text:tiny.txt", "has 2"],
    ),
    ("context beyond the corpus", ["train.seq_len=1000000000", f"store={S}"], ["train.seq_len", "1000000000"]),
    (  # Hydra's own words suggest +data.path, which would train on the stdlib corpus anyway
        "a key of another data option",
        ["data.path=/x", f"store={S}"],
        ["data.path", "belongs to data=bin, data=text", "e.g. data=bin data.path=..."],
    ),
]
SWEEP_CASES = [
    ("unknown sweep", ["nosuch"], ["sweep 'nosuch'", "no such sweep file", "tiny"]),
    ("unknown key", [str(SWEEP), "lr=3", f"store={S}"], ["'lr'", "not in 'Config'"]),
    (
        "a typo in a sweeper setting",
        [str(SWEEP), "hydra.sweeper.modles=[d32]", f"store={S}"],
        ["hydra.sweeper.modles", "did you mean models?", "valid keys of hydra.sweeper:"],
    ),
    (  # before: "Error merging override hydra.sweeper.models=d32; ... str is not a ListConfig", d64 unnamed
        "a list setting without brackets",
        [str(SWEEP), "hydra.sweeper.models=d32,d64", f"store={S}"],
        ["hydra.sweeper.models takes a list: write hydra.sweeper.models=[d32,d64]"],
    ),
    ("unknown launcher", [str(SWEEP), "hydra/launcher=nosuch", f"store={S}"], ["hydra/launcher", "joblib", "basic"]),
    ("wrong type", [str(SWEEP), "train.batch_size=big", f"store={S}"], ["train.batch_size", "big", "Integer"]),
    ("unwritable store", [str(SWEEP), "store={afile}/store"], ["store", "Not a directory", "writable directory"]),
    (
        "a grid budget on the command line",
        [str(SWEEP), "hydra.sweeper.grid.3e11=[d32]", f"store={S}"],
        ["hydra.sweeper.grid.3e11", "cannot be set on the command line: write a sweep .yaml"],
    ),
]
SWEEPER_CASES = [  # found by the sweeper's plan, after Hydra has started: subprocesses
    ("negative budget", [str(SWEEP), "budget=-1e10", f"store={S}"], ["budget", "-1", "positive number"]),
    (
        "impossible budgets",
        [str(SWEEP), "budget=1e3", f"store={S}"],
        ["all 2 combinations were dropped", "train.min_steps"],
    ),
    (  # every combination listed twice: nothing kept, so nothing to merge into; each repeat is dropped too
        "impossible budgets, each combination twice",
        [str(SWEEP), "budget=1e3,1.0e3", "model=d32,d32", f"store={S}"],
        ["all 4 combinations were dropped", "train.min_steps"],
    ),
    ("unknown model in a list", [str(SWEEP), "model=d32,d33", f"store={S}"], ["model=d33", "model/d33", "d48"]),
    (  # before: the key was ignored and the sweep launched every run
        "a `+` sweeper setting it lacks",
        [str(SWEEP), "+hydra.sweeper.modles=[d32]", f"store={S}"],
        ["hydra.sweeper.modles: not a setting of the scaling sweeper", "did you mean models?"],
    ),
    # user18: `train` refuses these, the sweep trained with them (99 threads on 2 cores; settings left unread)
    ("threads beyond the cores", [str(SWEEP), "train.threads=100000", f"store={S}"], ["train.threads: 100000 is more"]),
    (
        "a setting no job reads",
        [str(SWEEP), "train.compile_mode=max-autotune", f"store={S}"],
        ["train.compile_mode: max-autotune is read only with train.compile=true", "(no job of this sweep reads it)"],
    ),
]
FIT = [
    ("missing store", ["{workdir}/no-such-store"], ["no-such-store", "does not exist"]),
    ("empty store", ["{empty}"], ["holds no readable run records"]),
    (
        "NaN loss in a record, --strict",
        ["{nan_store}", "--strict"],
        ["column 'val_loss'", "value nan", "finite numbers > 0", "(run "],
    ),
    ("negative loss in a table, --strict", ["{negative_csv}", "--strict"], ["column 'val_loss'", "-1.5", "> 0"]),
    ("missing column", ["{no_loss_csv}"], ["no column for loss", "--loss-column", "Columns present"]),
    ("unknown column option", [S, "--loss-column", "bpb"], ["--loss-column 'bpb'", "no such column", "val_loss"]),
    (
        "no completed run",
        ["{failed_store}"],
        ["no completed runs to fit", "6 runs", "diverged: training loss nan at step 3"],
    ),
    ("too few points for the approach", [S, "--approach", "2"], ["approach 2 needs", "3 distinct", "(2 sizes)"]),
    ("wrong type option", [S, "--bootstrap", "many"], ["--bootstrap", "'many'", "whole number"]),
    (
        "unwritable output",
        [S, "--approach", "3", "--bootstrap", "0", "--out", "{afile}/fit.json"],
        ["--out", "afile/fit.json", "directory"],
    ),
]
OPTIMAL = [
    ("negative budget", ["--budget", "-1e21"], ["--budget", "'-1e21'", "finite number > 0"]),
    ("zero budget", ["--budget", "0"], ["--budget", "'0'", "finite number > 0"]),
    (
        "unknown law",
        ["--law", "{workdir}/no-such-fit.json", "--budget", "1e21"],
        ["no-such-fit.json", "chinchilla, chinchilla-parametric, kaplan, muennighoff"],
    ),
    (
        "not a fit file",
        ["--law", "{negative_csv}", "--budget", "1e21"],
        ["negative.csv", "not valid JSON", "scaling fit", "--out FIT.json` first"],
    ),
    (
        "approach missing from the fit",
        ["--law", "{fit}", "--approach", "2", "--budget", "1e21"],
        ["no approach 2 fit", "it has: 3"],
    ),
    ("unreachable target loss", ["--law", "chinchilla-parametric", "--target-loss", "1.0"], ["not reachable", "1.69"]),
    ("negative token cap", ["--budget", "1e21", "--max-tokens", "-5e9"], ["--max-tokens", "'-5e9'"]),
    (
        "level out of range",
        ["--law", "{fit}", "--budget", "1e21", "--level", "7"],
        ["--level", "'7'", "between 0 and 1"],
    ),
]
PLOT = [
    ("output option missing", [S], ["--out", "required"]),
    ("output under a file", [S, "--out", "{afile}/figures"], ["--out", "afile", "is a file, not a directory"]),
    ("unknown format", [S, "--out", "{workdir}/figures", "--format", "png,gif"], ["--format", "gif", "png, svg, pdf"]),
    ("empty store", ["{empty}", "--out", "{workdir}/figures"], ["holds no readable run records"]),
    (
        "NaN loss in a record, --strict",
        ["{nan_store}", "--strict", "--out", "{workdir}/figures"],
        ["column 'val_loss'", "value nan"],
    ),
]
REPORT = [
    ("not an HTML file name", [S, "--out", "{workdir}/report.pdf"], ["--out", "report.pdf", ".html"]),
    ("output under a file", [S, "--out", "{afile}/report.html"], ["--out", "afile", "is a file, not a directory"]),
    (
        "not a fit file",
        [S, "--out", "{workdir}/report.html", "--fit", "{negative_csv}"],
        ["negative.csv", "not valid JSON"],
    ),
    (
        "no completed run",
        ["{failed_store}", "--out", "{workdir}/report.html"],
        ["no completed runs", "6 runs", "(failed: diverged"],
    ),
]
STATUS = [("not a sweep store", ["{empty}"], ["sweep.json", "no sweep plan"])]

IN_PROCESS = (
    [("train", *c) for c in TRAIN]
    + [("sweep", *c) for c in SWEEP_CASES]
    + [("fit", *c) for c in FIT]
    + [("optimal", *c) for c in OPTIMAL]
    + [("plot", *c) for c in PLOT]
    + [("report", *c) for c in REPORT]
    + [("status", *c) for c in STATUS]
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A real store and the bad files made from it; returns the placeholders' values."""
    workdir = tmp_path_factory.mktemp("bad-input")
    store = copy_store(reference_store(tmp_path_factory), workdir / "store")
    nan_store = copy_store(store, workdir / "nan-store")
    record = sorted(nan_store.glob("runs/*/record.json"))[2]
    record.write_text(json.dumps({**json.loads(record.read_text()), "val_loss": math.nan}))
    failed_store = copy_store(store, workdir / "failed-store")
    for record in failed_store.glob("runs/*/record.json"):
        rec = json.loads(record.read_text())
        record.write_text(json.dumps({**rec, "status": "failed", "reason": "diverged: training loss nan at step 3"}))
    table = (store / "table.csv").read_text().splitlines()
    header = table[0].split(",")
    loss = header.index("val_loss")
    rows = [line.split(",") for line in table[1:]]
    rows[1][loss] = "-1.5"
    (workdir / "negative.csv").write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    losses = {loss, header.index("val_bpb")}  # val_bpb is a loss too (bits/byte): a table without a loss lacks both
    (workdir / "no-loss.csv").write_text(
        "\n".join(",".join(c for i, c in enumerate(r) if i not in losses) for r in [header, *rows]) + "\n"
    )
    (workdir / "odd.bin").write_bytes(bytes(range(256)) * 3 + bytes(233))  # 1001 bytes: not whole uint16s
    (workdir / "afile").write_text("a file where a directory is expected\n")
    (workdir / "small.txt").write_text("print('hello, world')\n" * 250)  # 5.5 kB: 275 val tokens
    (workdir / "tiny.txt").write_bytes(b"abc")
    (workdir / "empty").mkdir()
    for i in range(20):  # 20 documents of 1.1 kB: a prepared corpus whose val.bin has ~2 of them
        (workdir / "docs" / f"{i}.txt").parent.mkdir(exist_ok=True)
        (workdir / "docs" / f"{i}.txt").write_text(f"document {i}\n" * 100)
    assert (
        prepare([str(workdir / "docs"), "--out", str(workdir / "prepared"), "--holdout", "0.2", "--workers", "1"]) == 0
    )
    (workdir / "nanogpt").mkdir()  # nanoGPT's prepare.py output: train.bin and val.bin, no manifest
    np.tile(np.arange(256, dtype=np.uint16), 40).tofile(workdir / "nanogpt" / "train.bin")
    np.arange(256, dtype=np.uint16).tofile(workdir / "nanogpt" / "val.bin")
    # the fit file: approach 3 on a synthetic Chinchilla table (the reference store is too small for a law
    # whose exponents are positive, and a loaded law with a negative one is refused)
    isoflop_runs(CHINCHILLA_LAW, np.logspace(18, 20, 3), 6, noise=0.01, seed=0).to_csv(workdir / "law.csv", index=False)
    assert (
        run_cli(
            "fit", workdir / "law.csv", "--approach", "3", "--bootstrap", "0", "--out", workdir / "fit.json"
        ).returncode
        == 0
    )
    shutil.rmtree(store / "hydra", ignore_errors=True)
    return {
        "workdir": workdir,
        "store": store,
        "nan_store": nan_store,
        "failed_store": failed_store,
        "negative_csv": workdir / "negative.csv",
        "no_loss_csv": workdir / "no-loss.csv",
        "afile": workdir / "afile",
        "empty": workdir / "empty",
        "fit": workdir / "fit.json",
        "prepared": workdir / "prepared",
        "nanogpt": workdir / "nanogpt",
    }


def fill(argv, files):
    return [a.format(**files) for a in argv]


@pytest.fixture
def no_hydra(monkeypatch):
    """In-process cases must fail before Hydra starts (a run would start in the test process)."""
    import scaling.train_app

    def reached():
        raise AssertionError("bad input reached Hydra")

    monkeypatch.setattr(scaling.train_app, "hydra_main", reached)


def test_the_table_covers_every_verb_with_enough_cases():
    verbs = {verb for verb, *_ in IN_PROCESS}
    assert verbs >= {"train", "sweep", "fit", "optimal", "plot", "report"}
    assert len(IN_PROCESS) + len(SWEEPER_CASES) >= 25


@pytest.mark.parametrize("verb, case, argv, names", IN_PROCESS, ids=[f"{c[0]}: {c[1]}" for c in IN_PROCESS])
def test_bad_input_is_one_line_and_changes_nothing(capfd, files, no_hydra, verb, case, argv, names):
    from scaling.cli import main

    before = snapshot(files["workdir"])
    code = main([verb, *fill(argv, files)])
    out, err = capfd.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    for name in fill(names, files):
        assert name in errors[0], (name, errors[0])
    assert "$VALUE" not in errors[0], errors[0]  # OmegaConf's unfilled message template
    assert snapshot(files["workdir"]) == before, "bad input changed a file that was already written"


@pytest.mark.parametrize(
    "verb, case, argv, names",
    [("sweep", *c) for c in SWEEPER_CASES]
    + [
        ("train", *TRAIN[6]),
        ("fit", *FIT[2]),
        ("optimal", *OPTIMAL[0]),
        ("report", *REPORT[3]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_input_in_a_real_process(files, verb, case, argv, names):
    before = snapshot(files["workdir"])
    proc = run_cli(verb, *fill(argv, files), timeout=120)
    assert_one_line_error(proc, *fill(names, files))
    shutil.rmtree(files["store"] / "hydra", ignore_errors=True)  # Hydra's own log of the aborted sweep
    assert snapshot(files["workdir"]) == before, "bad input changed a file that was already written"


def test_a_device_this_machine_lacks_is_refused_before_anything_is_written(capfd, files, no_hydra):
    """train.device=cuda without CUDA (or mps without MPS): one line, exit 2, before Hydra starts."""
    import torch

    from scaling.cli import main

    device = "mps" if torch.cuda.is_available() else "cuda"
    if device == "mps" and torch.backends.mps.is_available():
        pytest.skip("this machine has both CUDA and MPS")
    before = snapshot(files["workdir"])
    code = main(["train", f"train.device={device}", f"store={files['store']}"])
    _, err = capfd.readouterr()
    assert code == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert f"train.device: '{device}' is not available" in line
    assert snapshot(files["workdir"]) == before


def test_a_sweep_on_a_device_this_machine_lacks_is_refused_before_it_writes(files):
    """user18: `scaling sweep ... train.device=cuda` on a CPU machine wrote its plan and hydra/ into a new store,
    launched, and only then failed."""
    import torch

    if torch.cuda.is_available() or os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has CUDA")
    store = files["workdir"] / "new-store"
    proc = run_cli("sweep", str(SWEEP), "train.device=cuda", f"store={store}", timeout=120)
    assert_one_line_error(proc, "train.device: 'cuda' is not available on this machine")
    assert not store.exists()


BAD_FLAGS = [
    (["shapes", "--bogus"], ["scaling shapes:", "--bogus", "see scaling shapes --help"]),
    (["shapes", "--nearest", "abc"], ["scaling shapes:", "--nearest", "'abc'"]),
    (["shapes", "--kind", "all"], ["scaling shapes:", "--kind", "'all'", "non_embedding"]),
    (["status", "results/quick", "--bogus"], ["scaling status:", "--bogus", "see scaling status --help"]),
    (["status"], ["scaling status:", "store", "see scaling status --help"]),
    (["sweep"], ["scaling sweep:", "name a sweep (default, ", "see scaling sweep --help"]),
    (["sync", "results/quick", "--bogus"], ["scaling sync:", "--bogus", "see scaling sync --help"]),
    (["prepare", "in.txt", "--out", "out", "--bogus"], ["scaling prepare:", "--bogus"]),
    (["fit", "results/quick", "--bogus"], ["scaling fit:", "--bogus"]),
]


@pytest.mark.parametrize("argv, names", BAD_FLAGS, ids=[" ".join(argv) for argv, _ in BAD_FLAGS])
def test_a_bad_flag_to_any_verb_is_one_error_line_and_no_usage(capfd, argv, names):
    """argparse's own error() prints its usage and `PROG: error: ...` (2-4 lines): every verb's parser
    is the one whose errors are a single `error:` line (README, Guarantees)."""
    from scaling.cli import main

    code = main(argv)
    out, err = capfd.readouterr()
    assert code == 2 and out == "", (code, out, err)
    (line,) = err.splitlines()
    assert line.startswith("error: "), line
    for name in names:
        assert name in line, (name, line)
