"""A table of runs in a file: CSV (or TSV) or Parquet, one row per run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scaling.errors import DataError


def read_table_file(path: Path) -> pd.DataFrame:
    """Read a CSV (or TSV) or Parquet file of runs; any failure becomes one DataError line. A CSV
    whose one column's name holds ';' (a comma-decimal locale's export: "3,1" is 3.1) or a tab is
    read with that separator."""
    if not path.exists():
        raise DataError(
            f"{str(path)!r} does not exist; give a results store directory, a .csv/.parquet file "
            "or wandb:ENTITY/PROJECT"
        )
    suffix = path.suffix.lower()
    kind = "Parquet" if suffix in (".parquet", ".pq") else "CSV"
    try:
        if kind == "Parquet":
            return pd.read_parquet(path)
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
        header = str(frame.columns[0]) if len(frame.columns) == 1 else ""
        if ";" in header:  # a spreadsheet's CSV in a comma-decimal locale: ';' between fields, ',' in numbers
            return pd.read_csv(path, sep=";", decimal=",")
        if "\t" in header:
            return pd.read_csv(path, sep="\t")
        return frame
    except Exception as err:  # pandas/pyarrow raise many types; the user needs the file and the reason
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"cannot read {str(path)!r} as {kind}: {reason}") from None
