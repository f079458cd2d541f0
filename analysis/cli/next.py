"""`scaling next SOURCE --flops X`: the runs to buy next, at most X FLOPs in all, that most narrow
the interval of N_opt at a target budget (`analysis.fits.next_runs`). For a results store: this
project's shapes, written as a sweep file. For any other table: sizes N on a log grid, given as
(C, N, D) with tokens per parameter and a reason each (`--out RUNS.csv`); `--ladder-shapes` asks
for this project's shapes there too."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from analysis.cli.common import add_table_options, column_map, count, parse, positive_float, tell, write_output
from analysis.cli.next_out import is_csv, plan_rows, render, runs_csv, short, summary, sweep_yaml
from analysis.describe.outliers import flagged_line
from analysis.fits.bootstrap import AS_A
from analysis.fits.results import Estimate
from scaling.errors import Parser, UserError

DEFAULT_TARGET_FACTOR = 10.0  # the target: 10x the largest budget (`next_runs.nominal`), unless --target-budget
# Simulated truths per design: at 48 a pair's narrowing of a 4-budget ladder's spread (0.136 -> 0.11) was
# within 2 standard errors of the simulation's noise, so nothing could be picked (`next_runs.NOISE_Z`).
DEFAULT_DRAWS = 192


def next_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="scaling next",
        description="Propose the runs (shape, budget), costing at most X FLOPs in all, that most narrow the "
        "interval of N_opt at a target budget: approach 3 refitted on results simulated from the current "
        "fit's bootstrap. Writes a sweep file ready to launch.",
    )
    p.add_argument("source", help="a results store (results/NAME) or a table of runs, as for `scaling fit`")
    p.add_argument("--flops", required=True, type=positive_float("a FLOP allowance, e.g. 3e13"), metavar="X")
    p.add_argument(
        "--target-budget",
        type=positive_float("a budget in FLOPs"),
        metavar="C",
        help=f"where N_opt's interval should narrow (default: {DEFAULT_TARGET_FACTOR:g}x the largest budget)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="SWEEP.yaml|RUNS.csv",
        help="write the proposal: a sweep file of this project's shapes (a results store, or --ladder-shapes), "
        "or, for a name ending in .csv, one row per run: budget_flops, params, tokens, tokens_per_param, reason",
    )
    p.add_argument(
        "--ladder-shapes",
        action="store_true",
        help="propose this project's model shapes (conf/model/d*.yaml) for a table that is not a results store "
        "(default there: sizes N on a log grid, 6 per decade, in the table's own terms)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_float("a token count"),
        metavar="D",
        help="propose no run needing more tokens than D (e.g. the corpus's training split, unless data repeat)",
    )
    p.add_argument("--bootstrap", type=count, default=200, metavar="K", help="resamples of the fit (default 200)")
    p.add_argument(
        "--draws",
        type=count,
        default=DEFAULT_DRAWS,
        metavar="M",
        help=f"simulated truths per design (default {DEFAULT_DRAWS}; fewer resolve only larger narrowings)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the simulations (default 0)")
    p.add_argument(
        "--exclude-outliers",
        action="store_true",
        help="plan from a fit without the runs the outlier rule flags (as `scaling fit --exclude-outliers`); "
        "without it they are kept, and a line says how many were flagged, by rule",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_table_options(p)
    return p


def next_main(argv: list[str]) -> int:
    args = parse(next_parser(), argv)
    if isinstance(args, int):
        return args
    from analysis.fits import next_runs as nr
    from analysis.fits.design import DesignSimulator, bootstrap_spread
    from analysis.sources.load import is_store, load_runs

    if args.draws < 8:
        raise UserError(
            f"--draws {args.draws} is too few to measure a spread; give at least 8 (default {DEFAULT_DRAWS})"
        )
    store = is_store(args.source)
    shapes = store or args.ladder_shapes  # this project's shapes, or sizes in the table's terms
    check_out(args, shapes)
    base = base_sweep(args.source)
    loaded = load_runs(args.source, column_map(args), args.allow_mixed_corpora)
    tell(loaded.lines()[0], "warning")
    table, fit, outliers = law_fit(args, loaded)
    budgets = sorted(table.runs["budget"].unique().tolist())
    target = args.target_budget or DEFAULT_TARGET_FACTOR * nr.nominal(max(budgets))
    if fit.bootstrap is None or not fit.bootstrap.samples:
        raise UserError(f"the fit of {args.source!r} has no bootstrap intervals to narrow; fit more runs first")
    every = budgets + nr.next_budgets(budgets, target)
    bounds = {} if shapes else n_opt_bounds(fit, every)  # a table's pairs bracket N_opt's interval there
    rules = candidate_rules(args, table, fit.params, bounds, shapes, base)
    done = list(zip(table.runs["N"], table.runs["budget"]))
    pool = nr.candidates(fit.params, done, every, rules, bounds)
    buyable = nr.units(pool, rules, bounds)
    check_allowance(args, buyable, shapes, nr.no_pair(bounds, rules) if bounds else "")
    sim = DesignSimulator.from_fit(fit, target, draws=args.draws, seed=args.seed)
    plan = nr.plan_runs(sim, [u for u in buyable if nr.cost(u) <= args.flops], args.flops)
    runs_at_top = int(np.sum(np.isclose(table.runs["budget"], max(budgets))))
    ladder = nr.ladder_extension(fit.params, done, budgets, rules, runs_at_top)
    now = n_opt_now(fit.params, fit.bootstrap.samples, target, fit.bootstrap.level, fit.estimates["a"].unidentified)
    result = summary(args, plan, target, now, ladder, sim, bootstrap_spread(fit, target))
    result["outliers"] = flagged_line(outliers, args.exclude_outliers, by_rule=True) if outliers else None
    if not store:
        result.update(table_terms(args, table, plan, fit.params, budgets, target, shapes, bounds))
    if args.out is not None:
        data = runs_csv(result["runs"], shapes, store) if is_csv(args.out) else sweep_yaml(base, plan, args, target)
        write_output(args.out, data.encode(), "--out")
    print(json.dumps(result) if args.json else render(result))
    return 0


def law_fit(args, table):
    """The table to plan from, approach 3's fit of it with its bootstrap (which places the candidates and
    brackets N_opt) and the runs the outlier rule flags (`analysis.fits.outliers`, as `scaling fit` flags
    them): kept, or left out with --exclude-outliers."""
    from analysis.fits.outliers import fit_flagged
    from analysis.fits.parametric import fit_parametric
    from analysis.fits.results import no_law

    def fit(runs):
        return fit_parametric(runs, resamples=max(args.bootstrap, 20), seed=args.seed)

    flagged = fit_flagged(table, fit, args.exclude_outliers)
    table, fit, outliers = flagged.table, flagged.fit, flagged.outliers
    if no_law(fit):  # the runs contradict L = E + A/N^α + B/D^β: it cannot place candidates
        raise UserError(f"approach 3's law of {args.source!r} is unidentified ({no_law(fit)}): it cannot plan runs")
    return table, fit, outliers


def check_out(args, shapes: bool) -> None:
    """A sweep file of this project's shapes only where they mean something (before any work is done)."""
    if args.out is None or shapes or is_csv(args.out):
        return
    raise UserError(
        f"--out {str(args.out)!r}: {args.source!r} is not a results store, so this project's shapes have nothing "
        "to do with its N and no sweep file is written; give --out RUNS.csv for the proposed (C, N, D), or "
        "--ladder-shapes to plan this project's shapes"
    )


def candidate_rules(args, table, params: dict, bounds: dict, shapes: bool, base: dict):
    """Which runs may be proposed (`next_runs.CandidateRules`): this project's shapes, one at a time,
    within `WINDOW_DECADES` of N_opt; or a table's sizes in pairs bracketing N_opt's interval ``bounds``,
    within `BRACKET_DECADES` of N_opt or a grid step of the interval."""
    from analysis.fits import next_runs as nr
    from scaling.flops import TOKENS_PER_PARAM

    return nr.CandidateRules(
        shapes=nr.ladder_shapes(table.n_kind, *model_dims(args.source))
        if shapes
        else table_sizes(table, params, bounds),
        tokens_per_param=tuple(base["hydra"]["sweeper"].get("tokens_per_param", TOKENS_PER_PARAM)),
        max_tokens=args.max_tokens,
        **({} if shapes else {"window_decades": nr.BRACKET_DECADES, "bracket": True}),
    )


def check_allowance(args, units: list[tuple], shapes: bool, why_none: str) -> None:
    """Some candidate (`next_runs.units`, the ones the search is given) under the limits, and the allowance
    buys the cheapest one; ``why_none``: why no pair brackets N_opt's interval, for a table."""
    from analysis.fits.next_runs import cost

    if not units:
        if not shapes:
            raise UserError(f"{args.source!r}: {why_none}")
        raise UserError(f"no ladder shape fits any budget of {args.source!r} under the limits; loosen --max-tokens")
    cheapest = min(units, key=cost)
    if cost(cheapest) > args.flops:
        names = [c.shape if shapes else f"N = {c.n:.3g}" for c in cheapest]
        what = "run" if len(cheapest) == 1 else "pair"
        raise UserError(
            f"--flops {short(args.flops)} is below the cheapest candidate {what} ({' and '.join(names)} at "
            f"{short(cheapest[0].budget)} FLOPs"
            + (", bracketing N_opt" if what == "pair" else "")
            + f"); give at least {short(cost(cheapest))}"
        )


def n_opt_bounds(fit, budgets) -> dict:
    """N_opt's bootstrap interval at each budget (`n_opt_now`); the point N_opt where it has none."""
    out = {}
    for budget in budgets:
        n_opt = n_opt_now(fit.params, fit.bootstrap.samples, budget, fit.bootstrap.level)
        out[budget] = (n_opt.value, n_opt.value) if n_opt.interval is None else tuple(n_opt.interval)
    return out


def table_sizes(table, params: dict, bounds: dict) -> dict[str, float]:
    """Candidate sizes for a table that is not a store: the log grid over its own N and N_opt (and its
    interval, ``bounds``) from its smallest budget to the target, widened by the candidate window (which
    then picks per budget)."""
    from analysis.fits.next_runs import BRACKET_DECADES, grid_sizes, n_opt_at

    n_opt = n_opt_at(params, np.array([min(bounds), max(bounds)]))
    lows, highs = [b[0] for b in bounds.values() if b[0] > 0], [b[1] for b in bounds.values()]
    lo = min(float(table.runs["N"].min()), float(n_opt[0]), *lows) / 10**BRACKET_DECADES
    hi = max(float(table.runs["N"].max()), float(n_opt[1]), *highs) * 10**BRACKET_DECADES
    return grid_sizes(lo, hi)


def table_terms(args, table, plan, params: dict, budgets: list, target: float, shapes: bool, bounds: dict) -> dict:
    """What a table that is not a store adds: how its rows were read, and each run in its own terms
    (tokens per parameter, why it is proposed); the sizes' rule unless they are this project's shapes."""
    from analysis.fits.next_runs import GRID_PER_DECADE

    runs = [
        {
            **run,
            "shape": run["shape"] if shapes else None,
            "reason": reason(c, plan.steps[c], params, budgets, target, bounds.get(c.budget)),
        }
        for run, c in zip(plan_rows(plan), plan.runs)
    ]
    out = {"reading": reading(table, args.rows_are_runs), "runs": runs}
    if not shapes:
        out["sizes"] = f"N on a log grid, {GRID_PER_DECADE} per decade (not a results store: not this project's shapes)"
    return out


def reading(table, rows_are_runs: bool) -> str:
    """How the table's rows were read (`RunTable.reading`): as training curves or as runs."""
    if table.reading is not None:
        return table.reading.note
    return f"each row a run: {len(table.runs)} runs" + (" (--rows-are-runs)" if rows_are_runs else "")


def reason(c, step: tuple, params: dict, budgets: list, target: float, bounds: tuple | None) -> str:
    """Why run ``c`` is proposed: its budget, its place against today's N_opt there (and, bought in a
    pair bracketing N_opt's interval ``bounds`` there, its side of it), and its narrowing."""
    from analysis.fits.next_runs import n_opt_at

    n_opt = float(n_opt_at(params, c.budget))
    if np.isclose(c.budget, target):
        where = "the target budget"
    elif np.isclose(c.budget, budgets).any():
        where = "a budget of the table"
    else:
        where = "a new budget beyond the table's largest"
    order, before, after = step
    pair = ""
    if bounds is not None:
        side = "below" if c.n <= bounds[0] else "above"
        pair = (
            f" ({n_opt:.3g} [{bounds[0]:.3g}, {bounds[1]:.3g}]), the run {side} its interval in a pair bracketing it"
            if bounds[0] < bounds[1]  # else N_opt has no interval there: the pair brackets the point fit's
            else f" ({n_opt:.3g}, no interval), the run {side} it in a pair bracketing it"
        )
    return (
        f"{where}; N = {c.n / n_opt:.2g}x today's N_opt there{pair}; pick {order}: spread of ln N_opt(target) "
        f"{before:.3g} -> {after:.3g}"
    )


def n_opt_now(params: dict, samples: dict, budget: float, level: float, a_why: str | None = None) -> Estimate:
    """N_opt at ``budget`` with its bootstrap interval (`Law.n_opt`: resamples whose A or B overflowed
    have no value, an interval reaching 0 is none; no interval where it is unidentified). With ``a_why``
    (why the fit's exponent a is unidentified, "" if it is not), unidentified wherever `scaling optimal`
    calls it so: also "as the fit's a", or where the interval spans more than `bootstrap.MAX_DECADES`
    (`identified.scale_rule`); without, the interval is kept however wide (the pairs bracket it)."""
    from analysis.fits.identified import scale_rule
    from analysis.fits.optimal import ParametricLaw

    now = ParametricLaw("fit", dict(params), samples, level=level).n_opt(budget)
    if a_why:
        now.unidentified = f"{AS_A}: {a_why}"
    if a_why is not None:
        scale_rule(now)
    return Estimate(now.value, unidentified=now.unidentified) if now.unidentified else now


def base_sweep(source: str) -> dict:
    """The sweep file the source store was run from (its settings carry over), or a bare one."""
    import yaml

    from scaling.sweep_app import SWEEPS_DIR

    manifest = Path(source) / "sweep.json"
    name = json.loads(manifest.read_text()).get("sweep") if manifest.is_file() else None
    path = SWEEPS_DIR / f"{name}.yaml" if name else None
    if path is not None and path.is_file():
        return yaml.safe_load(path.read_text())
    return {
        "defaults": ["config", {"override hydra/sweeper": "scaling"}, "_self_"],
        "sweep": "next",
        "hydra": {"sweeper": {}},
    }


def model_dims(source: str) -> tuple[int, int]:
    """(vocab_size, seq_len) of the store's runs (the ladder's parameter counts depend on them)."""
    import pandas as pd

    table = Path(source) / "table.csv"
    if table.is_file():
        frame = pd.read_csv(table)
        if {"vocab_size", "seq_len"} <= set(frame) and len(frame):
            return int(frame["vocab_size"].mode()[0]), int(frame["seq_len"].mode()[0])
    return 256, 128
