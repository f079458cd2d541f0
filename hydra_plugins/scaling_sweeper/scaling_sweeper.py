"""A Hydra sweeper for IsoFLOP sweeps: FLOP budgets × model shapes, planned before launch.

Hydra 1.3's basic sweeper can only take Cartesian products and has no resume (PITFALLS.md). This
sweeper, selected by ``override hydra/sweeper: scaling`` in a sweep file:

1. expands ``budgets`` × ``models`` (or a per-budget ``grid``) × any other swept overrides;
2. plans every job with `scaling.plan.plan_run` (pure arithmetic) and **drops** combinations that make
   no sense — fewer than ``train.min_steps`` steps, tokens per parameter outside ``tokens_per_param``,
   more tokens than the corpus holds (unless ``train.allow_repeat``) — listing each with its reason;
3. looks each run up in the results store: finished runs are skipped, interrupted ones resume from
   their checkpoint, runs held by another live process are left to it;
4. writes ``STORE/sweep.json`` (the plan), launches the rest through whichever Hydra launcher is
   configured (basic, joblib, submitit_local, submitit_slurm), largest first, with torch threads per
   job set so that concurrent jobs never oversubscribe the cores; then rebuilds ``STORE/table.csv``.
"""

import itertools
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclass
class ScalingSweeperConf:
    _target_: str = "hydra_plugins.scaling_sweeper.scaling_sweeper.ScalingSweeper"
    budgets: List[float] = field(default_factory=list)   # FLOP budgets C
    models: List[str] = field(default_factory=list)      # ladder names (conf/model/*.yaml), tried at every budget
    grid: Any = field(default_factory=dict)  # optional per-budget shapes: {1e12: [d32, d64], 3e12: [...]}
    tokens_per_param: List[float] = field(default_factory=lambda: [0.5, 2000.0])  # keep D/N inside [lo, hi]
    params: Dict[str, str] = field(default_factory=dict)  # extra swept keys, as the basic sweeper: {seed: "0,1"}
    max_batch_size: Optional[int] = None                 # launch in chunks of this many jobs (None: all at once)


ConfigStore.instance().store(group="hydra/sweeper", name="scaling", node=ScalingSweeperConf, provider="scaling")


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def concurrency(launcher_cfg: DictConfig, n_jobs: int) -> int:
    """How many jobs the configured launcher runs at once on this machine."""
    target = str(launcher_cfg.get("_target_", ""))
    if "Joblib" in target:
        n = int(launcher_cfg.get("n_jobs", -1))
        return max(1, min(n_jobs, _cores() if n in (-1, 0) else n))
    if "LocalLauncher" in target:  # submitit_local starts every job at once
        return max(1, min(n_jobs, _cores()))
    return 1  # basic (sequential) and SLURM (each job has its own cpus_per_task)


class ScalingSweeper(Sweeper):
    def __init__(self, budgets, models, grid, tokens_per_param, params, max_batch_size):
        super().__init__()
        self.budgets = [float(b) for b in budgets]
        self.models = list(models)
        self.grid = {float(k): list(v) for k, v in (grid or {}).items()}
        self.tokens_per_param = tuple(float(x) for x in tokens_per_param)
        self.params = dict(params or {})
        self.max_batch_size = max_batch_size
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    # ------------------------------------------------------------ 1. expand
    def expand(self, arguments: List[str]) -> List[List[str]]:
        """Every job's override list: budgets × models (or grid) × the other swept keys."""
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        axes: Dict[str, List[str]] = {}
        for override in parser.parse_overrides([f"{k}={v}" for k, v in self.params.items()] + list(arguments)):
            key = override.get_key_element()
            if override.is_sweep_override():
                values = list(override.sweep_string_iterator())
            else:
                values = [override.get_value_element_as_str()]
            if key == "budget":
                self.budgets, self.grid = [float(v) for v in values], {}
            elif key == "model":
                self.models, self.grid = values, {}
            else:
                axes[key] = [f"{key}={v}" for v in values]
        pairs = []
        for budget in self.budgets or sorted(self.grid):
            for model in self.grid.get(budget, self.models):
                pairs.append([f"budget={budget:g}", f"model={model}"])
        if not pairs:
            from scaling.errors import ConfigError
            raise ConfigError("hydra.sweeper: no budgets × models to sweep; set hydra.sweeper.budgets and "
                              "hydra.sweeper.models (or hydra.sweeper.grid) in the sweep file")
        return [pair + list(rest) for pair in pairs for rest in itertools.product(*axes.values())]

    # ------------------------------------------------------------ 2-3. plan
    def plan(self, jobs: List[List[str]]):
        from scaling.errors import UserError
        from scaling.plan import plan_run
        from scaling.store import RunPaths, run_state
        from scaling import data as data_lib

        loader = self.hydra_context.config_loader
        kept, dropped, corpus_tokens = [], [], {}
        lo, hi = self.tokens_per_param
        for overrides in jobs:
            label = " ".join(overrides)
            cfg = loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            with open_dict(cfg):
                del cfg["hydra"]  # as in the job itself: its interpolations need a running job
            try:
                plan = plan_run(cfg)
            except UserError as err:
                dropped.append({"overrides": overrides, "reason": str(err)})
                continue
            ratio = plan.tokens / plan.n_budget
            if not lo <= ratio <= hi:
                dropped.append({"overrides": overrides, "reason": f"{ratio:.3g} tokens per parameter is outside "
                                f"hydra.sweeper.tokens_per_param [{lo:g}, {hi:g}]"})
                continue
            if not cfg.train.allow_repeat:
                key = OmegaConf.to_yaml(cfg.data)
                if key not in corpus_tokens:
                    corpus_tokens[key] = len(data_lib.load_corpus(cfg.data).train)
                if plan.tokens > corpus_tokens[key]:
                    dropped.append({"overrides": overrides, "reason": f"needs {plan.tokens:,} tokens but the corpus's "
                                    f"training split holds {corpus_tokens[key]:,} (set train.allow_repeat=true to repeat data)"})
                    continue
            state = run_state(RunPaths(Path(cfg.store), plan.run_id))
            kept.append({"overrides": overrides, "label": label, "run_id": plan.run_id, "plan": plan,
                         "state": state, "store": cfg.store})
        return kept, dropped

    # ------------------------------------------------------------ 4. launch
    def sweep(self, arguments: List[str]) -> Any:
        from scaling.progress import write_sweep_manifest, format_progress
        from scaling.store import write_tables

        jobs, dropped = self.plan(self.expand(arguments))
        store = Path(self.config.store)
        to_run = [j for j in jobs if j["state"] in ("new", "partial", "corrupt", "errored")]
        busy = [j for j in jobs if j["state"] == "running"]
        to_run.sort(key=lambda j: -j["plan"].flops_attention)  # largest first: shortest makespan in parallel
        write_sweep_manifest(store, self.config.sweep, jobs, dropped)

        name = self.config.sweep or "sweep"
        print(f"sweep {name}: {len(jobs)} runs planned in {store}, {len(dropped)} dropped; "
              f"{sum(j['state'] in ('completed', 'failed') for j in jobs)} already finished (skipped), "
              f"{sum(j['state'] == 'partial' for j in jobs)} to resume, "
              f"{sum(j['state'] in ('errored', 'corrupt') for j in jobs)} to retry, {sum(j['state'] == 'new' for j in jobs)} new"
              + (f", {len(busy)} running in another process (left to it)" if busy else ""), flush=True)
        for d in dropped:
            print(f"  dropped {' '.join(d['overrides'])}: {d['reason']}", flush=True)
        if not to_run:
            write_tables(store)
            print(format_progress(store), flush=True)
            return []

        n_parallel = concurrency(self.config.hydra.launcher, len(to_run))
        batch = [list(j["overrides"]) + [f"train.concurrent_runs={n_parallel}"] for j in to_run]
        print(f"launching {len(batch)} runs, {n_parallel} at a time "
              f"({sum(j['plan'].flops for j in to_run):.3g} FLOPs to train)", flush=True)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        returns, size = [], self.max_batch_size or len(batch)
        for start in range(0, len(batch), size):
            chunk = batch[start:start + size]
            self.validate_batch_is_legal(chunk)
            returns.append(self.launcher.launch(chunk, initial_job_idx=start))
        write_tables(store)
        print(format_progress(store, final=True), flush=True)
        for results in returns:
            for r in results:
                _ = r.return_value  # re-raise a job's exception, as the basic sweeper does
        return returns
