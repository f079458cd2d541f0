"""Before training a WSD design: approach 3's interval on a, simulated for it and for cosine's quick sweep.

    .venv/bin/python bench/sim_wsd_design.py --seeds 12 --bootstrap 100

Each design is a list of (shape, trunk, N, D) points: quick's 16 cosine runs (each its own unit),
quick-wsd's 8 trunks with their branches and quick-wsd16's 15 trunks, one per distinct shape (planned
as the sweeper plans them: 76 and 82 points). Losses are drawn from the demo's law (`analysis.synthetic.QUICK_LAW`) times
exp(misfit + shift + noise): the misfit is the law's error along each shape, shared by every point of
that shape in every design, u + v·log10(D / 1e6) with u ~ N(0, --offset) and v ~ N(0, --slope) per
shape (README, "WSD and cooldown branches": residuals that move smoothly with D, ±0.07 per decade); the
shift is a run's seed (a trunk's, shared by its branches); the noise is each point's evaluation. Each
table is fitted as the stores are (approach 3, a trunk and its branches one bootstrap unit) and the
width of a's 95% interval is compared, design against quick, seed by seed (the same misfit draws).
"""

from __future__ import annotations

import argparse

import common  # noqa: F401  (puts the checkout on sys.path)
import numpy as np
import pandas as pd
from common import print_header

from analysis.fits import laws
from analysis.fits.parametric import fit_parametric
from analysis.sources.check import table_from_frame
from analysis.synthetic import QUICK_LAW
from hydra_plugins.scaling_sweeper.branching import extra_budgets

# Total parameters of the shapes used: the ladder's (conf/model/*.yaml) and the fine ones between them
# (conf/model/fine/*.yaml: d40, d56, d72, d88, d104, d120), as `scaling shapes --kind total` gives them.
SIZES = {
    "d16": 9456, "d24": 16488, "d32": 25056, "d40": 35160, "d48": 75072, "d56": 98336, "d64": 124672,
    "d72": 154080, "d80": 264400, "d88": 316184, "d96": 372576, "d104": 433576, "d112": 651168,
    "d120": 743760, "d128": 842496,
}  # fmt: skip
QUICK = {  # sweeps/quick.yaml
    3e11: ["d16", "d24", "d32", "d48", "d64"],
    1e12: ["d24", "d32", "d48", "d64", "d80", "d96"],
    3e12: ["d48", "d64", "d80", "d96", "d112"],
}


def cosine_design(grid: dict) -> list[tuple]:
    """Every (budget, shape) of the grid as its own run: its own trunk."""
    return [(s, f"{s}@{c:g}", SIZES[s], c / (6 * SIZES[s])) for c, shapes in grid.items() for s in shapes]


QUICK16_PER_DECADE = 6  # sweeps/quick-wsd16.yaml's extra_points_per_decade: the design README calls quick-wsd16
QUICK16 = {  # sweeps/quick-wsd16.yaml: 15 distinct shapes (fine/d40..fine/d120 between the ladder's)
    3e11: ["d16", "d24", "d32", "d40", "d48", "d56"],
    1e12: ["d64", "d72", "d80", "d88", "d96"],
    3e12: ["d104", "d112", "d120", "d128"],
}
TOKENS_PER_PARAM, MIN_TOKENS = (0.3, 2000), 100 * 1024  # quick's window and train.min_steps x 1,024 tokens


def quick16_label(per_decade: float) -> str:
    return "quick-wsd16" if per_decade == QUICK16_PER_DECADE else f"quick-wsd16/{per_decade:g}"


def allowed(n: float, d: float) -> bool:
    return TOKENS_PER_PARAM[0] <= d / n <= TOKENS_PER_PARAM[1] and d >= MIN_TOKENS


def wsd_design(grid: dict, per_decade: float) -> list[tuple]:
    """One trunk per shape at its largest budget, branches at its other budgets and ``per_decade`` more
    per decade down to its smallest (at most a tenth of the trunk's), as the sweeper plans; branches
    outside quick's tokens-per-parameter window or under train.min_steps are dropped, as it drops them."""
    budgets: dict[str, list[float]] = {}
    for c, shapes in grid.items():
        for s in shapes:
            budgets.setdefault(s, []).append(c)
    rows = []
    for s, own in budgets.items():
        for c in sorted(own) + extra_budgets(own, per_decade):
            rows.append((s, s, SIZES[s], c / (6 * SIZES[s])))
    return [r for r in rows if allowed(r[2], r[3]) or r[3] == max(q[3] for q in rows if q[0] == r[0])]


def wsd_flops(design: list[tuple], cooldown: float) -> float:
    """Training FLOPs: each trunk's own 6ND, each branch its cooldown (``cooldown`` of its 6ND)."""
    top = trunk_points(design)
    return sum(6 * design[i][2] * design[i][3] for i in top.values()) + sum(
        cooldown * 6 * n * d for i, (_, t, n, d) in enumerate(design) if i != top[t]
    )


def trunk_points(design: list[tuple]) -> dict[str, int]:
    """Each trunk's own point (its largest D), by index."""
    top: dict[str, int] = {}
    for i, (_, t, _, d) in enumerate(design):
        if t not in top or d > design[top[t]][3]:
            top[t] = i
    return top


def draw(design: list[tuple], misfit: dict, how: argparse.Namespace, rng) -> pd.DataFrame:
    shift = {t: how.shift * rng.standard_normal() for t in sorted({t for _, t, _, _ in design})}
    rows = []
    for i, (s, t, n, d) in enumerate(design):
        u, v = misfit[s]
        err = u + v * np.log10(d / 1e6) + shift[t] + how.noise * rng.standard_normal()
        rows.append({"run_id": f"r{i}", "N": n, "D": d, "loss": laws.chinchilla_loss(n, d, **QUICK_LAW) * np.exp(err)})
    top = trunk_points(design)
    branch_of = ["" if i == top[t] else f"r{top[t]}" for i, (_, t, _, _) in enumerate(design)]
    return pd.DataFrame(rows).assign(branch_of=branch_of)


def width_and_rms(frame: pd.DataFrame, resamples: int) -> tuple[float, float, float]:
    fit = fit_parametric(table_from_frame(frame, "simulated"), resamples=resamples, seed=0)
    a = fit.estimates["a"]
    width = np.nan if a.interval is None else a.interval[1] - a.interval[0]
    return width, a.value, float(np.sqrt(np.mean(np.square(fit.residuals))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--bootstrap", type=int, default=200)
    p.add_argument("--offset", type=float, default=0.01, help="sd of a shape's misfit at D = 1e6")
    p.add_argument("--slope", type=float, default=0.1, help="sd of a shape's misfit per decade of D")
    p.add_argument("--shift", type=float, default=0.005, help="sd of a run's (a trunk's) seed shift")
    p.add_argument("--noise", type=float, default=0.003, help="sd of each point's evaluation noise")
    p.add_argument(
        "--per-decade",
        type=float,
        nargs="+",
        default=[QUICK16_PER_DECADE],
        help="quick-wsd16's branch budgets per decade",
    )
    how = p.parse_args()
    print_header("Simulated approach-3 width of a: WSD designs against quick")
    designs = {"quick": cosine_design(QUICK), "quick-wsd": wsd_design(QUICK, 9)}
    # the sweep's own design is named as README names it; another --per-decade k reads quick-wsd16/k
    designs |= {quick16_label(k): wsd_design(QUICK16, k) for k in how.per_decade}
    print(
        "points, training FLOPs (10% cooldowns):", {k: (len(v), f"{wsd_flops(v, 0.1):.3g}") for k, v in designs.items()}
    )
    rows = []
    for seed in range(how.seeds):
        rng = np.random.default_rng(seed)
        misfit = {s: (how.offset * rng.standard_normal(), how.slope * rng.standard_normal()) for s in SIZES}
        for name, design in designs.items():
            w, a, rms = width_and_rms(draw(design, misfit, how, rng), how.bootstrap)
            rows.append({"seed": seed, "design": name, "width": w, "a": a, "rms": rms})
        print(
            seed,
            "width(a), rms residual:",
            [(r["design"], round(r["width"], 3), round(r["rms"], 3)) for r in rows[-len(designs) :]],
        )
    df = pd.DataFrame(rows)
    print("medians over seeds:\n", df.groupby("design")[["width", "a", "rms"]].median(), sep="")
    width = df.pivot(index="seed", columns="design", values="width")
    print(
        "width(a) / quick's, over seeds:\n",
        width.div(width["quick"], axis=0).describe().loc[["mean", "50%", "min", "max"]],
        sep="",
    )


if __name__ == "__main__":
    main()
