"""A Hydra sweeper for IsoFLOP sweeps: FLOP budgets × model shapes, planned before launch.

Hydra 1.3's basic sweeper can only take Cartesian products and has no resume (docs/NOTES.md). This
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

Hyperparameter axes (``lr_multipliers`` or ``lr_grid``, ``batch_sizes``, ``warmup_fracs``, and
``lr_refine``: a coarse LR grid, then midpoints around each best, in the same invocation) are
crossed with every (budget, shape) in step 1; `hyper` holds them, and the cost they add is printed
before launching.

``hydra.sweeper.dry_run=true`` stops after step 3: it lists the planned runs (N, D, D/N, C = 6ND)
and writes them to ``STORE/sweep.dry-run.json``, launching nothing.

Exit status of `scaling sweep`: the table in scaling/sweep_app.py's docstring (0 every planned run
completed, 1 a run failed or a write failed, 2 bad input, 130/143 interrupted); how a launch ended is
read from the store by `outcome`.

The sweep settings are checked in `settings`; the plan table and the summary printed before launching live in `summary`; launcher layout rules
(runs at once, jobs per launch call) in `layout`; the sweep's worker processes (signals, ending with
the sweep, a dead sweep's workers) in `processes`.

A bad sweep setting (a budget that is not a number, an unknown model) is one ``error:`` line and exit
status 2, before anything is written. Combinations that make no sense are dropped, not errors; a
sweep whose every combination is dropped is an error. A combination that plans the same run as
another (a shape or budget listed twice) is merged into it: trained and counted once.
"""

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.scaling_sweeper import branching, outcome, pack, processes, settings
from hydra_plugins.scaling_sweeper.hyper import HyperAxes
from hydra_plugins.scaling_sweeper.layout import (
    check_evaluations,
    check_jobs_here,
    check_launcher,
    check_read,
    is_local_launcher,
    launch_chunk_size,
    plan_layout,
    warn_of_laws,
)
from hydra_plugins.scaling_sweeper.summary import format_plan, print_summary
from scaling.flops import TOKENS_PER_PARAM


@dataclass
class ScalingSweeperConf:
    _target_: str = "hydra_plugins.scaling_sweeper.scaling_sweeper.ScalingSweeper"
    budgets: list[float] = field(default_factory=list)  # FLOP budgets C
    models: list[str] = field(default_factory=list)  # ladder names (conf/model/*.yaml), tried at every budget
    grid: Any = field(default_factory=dict)  # optional per-budget shapes: {1e12: [d32, d64], 3e12: [...]}
    tokens_per_param: list[float] = field(default_factory=lambda: list(TOKENS_PER_PARAM))  # keep D/N inside [lo, hi]
    params: dict[str, str] = field(default_factory=dict)  # extra swept keys, as the basic sweeper: {seed: "0,1"}
    max_batch_size: int | None = None  # launch in chunks of this many jobs (None: all at once)
    dry_run: bool = False  # plan, list the runs, write STORE/sweep.dry-run.json; launch nothing
    lr_multipliers: list[float] = field(default_factory=list)  # optim.lr_multiplier per run: × the shape's LR
    lr_grid: list[float] = field(default_factory=list)  # or optim.lr per run, the same for every shape
    batch_sizes: list[int] = field(default_factory=list)  # train.batch_size per run
    warmup_fracs: list[float] = field(default_factory=list)  # optim.warmup_frac per run
    lr_refine: bool = False  # then midpoints around each (shape, budget)'s best coarse LR (`hyper`)
    runs_per_gpu: int = 1  # local launchers on GPUs: runs at once per visible GPU (`layout`, scaling.devices)
    pack: bool | None = None  # the LRs of one (shape, budget) as one packed job (`pack`); null: where it pays
    branches: bool = False  # with train.schedule=wsd: one trunk per shape, cooldown branches (`branching`)
    extra_points_per_decade: float = 0.0  # branches: this many more budgets per decade below each trunk's


ConfigStore.instance().store(group="hydra/sweeper", name="scaling", node=ScalingSweeperConf, provider="scaling")


class ScalingSweeper(Sweeper):
    def __init__(
        self,
        budgets,
        models,
        grid,
        tokens_per_param,
        params,
        max_batch_size,
        dry_run=False,
        runs_per_gpu=1,
        pack=None,
        **hyper,
    ):
        super().__init__()
        # kept as given; checked by `check_settings` when the sweep starts (errors raised here would
        # reach the user wrapped in Hydra's instantiation traceback)
        self.budgets = list(budgets)
        self.models = list(models)
        self.grid = grid
        self.tokens_per_param = list(tokens_per_param)
        self.params = dict(params or {})
        self.max_batch_size = max_batch_size
        self.dry_run = bool(dry_run)
        self.jobs_checked = False  # `plan` checks the jobs as their runs would, once (`check_jobs_here`, `check_read`)
        self.launch = None  # this invocation's launch time and states (`write_sweep_manifest`): lr_refine's stage 2
        self.runs_per_gpu = runs_per_gpu
        self.pack = pack  # None: auto, resolved by `settings.check`
        self.pack_rule = None  # which LR groups pack packs (`pack.Rule`): set by `settings.check`
        self.branches = bool(hyper.pop("branches", False))
        self.extra_points_per_decade = float(hyper.pop("extra_points_per_decade", 0.0))
        self.branch_line: str | None = None
        self.hyper_settings = hyper  # lr_multipliers, lr_grid, batch_sizes, warmup_fracs, lr_refine
        self.hyper: HyperAxes | None = None
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def check_settings(self) -> None:
        """Budgets, grid, tokens_per_param and the other settings, or ConfigError naming the bad one."""
        settings.check(self)

    # ------------------------------------------------------------ 1. expand
    def expand(self, arguments: list[str]) -> list[list[str]]:
        """Every job's override list: budgets × models (or grid) × the other swept keys."""
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        axes: dict[str, list[str]] = {}
        grid_budgets = sorted(self.grid)  # the message for a budget= that replaced the grid names them
        for override in parser.parse_overrides([f"{k}={v}" for k, v in self.params.items()] + list(arguments)):
            key = override.get_key_element()
            if override.is_sweep_override():
                values = list(override.sweep_string_iterator())
            else:
                values = [override.get_value_element_as_str()]
            if key == "budget":
                self.budgets, self.grid = [settings.budget(v, "budget") for v in values], {}
            elif key == "model":  # at the grid's budgets unless budgets are given here
                here = settings.given_here(self, "budgets") or not self.grid
                self.budgets, self.models, self.grid = self.budgets if here else sorted(self.grid), values, {}
            else:
                axes[key] = [f"{key}={v}" for v in values]
        for key, values in self.hyper.axes().items():  # replace a single value given for the key
            if len(axes.get(key, ())) > 1:
                from scaling.errors import ConfigError

                raise ConfigError(f"{key}: swept both on the command line and by hydra.sweeper; give one")
            axes[key] = values
        if self.grid:  # the file's budgets and models yield to a grid; the command line's cut it
            self.grid = settings.cut_here(self)
            self.budgets = sorted(self.grid)
        budgets = self.budgets or sorted(self.grid)
        pairs = [[f"budget={settings.text(b)}", f"model={m}"] for b in budgets for m in self.grid.get(b, self.models)]
        if not pairs:
            raise settings.nothing_to_sweep(grid_budgets, self.budgets)
        return [pair + list(rest) for pair in pairs for rest in itertools.product(*axes.values())]

    # ------------------------------------------------------------ 2-3. plan
    def plan(self, jobs: list[list[str]]):
        """Plan every job: (kept, dropped, duplicates). Bad input in a job's config (a bad value, a
        missing or malformed corpus) raises ConfigError/DataError naming the job; a budget too small
        for a shape, D/N outside ``tokens_per_param`` or more tokens than the corpus holds drop the
        job (``reason``: never launched); a job whose run id a kept one already has is merged into it
        (``same_as``: that job's label; trained and counted once)."""
        from scaling.errors import UserError
        from scaling.plan import BudgetTooSmall, plan_run, repeats_unasked
        from scaling.store import RunPaths, run_state

        kept, dropped, duplicates, by_id = [], [], [], {}
        lo, hi = self.tokens_per_param
        cfgs = [self.compose(overrides) for overrides in jobs]
        first = not self.jobs_checked  # refine's stage 2 plans a subset of the jobs checked here
        if first and not self.dry_run:
            check_jobs_here(self.config.hydra.launcher, cfgs)  # as each run would, before anything is written
        if first and cfgs:
            warn_of_laws(cfgs[0])
        reading = []  # the configs of the jobs that will train (kept, or merged into a kept one)
        for overrides, cfg in zip(jobs, cfgs):
            label = " ".join(overrides)
            try:  # planned once here; the job gets this plan (the `plan` override at launch)
                plan = plan_run(cfg)
            except BudgetTooSmall as err:  # fewer than train.min_steps steps of this shape: dropped
                dropped.append({"overrides": overrides, "reason": str(err)})
                continue
            except UserError as err:  # bad input, not a combination to drop
                raise type(err)(f"sweep job {label}: {err}") from None
            ratio = plan.tokens / plan.n_budget
            if not lo <= ratio <= hi:
                dropped.append(
                    {
                        "overrides": overrides,
                        "reason": f"{ratio:.3g} tokens per parameter is outside "
                        f"hydra.sweeper.tokens_per_param [{lo:g}, {hi:g}]",
                    }
                )
                continue
            if why := repeats_unasked(cfg, plan):
                dropped.append({"overrides": overrides, "reason": why})
                continue
            reading.append(cfg)
            if plan.run_id in by_id:  # a budget or shape listed twice: one run, trained and counted once
                duplicates.append({"overrides": overrides, "same_as": by_id[plan.run_id]["label"]})  # merged, not lost
                continue
            state = run_state(RunPaths(Path(cfg.store), plan.run_id))
            job = {"overrides": overrides, "label": label, "run_id": plan.run_id, "plan": plan, "state": state}
            kept.append(by_id.setdefault(plan.run_id, {**job, "store": cfg.store}))
        if first:
            check_read(reading)
            check_evaluations([] if self.dry_run else reading)  # as each run will, before anything is written
            self.jobs_checked = True
        return kept, dropped, duplicates

    def compose(self, overrides: list[str]) -> DictConfig:
        """A job's config as the job composes it; ConfigError naming the job on bad input."""
        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(
                master_config=self.config, sweep_overrides=list(overrides)
            )
        except Exception as err:  # an unknown model name, a bad value in a swept key: bad input
            from scaling.errors import ConfigError
            from scaling.train_app import explain_compose_error

            raise ConfigError(
                f"sweep job {' '.join(overrides)}: {explain_compose_error(err, list(overrides))}"
            ) from None
        with open_dict(cfg):
            del cfg["hydra"]  # as in the job itself: its interpolations need a running job
        return cfg

    # ------------------------------------------------------------ 4. launch
    def sweep(self, arguments: list[str]) -> Any:
        """Plan, report, launch. Bad sweep settings: one `error:` line on stderr and exit status 2
        (Hydra would print a traceback for an exception raised here)."""
        from scaling.errors import ConfigError, UserError

        try:
            self.check_settings()
            check_launcher(self.config.hydra.launcher)
            jobs, dropped, duplicates = self.plan(self.expand(arguments))
            if self.branches and jobs:
                jobs, dropped, self.branch_line = branching.plan_trunks(
                    self, jobs, dropped, self.extra_points_per_decade
                )
            if not jobs:  # nothing kept, so nothing merged into a kept run: every combination dropped
                for d in dropped:
                    print(f"  dropped {' '.join(d['overrides'])}: {d['reason']}", file=sys.stderr, flush=True)
                raise ConfigError(
                    f"sweep {self.config.sweep or 'sweep'}: all {len(dropped)} combinations were dropped "
                    "(reasons above), nothing to run; change hydra.sweeper budgets/models/grid, "
                    "hydra.sweeper.tokens_per_param, train.min_steps or train.allow_repeat"
                )
        except UserError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
        if not self.hyper.lr_refine:
            return self.launch_planned(jobs, dropped, duplicates)
        return self.refine(jobs, dropped, duplicates)

    def refine(self, jobs: list[dict], dropped: list[dict], duplicates: list[dict]) -> Any:
        """lr_refine: launch the coarse grid (stage 1), then plan stage 2 from its records
        (`HyperAxes.refinements`) and launch it. On relaunch, the same: what is done is skipped."""
        from scaling.store import RunPaths, run_state

        returns = self.launch_planned(jobs, dropped, duplicates, final=False)
        for j in jobs:  # as stage 1 left them
            j["state"] = str(run_state(RunPaths(Path(self.config.store), j["run_id"])))
        extra, notes = self.hyper.refinements(jobs, Path(self.config.store))
        pending = [n for n in notes if n.endswith("not all finished)")]
        for note in notes:
            if note not in pending:
                print(f"  lr_refine: {note}", flush=True)
        if self.dry_run:
            how = f"{len(extra)} runs now, from stage 1's records; {len(pending)} (shape, budget) groups wait"
            print(f"dry run: stage 2 (lr_refine) would add {how} for their coarse runs", flush=True)
            return returns
        refined, dropped2, duplicates2 = self.plan(extra) if extra else ([], [], [])
        print(f"lr_refine: stage 2, {len(refined)} runs around each (shape, budget)'s best LR", flush=True)
        return returns + self.launch_planned(
            jobs + refined, dropped + dropped2, duplicates + duplicates2, launch=refined
        )

    def launch_planned(
        self,
        jobs: list[dict],
        dropped: list[dict],
        duplicates: list[dict],
        final: bool = True,
        launch: list[dict] | None = None,
    ) -> Any:
        """Write the plan (with ``plan``'s dropped and merged combinations), report it and launch the
        runs of ``launch`` (default: ``jobs``) not yet done; when ``final``, exit 1 if a planned run
        did not complete (`exit_if_failed`)."""
        from scaling.progress import DRY_RUN_MANIFEST, MANIFEST, format_progress, write_sweep_manifest
        from scaling.store import write_tables

        store = Path(self.config.store)
        to_run = [j for j in (jobs if launch is None else launch) if branching.to_launch(j)]
        to_run.sort(key=lambda j: -j["plan"].flops_attention)  # largest first: shortest makespan in parallel
        manifest = DRY_RUN_MANIFEST if self.dry_run else MANIFEST
        self.launch = write_sweep_manifest(store, self.config, jobs, dropped, duplicates, manifest, self.launch)

        cost = "\n  ".join(line for line in (self.hyper.cost_line(jobs), self.branch_line) if line)
        print_summary(self.config.sweep or "sweep", store, jobs, dropped, duplicates, cost or None)
        if self.dry_run:
            return self.report_dry_run(jobs, store / manifest)
        if not to_run:
            write_tables(store)
            print(format_progress(store), flush=True)
            if final:
                self.exit_if_failed(store, jobs)
            return []

        batch, leaders, layout = self.job_overrides(to_run)
        n_parallel = layout.n_parallel
        print(
            f"launching {len(to_run)} runs{self.pack_note(batch)}, "
            f"{n_parallel} at a time{layout.describe()} "
            f"({branching.flops_to_train(jobs if launch is None else launch):.3g} FLOPs to train)",
            flush=True,
        )
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        returns, size = [], launch_chunk_size(self.config.hydra.launcher, n_parallel, self.max_batch_size)
        processes.forward_sigterm_to_workers()
        if is_local_launcher(self.config.hydra.launcher):
            processes.mark_sweep_parent()  # its workers end when this process dies (processes.watch_sweep)
        for start in range(0, len(batch), size):
            chunk = batch[start : start + size]
            self.validate_batch_is_legal(chunk)
            returns.append(self.launcher.launch(chunk, initial_job_idx=start))
        write_tables(store)
        print(format_progress(store, final=True), flush=True)
        self.reraise_job_errors(store, leaders, returns)
        if final:
            self.exit_if_failed(store, jobs)
        return returns

    @staticmethod
    def reraise_job_errors(store: Path, leaders: list[dict], returns: list) -> None:
        """Re-raise a launched job's exception, as the basic sweeper does; not a job that stopped with
        its checkpoint kept (submitit gave up on a SLURM time limit: UncompletedJobError): a relaunch
        resumes it, and `exit_if_failed` counts it."""
        from scaling.run_status import RunState
        from scaling.store import RunPaths, run_state

        for job, r in zip(leaders, (r for results in returns for r in results)):
            if run_state(RunPaths(store, job["run_id"])) != RunState.PARTIAL:
                _ = r.return_value

    def pack_note(self, batch: list[list[str]]) -> str:
        if not self.pack:
            return ""
        packed = sum(any(o.startswith("pack=") for o in job) for job in batch)
        auto = self.pack_rule.describe() if self.pack_rule != pack.EVERY else ""
        return f" as {len(batch)} jobs, {packed} of them packed{auto}"

    def job_overrides(self, to_run: list[dict]) -> tuple[list[list[str]], list[dict], Any]:
        """(each launched job's overrides, the run whose state tells how it ended, the `layout.Layout`);
        with ``pack``, one job per (shape, budget, ...) trains its LRs packed (`pack`)."""
        n_jobs = len(pack.pack_jobs(to_run, [[]] * len(to_run), self.pack_rule)[0]) if self.pack else len(to_run)
        layout = plan_layout(self.launcher, self.config.hydra.launcher, self.config.train, n_jobs, self.runs_per_gpu)
        batch = [[*j["overrides"], *layout.job_overrides(), f"plan='{j['plan'].to_json()}'"] for j in to_run]
        packed = pack.pack_jobs(to_run, batch, self.pack_rule) if self.pack else None
        return (*packed, layout) if packed else (batch, to_run, layout)

    @staticmethod
    def report_dry_run(jobs: list[dict], manifest: Path) -> list:
        print(format_plan(jobs), flush=True)
        print(f"dry run (hydra.sweeper.dry_run=true): nothing launched; the plan is in {manifest}", flush=True)
        return []

    def exit_if_failed(self, store: Path, jobs: list[dict]) -> None:
        """Exit status 1, after one line, when a planned run did not complete (`outcome`)."""
        status = outcome.exit_status(self.config.sweep or "sweep", store, jobs)
        if status:
            sys.exit(status)
