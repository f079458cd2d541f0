"""An output never replaces what a command reads, nor a file it did not write (user21: `fit c2.csv --out c2.csv` saved
its FIT.json over the 28 runs it had read, `next c5.csv --out c5.csv` left a header, and `report --out c6.html`
replaced the user's own c6.md with its Markdown twin: `analysis.report.render.guard_twin`). `parse` calls
`guard_outputs` before anything is read."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from scaling.errors import UserError

INPUTS = ("source", "candidates", "sources")  # the arguments that name what a command reads
FILE_OUTPUTS = ("out", "out_figure")  # the options that name one file a command writes (or a directory: `out_files`)
STORE_FILES = ("sweep.json", "table.csv", "curves.csv", "record.json")  # what a results store is read from


def guard_outputs(args: argparse.Namespace) -> None:
    """One UserError line when an output file of ``args`` is one of its inputs (the same file, by any path) or a
    file of a store it reads (`STORE_FILES`; review17: `fit STORE --out STORE/sweep.json`); for an --out directory,
    the files the command writes there (``args.out_files``: compare's compare.json) likewise."""
    paths = [Path(p) for name in INPUTS for p in _listed(getattr(args, name, None))]
    inputs, stores = [p for p in paths if p.is_file()], [p.resolve() for p in paths if p.is_dir()]
    for dest in FILE_OUTPUTS:
        if not (value := getattr(args, dest, None)):
            continue
        outs = (
            [Path(value) / name for name in getattr(args, "out_files", ())] if Path(value).is_dir() else [Path(value)]
        )
        for out in (o for o in outs if o.is_file()):
            source = next((p for p in inputs if os.path.samefile(out, p)), None)
            if source is None and out.name in STORE_FILES and any(out.resolve().is_relative_to(s) for s in stores):
                source = out
            if source is not None:
                raise UserError(
                    f"--{dest.replace('_', '-')} {str(value)!r}: {str(out)!r} is a file this command reads "
                    f"({str(source)!r}): writing it would replace it; give another path"
                )


def _listed(value) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)
