"""The `scaling` command: thin dispatch to the module that does each verb's work.

Each verb's module is imported only when that verb runs, so `scaling optimal` never pays for
importing torch, and `scaling train` never imports scipy's fitting code.
"""

from __future__ import annotations

import importlib
import sys

from scaling.errors import UserError

# verb -> ("module:function", one-line help). Each function takes argv (list[str]) and returns an exit code.
VERBS: dict[str, tuple[str, str]] = {
    "train": (
        "scaling.train_app:main",
        "train one model for a FLOP budget (a Hydra app: scaling train budget=1e12 model=d64)",
    ),
    "sweep": ("scaling.sweep_app:main", "run a sweep from sweeps/ (Hydra multirun over budgets x shapes)"),
    "status": ("scaling.progress:status_main", "show a sweep's progress: done, running, failed, skipped, FLOPs, ETA"),
    "sync": ("scaling.tracking:sync_main", "upload a sweep's offline wandb runs (needs `wandb login`)"),
    "prepare": (
        "scaling.prepare:main",
        "text, JSONL or Parquet -> token shards + manifest for data=bin (bytes, tokenizer.json or a BPE trained here)",
    ),
    "shapes": ("scaling.shapes:main", "list the model ladder, or the shape nearest a target parameter count"),
    "fit": ("analysis.cli:fit_main", "fit scaling laws (Chinchilla approaches 1-3) with bootstrap intervals"),
    "optimal": ("analysis.cli:optimal_main", "compute-optimal N and D for a budget, from a fit or a published law"),
    "next": ("analysis.cli.next:next_main", "the runs to buy next: most narrowing of N_opt's interval for X FLOPs"),
    "plot": ("analysis.cli:plot_main", "write the log-log figures of a sweep or table"),
    "report": ("analysis.cli:report_main", "write a self-contained HTML report (and Markdown twin)"),
    "compare": ("analysis.cli:compare_main", "how much compute a candidate recipe is worth: m(C) against a baseline"),
}


def _usage() -> str:
    lines = ["usage: scaling VERB [args...]", "", "verbs:"]
    lines += [f"  {verb:<8} {help_}" for verb, (_, help_) in VERBS.items()]
    lines += ["", "`scaling VERB --help` describes each verb."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"error: unknown verb {verb!r}; valid verbs: {', '.join(VERBS)}", file=sys.stderr)
        return 2
    module_name, func_name = VERBS[verb][0].split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(func(rest) or 0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `scaling ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
