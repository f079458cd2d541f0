"""Cooldown branches in a sweep: ``hydra.sweeper.branches: true`` with ``train.schedule: wsd``.

The planned runs are grouped by shape (and every other swept key but the budget). Each group
becomes one trunk, the run at the group's largest budget, with a cooldown branch at every other
budget of the group (`scaling.branches`), plus ``extra_points_per_decade`` log-spaced budgets between
the group's smallest budget (at most a tenth of the trunk's) and the trunk's. Every branch is also a
job of the plan, with its own run id (a standalone WSD run's), so the summary, ``sweep.json``,
``scaling status`` and the exit status count it; its trunk trains it, or, when the trunk is already
finished, it is launched as the standalone run it equals. A trunk's warmup is fixed in steps
(``optim.warmup_steps``: ``optim.warmup_frac`` of its smallest branch's steps), the same for its
branches, so that each branch is that standalone run and no point spends more than warmup_frac
of its steps warming up.
"""

from __future__ import annotations

import math

from hydra_plugins.scaling_sweeper.settings import text

TO_RUN = ("new", "partial", "corrupt", "errored")


def to_launch(job: dict) -> bool:
    """Whether the sweep launches ``job``: a run not yet done, unless its trunk trains it."""
    return job["state"] in TO_RUN and not job.get("with_trunk")


def job_flops(job: dict) -> float:
    """What a planned job costs to train: a cooldown branch its trunk trains, its cooldown only."""
    return job.get("flops_to_train", job["plan"].flops)


def flops_to_train(jobs: list[dict]) -> float:
    """The FLOPs the runs of ``jobs`` not yet done cost to train (`job_flops`; user32: the launch line left the
    branches out, the progress line counted each as its own run: three totals for one plan)."""
    return sum(job_flops(j) for j in jobs if j["state"] in TO_RUN)


def _budget_of(job: dict) -> float:
    return job["plan"].budget


def extra_budgets(budgets: list[float], per_decade: float) -> list[float]:
    """Log-spaced budgets, ``per_decade`` to a factor of 10, below the largest of ``budgets`` down to
    the smallest (at most a tenth of the largest), away from the given ones by at least half a step."""
    if per_decade <= 0:
        return []
    top = max(budgets)
    low = min(min(budgets), top / 10)
    out, k = [], 1
    while (b := top * 10 ** (-k / per_decade)) >= low * (1 - 1e-9):
        if all(abs(math.log10(b / g)) >= 0.5 / per_decade for g in budgets):
            out.append(b)
        k += 1
    return out


def plan_trunks(sweeper, jobs: list[dict], dropped: list[dict], per_decade: float):
    """(jobs, dropped, summary line): one trunk per group with its branches as jobs (``branch_of``). A warmup in
    steps set on the command line or in the sweep file is kept (user19: the file's was rescaled, silently)."""
    from scaling.errors import ConfigError
    from scaling.store import RunPaths, run_state

    if list(sweeper.config.train.branches or []):  # the sweeper would replace them, silently
        raise ConfigError(
            f"train.branches: {list(sweeper.config.train.branches)} with hydra.sweeper.branches=true; give one: "
            "the sweeper plans each trunk's branches from the sweep's budgets (and extra_points_per_decade)"
        )
    groups: dict[tuple, list[dict]] = {}
    for j in jobs:
        groups.setdefault(tuple(o for o in j["overrides"] if not o.startswith("budget=")), []).append(j)
    planned = []
    for rest, members in groups.items():
        top = max(members, key=_budget_of)
        if top["plan"].schedule != "wsd":
            raise ConfigError("hydra.sweeper.branches: true needs train.schedule=wsd (cooldown branches)")
        grid = sorted({_budget_of(m) for m in members})
        given = sweeper.config.optim.warmup_steps is not None or any(o.startswith("optim.warmup_steps=") for o in rest)
        fixed, cfg, trunk_plan, branches, bad = trunk_with_branches(
            sweeper, top, grid[:-1] + extra_budgets(grid, per_decade), given
        )
        dropped += [{"overrides": [f"budget={text(b)}", *rest], "reason": f"not a branch: {why}"} for b, why in bad]
        listed = ",".join(repr(b.plan.budget) for b in branches)
        trunk = {**top, "overrides": [*top["overrides"], *fixed, f"train.branches=[{listed}]"], "plan": trunk_plan}
        trunk["run_id"], trunk["label"] = trunk_plan.run_id, " ".join(trunk["overrides"])
        trunk["state"] = str(run_state(RunPaths(cfg.store, trunk_plan.run_id)))
        planned.append(trunk)
        for b in branches:
            overrides = [f"budget={b.plan.budget!r}", *rest, *fixed]
            state = str(run_state(RunPaths(cfg.store, b.plan.run_id)))
            planned.append(
                {
                    "overrides": overrides,
                    "label": " ".join(overrides),
                    "run_id": b.plan.run_id,
                    "plan": b.plan,
                    "state": state,
                    "store": cfg.store,
                    "branch_of": trunk_plan.run_id,
                    "with_trunk": (with_trunk := trunk["state"] in (*TO_RUN, "running")),  # the trunk trains it
                    # else alone, as its own run (review21: a finished trunk's branch counted its cooldown only)
                    "flops_to_train": b.flops_to_train if with_trunk else b.plan.flops,
                }
            )
    return planned, dropped, cost_line(jobs, planned)


def trunk_with_branches(sweeper, top: dict, candidates: list[float], given: bool):
    """(fixed, cfg, trunk plan, branches, dropped budgets with why) of the trunk ``top`` with a branch at each
    of ``candidates`` that can be one: enough steps, D/N inside ``tokens_per_param``. Unless ``given``, its
    warmup in steps (``fixed``) is ``top``'s warmup_frac of the smallest branch it keeps (user22: it was the
    smallest candidate's, dropped after: d48's 1e10, at 0.3 tokens per parameter, set 1 step for a smallest
    branch of 47 steps). A longer warmup drops only shorter branches (warmup and cooldown must fit), so the
    warmup only grows until the smallest branch kept with it sets it."""
    from scaling.branch_plan import plan_branches
    from scaling.plan import plan_run

    lo, hi = sweeper.tokens_per_param
    budget = _budget_of(top)
    warmup = _warmup_at(top, min(candidates, default=budget))
    while True:
        fixed = [] if given else [f"optim.warmup_steps={warmup}"]
        cfg = sweeper.compose([*top["overrides"], *fixed, f"train.branches=[{','.join(map(repr, candidates))}]"])
        trunk_plan = plan_run(cfg)
        branches, bad = plan_branches(cfg, trunk_plan)
        for b in [b for b in branches if not lo <= b.plan.tokens / b.plan.n_budget <= hi]:
            ratio = b.plan.tokens / b.plan.n_budget
            bad.append((b.plan.budget, f"{ratio:.3g} tokens per parameter is outside [{lo:g}, {hi:g}]"))
            branches.remove(b)
        kept = _warmup_at(top, min((b.plan.budget for b in branches), default=budget))
        if given or kept == warmup:
            return fixed, cfg, trunk_plan, branches, bad
        warmup = kept


def _warmup_at(top: dict, budget: float) -> int:
    """The trunk ``top``'s warmup_frac of the steps of its shape's run at ``budget``."""
    return max(1, round(top["plan"].warmup_steps * budget / _budget_of(top)))


def cost_line(grid: list[dict], planned: list[dict]) -> str:
    """The FLOPs of the branched plan against the grid as separate runs (the saving), and its points."""
    trunks = [j for j in planned if "branch_of" not in j]
    spent = sum(job_flops(j) for j in planned)
    as_runs = sum(j["plan"].flops for j in grid)
    every = sum(j["plan"].flops for j in planned)
    return (
        f"branches: {len(trunks)} trunks and {len(planned) - len(trunks)} cooldown branches, {len(planned)} (N, D, loss) "
        f"points for {spent:.3g} FLOPs (trunks + cooldowns); the grid's {len(grid)} points as separate runs "
        f"{as_runs:.3g} FLOPs (this plan: {spent / as_runs:.0%} of it, {len(planned) / len(grid):.2g}x the points); "
        f"each of these points as its own run {every:.3g}"
    )
