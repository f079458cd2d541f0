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

from analysis.cli.argtypes import count, positive_float
from analysis.cli.common import FIT_RESAMPLES, add_table_options, column_map, parse, tell, write_output
from analysis.cli.next_limits import (
    add_reach_option,
    check_allowance,
    check_limits,
    per_point,
    tokens_window,
    window_of,
)
from analysis.cli.next_out import (
    BARE,
    is_csv,
    ratio_range,
    render,
    runs_csv,
    summary,
    table_terms,
)
from analysis.cli.next_settings import base_sweep
from analysis.cli.next_sweep import sweep_yaml
from analysis.describe.outliers import flagged_line
from analysis.fits.bootstrap import AS_A
from analysis.fits.identified import below_range_note
from analysis.fits.results import Estimate
from scaling.errors import Parser, UserError
from scaling.flops import smallest_6nd

MIN_BOOTSTRAP = 20  # resamples of the fit, at least: the simulated truths and N_opt's interval now
DEFAULT_TARGET_FACTOR = 10.0  # the target: 10x the largest budget (`next_runs.nominal`), unless --target-budget
# Simulated truths per design: at 48 a pair's narrowing of a 4-budget ladder's spread (0.136 -> 0.11) was
# within 2 standard errors of the simulation's noise, so nothing could be picked (`next_runs.NOISE_Z`).
DEFAULT_DRAWS = 192
REFITS = 32  # simulated refits of the table with the runs behind the expected width (`analysis.fits.refits`)


def next_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="scaling next",
        description="Propose the runs (shape, budget), costing at most X FLOPs in all, that most narrow the "
        "interval of N_opt at a target budget: approach 3 refitted on results simulated from the current "
        "fit's bootstrap; the expected width is the median (and the range) of refits of the table with the runs "
        "simulated. Writes a sweep file ready to launch.",
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
    p.add_argument(
        "--bootstrap", type=count, default=200, metavar="K", help="resamples of the fit, at least 20 (default 200)"
    )
    p.add_argument(
        "--draws",
        type=count,
        default=DEFAULT_DRAWS,
        metavar="M",
        help=f"simulated truths per design (default {DEFAULT_DRAWS}; fewer resolve only larger narrowings)",
    )
    refits = (
        f"simulated refits of the table with the proposed runs behind the expected width (default {REFITS}; 0: none)"
    )
    p.add_argument("--refits", type=count, default=REFITS, metavar="R", help=refits)
    p.add_argument("--seed", type=count, default=0, help="seed of the bootstrap and the simulations (default 0)")
    p.add_argument(
        "--exclude-outliers",
        action="store_true",
        help="plan from a fit without the runs the outlier rule flags (as `scaling fit --exclude-outliers`); "
        "without it they are kept, and a line says how many were flagged, by rule",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    add_reach_option(p)
    add_table_options(p)
    return p


def next_main(argv: list[str]) -> int:
    args = parse(next_parser(), argv)
    if isinstance(args, int):
        return args
    from analysis.fits import next_runs as nr
    from analysis.fits import refits
    from analysis.fits.design import DesignSimulator, bootstrap_spread
    from analysis.sources.load import is_store, load_runs

    check_counts(args)
    store = is_store(args.source)
    shapes = store or args.ladder_shapes  # this project's shapes, or sizes in the table's terms
    check_out(args, shapes)
    base = base_sweep(args.source, BARE)
    loaded = load_runs(args.source, column_map(args), args.allow_mixed_corpora)
    tell(loaded.lines()[0], "warning")
    per, window = per_point(loaded), window_of(loaded, tokens_window(base), args.dn_reach)  # K runs a point; D/N
    check_limits(args, float(loaded.budget_compute.min()), shapes, window.allowed, per)
    flagged = law_fit(args, loaded)
    table, fit = flagged.table, flagged.fit
    budgets = table.budget_compute.tolist()  # where the fit places them: its runs' 6·N·D (review17: labels 1.3x low)
    target = args.target_budget or DEFAULT_TARGET_FACTOR * nr.nominal(max(budgets))
    require_intervals(fit, args.source)
    every = budgets + nr.next_budgets(budgets, target)
    law = fit_law(fit)
    bounds = {} if shapes else n_opt_bounds(law, every)  # a table's pairs bracket N_opt's interval there
    rules = candidate_rules(args, table, fit.params, bounds, shapes, window.allowed)
    done = list(zip(table.runs["N"], table.runs["budget"].map(dict(zip(table.budgets, budgets)))))
    pool = nr.candidates(fit.params, done, every, rules, bounds)
    buyable = nr.units(pool, rules, bounds)
    check_allowance(
        args, buyable, shapes, bounds, rules, (per, window), lambda: nr.no_shape(fit.params, done, every, rules)
    )
    sim = DesignSimulator.from_fit(fit, target, flagged.noise_scale, draws=args.draws, seed=args.seed)
    allowance = args.flops / per.runs  # each point bought costs K runs at its budget
    plan = nr.plan_runs(sim, [u for u in buyable if nr.cost(u) <= allowance * (1 + 1e-9)], allowance)
    runs_at_top = int(np.sum(table.runs["budget"] == table.budgets[-1]))
    ladder = nr.ladder_extension(fit.params, done, budgets, rules, runs_at_top)
    now = n_opt_now(law, target)
    outlook = nr.outlook(plan, ladder, now, bootstrap_spread(fit, target), refits_of(args, flagged, target))
    why = "" if outlook.why_unknown == refits.SKIPPED else outlook.why_unknown  # skipped: each pick's spread holds
    result = summary(args, plan, target, now, ladder, outlook, per, window.as_json())
    result["target_below_range"] = below_range_note(target, law.fitted_compute_min) or None
    result["outliers"] = (
        flagged_line(flagged.outliers, args.exclude_outliers, by_rule=True) if flagged.outliers else None
    )
    if not store:
        result.update(table_terms(args, table, plan, fit.params, (budgets, target), shapes, bounds, why))
    if args.out is not None:
        data = (
            runs_csv(result["runs"], shapes, store, per.runs)
            if is_csv(args.out)
            else sweep_yaml(base, plan, args, (target, width_said(result)), per)
        )
        write_output(args.out, data.encode(), "--out")
    print(json.dumps(result) if args.json else render(result))
    return 0


def check_counts(args) -> None:
    """--draws, --refits and --bootstrap: enough to measure what each is for."""
    if args.draws < 8:
        raise UserError(
            f"--draws {args.draws} is too few to measure a spread; give at least 8 (default {DEFAULT_DRAWS})"
        )
    if 0 < args.refits < 8:
        raise UserError(
            f"--refits {args.refits} is too few to give a range; give at least 8 (default {REFITS}), or 0 to skip them"
        )
    if args.bootstrap < MIN_BOOTSTRAP:  # it took 20 where given fewer, 0 included, and did not say so
        raise UserError(
            f"--bootstrap {args.bootstrap} is too few: the fit's resamples are the truths the simulation draws and "
            f"N_opt's interval now; give at least {MIN_BOOTSTRAP} (default 200)"
        )


def width_said(result: dict) -> str:
    """The expected width as the sweep file's header says it: the refits' median and range, or why unknown."""
    if result["why_unknown"]:
        return f"unknown: {result['why_unknown']}"
    return f"{ratio_range(result['width_ratio_refits'])} of today's"


def refits_of(args, flagged, target: float):
    """Designs -> their `refits.Refits`: ``flagged``'s table with each design's runs simulated and refitted as
    `scaling fit --seed S` refits it (its `FIT_RESAMPLES` resamples, or next's --bootstrap if more; S: next's
    --seed), N_opt's log-width at ``target`` after over today's, fitted alike (`refits.refit_ratios`)."""
    from analysis.fits.parametric import fit_parametric
    from analysis.fits.refits import SKIPPED, NoRatio, refit_ratios

    resamples = max(args.bootstrap, FIT_RESAMPLES)  # at 200 a width's own Monte Carlo noise was 8-11%, at 1000 4-6%

    def refit(table):
        return fit_parametric(table, resamples=resamples, seed=args.seed)

    def refits(designs):
        if not args.refits:
            raise NoRatio(SKIPPED)
        today = flagged.fit if resamples == args.bootstrap else refit(flagged.table)

        def width(fit):
            return n_opt_log_width(fit, target)

        return refit_ratios(flagged.table, today, designs, flagged.noise_scale, refit, width, args.refits, args.seed)

    return refits


def n_opt_log_width(fit, target: float) -> float:
    """ln(upper/lower) of N_opt's bootstrap interval at ``target`` under approach 3's ``fit`` (`Law.n_opt`), inf
    where it has none or it reaches 0: the width `scaling next`'s expected width is a ratio of."""
    n = fit_law(fit).n_opt(target)
    return float(np.log(n.upper / n.lower)) if n.interval is not None and n.lower > 0 else np.inf


def law_fit(args, table):
    """`outliers.fit_flagged`'s answer: the table to plan from, approach 3's fit of it with its bootstrap
    (which places the candidates and brackets N_opt), the runs the outlier rule flags (as `scaling fit`
    flags them: kept, or left out with --exclude-outliers) and the noise of the runs its residual test
    measured (the simulation's σ)."""
    from analysis.fits.outliers import fit_flagged
    from analysis.fits.parametric import fit_parametric
    from analysis.fits.parametric_form import collinear_reason
    from analysis.fits.results import no_law

    def fit(runs):
        return fit_parametric(runs, resamples=args.bootstrap, seed=args.seed)

    flagged = fit_flagged(table, fit, args.exclude_outliers)
    if no_law(flagged.fit):  # the runs contradict L = E + A/N^α + B/D^β: it cannot place candidates
        raise UserError(
            f"approach 3's law of {args.source!r} is unidentified ({no_law(flagged.fit)}): it cannot plan runs"
        )
    collinear = collinear_reason(np.log(flagged.fit.n), np.log(flagged.fit.d), np.asarray(flagged.fit.residuals))
    if collinear:  # its N_opt is the law's split of terms the runs cannot tell apart: no size brackets anything
        raise UserError(f"approach 3 cannot plan runs from {args.source!r}: {collinear}")
    if flagged.noise_scale is None:  # approach 3 fitted with the runs, not without them (--exclude-outliers)
        raise UserError(f"{args.source!r}: {'; '.join(flagged.notes)}: no noise scale to simulate runs with")
    return flagged


def require_intervals(fit, source: str) -> None:
    """UserError when approach 3's fit has no bootstrap samples to narrow, saying how many resamples failed."""
    boot = fit.bootstrap
    if boot is None or not boot.samples:
        why = f" ({boot.failed} of {boot.resamples} resamples could not be refitted)" if boot and boot.failed else ""
        raise UserError(f"the fit of {source!r} has no bootstrap intervals to narrow{why}; fit more runs first")


def check_out(args, shapes: bool) -> None:
    """A sweep file of this project's shapes only where they mean something (before any work is done)."""
    if args.out is None or shapes or is_csv(args.out):
        return
    raise UserError(
        f"--out {str(args.out)!r}: {args.source!r} is not a results store, so this project's shapes have nothing "
        "to do with its N and no sweep file is written; give --out RUNS.csv for the proposed (C, N, D), or "
        "--ladder-shapes to plan this project's shapes"
    )


def candidate_rules(args, table, params: dict, bounds: dict, shapes: bool, window: tuple[float, float]):
    """Which runs may be proposed (`next_runs.CandidateRules`): this project's shapes, one at a time,
    within `WINDOW_DECADES` of N_opt; or a table's sizes in pairs bracketing N_opt's interval ``bounds``,
    within `BRACKET_DECADES` of N_opt or a grid step of the interval; inside the tokens-per-parameter ``window``
    (`next_limits.window_of`) and --max-tokens either way."""
    from analysis.fits import next_runs as nr

    return nr.CandidateRules(
        shapes=nr.ladder_shapes(table.n_kind, *model_dims(args.source))
        if shapes
        else table_sizes(table, params, bounds),
        tokens_per_param=window,
        max_tokens=args.max_tokens,
        **({} if shapes else {"window_decades": nr.BRACKET_DECADES, "bracket": True}),
    )


def n_opt_bounds(law, budgets) -> dict:
    """N_opt's bootstrap interval at each budget (`Law.n_opt`), as `next_runs.Bounds`: however wide, the pairs
    bracket it; one reaching 0 is unbounded below, (0, upper), and no pair brackets it. Where there is none
    (too many resamples without a value, or overflowed ones), the point N_opt twice: the pairs bracket it."""
    out = {}
    for budget in budgets:
        n_opt = law.n_opt(budget)
        out[budget] = (n_opt.value, n_opt.value) if n_opt.interval is None else (max(n_opt.lower, 0.0), n_opt.upper)
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


def n_opt_now(law, budget: float) -> Estimate:
    """N_opt at ``budget`` as `scaling optimal` rules it (``law``'s allocation, `fit_law`: unidentified as the
    fit's a, where its bootstrap interval reaches 0 or spans more than `bootstrap.MAX_DECADES`, or where too
    many resamples have no value), with no interval where it is unidentified; "as the fit's a" says why a is."""
    n = law.allocate(budget).n
    if not n.unidentified:
        return n
    return Estimate(n.value, unidentified=f"{AS_A}: {law.unidentified}" if n.unidentified == AS_A else n.unidentified)


def fit_law(fit):
    """Approach 3's fit as `scaling optimal`'s allocation law (`optimal.ParametricLaw`): N_opt's intervals
    from its bootstrap, and every N_opt unidentified with the fit's exponent a where a is."""
    from analysis.fits.optimal import ParametricLaw

    boot = fit.bootstrap
    return ParametricLaw(
        "fit",
        dict(fit.params),
        boot.samples,
        level=boot.level,
        unidentified=fit.estimates["a"].unidentified,
        fitted_compute_min=smallest_6nd(fit.n, fit.d),  # as `saved_law.law_from_fit` reads approach 3's range
        fitted_compute_max=fit.fitted_compute_max,
    )


def model_dims(source: str) -> tuple[int, int, str, bool]:
    """(vocab_size, seq_len, model.arch, model.tied_head) of the store's runs (the ladder's parameter counts depend on
    them; user26: a llama store's candidates were counted as GPT-2's)."""
    import pandas as pd

    from analysis.sources.settings import run_configs

    configs = list(run_configs(source).values())
    arch, tied = (
        (configs[0].get("model.arch", "gpt2"), configs[0].get("model.tied_head", True)) if configs else ("gpt2", True)
    )
    table = Path(source) / "table.csv"
    if table.is_file():
        frame = pd.read_csv(table)
        if {"vocab_size", "seq_len"} <= set(frame) and len(frame):
            return int(frame["vocab_size"].mode()[0]), int(frame["seq_len"].mode()[0]), arch, tied
    return 256, 128, arch, tied
