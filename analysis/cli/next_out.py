"""What `scaling next` writes (`analysis.cli.next`): the proposal as one JSON-able dict, its text, the
sweep file of this project's shapes and the runs CSV in the table's own terms."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.fits.results import Estimate


def summary(args, plan, target: float, now, ladder: list, outlook, per, window: dict) -> dict:
    """The proposal as one JSON-able dict (what `render` prints). ``outlook``: what can be said of it
    (`next_runs.Outlook`: the fit's own bootstrap spread, why no width ratio can be known, the simulated
    refits of the table with the plan's runs and with the ladder's). ``per``: the runs each point costs
    (`next_limits.PerPoint`: K for a hyperparameter sweep's points); ``window``: the candidates' tokens per
    parameter (`next_limits.Window.as_json`)."""
    from analysis.fits.next_runs import NOISE_Z

    known = outlook.known
    expected = outlook.plan.as_json() if known else None
    return {
        "source": args.source,
        "target_budget": target,
        "flops_allowance": args.flops,
        "n_opt_now": now.as_json(),  # {estimate, interval[, unidentified]}: no interval when unbounded
        "runs": plan_rows(plan),
        "flops": plan.flops * per.runs,  # every point's K runs (`next_limits.per_point`)
        "runs_per_point": per.runs,
        "per_point": per.note or None,  # why a point is K runs, None for 1
        "tokens_per_param_window": window,
        "spread_now": plan.spread_done,
        "spread_fit_bootstrap": outlook.fit_spread,  # what spread_now stands for
        "spread_after": plan.spread,
        "width_ratio": expected["median"] if known else None,  # the median simulated refit's width / today's
        "width_ratio_refits": expected,  # {median, range, range_percentiles, narrower, refits}
        "why_unknown": outlook.why_unknown,  # why there is no width ratio ("" when there is)
        "n_opt_expected_interval": _expected(now, expected["median"]) if known and now.interval else None,
        "search": plan.rule,
        "noise_z": NOISE_Z,  # each pick narrows the spread by more than this many standard errors of simulation noise
        "ladder_extension": {
            "runs": [{"shape": c.shape, "budget_flops": c.budget} for c in ladder],
            "flops": float(sum(c.budget for c in ladder)) * per.runs,
            "width_ratio": outlook.ladder.as_json()["median"] if outlook.ladder else None,  # null, not Infinity
            "width_ratio_refits": outlook.ladder.as_json() if outlook.ladder else None,
        },
        "draws": args.draws,
        "out": None if args.out is None else str(args.out),
    }


def _expected(now: Estimate, ratio: float | None) -> list[float] | None:
    from analysis.fits.next_runs import expected_interval

    return None if ratio is None else list(expected_interval(now.value, now.lower, now.upper, ratio))


def render(r: dict) -> str:
    lines = [
        f"next runs for {r['source']}: at most {r['flops_allowance']:.4g} FLOPs, to narrow N_opt at "
        f"{r['target_budget']:.4g} FLOPs",
    ]
    lines += [f"  reading              {r['reading']}"] if "reading" in r else []
    lines += [f"  proposed sizes       {r['sizes']}"] if "sizes" in r else []
    lines += [f"  outliers             {r['outliers']}"] if r.get("outliers") else []
    lines += [f"  target               {r['target_below_range']}"] if r.get("target_below_range") else []
    lines.append(f"  N_opt now            {n_opt_shown(r['n_opt_now'])}")
    lines.append(f"  tokens per param     {window_line(r['tokens_per_param_window'])}")
    lines += [f"  runs per point       {r['per_point']}"] if r["per_point"] else []
    if not r["runs"]:
        lines.append(
            f"  no affordable run narrows the simulated spread by more than {r['noise_z']:g} standard errors of "
            "its simulation noise: buy nothing, allow more FLOPs, or raise --draws"
            + (
                "; or raise --dn-reach (the tokens-per-parameter window above)"
                if binds(r["tokens_per_param_window"])
                else ""
            )
        )
    for run in r["runs"]:
        lines += run_lines(run)
    from analysis.fits.refits import SKIPPED

    unknown = r["why_unknown"] and r["why_unknown"] != SKIPPED  # --refits 0: the spread stands for today's interval
    spread = ", a spread that stands for no interval here (expected width)" if unknown else ""
    lines.append(  # user33: "each pick narrows" beside "a narrowing of it cannot be known", unexplained
        f"  cost                 {r['flops']:.4g} FLOPs in {counted(len(r['runs']), r['runs_per_point'])} (search: {r['search']}; each pick "
        f"narrows the simulated spread of ln N_opt by over {r['noise_z']:g} standard errors of simulation noise{spread})"
    )
    lines += width_lines(r)
    ladder = r["ladder_extension"]
    if ladder["width_ratio_refits"] is not None:
        lines.append(
            f"  for comparison       one more ladder budget ({counted(len(ladder['runs']), r['runs_per_point'])} at "
            f"{ladder['runs'][0]['budget_flops']:.3g} FLOPs, {ladder['flops']:.4g} FLOPs): "
            f"{ratio_range(ladder['width_ratio_refits'])}"
        )
    if r["out"] and is_csv(Path(r["out"])):
        row = "run" if r["runs_per_point"] == 1 else f"point, its {r['runs_per_point']} runs to sweep as the table did"
        lines.append(f"  runs file            {r['out']} (one row per {row})")
    elif r["out"]:
        launch = f"launch: scaling sweep {r['out']}" if r["runs"] else "no runs: nothing to launch"
        lines.append(f"  sweep file           {r['out']} ({launch})")
    return "\n".join(lines)


def window_line(w: dict) -> str:
    """The window as the text says it (``w``: `next_limits.Window.as_json`)."""
    (lo, hi), (own_lo, own_hi), (sweep_lo, sweep_hi) = w["allowed"], w["table"], w["sweep"]
    return (
        f"runs proposed at {lo:.3g} to {hi:.3g}: the table's own {own_lo:.3g} to {own_hi:.3g} widened {w['reach']:g}x "
        f"either way, inside the sweep's {sweep_lo:g} to {sweep_hi:g} (the law is not fitted beyond its runs)"
    )


def binds(w: dict) -> bool:
    """Whether the table's own range widened (`next_limits.Window`) narrows the sweep's window."""
    return w["allowed"][0] > w["sweep"][0] or w["allowed"][1] < w["sweep"][1]


def width_lines(r: dict) -> list[str]:
    """The expected width (or why unknown), the simulated spread behind the picks, the expected interval."""
    if r["why_unknown"]:
        lines = [f"  expected width       unknown: {r['why_unknown']}"]
    else:
        lines = [
            f"  expected width       {expected_width(r['width_ratio_refits'])}",
            f"  simulated spread     of ln N_opt {r['spread_now']:.3g} -> {r['spread_after']:.3g} in {r['draws']} "
            f"simulated tables (the fit's own bootstrap: {r['spread_fit_bootstrap']:.3g}): it ranks the picks; the "
            "expected width is from refits of this table",
        ]
    if r["n_opt_expected_interval"] is not None and r["runs"]:  # no runs: today's interval, said above (review22)
        lines.append(
            "  expected interval    [{:.4g}, {:.4g}] (today's, its log-width times the median ratio)".format(
                *r["n_opt_expected_interval"]
            )
        )
    return lines


def ratio_text(x: float | None) -> str:
    return "x>100" if x is None or x > 100 else f"x{x:.2f}"


def ratio_range(refits: dict) -> str:
    """A width ratio as the simulated refits give it: the median, and the range of the middle of them."""
    if not refits["refits"]:
        return "x1 (no runs)"
    low, high = refits["range"]
    share = round(refits["range_percentiles"][1] - refits["range_percentiles"][0])
    return f"{ratio_text(refits['median'])} ({ratio_text(low)} to {ratio_text(high)} in {share}% of refits)"


def expected_width(refits: dict) -> str:
    """The expected-width line: the median simulated refit's width over today's, the range a single refit
    falls in, how often it narrows, and where a single refit may well widen it or no narrowing is expected,
    that said (`analysis.fits.refits`)."""
    if not refits["refits"]:
        return "x1 of today's (no runs)"
    said = (
        f"{ratio_range(refits)} of today's (log scale; the median of {refits['refits']} simulated refits of this "
        f"table with these runs, as `scaling fit` refits it; narrower in {refits['narrower']:.0%})"
    )
    median, high = refits["median"], refits["range"][1]
    if median is None or median >= 1:
        return f"{said}: no narrowing to expect"
    if high is None or high >= 1:
        return f"{said}: a single refit may widen it"
    return said


def n_opt_shown(now: dict) -> str:
    """Today's N_opt: its value and interval, or unidentified (why), as `scaling optimal` says it."""
    if now.get("unidentified"):
        return f"unidentified ({now['unidentified']}); the point fit's {now['estimate']:.4g} places the candidates"
    interval = "" if now["interval"] is None else " [{:.4g}, {:.4g}]".format(*now["interval"])
    return f"{now['estimate']:.4g}{interval} parameters"


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


def table_terms(args, table, plan, params: dict, where: tuple, shapes: bool, bounds: dict, why_unknown: str) -> dict:
    """What a table that is not a store adds: how its rows were read, and each run in its own terms
    (tokens per parameter, why it is proposed: `reason`, at ``where`` = (the table's budgets, the target));
    the sizes' rule unless they are this project's shapes."""
    from analysis.fits.next_runs import GRID_PER_DECADE

    runs = [
        {
            **run,
            "shape": run["shape"] if shapes else None,
            "reason": reason(c, plan.steps[c], params, where, bounds.get(c.budget), why_unknown),
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
    if table.hparams is not None:  # user30: an 84-row LR sweep read "each row a run: 12 runs"
        return table.hparams.note
    return f"each row a run: {len(table.runs)} runs" + (" (--rows-are-runs)" if rows_are_runs else "")


def reason(c, step: tuple, params: dict, where: tuple, bounds: tuple | None, why_unknown: str) -> str:
    """Why run ``c`` is proposed: its budget (against ``where`` = (the table's budgets, the target)), its place
    against today's N_opt there (and, bought in a pair bracketing N_opt's interval ``bounds`` there, its side of
    it), and its pick's narrowing of the simulated spread; where no narrowing can be known (``why_unknown``,
    `next_runs.unknown_ratio`), why, and no numbers."""
    from analysis.fits.next_runs import n_opt_at

    budgets, target = where
    n_opt = float(n_opt_at(params, c.budget))
    if np.isclose(c.budget, target):
        at = "the target budget"
    elif np.isclose(c.budget, budgets).any():
        at = "a budget of the table"
    else:
        at = "a new budget beyond the table's largest"
    order, before, after = step
    pair = ""
    if bounds is not None:
        side = "below" if c.n <= bounds[0] else "above"
        pair = (
            f" ({n_opt:.3g} [{bounds[0]:.3g}, {bounds[1]:.3g}]), the run {side} its interval in a pair bracketing it"
            if bounds[0] < bounds[1]  # else N_opt has no interval there: the pair brackets the point fit's
            else f" ({n_opt:.3g}, no interval), the run {side} it in a pair bracketing it"
        )
    narrowing = f"; {why_unknown}" if why_unknown else f": spread of ln N_opt(target) {before:.3g} -> {after:.3g}"
    return f"{at}; N = {c.n / n_opt:.2g}x today's N_opt there{pair}; pick {order}{narrowing}"


def plan_rows(plan) -> list[dict]:
    return [
        {
            "shape": c.shape,
            "budget_flops": float(f"{c.budget:.12g}"),  # a clustered budget's 9.999999999999986e+17 is 1e18 (user17)
            "params": c.n,
            "tokens": c.tokens,
            "tokens_per_param": c.tokens_per_param,
        }
        for c in plan.runs
    ]


def runs_csv(rows: list[dict], shapes: bool, store: bool, per: int = 1) -> str:
    """The proposal, one row per point (``rows``: the printed runs), in the table's terms (`--out RUNS.csv`): a
    shape column for this project's shapes, a reason for a table that is not a store, and where a point is
    ``per`` > 1 runs (a hyperparameter sweep's settings, `next_limits.per_point`), runs_per_point."""
    import pandas as pd

    columns = ["shape"] * shapes + ["budget_flops", "params", "tokens", "tokens_per_param"] + ["reason"] * (not store)
    frame = pd.DataFrame(rows, columns=columns)
    return (frame.assign(runs_per_point=per) if per > 1 else frame).to_csv(index=False)


BARE = "next"  # the sweep name of a file `next` writes without the source's sweep file (`next.base_sweep`)


def short(x: float) -> str:
    """3e12, not 3e+12 (as the sweep files write budgets); 1e9, not 1e+09."""
    text = f"{x:.3g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def runs(k: int) -> str:
    return f"{k} run" + ("" if k == 1 else "s")


def counted(points: int, per: int) -> str:
    """``points`` proposed (N, budget) points of ``per`` runs each, as the cost says them: "3 runs", or
    "3 points of 5 runs each (15 runs)"."""
    if per == 1:
        return runs(points)
    return f"{points} point{'' if points == 1 else 's'} of {per} runs each ({runs(points * per)})"


def is_csv(path: Path) -> bool:
    return path.suffix.lower() == ".csv"
