"""The results store: one directory per sweep, one atomic JSON record per run.

Layout (docs/CONTRACTS.md)::

    STORE/runs/<run_id>/record.json   the source of truth, written atomically
    STORE/runs/<run_id>/config.yaml   the resolved config
    STORE/runs/<run_id>/ckpt.pt       the last checkpoint of an unfinished run
    STORE/runs/<run_id>/.lock         held (flock) while a process trains the run
    STORE/table.csv, STORE/curves.csv derived tables, rebuilt from the records

A run's identity is a hash of the parts of its resolved config that change its result (shape,
budget, data, optimizer, training settings, seed); launching the same run again is a no-op.
This module imports no torch: the analysis and the sweeper read the store through it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from scaling.run_status import Failure, RunState, Status, record_failure  # noqa: F401  (also the store's API)

SCHEMA = 1
RECORD = "record.json"


STATUSES = tuple(Status)
FINISHED = (RunState.COMPLETED, RunState.FAILED)  # states a relaunch leaves as they are
REQUIRED_KEYS = ("schema", "run_id", "status", "params", "params_non_embedding", "tokens", "flops", "val_loss")

# Columns of table.csv, in order; everything else in a record stays in record.json.
# fmt: off
TABLE_COLUMNS = [
    "run_id", "sweep", "status", "failure", "error_type", "reason",
    "budget_flops", "flops", "flops_attention", "param_count", "params", "params_non_embedding",
    "tokens", "unique_tokens", "epochs", "steps", "batch_size", "seq_len", "eval_tokens",
    "shape", "n_layer", "d_model", "n_head", "vocab_size", "lr", "warmup_frac",
    "schedule", "branch_of", "branch_start_step",  # cosine | wsd; a WSD cooldown branch's trunk, fork step
    "val_loss", "val_bpb", "train_loss", "seed", "corpus", "corpus_fingerprint", "entropy_rate", "loss_floor",
    "wall_time_s", "tokens_per_s", "flops_per_s", "device", "threads", "code_version", "architecture",
    "started_at", "finished_at",
    "pack_job", "pack_tokens_per_s",  # a packed run's (scaling.packed_store), else empty
]
# fmt: on
CURVE_COLUMNS = ["run_id", "step", "tokens", "flops", "train_loss", "val_loss", "lr"]


def run_id(identity: dict[str, Any]) -> str:
    """12 hex characters of sha256 over the canonical JSON of a run's identity."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


_UMASK = os.umask(0)
os.umask(_UMASK)


@lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of the code (with -dirty when it has uncommitted changes), else the package
    version: recorded with every run, and stamped on reports."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"scaling-{version('scaling')}"
        except PackageNotFoundError:
            return "scaling-unknown"


# ---------------------------------------------------------------- atomic writes
def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part:
    a temporary file in the same directory, fsync, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp creates 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def remove_partial_writes(directory: Path) -> list[Path]:
    """Delete the temporary files of atomic writes that never finished (``.<name>.<random>.tmp``, left
    when a process is killed between writing and renaming: a checkpoint's can be gigabytes). Only the
    process that holds the directory's run lock may call this. Returns what was removed."""
    removed = []
    for tmp in Path(directory).glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False, default=_json_default, allow_nan=True) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


def check_writable_store(store: Path) -> list[Path]:
    """Create the store directory if needed and check that a file can be written in it, so that a
    store under a file, on a read-only disk or out of space is one line (ConfigError naming
    ``store``) before Hydra or any run writes there. Leaves nothing behind but the directory; returns
    the directories it created (the store and its missing parents, outermost first) for
    `remove_created` to take back when the command is refused after all."""
    from scaling.errors import ConfigError

    store = Path(store)
    created = [path for path in (store, *store.parents) if not path.exists()][::-1]
    try:
        store.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=store):
            pass
    except OSError as err:
        raise ConfigError(
            f"store: {str(store)!r} cannot be written ({err.strerror or err}); "
            "give a writable directory, e.g. store=results/NAME"
        ) from None
    return created


def remove_created(directories: list[Path]) -> None:
    """Remove the directories `check_writable_store` created, innermost first, each only while it is
    empty (rmdir: nothing in them is ever deleted; one that holds anything stays, with its parents)."""
    for path in reversed(directories):
        try:
            path.rmdir()
        except OSError:
            return


# ---------------------------------------------------------------- per-run paths and locks
@dataclass(frozen=True)
class RunPaths:
    store: Path
    run_id: str

    @property
    def dir(self) -> Path:
        return Path(self.store) / "runs" / self.run_id

    @property
    def record(self) -> Path:
        return self.dir / RECORD

    @property
    def config(self) -> Path:
        return self.dir / "config.yaml"

    @property
    def checkpoint(self) -> Path:
        return self.dir / "ckpt.pt"

    @property
    def lock(self) -> Path:
        return self.dir / ".lock"


@contextlib.contextmanager
def run_lock(paths: RunPaths) -> Iterator[bool]:
    """Hold an exclusive, non-blocking flock on the run while it trains.

    Yields True when this process owns the run, False when another process is training it now
    (two sweeps launched into one store never train the same run twice). The kernel releases the
    lock if the process dies, so a killed run never leaves a stale lock."""
    paths.dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def is_locked(paths: RunPaths) -> bool:
    """True when some process holds the run's lock (it is training now)."""
    if not paths.lock.exists():
        return False
    fd = os.open(paths.lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


# ---------------------------------------------------------------- records
class RecordProblem(Exception):
    """A record file that cannot be used; the message names the path and the reason."""


def read_record(path: Path) -> dict[str, Any]:
    """Read and check one record; raise RecordProblem naming the path and what is wrong."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise RecordProblem(f"{path}: cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise RecordProblem(f"{path}: not UTF-8 text (byte {err.start}); garbled") from None
    if not text.strip():
        raise RecordProblem(f"{path}: empty file")
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordProblem(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); truncated or garbled") from None
    if not isinstance(rec, dict):
        raise RecordProblem(f"{path}: expected a JSON object, found {type(rec).__name__}")
    if rec.get("schema") != SCHEMA:
        raise RecordProblem(
            f"{path}: schema {rec.get('schema')!r} is not supported (this version reads schema {SCHEMA})"
        )
    missing = [k for k in REQUIRED_KEYS if k not in rec]
    if missing:
        raise RecordProblem(f"{path}: missing keys {', '.join(missing)}")
    if rec["status"] not in STATUSES:
        raise RecordProblem(f"{path}: status {rec['status']!r} is not one of {', '.join(STATUSES)}")
    if rec.get("failure", "") not in tuple(Failure):
        raise RecordProblem(f"{path}: failure {rec['failure']!r} is not one of {', '.join(map(repr, Failure))}")
    if rec["run_id"] != path.parent.name:
        raise RecordProblem(f"{path}: its run_id {rec['run_id']!r} does not match its directory {path.parent.name!r}")
    return rec


def iter_records(store: Path) -> Iterator[tuple[Path, dict[str, Any] | None, str | None]]:
    """Yield (path, record or None, problem or None) for every record file under STORE/runs."""
    runs = Path(store) / "runs"
    if not runs.is_dir():
        return
    for path in sorted(runs.glob(f"*/{RECORD}")):
        try:
            yield path, read_record(path), None
        except RecordProblem as err:
            yield path, None, str(err)


@dataclass
class StoreTable:
    """What the analysis reads: one row per usable record, the loss curves, and the skipped files."""

    runs: Any  # pandas.DataFrame with TABLE_COLUMNS
    curves: Any  # pandas.DataFrame with CURVE_COLUMNS
    problems: list[str] = field(default_factory=list)


def _flat_row(rec: dict[str, Any]) -> dict[str, Any]:
    row = {k: rec.get(k) for k in TABLE_COLUMNS}
    row["failure"] = str(record_failure(rec))
    for k in (
        "error_type",
        "reason",
        "sweep",
        "corpus",
        "corpus_fingerprint",
        "code_version",
        "architecture",
        "shape",
        "device",
        "schedule",  # (records before WSD have none)
        "branch_of",  # (empty but for a cooldown branch)
        "pack_job",  # (empty but for a packed run)
    ):
        row[k] = "" if row[k] is None else row[k]
    for k in ("entropy_rate", "loss_floor", "pack_tokens_per_s"):
        if row[k] is None:
            row[k] = math.nan
    return row


def read_store(store: Path) -> StoreTable:
    """Read every record of a store into tables. Unreadable, foreign or old-schema records are
    skipped and listed in ``problems`` (each naming its path); the others are all read."""
    import pandas as pd

    from scaling.evalsets import curve_rows, extra_columns, table_columns  # + evaluation sets' columns

    store = Path(store)
    if not store.exists():
        from scaling.errors import DataError

        raise DataError(
            f"results store {str(store)!r} does not exist; give a sweep's directory (e.g. results/quick) or a CSV/Parquet file"
        )
    rows, curves, problems = [], [], []
    for _path, rec, problem in iter_records(store):
        if problem:
            problems.append(problem)
            continue
        rows.append({**_flat_row(rec), **table_columns(rec)})
        curves += curve_rows(rec, CURVE_COLUMNS)
    runs = pd.DataFrame(rows, columns=extra_columns(rows, TABLE_COLUMNS))
    runs["branch_start_step"] = runs["branch_start_step"].astype("Int64")  # a step, empty but for a branch
    return StoreTable(runs, pd.DataFrame(curves, columns=extra_columns(curves, CURVE_COLUMNS)), problems)


def set_aside(path: Path, why: str) -> Path:
    """Rename a record that will be replaced (corrupt, or an errored attempt) so nothing is lost:
    ``record.json`` -> ``record.json.<why>-<UTC time>``."""
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    os.replace(path, target)
    return target


def write_tables(store: Path) -> StoreTable:
    """Rebuild STORE/table.csv and STORE/curves.csv from the records (atomically) and return them."""
    table = read_store(store)
    atomic_write_text(Path(store) / "table.csv", table.runs.to_csv(index=False))
    atomic_write_text(Path(store) / "curves.csv", table.curves.to_csv(index=False))
    return table


def run_state(paths: RunPaths) -> RunState:
    """Where the run stands in the store (see `RunState`)."""
    if paths.record.exists():
        try:
            rec = read_record(paths.record)
        except RecordProblem:
            return RunState.CORRUPT
        failure = record_failure(rec)
        if failure == Failure.ERRORED:
            return RunState.ERRORED
        return RunState.FAILED if failure == Failure.DIVERGED else RunState.COMPLETED
    if is_locked(paths):
        return RunState.RUNNING
    if paths.checkpoint.exists():
        return RunState.PARTIAL
    return RunState.NEW
