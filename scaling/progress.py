"""A sweep's plan (STORE/sweep.json) and its progress: done, running, failed, skipped, FLOPs, ETA.

The sweeper writes the plan before launching; every job prints one progress line when it ends, and
`scaling status STORE` prints the same at any time, from any shell — all read from the store itself,
so progress is right whichever launcher (and however many processes) ran the jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from scaling.errors import UserError
from scaling.store import RunPaths, atomic_write_json, iter_records, read_record, run_state

MANIFEST = "sweep.json"
DRY_RUN_MANIFEST = "sweep.dry-run.json"  # the plan of a dry run: never mistaken for a launch's


def write_sweep_manifest(
    store: Path, name: str, jobs: list[dict], dropped: list[dict], filename: str = MANIFEST
) -> None:
    """Record the plan of this launch (atomically): every kept run with its FLOPs, every dropped one."""
    atomic_write_json(
        Path(store) / filename,
        {
            "sweep": name,
            "launched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "launched_at_unix": time.time(),
            "runs": [
                {
                    "run_id": j["run_id"],
                    "overrides": j["overrides"],
                    "shape": j["plan"].shape.name,
                    "budget_flops": j["plan"].budget,
                    "flops": j["plan"].flops,
                    "params": j["plan"].params,
                    "tokens": j["plan"].tokens,
                    "state_at_launch": j["state"],
                }
                for j in jobs
            ],
            "dropped": [{"overrides": d["overrides"], "reason": d["reason"]} for d in dropped],
        },
    )


def read_manifest(store: Path) -> dict:
    if not Path(store).is_dir():
        raise UserError(
            f"store {str(store)!r} is not a directory; give a sweep's results directory "
            "(the store=... of `scaling sweep`, e.g. results/quick)"
        )
    path = Path(store) / MANIFEST
    if not path.exists():
        raise UserError(f"{path}: no sweep plan here; give a directory written by `scaling sweep` (e.g. results/quick)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: cannot be read ({err}); relaunching the sweep rewrites it") from None
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    fields = ("run_id", "flops", "state_at_launch")
    if not (
        isinstance(runs, list)
        and all(isinstance(r, dict) and all(k in r for k in fields) for r in runs)
        and isinstance(manifest.get("dropped"), list)
        and "sweep" in manifest
    ):  # valid JSON, not a plan (edited by hand, or another program's file)
        raise UserError(
            f"{path}: not a sweep plan (a sweep, runs with {', '.join(fields)}, dropped); relaunching the sweep rewrites it"
        )
    return manifest


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )


def _unix(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def progress(store: Path) -> dict:
    """Counts and FLOPs of the planned runs by state, and an ETA from this launch's pace:
    ETA = elapsed · (FLOPs left) / (FLOPs finished since the launch). Once nothing is left to run,
    elapsed is the launch's duration (to the last run's finish), not the time since the launch."""
    manifest = read_manifest(store)
    counts = {"completed": 0, "failed": 0, "running": 0, "pending": 0, "skipped": 0}
    flops_total = flops_done = flops_done_now = 0.0
    failed, last_finish = [], None
    for run in manifest["runs"]:
        flops_total += run["flops"]
        paths = RunPaths(Path(store), run["run_id"])
        state = run_state(paths)
        if state in ("completed", "failed") and run["state_at_launch"] in ("completed", "failed"):
            counts["skipped"] += 1
            flops_done += run["flops"]
        elif state in ("completed", "failed"):
            counts[state] += 1
            flops_done += run["flops"]
            flops_done_now += run["flops"]
            record = read_record(paths.record)
            finished = _unix(record.get("finished_at"))
            last_finish = finished if last_finish is None or (finished or 0) > last_finish else last_finish
            if state == "failed":
                failed.append(f"{run['run_id']} ({record.get('reason', '')})")
        elif state == "running":
            counts["running"] += 1
        else:
            counts["pending"] += 1
    launched = manifest.get("launched_at_unix", time.time())
    done = counts["running"] + counts["pending"] == 0
    elapsed = (last_finish if done and last_finish else time.time()) - launched
    remaining = flops_total - flops_done
    eta = elapsed * remaining / flops_done_now if flops_done_now > 0 else None
    return {
        "sweep": manifest["sweep"],
        "planned": len(manifest["runs"]),
        "dropped": len(manifest["dropped"]),
        **counts,
        "flops_total": flops_total,
        "flops_done": flops_done,
        "elapsed_s": elapsed,
        "eta_s": eta,
        "failed_runs": failed,
    }


def format_progress(store: Path, final: bool = False) -> str:
    p = progress(store)
    share = p["flops_done"] / p["flops_total"] if p["flops_total"] else 1.0
    eta = "" if final or p["eta_s"] is None or p["pending"] + p["running"] == 0 else f", ETA {_duration(p['eta_s'])}"
    line = (
        f"[{p['sweep'] or 'sweep'}] {p['completed'] + p['failed'] + p['skipped']}/{p['planned']} runs done "
        f"({p['completed']} completed, {p['failed']} failed, {p['skipped']} skipped as already done), "
        f"{p['running']} running, {p['pending']} pending; {p['flops_done']:.3g}/{p['flops_total']:.3g} FLOPs "
        f"({share:.0%}); elapsed {_duration(p['elapsed_s'])}{eta}"
        + (
            f"; {p['dropped']} combination{'s' * (p['dropped'] != 1)} dropped at planning (see sweep.json)"
            if p["dropped"]
            else ""
        )
    )
    if final and p["failed_runs"]:
        line += "\n  failed: " + "; ".join(p["failed_runs"])
    return line


def status_main(argv: list[str]) -> int:
    """`scaling status STORE`: a sweep's progress, read from its store."""
    parser = argparse.ArgumentParser(prog="scaling status", description=status_main.__doc__)
    parser.add_argument("store", help="a sweep's results directory, e.g. results/quick")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    for _, _, problem in iter_records(Path(args.store)):  # a damaged record: named, not fatal
        if problem:
            print(f"warning: skipped {problem} (a relaunch keeps it aside and trains the run again)", file=sys.stderr)
    if args.json:
        print(json.dumps(progress(Path(args.store))))
    else:
        print(format_progress(Path(args.store)))
    return 0
