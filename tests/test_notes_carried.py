"""What `scaling fit` and `scaling compare` print as warnings and notes reaches their `--json` (`warnings`,
`notes`) and the report, word for word: a row excluded for a NaN loss (a warning), the reading's notes,
the outlier rule's (`--exclude-outliers`: the runs left out), the check of the evaluation data.
(~15 s: fits without bootstrap.)"""

import json
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from conftest import run_main

from analysis.compare import compare_inputs, read_inputs
from analysis.fits.fit import fit_all
from analysis.report import report_blocks
from analysis.report.blocks import FLAG
from analysis.report.compare import comparison_blocks
from analysis.report.render import render_html
from analysis.sources.load import read_source
from analysis.sources.schema import ColumnMap
from analysis.synthetic import CHINCHILLA_LAW, isoflop_runs

PLANTED = [4, 13]  # rows given a 15% higher loss: the outlier rule flags them


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, str]:
    """``clean``: 27 runs, 2 planted high; ``warned``: the same with a row whose loss is NaN (excluded)."""
    folder = tmp_path_factory.mktemp("notes")
    frame = isoflop_runs(CHINCHILLA_LAW, [1e19, 1e20, 1e21], 9, noise=0.005, seed=3)
    frame.loc[frame.index[PLANTED], "val_loss"] *= 1.15
    frame.to_csv(folder / "clean.csv", index=False)
    broken = frame.iloc[[0]].assign(run_id="broken", val_loss=np.nan)
    pd.concat([frame, broken]).to_csv(folder / "warned.csv", index=False)
    return {"clean": str(folder / "clean.csv"), "warned": str(folder / "warned.csv")}


def told(stderr: str, kind: str, label: str | None = None) -> list[str]:
    """The lines of ``stderr`` that are ``kind`` ("warning", "note"), under ``[label]`` or under none."""
    prefix = f"{kind}: " if label is None else f"{kind} [{label}]: "
    return [line.removeprefix(prefix) for line in stderr.splitlines() if line.startswith(prefix)]


def test_fit_json_carries_the_warnings_and_notes_fit_prints(tables, capsys):
    asked = ("fit", tables["warned"], "--bootstrap", 0, "--exclude-outliers")
    printed = run_main(capsys, *asked, check=True).stderr
    got = json.loads(run_main(capsys, *asked, "--json", check=True).stdout)
    assert got["warnings"] == told(printed, "warning") and len(got["warnings"]) == 1
    assert "row 28 (run broken): val_loss nan" in got["warnings"][0]
    assert got["notes"] == told(printed, "note")
    assert any(re.match(r"--exclude-outliers: fitted without the \d flagged run\(s\): ", n) for n in got["notes"]), got
    single = json.loads(run_main(capsys, *asked, "--approach", "3", "--json", check=True).stdout)
    assert single["warnings"] == got["warnings"] and single["notes"][-1] == got["notes"][-1]


def test_fit_json_of_groups_carries_each_groups_lines(tables, tmp_path, capsys):
    """With --group-by, each group's object has its own; a group that could not be fitted its reading's
    (its notes are not printed: the text says it was not fitted, and why)."""
    frame = isoflop_runs(CHINCHILLA_LAW, [1e19, 1e20, 1e21], 9, noise=0.005, seed=3).assign(recipe="a")
    lone = frame.iloc[:2].assign(recipe="b")  # two runs: nothing can be fitted
    pd.concat([frame, lone]).to_csv(tmp_path / "groups.csv", index=False)
    asked = ("fit", tmp_path / "groups.csv", "--group-by", "recipe", "--bootstrap", 0)
    printed = run_main(capsys, *asked, check=True).stderr
    groups = json.loads(run_main(capsys, *asked, "--json", check=True).stdout)["groups"]
    assert groups[0]["notes"] == told(printed, "note", "recipe=a")
    assert "error" in groups[1] and any(
        n.endswith("1 budgets; 6·N·D agrees with it within 2%") for n in groups[1]["notes"]
    )
    assert groups[1]["warnings"] == [w for w in told(printed, "warning", "recipe=b") if not w.startswith("not fitted")]


def test_compare_json_carries_each_sides_warnings_and_notes_and_the_eval_check(tables, capsys):
    asked = ("compare", tables["clean"], tables["warned"], "--bootstrap", 0, "--exclude-outliers")
    printed = run_main(capsys, *asked, check=True).stderr
    got = json.loads(run_main(capsys, *asked, "--json", check=True).stdout)
    (comparison,) = got["comparisons"]
    for side, path in (("baseline", tables["clean"]), ("candidate", tables["warned"])):
        assert comparison[side]["warnings"] == told(printed, "warning", path)
        assert comparison[side]["notes"] == told(printed, "note", path)
    assert len(comparison["candidate"]["warnings"]) == 1 and comparison["baseline"]["warnings"] == []
    assert comparison["candidate"]["notes"][-1].startswith("--exclude-outliers: fitted without the ")
    assert (
        got["notes"] == told(printed, "note")
        and "cannot check that the losses share evaluation data" in got["notes"][0]
    )


class _Text(HTMLParser):
    """The text of a page, and the tags it opens."""

    def __init__(self):
        super().__init__()
        self.text, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def page(blocks) -> _Text:
    parsed = _Text()
    parsed.feed(render_html(blocks, {}))
    return parsed


def test_the_report_shows_the_fits_notes_and_each_compared_sides_escaped(tables, tmp_path):
    """A planted run named like markup: the fit's note that it was left out (--exclude-outliers), once, in the
    report's text, not as a tag; a candidate's excluded row (a warning, flagged) and the check of the evaluation data
    in the comparison. Before, the report showed the reading's notes only."""
    frame = pd.read_csv(tables["warned"])
    frame.loc[PLANTED[0], "run_id"] = "<i>r4</i>"
    frame.to_csv(tmp_path / "markup.csv", index=False)
    source = read_source(str(tmp_path / "markup.csv"))
    fit = fit_all(source.table, resamples=0, exclude_outliers=True)
    (left_out,) = [n for n in fit.notes if n.startswith("--exclude-outliers")]
    assert "<i>r4</i>" in left_out
    shown = page(report_blocks(source, fit, {}, {}, how_fitted="in the test"))
    text = "\n".join(shown.text)
    assert text.count(left_out) == 1 and "Notes on the fit" in text and "i" not in shown.tags
    (excluded,) = source.table.warnings
    assert text.count(excluded) == 1  # listed once, with the reading's notes: not again among the fit's
    inputs = read_inputs([tables["clean"], str(tmp_path / "markup.csv")], ColumnMap())
    comparisons = compare_inputs(inputs, resamples=0, exclude_outliers=True)
    eval_note = "cannot check that the losses share evaluation data (a note of the test)"
    text = "\n".join(page(comparison_blocks(comparisons, has_figure=False, notes=[eval_note])).text)
    assert f"{FLAG} {excluded}" in text and f"Note: {eval_note}" in text
    for side in (comparisons[0].baseline, comparisons[0].candidate):
        assert f"Notes on {side.source}, as `scaling compare` prints them:" in text
        assert all(note in text for note in side.notes) and side.outlier_notes
