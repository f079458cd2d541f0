"""A sweep's plan (STORE/sweep.json) and its progress: done, running, failed, skipped, FLOPs, ETA.

The sweeper writes the plan before launching; every job prints one progress line when it ends, and
`scaling status STORE` prints the same at any time, from any shell — all read from the store itself,
so progress is right whichever launcher (and however many processes) ran the jobs.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from scaling.errors import Parser, UserError
from scaling.store import (
    FINISHED,
    RecordProblem,
    RunPaths,
    RunState,
    atomic_write_json,
    iter_records,
    read_record,
    run_state,
)

MANIFEST = "sweep.json"
DRY_RUN_MANIFEST = "sweep.dry-run.json"  # the plan of a dry run: never mistaken for a launch's


LEGACY_DUPLICATE = re.compile(r"the same run as (?P<same_as>.*): planned once")  # before `duplicates`


def _migrate(manifest: dict) -> dict:
    """A plan written before sweep.json's ``duplicates`` key kept each combination merged into
    another of the same run id in ``dropped``, with the reason "the same run as ...: planned once":
    moved to ``duplicates`` (``overrides``, ``same_as``), as the sweeper writes them now."""
    if "duplicates" in manifest:
        return manifest
    dropped, duplicates = [], []
    for entry in manifest["dropped"]:
        legacy = LEGACY_DUPLICATE.fullmatch(str(entry.get("reason", "")))
        if legacy:
            duplicates.append({"overrides": entry.get("overrides", []), "same_as": legacy["same_as"]})
        else:
            dropped.append(entry)
    return {**manifest, "dropped": dropped, "duplicates": duplicates}


def planning_counts(duplicates: int, dropped: int) -> str:
    """The planning's counts that are not 0: "k duplicate combinations merged (same run id), m combinations dropped"."""
    parts = [f"{duplicates} duplicate combination{'s' * (duplicates != 1)} merged (same run id)"] if duplicates else []
    return ", ".join(parts + ([f"{dropped} combination{'s' * (dropped != 1)} dropped"] if dropped else []))


def sweep_file(config) -> str | None:
    """The sweep file a sweep's composed ``config`` (with its ``hydra`` node) came from: its config name in the first
    of Hydra's config directories that holds it (a file kept elsewhere under one of the project's names is refused:
    `sweep_app.check_not_shadowed`); None when unknown."""
    hydra = config.get("hydra") if hasattr(config, "get") else None
    name = hydra.job.get("config_name") if hydra is not None else None
    if not name:
        return None
    sources = hydra.runtime.get("config_sources") or []  # in Hydra's order: the first that holds the file is it
    paths = [Path(s["path"]) / f"{name}.yaml" for s in sources if s.get("schema") == "file"]
    return next((str(p.resolve()) for p in paths if p.is_file()), None)


def write_sweep_manifest(
    store: Path,
    config,
    jobs: list[dict],
    dropped: list[dict],
    duplicates: list[dict],
    filename: str = MANIFEST,
    launch: dict | None = None,
) -> dict:
    """Record the plan of this launch (atomically): the sweep's name and file (`sweep_file` of the composed
    ``config``: `scaling next` reads its settings), every kept run with its FLOPs, every dropped
    combination with its reason, every merged one with the combination it is the same run as. ``launch``
    (what this returns: the launch time and each run's state then) keeps an invocation's launch for its second
    stage's plan (lr_refine; user22: its stage 1 runs read "skipped as already done", launched at stage 2)."""
    now = {"launched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "launched_at_unix": time.time()}
    launch = {**now, "states": {j["run_id"]: j["state"] for j in jobs}, **(launch or {})}
    states = {**{j["run_id"]: j["state"] for j in jobs}, **launch["states"]}
    atomic_write_json(
        Path(store) / filename,
        {
            "sweep": config.sweep,
            "sweep_file": sweep_file(config),
            "launched_at": launch["launched_at"],
            "launched_at_unix": launch["launched_at_unix"],
            "runs": [
                {
                    "run_id": j["run_id"],
                    "overrides": j["overrides"],
                    "shape": j["plan"].shape.name,
                    "budget_flops": j["plan"].budget,
                    "flops": j["plan"].flops,
                    "params": j["plan"].params,
                    "tokens": j["plan"].tokens,
                    "state_at_launch": states[j["run_id"]],
                    **({"flops_to_train": j["flops_to_train"]} if "flops_to_train" in j else {}),  # a cooldown's
                }
                for j in jobs
            ],
            "dropped": dropped,
            "duplicates": duplicates,
        },
    )
    return launch


def _list_of_objects(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, dict) for x in value)


def read_manifest(store: Path) -> dict | None:
    """The store's sweep plan (sweep.json), or None for a store without one (`scaling train` runs);
    UserError for one that cannot be read or is not a plan. Every reader of sweep.json reads it here:
    ``dropped`` (each with its ``reason``) and ``duplicates`` (each with its ``same_as``) apart,
    an old plan's migrated (`_migrate`)."""
    if not Path(store).is_dir():
        raise UserError(
            f"store {str(store)!r} is not a directory; give a sweep's results directory "
            "(the store=... of `scaling sweep`, e.g. results/quick)"
        )
    path = Path(store) / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot be read ({err}); relaunching the sweep rewrites it") from None
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    fields = ("run_id", "flops", "state_at_launch")
    if not (
        isinstance(runs, list)
        and all(isinstance(r, dict) and all(k in r for k in fields) for r in runs)
        and _list_of_objects(manifest.get("dropped"))
        and _list_of_objects(manifest.get("duplicates", []))  # a plan written before this key has none
        and "sweep" in manifest
    ):  # valid JSON, not a plan (edited by hand, or another program's file)
        raise UserError(
            f"{path}: not a sweep plan (a sweep, runs with {', '.join(fields)}, dropped); relaunching the sweep rewrites it"
        )
    return _migrate(manifest)


def runs_in_store(store: Path) -> list[dict]:
    """A store without a plan (runs of `scaling train`): every run directory under STORE/runs, as a
    plan's run (FLOPs unknown until its record gives them; nothing was there before)."""
    runs = sorted(p.name for p in (Path(store) / "runs").glob("*") if p.is_dir())
    if not runs and (Path(store) / DRY_RUN_MANIFEST).exists():  # user19: read as "no sweep plan here"
        raise UserError(
            f"{Path(store)}: only a dry run's plan ({DRY_RUN_MANIFEST}), nothing launched; launch the sweep "
            "without hydra.sweeper.dry_run=true to train it"
        )
    if not runs:
        raise UserError(
            f"{Path(store) / MANIFEST}: no sweep plan here, and no runs under {Path(store) / 'runs'}; give a "
            "directory written by `scaling sweep` (e.g. results/quick) or by `scaling train store=...`"
        )
    return [{"run_id": run, "flops": None, "state_at_launch": RunState.NEW} for run in runs]


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


def _record(paths: RunPaths) -> dict:
    """The run's record, or {} when it went between reading its state and now (a relaunch set it aside)."""
    try:
        return read_record(paths.record)
    except RecordProblem:
        return {}


def _tally(store: Path, runs: list[dict], launched: float | None) -> dict:
    """Counts and FLOPs of ``runs`` by the state each is in now. A run completed before this launch is
    "skipped", one that failed then is "failed" still; an errored run whose record is older than the launch is "pending" (the launch retries it)."""
    counts = {"completed": 0, "failed": 0, "errored": 0, "running": 0, "pending": 0, "resumable": 0, "skipped": 0}
    flops_total = flops_done = flops_done_now = 0.0
    failed, running, last_finish = [], [], None
    for run in runs:
        paths = RunPaths(Path(store), run["run_id"])
        state = run_state(paths)
        record = _record(paths) if state in (*FINISHED, RunState.ERRORED) else {}
        finished = _unix(record.get("finished_at"))
        if state == RunState.ERRORED and launched is not None and (finished or 0) < launched:
            state, record = RunState.PARTIAL, {}  # errored before this launch: retried by it
        flops = record.get("flops", 0.0) if run["flops"] is None else run.get("flops_to_train", run["flops"])
        flops_total += flops
        if state in FINISHED and run["state_at_launch"] in FINISHED:
            flops_done += flops
            if state == RunState.COMPLETED:
                counts["skipped"] += 1
            else:  # failed before this launch and not retried (user19: `status` after a relaunch hid it)
                counts["failed"] += 1
                failed.append(f"{run['run_id']} ({record.get('reason', '')})")
        elif record:
            counts[str(state)] += 1
            if state != RunState.ERRORED:  # an errored run's FLOPs are still to train
                flops_done += flops
                flops_done_now += flops
            last_finish = finished if last_finish is None or (finished or 0) > last_finish else last_finish
            if state != RunState.COMPLETED:
                failed.append(f"{run['run_id']} ({record.get('reason', '')})")
        elif state == RunState.RUNNING:
            counts["running"] += 1
            running.append(run["run_id"])
        else:
            counts["pending"] += 1
            counts["resumable"] += paths.checkpoint.exists()  # user19: a run stopped at step 1969 read as pending
    tally = {"flops_total": flops_total, "flops_done": flops_done, "flops_done_now": flops_done_now}
    return {**counts, **tally, "last_finish": last_finish, "failed_runs": failed, "running_runs": running}


INTERNAL = ("last_finish", "flops_done_now")  # `_tally`'s inputs to the ETA, not part of `progress` (CONTRACTS.md)


def progress(store: Path) -> dict:
    """Counts and FLOPs of the planned runs by state, and an ETA from this launch's pace:
    ETA = elapsed · (FLOPs left) / (FLOPs finished since the launch). Once nothing is left to run,
    elapsed is the launch's duration (to the last run's finish), not the time since the launch.
    A store without a plan (`scaling train` runs): the runs it holds, no sweep (None), no ETA."""
    manifest = read_manifest(store)
    if manifest is None:
        runs = runs_in_store(store)
        tally = _tally(store, runs, None)
        return {
            "sweep": None,
            "planned": len(runs),
            "dropped": 0,
            "duplicates": 0,
            **{k: v for k, v in tally.items() if k not in INTERNAL},
            "elapsed_s": None,
            "eta_s": None,
        }
    launched = manifest.get("launched_at_unix", time.time())
    tally = _tally(store, manifest["runs"], launched)
    done = tally["running"] + tally["pending"] == 0
    elapsed = (tally["last_finish"] if done and tally["last_finish"] else time.time()) - launched
    remaining = tally["flops_total"] - tally["flops_done"]
    eta = elapsed * remaining / tally["flops_done_now"] if tally["flops_done_now"] > 0 else None
    planned = {run["run_id"] for run in manifest["runs"]}
    return {
        "sweep": manifest["sweep"],
        "planned": len(manifest["runs"]),
        "dropped": len(manifest["dropped"]),
        "duplicates": len(manifest["duplicates"]),
        **{k: v for k, v in tally.items() if k not in INTERNAL},
        "elapsed_s": elapsed,
        "eta_s": eta,
        # runs of earlier launches into this store with another plan (user18: a second launch's `status` read
        # "2/2 runs done" beside 6 records); the fits read them all. A run: a directory with a record or checkpoint
        "outside_plan": sum(
            p.name not in planned and (paths.record.exists() or paths.checkpoint.exists())
            for p in (Path(store) / "runs").glob("*")
            for paths in [RunPaths(store, p.name)]
        ),
    }


def stalled(p: dict) -> bool:
    """Runs are left but none is training (a stopped sweep, or one waiting in a queue): `status` gives
    no ETA then, in its line or its JSON. (A sweep's own line between two runs keeps its ETA.)"""
    return p["pending"] > 0 and not p["running"]


def print_after_run(store: Path) -> None:
    """Print the progress line of the sweep a run just ended in; nothing after the sweep's last run,
    whose line the sweeper prints once its launch returns (`format_progress(final=True)`): before, twice."""
    p = progress(store)
    if p["pending"] + p["running"] > 0:
        print(format_progress(store, p=p), flush=True)


def format_progress(store: Path, final: bool = False, runs: bool = False, p: dict | None = None) -> str:
    """One line of a store's progress (a sweep's, or the runs of a store without a plan); with
    ``final`` or ``runs``, the failed runs with their reasons below it, and with ``runs`` the running ones.
    ``p``: `progress(store)` when the caller has it."""
    p = progress(store) if p is None else p
    planned = p["sweep"] is not None
    done = p["completed"] + p["failed"] + p["errored"] + p["skipped"]
    counts = f"{p['completed']} completed, {p['failed']} failed" + (
        f", {p['skipped']} skipped as already done" if planned else ""
    )
    counts += f", {p['errored']} errored (retried on relaunch)" if p["errored"] else ""
    if planned:
        share = p["flops_done"] / p["flops_total"] if p["flops_total"] else 1.0
        eta = (
            "" if final or p["eta_s"] is None or p["pending"] + p["running"] == 0 else f", ETA {_duration(p['eta_s'])}"
        )
        # `status` of a sweep that is not training: no ETA (user18: "ETA 2m24s" 16 minutes after it had stopped)
        if runs and stalled(p):
            eta = "; nothing is training now (stopped, or waiting in a queue: relaunch a stopped sweep to finish it)"
        flops = f"{p['flops_done']:.3g}/{p['flops_total']:.3g} FLOPs ({share:.0%}); elapsed {_duration(p['elapsed_s'])}{eta}"
        head = f"[{p['sweep'] or 'sweep'}] {done}/{p['planned']} runs done"
    else:
        flops = f"{p['flops_done']:.3g} FLOPs trained"
        head = f"[{store}] {done}/{p['planned']} runs done (no sweep plan: runs of `scaling train`)"
    planning = planning_counts(p["duplicates"], p["dropped"])
    resume = f" ({p['resumable']} to resume from a checkpoint)" if p.get("resumable") else ""
    line = f"{head} ({counts}), {p['running']} running, {p['pending']} pending{resume}; {flops}" + (
        f"; {planning} at planning (see sweep.json)" if planning else ""
    )
    if runs and p.get("outside_plan"):
        line += f"\n  and {p['outside_plan']} more runs in the store, not in this plan (an earlier launch's)"
    if (final or runs) and p["failed_runs"]:
        line += "\n  failed: " + "; ".join(p["failed_runs"])
    if runs and p["running_runs"]:
        line += "\n  running: " + ", ".join(p["running_runs"])
    return line


def status_main(argv: list[str]) -> int:
    """`scaling status STORE`: a sweep's progress, read from its store."""
    parser = Parser(prog="scaling status", description=status_main.__doc__)
    parser.add_argument("store", help="a sweep's results directory, e.g. results/quick")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    for _, _, problem in iter_records(Path(args.store)):  # a damaged record: named, not fatal
        if problem:
            print(f"warning: skipped {problem} (a relaunch keeps it aside and trains the run again)", file=sys.stderr)
    if args.json:
        p = progress(Path(args.store))
        print(json.dumps({**p, "eta_s": None} if stalled(p) else p))
    else:
        print(format_progress(Path(args.store), runs=True))
    return 0
