"""A table of runs in a file: CSV (or TSV), Parquet, JSON or JSON Lines, one row per run."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from scaling.errors import DataError

JSON_LINES = (".jsonl", ".ndjson")
FORMATS = ".csv, .tsv, .parquet, .json (an array of row objects) or .jsonl (one row object a line)"


def read_table_file(path: Path) -> pd.DataFrame:
    """Read a CSV (or TSV), Parquet, JSON (an array of row objects, or an object of columns) or JSON
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
    try:
        if kind == "Parquet":
            return pd.read_parquet(path)
        if kind.startswith("JSON"):
            return pd.read_json(  # exact floats (as the CSV's), ids kept as written ("007" stays text)
                path,
                lines=kind == "JSON Lines",
                orient=None if kind == "JSON Lines" else _orient(path),
                precise_float=True,
                dtype=False,  # no conversion of columns: dates included
            )
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
        header = str(frame.columns[0]) if len(frame.columns) == 1 else ""
        if ";" in header:  # a spreadsheet's CSV in a comma-decimal locale: ';' between fields, ',' in numbers
            return _comma_decimals(pd.read_csv(path, sep=";", decimal=","))
        if "\t" in header:
            return pd.read_csv(path, sep="\t")
        return frame
    except Exception as err:  # pandas/pyarrow raise many types; the user needs the file and the reason
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"cannot read {str(path)!r} as {kind}: {reason} (tables are read from {FORMATS})") from None


_COMMA_DECIMAL = re.compile(r"^\s*[-+]?[0-9]*,[0-9]+(?:[eE][-+]?[0-9]+)?\s*$")


def _comma_decimals(frame: pd.DataFrame) -> pd.DataFrame:
    """A comma-decimal file's text columns (a column pandas left as text, e.g. losses with one
    "diverged") with their "3,723" read as 3.723 here, where the locale is known: later the text would
    be a count grouped in thousands."""
    out = frame.copy()
    for column in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[column]):
            continue
        out[column] = (
            frame[column]
            .astype(object)
            .map(lambda v: float(v.replace(",", ".")) if isinstance(v, str) and _COMMA_DECIMAL.match(v) else v)
        )
    return out


def _orient(path: Path) -> str:
    """A JSON file's layout: "records" for an array of row objects, "columns" for an object of columns."""
    with path.open() as handle:
        first = next((c for c in iter(lambda: handle.read(1), "") if not c.isspace()), "[")
    return "records" if first == "[" else "columns"
