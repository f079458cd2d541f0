"""The figures: drawn for a store and for a CSV, log axes with readable labels and units, and fitted
lines that pass through the points they were fitted to (synthetic runs from a known law).
`scaling plot` end to end and its bad input. (~20 s on 2 idle cores: one fit with 100 resamples,
six figures drawn and rendered, one `scaling plot` subprocess.)"""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, run_cli, run_main
from matplotlib import image as mpimg
from matplotlib.colors import to_rgba
from synthetic_store import QUICK_BUDGETS, SMALL_LAW, write_store

from analysis.cli.plot import group_folders
from analysis.describe.numbers import count_label, flops_label
from analysis.figures import (
    FIGURES,
    OKABE_ITO,
    figure_bytes,
    figure_caption,
    log_ticks,
    make_figures,
    optimal_allocation,
)
from analysis.figures.axes import MAX_LEGEND_BUDGETS
from analysis.fits import laws
from analysis.fits.fit import fit_all
from analysis.fits.results import FitReport
from analysis.sources.load import load_runs
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs
from scaling.cli import main

UNITS = ("FLOPs", "parameters", "tokens", "nats/token", "%")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plots") / "store"
    write_store(path)
    return path


@pytest.fixture(scope="module")
def fitted(store):
    table = load_runs(str(store))
    return table, fit_all(table, resamples=100, seed=0)


@pytest.fixture(scope="module")
def figures(fitted):
    table, report = fitted
    drawn, missing = make_figures(table, report)
    assert missing == {}
    return drawn


def _gid(fig, prefix):
    """The artists whose gid starts with ``prefix`` (every plotted series carries one)."""
    return [a for ax in fig.axes for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


def _line_at(line, x):
    """The line's y at ``x``, interpolated in log x (the lines are drawn densely on log axes)."""
    xs, ys = (np.asarray(v, float) for v in line.get_data())
    return np.interp(np.log(x), np.log(xs), ys)


# ---------------------------------------------------------------- labels
def test_tick_labels_read_like_1e15_and_10M():
    assert [flops_label(v) for v in (1e15, 3e12, 2.5e11, 9.999e17)] == ["1e15", "3e12", "2.5e11", "1e18"]
    assert [count_label(v) for v in (950, 1e4, 2.5e6, 1e9, 3e12, 2e15)] == ["950", "10k", "2.5M", "1B", "3T", "2e15"]
    assert log_ticks(1e10, 1e20) is None  # wide: powers of ten only
    assert log_ticks(3e11, 3e12) == pytest.approx([3e11, 5e11, 1e12, 2e12, 3e12])
    assert log_ticks(1.6, 2.2) == pytest.approx([1.6, 1.8, 2.0, 2.2])  # narrow: evenly spaced


# ---------------------------------------------------------------- every figure, from a store
def test_every_figure_is_drawn_from_a_store_on_log_axes_with_units(figures, tmp_path):
    assert set(figures) == set(FIGURES)
    for name, fig in figures.items():
        path = tmp_path / f"{name}.png"
        path.write_bytes(figure_bytes(fig, "png"))
        pixels = mpimg.imread(path)
        height, width = pixels.shape[:2]
        assert width >= 1000 and height >= 500, (name, width, height)
        assert pixels[..., :3].std() > 0.05, f"{name} looks blank"
        fig.canvas.draw()
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                continue
            assert ax.get_xscale() == "log", (name, ax.get_xlabel())
            assert any(unit in ax.get_xlabel() for unit in UNITS), (name, ax.get_xlabel())
            labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            assert labels and all("$" not in t and "^" not in t for t in labels), (name, labels)  # 1e12, not 10^12
        assert any(unit in ax.get_ylabel() for ax in fig.axes for unit in UNITS), name
    x_labels = [t.get_text() for t in figures["loss_vs_compute"].axes[0].get_xticklabels() if t.get_text()]
    assert "1e12" in x_labels
    n_labels = [t.get_text() for t in figures["isoflop_profiles"].axes[0].get_xticklabels() if t.get_text()]
    assert "100k" in n_labels


def test_figures_are_written_as_png_svg_and_pdf(figures):
    fig = figures["isoflop_profiles"]
    assert figure_bytes(fig, "png")[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in figure_bytes(fig, "svg")[:500]
    assert figure_bytes(fig, "pdf")[:5] == b"%PDF-"
    assert figure_bytes(fig, "svg") == figure_bytes(fig, "svg")  # no timestamp: equal figures, equal files


# ---------------------------------------------------------------- fitted lines through their points
def test_parabolas_and_approach_3_pass_through_each_budgets_runs(figures, fitted):
    fig = figures["isoflop_profiles"]
    for budget in QUICK_BUDGETS:
        (points,) = _gid(fig, f"points:{budget:g}")
        n, loss = points.get_offsets().T
        (parabola,) = _gid(fig, f"parabola:{budget:g}")
        (parametric,) = _gid(fig, f"approach3:{budget:g}")
        # 0.5% noise on the losses; a parabola in ln N is not the law's exact shape over ±1 decade
        assert _line_at(parabola, n) == pytest.approx(loss, rel=0.015)
        assert _line_at(parametric, n) == pytest.approx(loss, rel=0.015)
        (star,) = _gid(fig, f"minimum:{budget:g}")
        true_n_opt = laws.chinchilla_allocation(budget, *(SMALL_LAW[k] for k in ("A", "B", "alpha", "beta")))[0]
        assert star.get_offsets()[0][0] == pytest.approx(true_n_opt, rel=0.25)


def test_envelope_law_passes_through_the_envelope(figures, fitted):
    fig = figures["loss_vs_compute"]
    (envelope,) = _gid(fig, "envelope")
    compute, loss = envelope.get_offsets().T
    (law,) = _gid(fig, "fit:approach1")
    assert _line_at(law, compute) == pytest.approx(loss, rel=0.02)
    (frontier,) = _gid(fig, "fit:approach3")  # the envelope is the law's frontier (synthetic curves)
    inside = (compute >= frontier.get_xdata().min()) & (compute <= frontier.get_xdata().max())
    assert _line_at(frontier, compute[inside]) == pytest.approx(loss[inside], rel=0.03)


def test_allocation_lines_pass_through_the_minima_and_the_truth(figures, fitted):
    _table, report = fitted
    fig = figures["optimal_allocation"]
    n_panel = fig.axes[0]
    (minima,) = [a for a in _gid(fig, "minima") if a.axes is n_panel]
    compute, n_opt = (np.asarray(v, float) for v in minima.get_data())
    for approach in (2, 3):
        (line,) = [a for a in _gid(fig, f"fit:approach{approach}") if a.axes is n_panel]
        assert _line_at(line, compute) == pytest.approx(n_opt, rel=0.15)
        truth = laws.chinchilla_allocation(compute, *(SMALL_LAW[k] for k in ("A", "B", "alpha", "beta")))[0]
        assert _line_at(line, compute) == pytest.approx(truth, rel=0.25)
    (reference,) = [a for a in _gid(fig, "reference") if a.axes is n_panel]
    assert _line_at(reference, np.array([1.2e14])) == pytest.approx(1e6, rel=0.01)  # sqrt(C/120)


def test_landscape_path_is_the_fitted_optimum_and_runs_use_the_contour_colours(figures, fitted):
    _table, report = fitted
    fig = figures["loss_landscape"]
    (path,) = _gid(fig, "optimal-path")
    n, d = (np.asarray(v, float) for v in path.get_data())
    assert 6.0 * n * d == pytest.approx(np.geomspace(6.0 * n[0] * d[0], 6.0 * n[-1] * d[-1], len(n)), rel=1e-9)
    p = report.parametric.params
    assert n == pytest.approx(laws.chinchilla_allocation(6.0 * n * d, p["A"], p["B"], p["alpha"], p["beta"])[0])
    (runs,) = _gid(fig, "runs")
    assert runs.norm is fig.axes[0].collections[0].norm  # the filled contours' colour scale


def test_palette_is_okabe_ito_for_approaches(figures):
    fig = figures["optimal_allocation"]
    (line,) = [a for a in _gid(fig, "fit:approach3") if a.axes is fig.axes[0]]
    assert to_rgba(line.get_color()) == to_rgba(OKABE_ITO["vermillion"])


# ---------------------------------------------------------------- many budgets
def test_thirty_budgets_keep_every_legend_bounded_and_one_iso_c_line_per_budget(tmp_path):
    csv = tmp_path / "thirty.csv"
    isoflop_runs(CHINCHILLA_LAW, np.geomspace(1e18, 1e22, 30), 7, spread_decades=0.8, seed=1).to_csv(csv, index=False)
    table = load_runs(str(csv))
    assert len(table.budgets) == 30
    drawn, missing = make_figures(table, fit_all(table, resamples=0))
    assert set(drawn) == set(FIGURES) - {"training_curves"}, missing  # a CSV holds no curves
    for name, fig in drawn.items():
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        entries = sum(len(legend.get_texts()) for legend in legends)
        assert entries <= MAX_LEGEND_BUDGETS, (name, entries)
    for name in ("isoflop_profiles", "residuals"):  # a colour bar names the budgets instead
        bars = [ax.get_ylabel() for ax in drawn[name].axes if ax.get_label() == "<colorbar>"]
        assert "compute budget C (FLOPs), 30 budgets" in bars, (name, bars)
    landscape = drawn["loss_landscape"]
    lines = _gid(landscape, "iso-C:")
    assert sorted(float(line.get_gid().removeprefix("iso-C:")) for line in lines) == pytest.approx(
        list(table.budgets), rel=1e-5
    )
    labels = [t for t in landscape.axes[0].texts if t.get_text().startswith("C = ")]
    assert 0 < len(labels) <= MAX_LEGEND_BUDGETS
    (runs,) = _gid(landscape, "runs")  # the fill shows the loss: a thin dark edge, not a thick white one
    assert to_rgba(runs.get_edgecolor()[0]) == to_rgba("black") and max(runs.get_linewidths()) <= 0.6


# ---------------------------------------------------------------- other sources
def test_csv_of_final_losses_draws_all_but_the_training_curves(store, tmp_path):
    table = load_runs(str(store))
    csv = tmp_path / "runs.csv"
    table.runs.rename(columns={"N": "params", "D": "tokens", "loss": "val_loss"}).to_csv(csv, index=False)
    from_csv = load_runs(str(csv))
    drawn, missing = make_figures(from_csv, fit_all(from_csv, resamples=0))
    assert set(missing) == {"training_curves"} and "no loss curves" in missing["training_curves"]
    assert set(drawn) == set(FIGURES) - {"training_curves"}


def test_too_few_runs_for_a_fit_still_draws_what_the_runs_support(tmp_path):
    path = tmp_path / "two"
    write_store(path, budgets=(1e12,), sizes=2, with_failures=False)
    drawn, missing = make_figures(load_runs(str(path)), None)
    assert set(drawn) == {"loss_vs_compute", "training_curves"}
    assert missing["isoflop_profiles"] == "no law could be fitted"


def test_allocation_figure_needs_a_fit():
    from analysis.figures import FigureUnavailable
    from analysis.fits.results import FitReport

    with pytest.raises(FigureUnavailable, match="no approach was fitted"):
        optimal_allocation(FitReport(source="x", n_kind="total", runs=0, warnings=[], notes=[]))


# ---------------------------------------------------------------- the CLI
def test_scaling_plot_writes_each_drawable_figure_in_every_format_and_notes_the_rest(tmp_path):
    store = tmp_path / "two-runs"
    write_store(store, budgets=(1e12,), sizes=2, with_failures=False)  # too few runs for any law
    out = tmp_path / "new" / "figures"  # created, parents too
    proc = run_cli("plot", store, "--out", out, "--format", "png,svg,pdf", "--bootstrap", "0", check=True)
    drawn = ("loss_vs_compute", "training_curves")
    written = sorted(p.name for p in out.iterdir())
    figures = sorted(f"{name}.{fmt}" for name in drawn for fmt in ("png", "svg", "pdf"))
    assert written == sorted(figures + ["captions.md"])
    paths = [line for line in proc.stdout.splitlines() if not line.startswith("  ")]
    assert sorted(paths) == sorted(str(out / name) for name in written)
    # each figure's caption: printed after its last file, and listed with its files in captions.md
    lines = proc.stdout.splitlines()
    listing = (out / "captions.md").read_text()
    for name in drawn:
        caption = figure_caption(name, None)
        assert lines[lines.index(str(out / f"{name}.pdf")) + 1] == f"  {caption}"
        assert f"`{name}.png`, `{name}.svg`, `{name}.pdf`\n\n{caption}\n" in listing
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: not drawn: ")]
    assert len(notes) == len(FIGURES) - len(drawn) and all("no law could be fitted" in n for n in notes)
    assert (out / "loss_vs_compute.png").stat().st_mode & 0o044 == 0o044  # readable by others, like any new file
    assert (out / "loss_vs_compute.pdf").read_bytes()[:5] == b"%PDF-"


def test_plot_group_by_draws_each_recipe_of_one_file_into_its_own_folder(tmp_path, capsys):
    """Several recipes in one file (refused by plot before, --where one at a time): a folder per group, named
    COLUMN=VALUE with a value's slash made safe; a saved fit, which is one table's, is refused with it."""
    frames = [isoflop_runs(CHINCHILLA_LAW, [1e18, 1e19], 5, seed=s).assign(recipe=r) for s, r in ((1, "a/b"), (2, "c"))]
    table = tmp_path / "two.csv"
    frames[1]["run_id"] = "c" + frames[1]["run_id"]
    pd.concat(frames, ignore_index=True).to_csv(table, index=False)
    out = tmp_path / "figs"
    proc = run_main(capsys, "plot", table, "--group-by", "recipe", "--out", out, "--bootstrap", 0, check=True)
    assert sorted(p.name for p in out.iterdir()) == ["recipe=a_b", "recipe=c"]
    for folder in out.iterdir():
        assert (folder / "isoflop_profiles.png").stat().st_size > 10_000 and (folder / "captions.md").exists()
    assert "== recipe = a/b ==" in proc.stdout and "== recipe = c ==" in proc.stdout
    assert group_folders("r", ["x y", "x/y", "z"]) == ["r=x_y-1", "r=x_y-2", "r=z"]
    fit = tmp_path / "fit.json"
    fit.write_text("{}")
    assert_one_line_error(
        run_main(capsys, "plot", table, "--group-by", "recipe", "--out", out, "--fit", fit), "--where"
    )


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["/nonexistent/store", "--out", "{tmp}/o"], ["'/nonexistent/store'", "does not exist"]),
        (["{store}", "--out", "{file}/o"], ["--out", "is a file, not a directory"]),
        (["{store}", "--out", "{tmp}/o", "--format", "png,gif"], ["'png,gif'", "png, svg, pdf"]),
        (["{empty}", "--out", "{tmp}/o"], ["holds no readable run records"]),
        (["{store}", "--out", "{tmp}/o", "--fit", "{file}"], ["is not valid JSON"]),
    ],
)
def test_scaling_plot_bad_input_is_one_line_and_writes_nothing(store, tmp_path, capsys, args, fragments):
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    (tmp_path / "a-file").write_text("not a directory")
    values = {"tmp": tmp_path, "store": store, "file": tmp_path / "a-file", "empty": tmp_path / "empty"}
    code = main(["plot", *[a.format(**values) for a in args]])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert all(fragment in errors[0] for fragment in fragments), errors[0]
    assert not (tmp_path / "o").exists()


def test_scaling_plot_writes_a_caption_for_each_figure_and_the_report_shows_the_same(store, tmp_path, capsys):
    fit = tmp_path / "fit.json"
    run_main(capsys, "fit", store, "--bootstrap", "20", "--out", fit, check=True)
    out = tmp_path / "figures"
    proc = run_main(capsys, "plot", store, "--fit", fit, "--out", out, check=True)
    report = FitReport.load(fit)
    listing = (out / "captions.md").read_text()
    lines = proc.stdout.splitlines()
    for name in FIGURES:
        caption = figure_caption(name, report)
        assert (out / f"{name}.png").exists() and f"`{name}.png`\n\n{caption}\n" in listing
        assert lines[lines.index(str(out / f"{name}.png")) + 1] == f"  {caption}"
    assert (
        "approach 1's law" in figure_caption("loss_vs_compute", report)
        and "95% bootstrap band (20 resamples)" in listing
    )
    # the report's caption under each figure is the one the figure declares
    html = tmp_path / "report.html"
    run_main(capsys, "report", store, "--fit", fit, "--out", html, check=True)
    markdown = html.with_suffix(".md").read_text()
    for name, (title, _draw) in FIGURES.items():
        assert f"*{title}.* {figure_caption(name, report)}" in markdown


def test_loss_against_epochs_draws_a_line_through_the_seeds_mean(tmp_path):
    # a repetition sweep with two seeds per point (the loss of seed 1 is 2% above seed 0's): one line
    # per (N, D) through the means, every run a dot; a source that never repeats has no such figure
    import pandas as pd

    from analysis.figures.axes import FigureUnavailable
    from analysis.figures.epochs import loss_vs_epochs
    from analysis.fits import muennighoff as mf
    from analysis.synthetic import repeated_runs

    runs = repeated_runs(mf.published_params(), [1e8, 4e8], [1e9], [1, 4, 16], noise=0.0)
    twice = runs.assign(run_id=runs["run_id"] + "b", val_loss=runs["val_loss"] * 1.02)
    csv = tmp_path / "repeat.csv"
    pd.concat([runs, twice]).to_csv(csv, index=False)
    fig = loss_vs_epochs(load_runs(str(csv)), None)
    ax = fig.axes[0]
    lines = [line for line in ax.lines if len(line.get_xdata()) == 3]  # the data lines (legend entries are empty)
    assert len(lines) == 2  # one per N at the one U
    for line in lines:
        assert np.allclose(line.get_xdata(), [1, 4, 16])
        n = 1e8 if line is lines[0] else 4e8
        means = [runs[(runs.params == n) & (runs.epochs == k)].val_loss.iloc[0] * 1.01 for k in (1, 4, 16)]
        assert np.allclose(line.get_ydata(), means)
    assert sum(len(c.get_offsets()) for c in ax.collections) == 12  # every run a dot
    once = repeated_runs(mf.published_params(), [1e8], [1e9], [0.5, 1], noise=0.0)
    once.to_csv(tmp_path / "once.csv", index=False)
    with pytest.raises(FigureUnavailable):
        loss_vs_epochs(load_runs(str(tmp_path / "once.csv")), None)


def test_captions_name_what_an_unfitted_approach_would_show_before_saying_it_was_not_fitted():
    # Before: "dashed vermillion: approach 3 (not fitted: no fit)'s loss at the compute-optimal N and D"
    # (user8 review), and the landscape's "L(N, D)" lowercased by capitalize().
    captions = {name: figure_caption(name, None) for name in ("loss_vs_compute", "isoflop_profiles", "loss_landscape")}
    assert not any(")'s" in text for text in captions.values())
    assert "approach 3's loss at the compute-optimal N and D (not fitted: no fit)." in captions["loss_vs_compute"]
    assert "approach 1's law fitted through it (not fitted: no fit), with" in captions["loss_vs_compute"]
    assert "Dashed: approach 3's L(N, C/6N) at the same budget (not fitted: no fit)." in captions["isoflop_profiles"]
    assert captions["loss_landscape"].startswith(
        "Approach 3's L(N, D) (filled contours) (not fitted: no fit), the runs"
    )


def test_a_one_budget_table_draws_its_profile_and_the_minimum_fit_gives(tmp_path):
    # user34: one IsoFLOP budget (often a researcher's first sweep) drew no profile: approach 2 refuses a law across
    # one budget, while `scaling fit` gives that budget's minimum in its refusal; the figure now draws it, the same N
    path = tmp_path / "one.csv"
    isoflop_runs(CHINCHILLA_LAW, [1e20], 9, noise=0.01, seed=3).to_csv(path, index=False)
    table = load_runs(str(path))
    report = fit_all(table, (2, 3), resamples=60)
    said = re.search(r"alone has its least loss at N = (\S+) \[(\S+), (\S+)\]", report.skipped["2"])
    drawn, missing = make_figures(table, report)
    assert "isoflop_profiles" in drawn and "isoflop_profiles" not in missing
    ax = drawn["isoflop_profiles"].axes[0]
    assert ax.get_title().startswith("IsoFLOP profile of one budget: no law across budgets")
    (star,) = [c for c in ax.collections if hasattr(c, "get_sizes") and len(c.get_sizes()) and c.get_sizes()[0] == 160]
    assert float(star.get_offsets()[0, 0]) == pytest.approx(float(said.group(1)), rel=1e-2)
    assert "One budget only: its parabola and minimum" in figure_caption("isoflop_profiles", report)
