"""Experiment tracking behind a small interface: wandb, or nothing.

The results store is the source of truth; wandb is a mirror for people who use its UI. So tracking
must never block or fail a run: with no API key configured it runs offline (docs/NOTES.md: a
non-interactive ``wandb.init`` with no key fails at once), every wandb call is guarded, and a wandb
failure mid-run disables tracking for the rest of the run with one warning.
"""

from __future__ import annotations

import netrc
import os
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scaling.errors import Parser, UserError


class Tracker:
    """No-op tracker (``tracking=none``) and the interface the trainer uses."""

    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def summary(self, values: dict[str, Any]) -> None:
        pass

    def finish(self, failed: bool = False) -> None:
        pass


def wandb_logged_in() -> bool:
    """True when an API key is configured (env var or ~/.netrc entry for the wandb host)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    try:
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str) -> str:
    """auto -> WANDB_MODE if set, else online when logged in, else offline."""
    if mode != "auto":
        return mode
    env = os.environ.get("WANDB_MODE")
    if env in ("online", "offline", "disabled", "dryrun"):
        return "offline" if env == "dryrun" else env
    return "online" if wandb_logged_in() else "offline"


@cache
def server_reachable(base_url: str, timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the wandb server opens within ``timeout`` seconds, name lookup
    included (in a thread, as a lookup ignores socket timeouts). Asked once per process before an
    online run, so that a logged-in machine without network logs offline at once instead of
    waiting out wandb's 30 s ``init_timeout`` on every run."""
    url = urlsplit(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    reached = []

    def connect() -> None:
        try:
            socket.create_connection((url.hostname, port), timeout=timeout).close()
            reached.append(True)
        except (OSError, ValueError):
            pass

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(reached)


class WandbTracker(Tracker):
    def __init__(self, run: Any):
        self._run = run

    def _guard(self, what: str, fn, *args, **kwargs) -> None:
        if self._run is None:
            return
        try:
            fn(*args, **kwargs)
        except Exception as err:  # tracking must never fail a run
            warnings.warn(
                f"wandb {what} failed ({type(err).__name__}: {err}); tracking is off for the rest of this run; "
                "the local record is unaffected",
                stacklevel=2,
            )
            self._run = None

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._guard("log", lambda: self._run.log(metrics, step=step))

    def summary(self, values: dict[str, Any]) -> None:
        self._guard("summary", lambda: self._run.summary.update(values))

    def finish(self, failed: bool = False) -> None:
        run, self._run = self._run, None
        if run is not None:
            try:
                run.finish(exit_code=1 if failed else 0)
            except Exception as err:
                warnings.warn(
                    f"wandb finish failed ({type(err).__name__}: {err}); the local record is unaffected", stacklevel=2
                )


def run_tags(own: Sequence[str], user: Sequence[str]) -> list[str]:
    """The run's own tags (sweep, budget, shape) then the user's ``tracking.tags``; empty and repeated
    ones dropped, order kept."""
    return list(dict.fromkeys(str(t) for t in [*own, *user] if str(t)))


def start_tracker(
    tracking_cfg, *, name: str, group: str, config: dict, run_dir: Path, run_id: str, tags: Sequence[str] = ()
) -> Tracker:
    """A tracker for one run: wandb (online or offline) or the no-op one. ``tags`` (the run's sweep,
    budget and shape) come first, then ``tracking.tags``."""
    if tracking_cfg.backend == "none":
        return Tracker()
    mode = resolve_mode(tracking_cfg.mode)
    if mode == "disabled":
        return Tracker()
    base_url = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    if mode == "online" and not server_reachable(base_url):
        warnings.warn(
            f"wandb: {base_url} cannot be reached; this run logs offline under {run_dir} "
            "(upload later with `scaling sync STORE`)",
            stacklevel=2,
        )
        mode = "offline"
    try:
        import wandb

        run_dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=tracking_cfg.project,
            entity=tracking_cfg.entity,
            group=group or None,
            name=name,
            id=run_id,
            resume="allow",
            tags=run_tags(tags, tracking_cfg.tags),
            config=config,
            dir=str(run_dir),
            mode=mode,
            reinit="finish_previous",
            settings=wandb.Settings(
                init_timeout=30, silent=True, x_disable_machine_info=True, console="off", x_disable_stats=True
            ),
        )
        return WandbTracker(run)
    except Exception as err:
        warnings.warn(
            f"wandb could not start ({type(err).__name__}: {err}); training continues without it", stacklevel=2
        )
        return Tracker()


def sync_main(argv: list[str]) -> int:
    """`scaling sync STORE`: upload a store's offline wandb runs (needs `wandb login`)."""
    parser = Parser(prog="scaling sync", description=sync_main.__doc__)
    parser.add_argument("store", help="a results-store directory, e.g. results/quick")
    args = parser.parse_args(argv)
    store = Path(args.store)
    if not store.is_dir():
        raise UserError(
            f"store {str(store)!r} is not a directory; give a sweep's results directory, e.g. results/quick"
        )
    offline = sorted(store.glob("runs/*/wandb/wandb/offline-run-*"))
    if not offline:
        print(f"no offline wandb runs under {store}")
        return 0
    if not wandb_logged_in():
        raise UserError("wandb: no API key configured; run `wandb login` (or set WANDB_API_KEY) and retry")
    wandb_cli = Path(sys.executable).with_name("wandb")
    print(f"syncing {len(offline)} offline runs from {store}")
    return subprocess.call([str(wandb_cli), "sync", *map(str, offline)])
