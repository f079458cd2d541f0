"""The analysis verbs of `scaling`: ``fit``, ``optimal``, ``plot``, ``report`` and ``compare``.

Each ``*_main(argv) -> int`` parses its arguments and calls plain functions. Bad input raises
`scaling.errors.UserError` (argument errors included), which `scaling.cli.main` prints as one line
``error: ...`` with exit status 2. Warnings and notes go to stderr, results to stdout; with
``--json`` stdout holds exactly one JSON object.
"""

from analysis.cli.compare import compare_main
from analysis.cli.fit import fit_main
from analysis.cli.optimal import optimal_main
from analysis.cli.plot import plot_main
from analysis.cli.report import report_main

__all__ = ["compare_main", "fit_main", "optimal_main", "plot_main", "report_main"]
