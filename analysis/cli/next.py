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

from analysis.cli.common import add_table_options, column_map, count, parse, positive_float, write_output
from analysis.fits.results import Estimate
from scaling.errors import Parser, UserError

DEFAULT_TARGET_FACTOR = 10.0  # the target budget: 10x the source's largest, unless --target-budget names one
SWEEPER_TOKENS_PER_PARAM = (0.5, 2000.0)  # the sweeper's default window (hydra_plugins/scaling_sweeper)


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
    p.add_argument("--draws", type=count, default=48, metavar="M", help="simulated truths per design (default 48)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the simulations (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_table_options(p)
    return p


def next_main(argv: list[str]) -> int:
    args = parse(next_parser(), argv)
    if isinstance(args, int):
        return args
    from analysis.fits import next_runs as nr
    from analysis.fits.design import DesignSimulator
    from analysis.fits.parametric import fit_parametric
    from analysis.fits.results import no_law
    from analysis.sources.load import is_store, load_runs

    if args.draws < 8:
        raise UserError(f"--draws {args.draws} is too few to measure a spread; give at least 8 (default 48)")
    store = is_store(args.source)
    shapes = store or args.ladder_shapes  # this project's shapes, or sizes in the table's terms
    check_out(args, shapes)
    base = base_sweep(args.source)
    table = load_runs(args.source, column_map(args), args.allow_mixed_corpora)
    fit = fit_parametric(table, resamples=0)  # the point fit places the candidates; the bootstrap waits
    if no_law(fit):  # the runs contradict L = E + A/N^α + B/D^β: it cannot place candidates
        raise UserError(f"approach 3's law of {args.source!r} is unidentified ({no_law(fit)}): it cannot plan runs")
    budgets = sorted(table.runs["budget"].unique().tolist())
    target = args.target_budget or DEFAULT_TARGET_FACTOR * max(budgets)
    rules = candidate_rules(args, table, fit.params, budgets, target, shapes, base)
    done = list(zip(table.runs["N"], table.runs["budget"]))
    pool = nr.candidates(fit.params, done, budgets + nr.next_budgets(budgets, target), rules)
    check_allowance(args, nr.units(pool, rules, nr.point_bounds(fit.params, {c.budget for c in pool})), shapes)
    fit = fit_parametric(table, resamples=max(args.bootstrap, 20), seed=args.seed)
    if fit.bootstrap is None or not fit.bootstrap.samples:
        raise UserError(f"the fit of {args.source!r} has no bootstrap intervals to narrow; fit more runs first")
    bounds = n_opt_bounds(fit, {c.budget for c in pool}) if rules.bracket else {}
    sim = DesignSimulator.from_fit(fit, target, draws=args.draws, seed=args.seed)
    plan = nr.plan_runs(sim, [u for u in nr.units(pool, rules, bounds) if nr.cost(u) <= args.flops], args.flops)
    runs_at_top = int(np.sum(np.isclose(table.runs["budget"], max(budgets))))
    ladder = nr.ladder_extension(fit.params, done, budgets, rules, runs_at_top)
    ladder_ratio = sim.spread([c.point for c in ladder]) / plan.spread_done if ladder else None
    now = n_opt_now(fit.params, fit.bootstrap.samples, target, fit.bootstrap.level)
    result = summary(args, plan, target, now, ladder, ladder_ratio)
    if not store:
        result.update(table_terms(args, table, plan, fit.params, budgets, target, shapes, bounds))
    if args.out is not None:
        data = (
            runs_csv(result["runs"], plan, shapes, store) if is_csv(args.out) else sweep_yaml(base, plan, args, target)
        )
        write_output(args.out, data.encode(), "--out")
    print(json.dumps(result) if args.json else render(result))
    return 0


def is_csv(path: Path) -> bool:
    return path.suffix.lower() == ".csv"


def check_out(args, shapes: bool) -> None:
    """A sweep file of this project's shapes only where they mean something (before any work is done)."""
    if args.out is None or shapes or is_csv(args.out):
        return
    raise UserError(
        f"--out {str(args.out)!r}: {args.source!r} is not a results store, so this project's shapes have nothing "
        "to do with its N and no sweep file is written; give --out RUNS.csv for the proposed (C, N, D), or "
        "--ladder-shapes to plan this project's shapes"
    )


def candidate_rules(args, table, params: dict, budgets: list, target: float, shapes: bool, base: dict):
    """Which runs may be proposed (`next_runs.CandidateRules`): this project's shapes, one at a time,
    within `WINDOW_DECADES` of N_opt; or a table's sizes in pairs bracketing N_opt's interval, within
    `BRACKET_DECADES` of it."""
    from analysis.fits import next_runs as nr

    return nr.CandidateRules(
        shapes=nr.ladder_shapes(table.n_kind, *model_dims(args.source))
        if shapes
        else table_sizes(table, params, min(budgets), target),
        tokens_per_param=tuple(base["hydra"]["sweeper"].get("tokens_per_param", SWEEPER_TOKENS_PER_PARAM)),
        max_tokens=args.max_tokens,
        **({} if shapes else {"window_decades": nr.BRACKET_DECADES, "bracket": True}),
    )


def check_allowance(args, units: list[tuple], shapes: bool) -> None:
    """Some candidate (`next_runs.units`) under the limits, and the allowance buys the cheapest one."""
    from analysis.fits.next_runs import cost

    if not units:
        what = "ladder shape" if shapes else "pair of sizes bracketing N_opt"
        raise UserError(f"no {what} fits any budget of {args.source!r} under the limits; loosen --max-tokens")
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


def table_sizes(table, params: dict, smallest: float, target: float) -> dict[str, float]:
    """Candidate sizes for a table that is not a store: the log grid over its own N and N_opt from its
    smallest budget to the target, widened by the candidate window (which then picks per budget)."""
    from analysis.fits.next_runs import BRACKET_DECADES, grid_sizes, n_opt_at

    n_opt = n_opt_at(params, np.array([smallest, target]))
    lo = min(float(table.runs["N"].min()), float(n_opt[0])) / 10**BRACKET_DECADES
    hi = max(float(table.runs["N"].max()), float(n_opt[1])) * 10**BRACKET_DECADES
    return grid_sizes(lo, hi)


def table_terms(args, table, plan, params: dict, budgets: list, target: float, shapes: bool, bounds: dict) -> dict:
    """What a table that is not a store adds: how its rows were read, and each run in its own terms
    (tokens per parameter, why it is proposed); the sizes' rule unless they are this project's shapes."""
    from analysis.fits.next_runs import GRID_PER_DECADE

    runs = [
        {
            **run,
            "shape": run["shape"] if shapes else None,
            "tokens_per_param": c.tokens_per_param,
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
        pair = f" ({n_opt:.3g} [{bounds[0]:.3g}, {bounds[1]:.3g}]), the run {side} its interval in a pair bracketing it"
    return (
        f"{where}; N = {c.n / n_opt:.2g}x today's N_opt there{pair}; pick {order}: spread of ln N_opt(target) "
        f"{before:.3g} -> {after:.3g}"
    )


def plan_rows(plan) -> list[dict]:
    return [{"shape": c.shape, "budget_flops": c.budget, "params": c.n, "tokens": c.tokens} for c in plan.runs]


def runs_csv(rows: list[dict], plan, shapes: bool, store: bool) -> str:
    """The proposal, one row per run (``rows``: the printed runs of ``plan``), in the table's terms
    (`--out RUNS.csv`): a shape column for this project's shapes, a reason for a table that is not a store."""
    import pandas as pd

    columns = ["shape"] * shapes + ["budget_flops", "params", "tokens", "tokens_per_param"] + ["reason"] * (not store)
    rows = [{**row, "tokens_per_param": c.tokens_per_param} for row, c in zip(rows, plan.runs)]
    return pd.DataFrame(rows, columns=columns).to_csv(index=False)


def n_opt_now(params: dict, samples: dict, target: float, level: float) -> Estimate:
    """N_opt at ``target`` with its bootstrap interval, by `scaling optimal`'s rules (`Law.n_opt`:
    resamples whose A or B overflowed have no value, an interval reaching 0 is none); no interval where
    it is unidentified."""
    from analysis.fits.optimal import ParametricLaw

    now = ParametricLaw("fit", dict(params), samples, level=level).n_opt(target)
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


def summary(args, plan, target: float, now: Estimate, ladder: list, ladder_ratio: float | None) -> dict:
    """The proposal as one JSON-able dict (what `render` prints)."""
    expected = None if now.interval is None else list(_expected(now, plan.ratio))
    return {
        "source": args.source,
        "target_budget": target,
        "flops_allowance": args.flops,
        "n_opt_now": now.as_json(),  # {estimate, interval[, unidentified]}: no interval when unbounded
        "runs": plan_rows(plan),
        "flops": plan.flops,
        "spread_now": plan.spread_done,
        "spread_after": plan.spread,
        "width_ratio": plan.ratio,
        "n_opt_expected_interval": expected,
        "search": plan.rule,
        "ladder_extension": {
            "runs": [{"shape": c.shape, "budget_flops": c.budget} for c in ladder],
            "flops": float(sum(c.budget for c in ladder)),
            "width_ratio": ladder_ratio,
        },
        "draws": args.draws,
        "out": None if args.out is None else str(args.out),
    }


def _expected(now: Estimate, ratio: float) -> tuple[float, float]:
    from analysis.fits.next_runs import expected_interval

    return expected_interval(now.value, now.lower, now.upper, ratio)


def render(r: dict) -> str:
    now = r["n_opt_now"]
    shown = f"{now['estimate']:.4g}" + ("" if now["interval"] is None else " [{:.4g}, {:.4g}]".format(*now["interval"]))
    shown += " parameters" + (f" (no interval: {now['unidentified']})" if now.get("unidentified") else "")
    lines = [
        f"next runs for {r['source']}: at most {r['flops_allowance']:.4g} FLOPs, to narrow N_opt at "
        f"{r['target_budget']:.4g} FLOPs",
    ]
    lines += [f"  reading              {r['reading']}"] if "reading" in r else []
    lines += [f"  proposed sizes       {r['sizes']}"] if "sizes" in r else []
    lines.append(f"  N_opt now            {shown}")
    if not r["runs"]:
        lines.append("  no affordable run narrows the interval (simulated): buy nothing, or allow more FLOPs")
    for run in r["runs"]:
        lines += run_lines(run)
    lines.append(f"  cost                 {r['flops']:.4g} FLOPs in {runs(len(r['runs']))} (search: {r['search']})")
    lines.append(
        f"  expected width       x{r['width_ratio']:.3f} of today's (log scale; spread of ln N_opt "
        f"{r['spread_now']:.3g} -> {r['spread_after']:.3g}, {r['draws']} simulated refits)"
    )
    if r["n_opt_expected_interval"] is not None:
        lines.append("  expected interval    [{:.4g}, {:.4g}]".format(*r["n_opt_expected_interval"]))
    ladder = r["ladder_extension"]
    if ladder["width_ratio"] is not None:
        lines.append(
            f"  for comparison       one more ladder budget ({runs(len(ladder['runs']))} at "
            f"{ladder['runs'][0]['budget_flops']:.3g} FLOPs, {ladder['flops']:.4g} FLOPs): x{ladder['width_ratio']:.3f}"
        )
    if r["out"] and is_csv(Path(r["out"])):
        lines.append(f"  runs file            {r['out']} (one row per run)")
    elif r["out"]:
        lines.append(f"  sweep file           {r['out']} (launch: scaling sweep {r['out']})")
    return "\n".join(lines)


def run_lines(run: dict) -> list[str]:
    """One proposed run: a store's shape line, or (C, N, D) in the table's terms, with its reason."""
    if run["shape"] is None:
        lines = [
            f"  + C = {run['budget_flops']:<8.3g} FLOPs  N = {run['params']:.4g}, D = {run['tokens']:.4g} tokens "
            f"({run['tokens_per_param']:.3g} per parameter)"
        ]
    else:
        lines = [
            f"  + {run['shape']:<6} at {run['budget_flops']:<8.3g} FLOPs  N = {run['params']:.4g}, "
            f"D = {run['tokens']:.4g} tokens"
        ]
    return lines + ([f"      why: {run['reason']}"] if "reason" in run else [])


def sweep_yaml(base: dict, plan, args, target: float) -> str:
    """The source's sweep file with its grid replaced by the proposal (budget -> shapes)."""
    import yaml

    grid: dict[str, list[str]] = {}
    for c in plan.runs:
        grid.setdefault(short(c.budget), []).append(c.shape)
    sweep = dict(base)
    sweep["hydra"] = {**base.get("hydra", {}), "sweeper": {**base.get("hydra", {}).get("sweeper", {}), "grid": grid}}
    header = (
        f"# written by `scaling next {args.source} --flops {short(args.flops)}`: {runs(len(plan.runs))}, {plan.flops:.4g} "
        f"FLOPs,\n# chosen to narrow N_opt at {target:.4g} FLOPs (expected width x{plan.ratio:.3f} of today's).\n"
        f"# The same sweep name and settings as the source, so the runs join its store: scaling sweep FILE\n"
    )
    return header + yaml.safe_dump(sweep, sort_keys=False)


def short(x: float) -> str:
    """3e12, not 3e+12 (as the sweep files write budgets); 1e9, not 1e+09."""
    text = f"{x:.3g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def runs(k: int) -> str:
    return f"{k} run" + ("" if k == 1 else "s")
