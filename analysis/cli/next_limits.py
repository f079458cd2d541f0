"""What `scaling next` may propose and what a proposal costs (`analysis.cli.next`).

Tokens per parameter: a candidate lies inside the sweep's window (the source's sweep file's, else the sweeper's
default) and within the table's own runs' D/N widened `DN_REACH` either way. Approach 3's law is fitted only where
the table has runs; a run far beyond them (user: 1.67e3 tokens per parameter proposed on a table whose runs span
1.6 to 635, inside the sweeper's 0.5-2000) tests the split of A/N^α and B/D^β where it was never fitted. A table whose N_opt interval is wider than its runs
reach may then have no pair that brackets it (`tests/test_next_wide.py`: 1.7 and 774 per parameter were proposed
on runs of 4.1 to 316); the error says so, and --dn-reach F lets runs lie further out, the user's call.

Runs per point: a table that is a hyperparameter sweep (`RunTable.hparams`: several runs per (N, budget) at
different learning rates, reduced to the best) gets its points by sweeping K settings each, so a proposed point
reproducing its design costs K runs (user: 5 LRs per point, the plan cost 3.7x the allowance). `PerPoint` counts
K as the table swept it; the plan is bought within --flops / K.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.cli.argtypes import positive_float
from analysis.cli.next_out import short
from scaling.errors import UserError

# A candidate's tokens per parameter lie within the table's own runs' range widened this factor either way: less
# than one step of the size grid at a fixed budget (10^(1/6) in N is 10^(1/3) = 2.15x in D/N), so a pair may
# bracket N_opt just past the table's edge, and no run tests the law where the table has no run near it.
DN_REACH = 2.0


def add_reach_option(p) -> None:
    """--dn-reach F: `DN_REACH`, the user's (at least 1)."""

    def reach(text: str) -> float:
        import argparse

        value = positive_float("a factor of at least 1, e.g. 3")(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is below 1; give a factor of at least 1 (1: the runs' own)")
        return value

    p.add_argument(
        "--dn-reach",
        type=reach,
        default=DN_REACH,
        metavar="F",
        help=f"propose runs within the source's own tokens per parameter (D/N) widened this factor either way "
        f"(default {DN_REACH:g}): the law is not fitted beyond its runs",
    )


@dataclass(frozen=True)
class PerPoint:
    """The runs a proposed (N, budget) point costs: 1, or the K settings a hyperparameter sweep ran per point."""

    runs: int = 1
    note: str = ""  # "each point is 5 runs: the table swept 5 learning rates per point" ("" for 1)
    swept: tuple[str, ...] = ()  # the table's swept columns (lr, batch_size, ...)


def per_point(table) -> PerPoint:
    """K, the settings of the swept columns the table ran per (N, budget) point (the median over its points,
    rounded up), where it is a hyperparameter sweep (`RunTable.hparams`); 1 otherwise."""
    sweep = table.hparams
    if sweep is None or not sweep.swept:
        return PerPoint()
    keys = ["N", "budget"]
    counts = sweep.rows.drop_duplicates([*keys, *sweep.swept]).groupby(keys).size().to_numpy()
    k = int(np.ceil(np.median(counts)))
    if k < 2:
        return PerPoint()
    what = "learning rates" if list(sweep.swept) == ["lr"] else f"settings of {', '.join(sweep.swept)}"
    spread = "" if counts.min() == counts.max() else f" (the median: {counts.min()} to {counts.max()} at its points)"
    return PerPoint(k, f"each point is {k} runs: the table swept {k} {what} per point{spread}", tuple(sweep.swept))


@dataclass(frozen=True)
class Window:
    """The tokens-per-parameter window of every candidate: ``allowed``, the ``sweep``'s window narrowed to the
    ``table``'s own range of D/N widened `DN_REACH` either way."""

    allowed: tuple[float, float]
    table: tuple[float, float]
    sweep: tuple[float, float]
    reach: float = DN_REACH

    def as_json(self) -> dict:
        return {
            "allowed": list(self.allowed),
            "table": list(self.table),
            "sweep": list(self.sweep),
            "reach": self.reach,
        }

    def said(self) -> str:
        """Why a candidate outside it is none, as an error says it."""
        return (
            f"runs are proposed within the source's own {self.table[0]:.3g} to {self.table[1]:.3g} tokens per "
            f"parameter widened {self.reach:g}x either way (--dn-reach; the law is not fitted beyond its runs): a "
            "larger --dn-reach lets them lie further out"
        )


def window_of(table, sweep: tuple[float, float], reach: float = DN_REACH) -> Window:
    """`Window` of ``table``'s runs (N, D), their range widened ``reach`` either way, inside ``sweep``'s window;
    where the two do not meet, the table's own range widened (the law is fitted there, not in the window)."""
    ratio = (table.runs["D"] / table.runs["N"]).to_numpy(dtype=float)
    own = (float(ratio.min()), float(ratio.max()))
    allowed = (max(sweep[0], own[0] / reach), min(sweep[1], own[1] * reach))
    if allowed[0] > allowed[1]:
        allowed = (own[0] / reach, own[1] * reach)
    return Window(allowed, own, tuple(sweep), reach)


def tokens_window(base: dict) -> tuple[float, float]:
    """The sweep's tokens-per-parameter window: the source sweep file's (``base``), else the sweeper's."""
    from scaling.flops import TOKENS_PER_PARAM

    return tuple(base["hydra"]["sweeper"].get("tokens_per_param", TOKENS_PER_PARAM))


def check_limits(args, smallest: float, shapes: bool, window: tuple[float, float], per: PerPoint) -> None:
    """--flops and --max-tokens against what every possible run needs, before the fit (from the source's
    ``smallest`` budget alone): a candidate costs its budget, at least the smallest (twice over for a table's
    pairs; K times over for a sweep's points, ``per``), and has D = √(C·(D/N)/6) tokens, at least √(C·lo/6)
    inside the tokens-per-parameter ``window``."""
    least = float(smallest) * (1 if shapes else 2) * per.runs
    if args.flops < least:
        unit = "one point" if shapes else "a pair of points (a table's sizes are bought in pairs bracketing N_opt)"
        unit = unit.replace("point", "run") if per.runs == 1 else f"{unit}, {per.note}"
        raise UserError(
            f"--flops {short(args.flops)} is below the cost of {unit} at the smallest budget of {args.source!r}, "
            f"{short(smallest)} FLOPs; give at least {short(least)}"
        )
    fewest = float(np.sqrt(smallest * window[0] / 6))
    if args.max_tokens is not None and args.max_tokens < fewest:
        raise UserError(
            f"--max-tokens {args.max_tokens:.3g} is below the fewest tokens any run can have: {fewest:.3g} at the "
            f"smallest budget of {args.source!r} ({short(smallest)} FLOPs) and {window[0]:.3g} tokens per "
            f"parameter, the window's least (D = √(C·(D/N)/6)); give at least {fewest:.3g}"
        )


def check_allowance(args, units: list[tuple], shapes: bool, bounds: dict, rules, limits: tuple, no_shape) -> None:
    """Some candidate (`next_runs.units`, the ones the search is given) under the limits, and the allowance
    buys the cheapest one (``limits``: (`PerPoint`, `Window`): K runs a point); for a table, where none does, why
    no pair brackets N_opt's interval (`no_pair`: N_opt's ``bounds``, the candidates' ``rules``); for shapes, why
    none fits (``no_shape()``: `next_runs.no_shape`); either way, how the window was drawn."""
    from analysis.fits.next_runs import cost, no_pair

    per, window = limits
    if not units:
        if not shapes:
            raise UserError(f"{args.source!r}: {no_pair(bounds, rules)}; {window.said()}")
        raise UserError(f"no ladder shape fits any budget of {args.source!r}: {no_shape()}; {window.said()}")
    cheapest = min(units, key=cost)
    if cost(cheapest) * per.runs > args.flops:
        names = [c.shape if shapes else f"N = {c.n:.3g}" for c in cheapest]
        what = "run" if len(cheapest) == 1 else "pair"
        raise UserError(
            f"--flops {short(args.flops)} is below the cheapest candidate {what} ({' and '.join(names)} at "
            f"{short(cheapest[0].budget)} FLOPs"
            + (", bracketing N_opt" if what == "pair" else "")
            + (f"; {per.note}" if per.runs > 1 else "")
            + f"); give at least {short(cost(cheapest) * per.runs)}"
        )
