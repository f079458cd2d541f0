"""Planning cooldown branches (no torch): which runs a WSD trunk's ``train.branches`` stand for.

A branch at budget C_i is, exactly, the standalone WSD run of that budget with the trunk's warmup in
steps (``optim.warmup_steps``): the same config with ``budget=C_i``, so the same run id, the same
record and the same loss. The trunk forks it at the step where that run's cooldown starts; until
then the two runs take the same steps on the same batches at the same LR. `scaling.branches` trains
the branches; the sweeper (``hydra.sweeper.branches``) plans them with `plan_branches`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from omegaconf import DictConfig

from scaling.errors import ConfigError
from scaling.flops import flops_6nd
from scaling.plan import BudgetTooSmall, RunPlan, plan_run
from scaling.schedule import decay_start


@dataclass(frozen=True)
class Branch:
    """A cooldown branch: the standalone run it equals, and the trunk step it forks at."""

    cfg: DictConfig
    plan: RunPlan
    start: int  # the trunk's step count when the branch forks (its cooldown's first step)

    @property
    def flops_to_train(self) -> float:
        """What the branch costs beyond its trunk: its cooldown's 6·N·D."""
        return flops_6nd(self.plan.n_budget, (self.plan.steps - self.start) * self.plan.tokens_per_step)


def branch_config(cfg: DictConfig, budget: float, warmup_steps: int) -> DictConfig:
    """The config of the standalone WSD run that the branch at ``budget`` equals."""
    c = copy.deepcopy(cfg)
    c.budget = float(budget)
    c.plan = ""
    c.train.branches = []
    c.optim.warmup_steps = warmup_steps
    return c


def plan_branches(cfg: DictConfig, trunk: RunPlan) -> tuple[list[Branch], list[tuple[float, str]]]:
    """The branches of ``cfg.train.branches`` for the trunk ``trunk``, by start step, and the
    budgets that cannot be branches, each with the reason (too few steps for the warmup and cooldown,
    a cooldown starting after the trunk's, another LR or batch from an LR law)."""
    branches, dropped = [], []
    for budget in sorted(set(float(b) for b in cfg.train.branches)):
        bcfg = branch_config(cfg, budget, trunk.warmup_steps)
        try:
            plan = plan_run(bcfg)
        except BudgetTooSmall as err:
            dropped.append((budget, str(err)))
            continue
        start = decay_start(plan.steps, plan.cooldown_steps)
        if start > decay_start(trunk.steps, trunk.cooldown_steps) or plan.steps >= trunk.steps:
            dropped.append((budget, f"its {plan.steps} steps are not fewer than the trunk's {trunk.steps}"))
        elif (plan.lr, plan.tokens_per_step) != (trunk.lr, trunk.tokens_per_step):
            dropped.append(
                (budget, f"its LR {plan.lr:g} and batch {plan.batch_size} differ from the trunk's (an LR law)")
            )
        else:
            branches.append(Branch(bcfg, plan, start))
    return sorted(branches, key=lambda b: b.start), dropped


def branches_or_error(cfg: DictConfig, trunk: RunPlan) -> list[Branch]:
    """`plan_branches` for a trunk about to train: a budget that cannot be a branch is bad input."""
    branches, dropped = plan_branches(cfg, trunk)
    if dropped:
        budget, reason = dropped[0]
        raise ConfigError(f"train.branches: {budget:g} cannot be a cooldown branch of this run: {reason}")
    return branches
