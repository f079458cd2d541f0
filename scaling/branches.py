"""Training a WSD trunk's cooldown branches: one constant-LR run, a full (N, D, loss) point per budget.

A run with ``train.schedule=wsd`` and ``train.branches=[C_1, ...]`` (budgets below its own) is a
*trunk*. Each branch equals the standalone WSD run of its budget (`scaling.branch_plan`): until the
branch's cooldown starts, that run takes the trunk's very steps (same seed, same batches, which are
a function of the step, same LR). So the trunk

1. keeps, for every branch still to come, the branch's own loss curve and training-loss window
   (the losses not yet read included), with its own log and evaluation steps (`observe`;
   evaluations of the shared model);
2. at a branch's first cooldown step saves its own checkpoint (with those curves), then trains the
   branch on in place: its cooldown steps, evaluations and record (`fork`), which carries
   ``branch_of`` (the trunk's run id) and ``branch_start_step``;
3. restores its own weights and optimizer state from memory and goes on.

A branch's record is the standalone run's record: the same run id, losses and curve (tests). A
relaunch after a kill or a preemption resumes the trunk from its checkpoint: a branch that was
interrupted is trained again from the trunk's checkpoint at its fork (or resumes from its own, when
it saved one); a branch with a record is skipped. A branch held by another process is left to it.
"""

from __future__ import annotations

import copy
import dataclasses
import time

from omegaconf import OmegaConf

from scaling.branch_plan import Branch, branches_or_error
from scaling.plan import job_config
from scaling.record import now_iso, write_record
from scaling.store import (
    FINISHED,
    RunPaths,
    RunState,
    atomic_write_text,
    remove_partial_writes,
    run_lock,
    run_state,
    set_aside,
)
from scaling.tracking import Tracker
from scaling.train import Run, curve_steps, log_point, train_until_stopped
from scaling.train_state import TrainState

# What a branch's state holds before it forks (saved in the trunk's checkpoint, `TrainState.extra`).
# "pending": the losses the branch took since its last curve point and has not read yet (it reads
# them at its own log points, not at the trunk's checkpoints). user22: they were not saved, so a
# resumed branch's next curve point averaged only the steps after the resume (train_loss 2.368889
# for 2.365607 at step 320 after a SIGTERM at step 309).
SHADOW_FIELDS = ("step", "curve", "train_time", "loss_start", "window_sum", "window_n", "ema", "pending")


class Branches:
    """The branches of the trunk ``run`` still to train, each with its state until it forks."""

    def __init__(self, run: Run):
        self.trunk = run
        self.pending: list[tuple[Branch, Run]] = []
        saved = run.state.extra.get("branches", {})
        for branch in branches_or_error(run.cfg, run.plan):
            paths = RunPaths(run.paths.store, branch.plan.run_id)
            name = f"[{run.plan.run_id}] branch {branch.plan.run_id} ({branch.plan.run_name})"
            if run_state(paths) in FINISHED:
                run.log(f"{name}: already finished; skipped")
            elif branch.start < run.state.step or (run.state.step and branch.plan.run_id not in saved):
                run.log(f"{name}: the trunk is past its fork at step {branch.start}; train it as a standalone run")
            else:
                state = TrainState(run.state.model, run.state.optimizer)
                for key, value in saved.get(branch.plan.run_id, {}).items():
                    setattr(state, key, value)
                self.pending.append((branch, self._run_of(branch, paths, state)))
        self._save_shadows()

    def _run_of(self, branch: Branch, paths: RunPaths, state: TrainState) -> Run:
        """The branch as a run sharing the trunk's model, data and evaluation sets (no tracker)."""
        return dataclasses.replace(
            self.trunk, cfg=branch.cfg, plan=branch.plan, paths=paths, state=state, tracker=Tracker(), branches=None
        )

    def _save_shadows(self) -> None:
        """Put the pending branches' states into the trunk's next checkpoint."""
        self.trunk.state.extra["branches"] = {
            b.plan.run_id: {k: getattr(r.state, k) for k in SHADOW_FIELDS} for b, r in self.pending
        }

    def observe(self, step: int, loss: float, lr: float) -> None:
        """The trunk's step ``step`` (training loss ``loss`` at LR ``lr``) as each branch still
        before its fork sees it: its training-loss window, and a curve point at its own log and
        evaluation steps."""
        for branch, run in self.pending:
            if step >= branch.start:
                continue
            run.state.observe(loss, step, run.cfg.train.divergence_factor)
            run.state.step, run.state.train_time = step + 1, self.trunk.state.train_time
            log_every, eval_steps = curve_steps(branch.plan, run.cfg.train)
            if step in eval_steps or (step + 1) % log_every == 0:
                log_point(run, step, lr, evaluated=step in eval_steps)
        self._save_shadows()

    def fork(self, step: int, guard) -> None:
        """Train the branches whose cooldown starts at ``step``, each after the trunk's checkpoint."""
        for branch, run in [p for p in self.pending if p[0].start == step]:
            if self.trunk.state.saved_step != step:  # what a relaunch resumes the branch from
                self.trunk.state.save(self.trunk.paths, self.trunk.plan.run_id, step)
            model, optimizer = self.trunk.state.model, self.trunk.state.optimizer
            kept = ({k: v.clone() for k, v in model.state_dict().items()}, copy.deepcopy(optimizer.state_dict()))
            try:
                self._train_branch(branch, run, guard)
            finally:
                model.load_state_dict(kept[0])
                optimizer.load_state_dict(kept[1])
            self.pending = [p for p in self.pending if p[0] is not branch]
            self._save_shadows()

    def _train_branch(self, branch: Branch, run: Run, guard) -> None:
        """Claim the branch's run in the store and train its cooldown; its record ends it."""
        name = f"[{self.trunk.plan.run_id}] branch {branch.plan.run_id} ({branch.plan.run_name})"
        t_start, started_at = time.perf_counter(), now_iso()
        with run_lock(run.paths) as owned:
            if not owned:
                run.log(f"{name}: another process is training it; skipping")
                return
            remove_partial_writes(run.paths.dir)
            state = run_state(run.paths)
            if state in FINISHED:
                return
            if state in (RunState.CORRUPT, RunState.ERRORED):
                set_aside(run.paths.record, state)
            atomic_write_text(run.paths.config, OmegaConf.to_yaml(job_config(run.cfg)))
            if run.state.restore(run.paths, branch.plan.run_id, self.trunk.device, run.log):
                run.log(f"{name}: resuming from its checkpoint at step {run.state.step}/{branch.plan.steps}")
            run.log(f"{name}: cooldown from step {branch.start} to {branch.plan.steps}")
            outcome = train_until_stopped(run, guard)
            write_record(
                run, outcome, started_at, t_start, branch_of=self.trunk.plan.run_id, branch_start_step=branch.start
            )
