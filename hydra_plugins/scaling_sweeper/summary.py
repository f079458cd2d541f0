"""What the sweeper prints before launching: the summary (runs planned, merged, dropped, finished, to
resume, the cost of any hyperparameter axes) and, for a dry run, the plan table."""

from pathlib import Path

from hydra_plugins.scaling_sweeper import processes
from scaling.progress import planning_counts


def format_plan(jobs: list[dict]) -> str:
    """The planned runs as a table: budget, shape, N (the count that set D), D, D/N, C = 6·N·D, state,
    run id, and the job's other swept overrides (seed=1, ...)."""
    lines = [
        f"  {'budget':>8} {'shape':>6} {'N':>12} {'D':>14} {'D/N':>7} {'C=6ND':>9} {'lr':>9} {'batch':>5}  "
        f"{'state':<9} run id"
    ]
    for j in sorted(jobs, key=lambda j: (j["plan"].budget, j["plan"].n_budget)):
        p = j["plan"]
        others = [o for o in j["overrides"] if not o.startswith(("budget=", "model=", "store="))]
        lines.append(
            f"  {p.budget:>8.3g} {p.shape.name:>6} {p.n_budget:>12,} {p.tokens:>14,} "
            f"{p.tokens / p.n_budget:>7.3g} {p.flops:>9.3g} {p.lr:>9.3g} {p.batch_size:>5}  "
            f"{j['state']:<9} {j['run_id']} {' '.join(others)}".rstrip()
        )
    lines.append(
        f"  total {sum(j['plan'].flops for j in jobs):.3g} FLOPs (6ND), "
        f"{sum(j['plan'].flops_attention for j in jobs):.3g} with attention"
    )
    return "\n".join(lines)


def law_line(jobs: list[dict]) -> str | None:
    """The law the runs take their peak LR and batch from (optim.lr_law), and the range of both."""
    laws = sorted({j["plan"].lr_law for j in jobs} - {""})
    if not laws:
        return None
    plans = [j["plan"] for j in jobs if j["plan"].lr_law]
    lrs, batches = [p.lr for p in plans], [p.batch_size for p in plans]
    return (
        f"peak LR from optim.lr_law={', '.join(laws)}: {min(lrs):.3g} .. {max(lrs):.3g}; "
        f"batch {min(batches)} .. {max(batches)} sequences (each run's: the dry run's plan table)"
    )


def print_summary(
    name: str, store: Path, jobs: list[dict], dropped: list[dict], duplicates: list[dict], cost: str | None = None
) -> None:
    """What the sweep found before launching: runs planned, combinations merged into another's run
    (``duplicates``: the same run id) and ``dropped`` (each with its reason), runs already finished,
    to resume, to retry, new, and held by other processes (naming a dead sweep's workers)."""
    busy = [j for j in jobs if j["state"] == "running"]
    merged = f"{planning_counts(len(duplicates), 0)}, " if duplicates else ""
    print(
        f"sweep {name}: {len(jobs)} runs planned in {store}, {merged}{len(dropped)} dropped; "
        f"{sum(j['state'] in ('completed', 'failed') for j in jobs)} already finished (skipped), "
        f"{sum(j['state'] == 'partial' for j in jobs)} to resume, "
        f"{sum(j['state'] in ('errored', 'corrupt') for j in jobs)} to retry, {sum(j['state'] == 'new' for j in jobs)} new"
        + (f", {len(busy)} running in another process (left to it)" if busy else ""),
        flush=True,
    )
    for line in (cost, law_line(jobs)):
        if line:
            print(f"  {line}", flush=True)
    for d in duplicates:
        label = " ".join(d["overrides"])
        same = "listed again" if label == d["same_as"] else f"the same run as {d['same_as']}"
        print(f"  merged {label}: {same} (trained once)", flush=True)
    for d in dropped:
        print(f"  dropped {' '.join(d['overrides'])}: {d['reason']}", flush=True)
    orphans = processes.orphaned_holders([store / "runs" / j["run_id"] / ".lock" for j in busy])
    if orphans:
        print(
            f"  runs held by workers of a sweep that is no longer running (pids {', '.join(map(str, orphans))}): "
            "they checkpoint and exit; relaunch then to resume them",
            flush=True,
        )
