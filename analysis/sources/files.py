"""A table of runs in a file: CSV (or TSV), Parquet, JSON or JSON Lines, one row per run."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.sources.rows import text_cells
from analysis.sources.schema import LOSS_NAME
from scaling.errors import DataError

JSON_LINES = (".jsonl", ".ndjson")
FORMATS = ".csv, .tsv, .parquet, .json (an array of row objects) or .jsonl (one row object a line)"


def read_table_file(path: Path) -> pd.DataFrame:
    """Read a CSV (or TSV), Parquet, JSON (an array of row objects, an object of columns, or rows under one key) or JSON
    Lines file of runs; any failure becomes one DataError line. A CSV whose one column's name holds ';'
    (a comma-decimal locale's export: "3,1" is 3.1) or a tab is read with that separator."""
    if not path.exists():
        raise DataError(
            f"{str(path)!r} does not exist; give a results store directory, a table of runs ({FORMATS}) "
            "or wandb:ENTITY/PROJECT"
        )
    suffix = path.suffix.lower()
    kind = {".parquet": "Parquet", ".pq": "Parquet", ".json": "JSON", **dict.fromkeys(JSON_LINES, "JSON Lines")}
    kind = kind.get(suffix, "CSV")
    if path.is_file() and path.stat().st_size == 0:
        raise DataError(f"{str(path)!r} is empty; give a table of runs ({FORMATS}) with a header row and a row per run")
    return _stripped_headers(_read(path, kind, suffix))


def _stripped_headers(frame: pd.DataFrame) -> pd.DataFrame:
    """Column names without blanks around them (user20: " params" and "Loss " were not found), unless
    that would make two names one."""
    names = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    return frame.set_axis(names, axis=1) if len(set(names)) == len(names) else frame


def _read(path: Path, kind: str, suffix: str) -> pd.DataFrame:
    try:
        if kind == "Parquet":
            return pd.read_parquet(path)
        if kind == "JSON" and (nested := _nested_records(path)) is not None:
            return _spread_objects(nested)
        if kind.startswith("JSON"):
            return _spread_objects(
                pd.read_json(  # exact floats (as the CSV's), ids kept as written ("007" stays text)
                    path,
                    lines=kind == "JSON Lines",
                    orient=None if kind == "JSON Lines" else _orient(path),
                    precise_float=True,
                    dtype=False,  # no conversion of columns: dates included
                )
            )
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
        header = str(frame.columns[0]) if len(frame.columns) == 1 else ""
        if ";" in header:  # a spreadsheet's CSV in a comma-decimal locale: ';' between fields, ',' in numbers
            text = pd.read_csv(path, sep=";", dtype=str, keep_default_na=False)
            return _comma_decimals(pd.read_csv(path, sep=";", decimal=","), text)
        if "\t" in header:
            return pd.read_csv(path, sep="\t")
        return frame
    except Exception as err:  # pandas/pyarrow raise many types; the user needs the file and the reason
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"cannot read {str(path)!r} as {kind}: {reason} (tables are read from {FORMATS})") from None


def without_repeated_headers(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    """A CSV's ``frame`` less the rows that repeat its header cell for cell (files joined with `cat`), its columns'
    types read again without them (the header's text made them text), and those rows' numbers (1-based): a row
    'recipe' among a recipe column's values read as a third experiment (user16). A cell repeats its column's name
    as text, as a number (a column named 2024), or blank under pandas' `Unnamed: k` (an index column's)."""
    names = [_header_cell(name) for name in frame.columns]
    if frame.empty or any(isinstance(n, str) and n and not _is_text(frame[c]) for c, n in zip(frame.columns, names)):
        return frame, []  # a column of numbers under a word has no header row inside it: no need to look (fast)
    repeats = np.ones(len(frame), bool)
    for column, name in zip(frame.columns, names):
        values = frame[column]
        if name == "":
            repeats &= values.isna().to_numpy()
        elif isinstance(name, float):
            repeats &= pd.to_numeric(values, errors="coerce").to_numpy(float) == name
        else:
            repeats &= text_cells(values) == name
    if not repeats.any():
        return frame, []
    kept = frame[~repeats]
    again = pd.read_csv(io.StringIO(kept.to_csv(index=False))).set_axis(kept.index)
    return again, [int(i) + 1 for i in frame.index[repeats]]


def _header_cell(name) -> str | float:
    """What a row repeating the header holds under column ``name``: "" (blank) under `Unnamed: k`, the number a
    numeric name reads as, else the name as text."""
    text = str(name).strip()
    if text.startswith("Unnamed: "):
        return ""
    try:
        return float(text)
    except ValueError:
        return text


def _is_text(column: pd.Series) -> bool:
    return pd.api.types.is_object_dtype(column.dtype) or pd.api.types.is_string_dtype(column.dtype)


_COMMA_DECIMAL = re.compile(r"^\s*[-+]?[0-9]*,[0-9]+(?:[eE][-+]?[0-9]+)?\s*$")
_DOT_THOUSANDS = re.compile(r"^\s*[-+]?[0-9]{1,3}(?:\.[0-9]{3})+(?:,[0-9]+)?\s*$")  # 1.300.000 or 125.000,5
_INTEGER = re.compile(r"^\s*[-+]?[0-9]+\s*$")
_DECIMAL_POINT = re.compile(r"^[-+]?[0-9]*\.[0-9]+$")


def _comma_decimals(frame: pd.DataFrame, text: pd.DataFrame) -> pd.DataFrame:
    """A comma-decimal file's text columns (a column pandas left as text, e.g. losses with one
    "diverged") with their "3,723" read as 3.723 here, where the locale is known: later the text would
    be a count grouped in thousands. A text column of dot-grouped thousands (`_dot_thousands`) is read
    as numbers: "125.000" was N = 125 and "1.300.000" no number. ``text``: the file's cells as written."""
    out = frame.copy()
    cells = text.apply(lambda c: c.map(str.strip)).to_numpy().ravel()  # (DataFrame.map needs pandas 2.1)
    commas = any(_COMMA_DECIMAL.match(v) for v in cells)  # the file writes 3,5
    # and a decimal point that no thousands grouping explains (2.5, 1000.000): then it writes decimal points too
    points = any(_DECIMAL_POINT.match(v) and not _DOT_THOUSANDS.match(v) for v in cells)
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]):
            continue
        loss = LOSS_NAME.search(str(column)) is not None  # a loss is never a count: 4.670 is not 4670
        grouped = None if loss else _dot_thousands(text[column], commas and not points)
        out[column] = (
            frame[column]
            .astype(object)
            .map(lambda v: float(v.replace(",", ".")) if isinstance(v, str) and _COMMA_DECIMAL.match(v) else v)
            if grouped is None
            else grouped
        )
    return out


def _dot_thousands(cells: pd.Series, commas: bool) -> pd.Series | None:
    """``cells`` as numbers when every one (empty ones aside) is an integer grouped in thousands by dots
    ("1.300.000", "125.000,5") or a plain integer; None otherwise. A lone group ("125.000": 125 with three
    decimals in a file written with decimal points) counts only when some cell has two groups or a decimal
    comma, or the file writes ``commas`` (3,5) elsewhere."""
    written = cells[cells.str.strip() != ""]
    dotted = written.map(lambda v: bool(_DOT_THOUSANDS.match(v)))
    if not dotted.any() or not (dotted | written.map(lambda v: bool(_INTEGER.match(v)))).all():
        return None
    if not (commas or written[dotted].str.contains(r",|\..*\.", regex=True).any()):
        return None
    numbers = cells.str.strip().str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    return pd.to_numeric(numbers, errors="coerce").astype(float)


def _orient(path: Path) -> str:
    """A JSON file's layout: "records" for an array of row objects, "columns" for an object of columns."""
    with path.open() as handle:
        first = next((c for c in iter(lambda: handle.read(1), "") if not c.isspace()), "[")
    return "records" if first == "[" else "columns"


def _nested_records(path: Path) -> pd.DataFrame | None:
    """The rows of a JSON object that holds them under one key (``{"runs": [{...}, ...]}``, perhaps beside
    metadata), or None for any other layout. It was read as an object of columns: "no column for N ...
    Columns present: runs"."""
    if _orient(path) != "columns":
        return None
    with path.open() as handle:
        document = json.load(handle)
    if not isinstance(document, dict):
        return None
    lists = [v for v in document.values() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)]
    return pd.DataFrame.from_records(lists[0]) if len(lists) == 1 else None


SPREAD_BARE = ("summary", "config")  # a wandb export's objects: their keys are columns as they are (summary's first)


def _spread_objects(frame: pd.DataFrame) -> pd.DataFrame:
    """A JSON table whose cells hold objects (a wandb export's ``config`` and ``summary``) with each object's keys as
    columns, nested keys joined with '.' as the wandb reader joins them (`analysis.sources.wandb`): `SPREAD_BARE`'s
    keys as they are (``val/loss``, ``model.n_params``), another's under its name (``meta.gpu``); a name twice
    keeps the first (the row's own, then summary's, then config's). User38: such a file was refused, its columns
    listed as 'config' and 'summary'."""
    from analysis.sources.settings import flatten

    objects = [c for c in frame.columns if frame[c].map(lambda v: isinstance(v, dict)).any()]
    if not objects:
        return frame
    parts = [frame.drop(columns=objects)]
    for column in sorted(objects, key=lambda c: SPREAD_BARE.index(c) if c in SPREAD_BARE else -1):
        rows = [flatten(v) if isinstance(v, dict) and v else {} for v in frame[column]]
        part = pd.DataFrame.from_records(rows, index=frame.index)
        parts.append(part if column in SPREAD_BARE else part.add_prefix(f"{column}."))
    spread = pd.concat(parts, axis=1)
    return spread.loc[:, ~spread.columns.duplicated()]
