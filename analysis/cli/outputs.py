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
FILE_OUTPUTS = ("out", "out_figure")  # the options that name one file a command writes (a directory is skipped)


def guard_outputs(args: argparse.Namespace) -> None:
    """One UserError line when an output file of ``args`` is one of its inputs (the same file, by any path)."""
    inputs = [Path(p) for name in INPUTS for p in _listed(getattr(args, name, None))]
    inputs = [p for p in inputs if p.is_file()]
    for dest in FILE_OUTPUTS:
        if not (value := getattr(args, dest, None)) or not (out := Path(value)).is_file():
            continue
        for source in inputs:
            if os.path.samefile(out, source):
                raise UserError(
                    f"--{dest.replace('_', '-')} {str(value)!r} is a file this command reads ({str(source)!r}): "
                    "writing it would replace it; give another path"
                )


def _listed(value) -> list:
    if value is None:
        return []
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)
