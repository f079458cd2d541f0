"""Tables a researcher brings, built from Chinchilla's approach-3 law and made messy the way published
tables are: two recipes pooled at the same (N, D) with no column naming them, one budget whose runs
show no loss floor, whole training curves as rows, counts in millions and billions in the column's
name, compute in PF-days, perplexity instead of loss, JSON and JSONL files. Each must give the truth
within its interval, or say the quantity is unidentified, or refuse with one line saying what is
valid; never a confident wrong number. (Each test failed before its fix; a few CLI processes.)"""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_main

from analysis.compare.multiplier import differences
from analysis.fits import laws
from analysis.fits.isoflop import fit_isoflop
from analysis.fits.optimal import ParametricLaw
from analysis.fits.parametric import fit_parametric
from analysis.published import CHINCHILLA_APPROACH3 as LAW
from analysis.sources.budgets import NOMINAL_BUDGETS
from analysis.sources.check import table_from_frame
from analysis.sources.schema import ColumnMap
from analysis.synthetic import isoflop_runs
from scaling.errors import DataError

BUDGETS = [1e18, 1e19, 1e20, 1e21, 1e22]
TRUE_A = LAW["beta"] / (LAW["alpha"] + LAW["beta"])


def ladder(budgets=BUDGETS, sizes=7, spread=0.8, seed=3) -> pd.DataFrame:
    return isoflop_runs(LAW, budgets, sizes, spread_decades=spread, noise=0.01, seed=seed)


def pooled_without_a_column() -> pd.DataFrame:
    """Two recipes at the same (N, D) points, nothing naming them: only the repeated points give it away."""
    base = ladder()
    rng = np.random.default_rng(8)
    better = laws.chinchilla_loss(base["params"], base["tokens"], **{**LAW, "E": 1.60, "A": 350.0})
    new = base.assign(val_loss=better * np.exp(0.01 * rng.standard_normal(len(base))))
    return pd.concat([base, new], ignore_index=True).drop(columns=["run_id", "status"])


def test_pooled_recipes_leave_every_parameter_unidentified_not_only_a():
    # Before: a and b were unidentified but E 1.756 [1.756, 1.756], alpha 0.3731 [0.3731, 0.3731], ...
    fit = fit_parametric(table_from_frame(pooled_without_a_column(), "t.csv", ColumnMap()), resamples=20, seed=0)
    for name in ("E", "A", "B", "alpha", "beta", "a", "b", "G"):
        e = fit.estimates[name]
        assert e.lower == e.upper and "every resample gave" in e.unidentified, name


def test_one_budget_without_a_floor_leaves_e_and_the_extrapolated_loss_unidentified():
    # One budget, 9 sizes over two decades (truth E = 1.69). Before: E = 6.4e-10 [7.8e-116, 0.42]
    # printed as identified, and `optimal` at 10x the budget a loss of 2.107 [2.036, 2.194] (truth 2.33).
    table = table_from_frame(ladder([1e20], 9, 1.0, seed=7), "one.csv", ColumnMap())
    fit = fit_parametric(table, resamples=30, seed=0)
    assert "puts E at 0" in fit.estimates["E"].unidentified
    assert fit.estimates["E"].upper < LAW["E"]  # the interval that was printed misses the truth
    law = ParametricLaw(
        "one",
        fit.params,
        fit.bootstrap.samples,
        fitted_compute_max=fit.fitted_compute_max,
        floor_unidentified=fit.estimates["E"].unidentified,
        fitted_compute_min=float(table.runs["C"].min()),
    )
    assert law.allocate(1e21).loss.unidentified == "as the fit's E"
    # below the fitted budget too: the report's ladder row at 1e18 printed 3.909 [3.577, 4.118], truth 3.51
    assert law.allocate(1e18).loss.unidentified == "as the fit's E"
    assert not law.allocate(1e20).loss.unidentified  # at the fitted budget the runs pin the loss down
    assert law.budget_for_loss(2.3).budget.unidentified == "as the fit's E"
    # optimal --inference-tokens follows the same rules. Before: N 2.3e8 [2.2e8, 3.1e8], a saving of
    # 0.55 [0.41, 0.64] and a loss 2.334 [2.326, 2.446] from a fit whose a and E are unidentified.
    from analysis.fits.inference import inference_allocation

    law.unidentified = fit.estimates["a"].unidentified
    assert law.unidentified
    at_budget = inference_allocation(law, 1e12, budget=1e21).values
    assert at_budget["N"].unidentified == at_budget["saving_fraction"].unidentified == "as the fit's a"
    assert at_budget["loss"].unidentified == "as the fit's E" and not at_budget["total_flops"].unidentified
    at_loss = inference_allocation(law, 1e12, target_loss=2.3).values
    assert at_loss["total_flops"].unidentified and not at_loss["loss"].unidentified
    # compare: a difference in E is no better known than either side's E
    clean = fit_parametric(table_from_frame(ladder([1e20, 1e21, 1e22], 7, seed=4), "c.csv"), resamples=30, seed=0)
    assert not clean.estimates["E"].unidentified
    assert differences(clean, fit, 0.95)["E"]["unidentified"] == "the candidate's E is unidentified"


def test_optimal_from_the_fit_json_names_the_unidentified_loss(tmp_path, capsys):
    path = tmp_path / "one.csv"
    ladder([1e20], 9, 1.0, seed=7).to_csv(path, index=False)
    run_main(
        capsys, "fit", str(path), "--approach", "3", "--bootstrap", "30", "--out", str(tmp_path / "f.json"), check=True
    )
    out = run_main(
        capsys, "optimal", "--law", str(tmp_path / "f.json"), "--budget", "1e21", "--json", check=True
    ).stdout
    assert json.loads(out)["loss"]["unidentified"] == "as the fit's E"
    out = run_main(
        capsys, "optimal", "--law", str(tmp_path / "f.json"), "--budget", "1e18", "--json", check=True
    ).stdout
    assert json.loads(out)["loss"]["unidentified"] == "as the fit's E"
    clean = ladder()
    clean.to_csv(path, index=False)  # the clean ladder keeps every number, and covers the truth
    proc = run_main(capsys, "fit", str(path), "--approach", "3", "--bootstrap", "30", "--json", check=True)
    fitted = json.loads(proc.stdout)
    for name, true in (("E", LAW["E"]), ("alpha", LAW["alpha"]), ("beta", LAW["beta"]), ("a", TRUE_A)):
        lower, upper = fitted[name]["interval"]
        assert lower < true < upper and "unidentified" not in fitted[name], name


def test_whole_training_curves_as_rows_are_read_as_curves_not_as_runs(tmp_path):
    # Before: 350 rows of 35 runs (10 evaluations each) were 350 runs in 47 budgets: approach 2 fitted
    # parabolas through mid-training points, with no word that run ids repeat.
    from analysis.synthetic import loss_curves

    runs = ladder()
    rows = loss_curves(runs, LAW, points_per_run=10, seed=2).merge(runs[["run_id", "params"]], on="run_id")
    table = table_from_frame(rows.sample(frac=1.0, random_state=0), "curves.csv", ColumnMap())
    assert len(table.runs) == 35 and len(table.budgets) == 5 and len(table.curves) == 350
    assert any("rows are training curves: 350 rows of 35 runs" in n for n in table.notes)
    final = rows.loc[rows.groupby("run_id")["tokens"].idxmax()].set_index("run_id")
    got = table.runs.set_index("run_id")
    assert np.allclose(got["loss"], final.loc[got.index, "val_loss"])  # each run's last row
    assert np.allclose(got["D"], final.loc[got.index, "tokens"])
    # seeds of one (N, D) repeat a run id at one token count: not curves
    seeds = pd.concat([runs, runs.assign(val_loss=runs["val_loss"] * 1.01)], ignore_index=True)
    assert len(table_from_frame(seeds, "seeds.csv", ColumnMap()).runs) == 70
    # one id over several sizes (an experiment's name in the run_id column) is not a curve either
    named = runs.assign(run_id="exp1")
    assert len(table_from_frame(named, "named.csv", ColumnMap()).runs) == 35


def test_units_in_column_names_are_applied_and_perplexity_is_refused(tmp_path, capsys):
    # Before: params_M and tokens_B were read as given (D/N = 0.02: no warning), budgets 1e3 to 1e7
    # "FLOPs", N_opt 91.58 at "C = 1e3"; compute_pfdays was refused, perplexity fitted as nats/token.
    runs = ladder()
    table = pd.DataFrame({"params_M": runs["params"] / 1e6, "tokens_B": runs["tokens"] / 1e9, "loss": runs["val_loss"]})
    checked = table_from_frame(table, "units.csv", ColumnMap())
    assert np.allclose(checked.runs["N"], runs["params"]) and np.allclose(checked.runs["D"], runs["tokens"])
    assert np.allclose(checked.budgets, BUDGETS, rtol=0.02)
    assert any("column 'tokens_B' is in B" in n for n in checked.notes)
    named = table.rename(columns={"params_M": "N (millions)", "tokens_B": "D [T]"}).assign(
        **{"D [T]": lambda f: f["D [T]"] / 1e3}
    )
    checked = table_from_frame(named, "u.csv", ColumnMap(n="N (millions)", d="D [T]"))
    assert np.allclose(checked.runs["D"], runs["tokens"]) and np.allclose(checked.runs["N"], runs["params"])
    pf = pd.DataFrame(
        {"params": runs["params"], "compute (PF-days)": runs["flops"] / 8.64e19, "loss": runs["val_loss"]}
    )
    path = tmp_path / "pf.csv"
    pf.to_csv(path, index=False)
    out = json.loads(
        run_main(capsys, "fit", str(path), "--approach", "2", "--bootstrap", "20", "--json", check=True).stdout
    )
    assert np.allclose([b["budget"] for b in out["table"]["budgets"]], BUDGETS, rtol=0.02)
    ppl = pd.DataFrame({"params": runs["params"], "tokens": runs["tokens"], "ppl": np.exp(runs["val_loss"])})
    ppl.to_csv(path, index=False)
    proc = run_main(capsys, "fit", str(path), "--loss-column", "ppl", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "ln(perplexity) in nats/token" in proc.stderr


def test_json_and_json_lines_tables_read_as_the_csv_does(tmp_path, capsys):
    # Before: a .json was read as CSV ("holds no runs (the table is empty)"), a .jsonl gave "no column
    # for N ... Columns present: {"run_id":"r0000", ...", an empty file "No columns to parse from file".
    from analysis.sources.files import read_table_file

    runs = ladder()
    runs.to_json(tmp_path / "r.json", orient="records")
    runs.to_json(tmp_path / "c.json", orient="columns")
    runs.to_json(tmp_path / "r.jsonl", orient="records", lines=True)
    # rows under one key, beside metadata: read as those rows (it said "no column for N ... Columns present: runs")
    rows = json.loads(runs.to_json(orient="records"))
    (tmp_path / "n.json").write_text(json.dumps({"meta": {"lab": "x", "tags": ["a", "b"]}, "runs": rows}))
    for name in ("r.json", "c.json", "r.jsonl", "n.json"):
        got = read_table_file(tmp_path / name)
        assert np.allclose(got["val_loss"].to_numpy(float), runs["val_loss"]), name
    (tmp_path / "empty.csv").write_text("")
    proc = run_main(capsys, "fit", str(tmp_path / "empty.csv"), check=False)
    assert proc.returncode == 2 and "is empty; give a table of runs (.csv, .tsv" in proc.stderr


def test_a_tokenizer_or_loss_unit_column_with_several_values_is_two_experiments(tmp_path, capsys):
    # Before: half the rows in bits/token, half in nats/token, pooled without a word (approach 3 then
    # printed beta 0.092 [0.038, 0.80] and B 16.1 [7.7, 9.6e9] as numbers).
    runs = ladder()
    mixed = runs.assign(loss_unit=np.where(runs.index % 2 == 0, "nats", "bits"))
    mixed.loc[mixed["loss_unit"] == "bits", "val_loss"] /= np.log(2)
    for column, frame in (
        ("loss_unit", mixed),
        ("tokenizer", runs.assign(tokenizer=["gpt2", "llama"] * 17 + ["gpt2"])),
    ):
        path = tmp_path / f"{column}.csv"
        frame.to_csv(path, index=False)
        proc = run_main(capsys, "fit", str(path), "--approach", "3", "--bootstrap", "0", check=False)
        assert proc.returncode == 2 and f"--group-by {column}" in proc.stderr, column


def test_a_nominal_budget_column_twice_6nd_groups_runs_and_the_fit_stays_at_6nd():
    # Before: only "6·N·D differs from it by up to 50% (median 50%); the fit uses the column", while
    # approach 2 put N_opt = 5.0e9 at "C = 2e22" and approach 3 the same N at 1e22; then (to 2026-11-27) approach 2
    # placed its budgets at the column's values, so its D_opt = label/(6·N_opt) was 2x the tokens its runs trained.
    runs = ladder()
    nominal = runs.assign(budget_flops=lambda f: 2 * f["budget_flops"])
    table = table_from_frame(nominal, "nominal.csv", ColumnMap())
    said = [n for n in table.lines()[1] if "budget column" in n]
    assert len(said) == 1 and "6·N·D is 0.5x it (median), a nominal budget" in said[0], said
    assert NOMINAL_BUDGETS in said[0]
    truth, fit = fit_isoflop(table_from_frame(runs, "t.csv", ColumnMap()), resamples=0), fit_isoflop(table, resamples=0)
    for p, q in zip(truth.profiles, fit.profiles, strict=True):
        assert q.budget == 2 * p.budget and q.compute == pytest.approx(p.compute, rel=1e-12)
        assert q.d_opt == pytest.approx(p.d_opt, rel=1e-12) and q.n_opt == pytest.approx(p.n_opt, rel=1e-12)
    assert fit.n_opt_law(1e22) == pytest.approx(truth.n_opt_law(1e22), rel=1e-9)
    assert fit.d_opt_law(1e22) == pytest.approx(truth.d_opt_law(1e22), rel=1e-9)
    rounded = ladder().assign(budget_flops=lambda f: f["budget_flops"] * np.where(f.index % 2, 1.1, 0.9))
    assert not any("x it (median)" in n for n in table_from_frame(rounded, "r.csv", ColumnMap()).lines()[1])


def test_a_table_with_only_non_embedding_counts_names_the_n_kind_option(tmp_path, capsys):
    # Before: "name it with --n-column" only, though --n-kind non_embedding reads the column as it is.
    runs = ladder()
    path = tmp_path / "kaplan.csv"
    pd.DataFrame({"params_non_embedding": runs["params"], "tokens": runs["tokens"], "loss": runs["val_loss"]}).to_csv(
        path, index=False
    )
    proc = run_main(capsys, "fit", str(path), "--bootstrap", "0", check=False)
    assert proc.returncode == 2 and "(or --n-kind non_embedding for column 'params_non_embedding')" in proc.stderr


@pytest.mark.parametrize(
    "name, hint",
    [
        ("n_non_embedding", "(or --n-kind non_embedding for column 'n_non_embedding')"),
        ("NonEmbedding Params", "(or --n-column 'NonEmbedding Params' --n-kind non_embedding: a non-embedding count)"),
    ],
)
def test_other_non_embedding_names_are_read_or_named_with_the_n_kind_option(name, hint):
    # Before: "name it with --n-column" only for n_non_embedding (user8 review), which --n-kind did not read either.
    runs = ladder()
    frame = pd.DataFrame({name: runs["params"], "tokens": runs["tokens"], "loss": runs["val_loss"]})
    with pytest.raises(DataError) as refused:
        table_from_frame(frame, "kaplan.csv", ColumnMap())
    assert hint in str(refused.value)
    if name == "n_non_embedding":
        kaplan = table_from_frame(frame, "kaplan.csv", ColumnMap(n_kind="non_embedding"))
        assert kaplan.n_kind == "non_embedding" and np.array_equal(kaplan.runs["N"], runs["params"])


def test_three_sizes_per_budget_give_no_bare_n_opt_per_budget():
    # Before: 78 of 100 resamples failed, a and b were unidentified, but each budget printed its N_opt
    # as a bare number (C = 1e19: 1.92e8, truth 2.5e8) with no interval and no word.
    from analysis.fits.isoflop import fit_isoflop

    fit = fit_isoflop(table_from_frame(ladder(sizes=3, spread=0.5, seed=6), "three.csv"), resamples=100, seed=0)
    assert fit.estimates["a"].unidentified.startswith("no interval")
    for profile in fit.profiles:
        assert profile.n_opt_interval is None and profile.n_opt_unidentified, profile.budget
    clean = fit_isoflop(table_from_frame(ladder(), "clean.csv"), resamples=50, seed=0)
    assert sum(not p.n_opt_unidentified for p in clean.profiles) >= 4  # a clean ladder keeps its intervals


def test_counts_with_thousands_separators_are_numbers():
    # Before: "no usable rows: all 35 have a value that is not a finite number > 0 ... params '12,771,384'".
    runs = ladder()
    grouped = runs.assign(params=runs["params"].map("{:,.0f}".format), tokens=runs["tokens"].map("{:,.0f}".format))
    table = table_from_frame(grouped, "commas.csv", ColumnMap())
    assert len(table.runs) == 35 and np.allclose(table.runs["N"], runs["params"], rtol=1e-6)


def test_a_loss_column_named_in_bits_is_labelled_so(tmp_path):
    # Before: --loss-column loss_bits printed "E 2.392 irreducible loss (nats/token)".
    runs = ladder()
    frame = pd.DataFrame(
        {"params": runs["params"], "tokens": runs["tokens"], "loss_bits": runs["val_loss"] / np.log(2)}
    )
    assert table_from_frame(frame, "b.csv", ColumnMap(loss="loss_bits")).loss_unit == "bits/token"
    assert table_from_frame(frame, "b.csv", ColumnMap(loss="loss_bits", loss_unit="nats")).loss_unit == "nats/token"
    bpb = frame.rename(columns={"loss_bits": "eval bpb"})
    assert table_from_frame(bpb, "b.csv", ColumnMap(loss="eval bpb")).loss_unit == "bits/byte"
    assert table_from_frame(runs, "r.csv", ColumnMap()).loss_unit == "nats/token"


def test_the_landscape_caption_says_when_the_drawn_e_is_unidentified():
    # Before: the report's landscape caption read "L(N, D) = 6.44e-10 + 160/N^0.255 + ..." as a finding.
    from analysis.describe.fit import parametric_law_text

    fit = fit_parametric(table_from_frame(ladder([1e20], 9, 1.0, seed=7), "one.csv"), resamples=30, seed=0)
    assert parametric_law_text(fit).endswith("(E, A, B, α, β unidentified)")  # one budget: its terms too (user34)
    clean = fit_parametric(table_from_frame(ladder(), "c.csv"), resamples=20, seed=0)
    assert "unidentified" not in parametric_law_text(clean)
