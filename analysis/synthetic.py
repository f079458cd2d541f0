"""Runs drawn from a known law L(N, D) = E + A/N^α + B/D^β, for checking a fitting setup.

The tests and the benchmark fit these and compare with the truth (approach 1's designs, `no_floor_ladder`
and `quick_design`, are shared by both); a user can do the same before
trusting a fit on a sweep of a similar design (same budgets, sizes, noise).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from analysis.fits import laws
from analysis.published import CHINCHILLA_APPROACH3
from analysis.sources.check import table_from_frame
from scaling.flops import flops_6nd

# Hoffmann et al. 2022, approach 3 (Eq. 10): a realistic truth to draw from.
CHINCHILLA_LAW = CHINCHILLA_APPROACH3


def isoflop_runs(
    law: dict[str, float],
    budgets,
    sizes_per_budget: int,
    spread_decades: float = 1.0,
    noise: float = 0.01,
    seed: int = 0,
) -> pd.DataFrame:
    """An IsoFLOP sweep: per budget C, ``sizes_per_budget`` model sizes log-spaced over
    N_opt(C)·10^(±spread_decades), D = C/(6N), loss = L(N, D)·exp(noise·ε), ε ~ N(0, 1).

    Columns follow the results store: run_id, status, budget_flops, flops, params, tokens, val_loss.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for budget in np.asarray(budgets, dtype=float):
        n_opt, _ = laws.chinchilla_allocation(budget, law["A"], law["B"], law["alpha"], law["beta"])
        for n in np.geomspace(n_opt / 10**spread_decades, n_opt * 10**spread_decades, sizes_per_budget):
            d = laws.tokens_for_compute(budget, n)
            loss = laws.chinchilla_loss(n, d, **law) * np.exp(noise * rng.standard_normal())
            rows.append(
                {
                    "run_id": f"r{len(rows):04d}",
                    "status": "completed",
                    "budget_flops": budget,
                    "flops": flops_6nd(n, d),
                    "params": n,
                    "tokens": d,
                    "val_loss": loss,
                }
            )
    return pd.DataFrame(rows)


def loss_curves(
    runs: pd.DataFrame, law: dict[str, float], points_per_run: int = 20, noise: float = 0.01, seed: int = 0
) -> pd.DataFrame:
    """Loss curves for ``runs``: at tokens t log-spaced up to each run's D, loss = L(N, t)·exp(noise·ε).

    (A run part-way through training is treated as a run trained on the tokens seen so far, so
    the envelope of the curves is exactly the law's compute-optimal frontier.)
    Columns follow the store's curves.csv: run_id, step, tokens, flops, train_loss, val_loss, lr.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for run in runs.itertuples():
        tokens = np.geomspace(run.tokens / 100.0, run.tokens, points_per_run)
        loss = laws.chinchilla_loss(run.params, tokens, **law) * np.exp(noise * rng.standard_normal(points_per_run))
        frames.append(
            pd.DataFrame(
                {
                    "run_id": run.run_id,
                    "step": np.arange(1, points_per_run + 1),
                    "tokens": tokens,
                    "flops": flops_6nd(run.params, tokens),
                    "train_loss": loss,
                    "val_loss": loss,
                    "lr": np.nan,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


# A known optimal-LR law for the synthetic sweep (Step Law form: η* = c·N^a·D^b, N non-embedding).
SYNTHETIC_LR_LAW = {"form": "step_law", "coefficient": 2.0, "n_exponent": -0.5, "d_exponent": 0.1}


def lr_sweep_runs(
    law: dict[str, float],
    budgets,
    sizes,
    lr_law: dict | None = None,
    lr_multipliers=(0.25, 0.5, 1.0, 2.0, 4.0),
    batch_sizes=(None,),
    curvature: float = 0.02,
    noise: float = 0.002,
    seed: int = 0,
) -> pd.DataFrame:
    """A sweep of every size in ``sizes`` (N) at every budget C (D = C/(6N)), as a shape ladder is
    swept, each trained at several learning rates: η = m·η*(N, D) for m in ``lr_multipliers`` (η*
    from ``lr_law``, `scaling.hplaws` form, default `SYNTHETIC_LR_LAW`), and at each of
    ``batch_sizes`` (sequences of 128 tokens; None: no batch column). The loss is convex in log η:
    L(N, D)·(1 + curvature·ln(η/η*)² + 0.01·ln(B/16)²)·exp(noise·ε), so its minimum over η is at η*.
    Columns as the store: run_id, status, budget_flops, flops, params, params_non_embedding
    (0.8·params), tokens, val_loss, lr, seq_len, batch_size (with ``batch_sizes``)."""
    from scaling.hplaws import evaluate

    lr_law = lr_law or SYNTHETIC_LR_LAW
    rng = np.random.default_rng(seed)
    rows = []
    for budget in np.asarray(budgets, dtype=float):
        for n in np.asarray(sizes, dtype=float):
            d = laws.tokens_for_compute(budget, n)
            best = evaluate(lr_law, n_non_embedding=0.8 * n, tokens=d, flops=flops_6nd(n, d))
            for batch in batch_sizes:
                for m in lr_multipliers:
                    shape = (
                        1.0 + curvature * np.log(m) ** 2 + (0.0 if batch is None else 0.01 * np.log(batch / 16) ** 2)
                    )
                    loss = laws.chinchilla_loss(n, d, **law) * shape * np.exp(noise * rng.standard_normal())
                    row = {"run_id": f"r{len(rows):05d}", "status": "completed", "budget_flops": budget}
                    row.update(flops=flops_6nd(n, d), params=n, params_non_embedding=0.8 * n, tokens=d)
                    row.update(val_loss=loss, lr=best * m, seq_len=128)
                    rows.append(row if batch is None else {**row, "batch_size": batch})
    return pd.DataFrame(rows)


def repeated_runs(
    law: dict[str, float], sizes, unique_tokens, epochs, noise: float = 0.005, seed: int = 0
) -> pd.DataFrame:
    """Runs drawn from the data-constrained law L(N, D, U) (`analysis.fits.muennighoff.loss`, parameters
    E, A, B, alpha, beta, R_D, R_N): every size N × unique tokens U × epochs k, D = k·U,
    loss = L(N, D, U)·exp(noise·ε). Columns as the store's: run_id, status, budget_flops, flops,
    params, tokens, unique_tokens, epochs, val_loss."""
    from analysis.fits import muennighoff

    rng = np.random.default_rng(seed)
    rows = []
    for n, u, k in itertools.product(sizes, unique_tokens, epochs):
        d = k * u
        loss = float(muennighoff.loss(n, d, u, **law)) * np.exp(noise * rng.standard_normal())
        c = flops_6nd(n, d)
        rows.append(
            {
                "run_id": f"r{len(rows):04d}",
                "status": "completed",
                "budget_flops": c,
                "flops": c,
                "params": n,
                "tokens": d,
                "unique_tokens": u,
                "epochs": k,
                "val_loss": loss,
            }
        )
    return pd.DataFrame(rows)


# The designs of approach 1's checks (tests/test_isoflop_bracketing.py) and its calibration study
# (bench/bench_approach1.py), defined once for both.
NO_FLOOR_LAW = {**CHINCHILLA_LAW, "E": 0.0}  # a pure power law: the envelope's floor has its best value at 0


def no_floor_ladder(seed: int):
    """3 budgets (1e18, 1e20, 1e22) × 6 sizes over N_opt·10^(±1) of `NO_FLOOR_LAW`, 12 curve points
    each, 0.5% noise, as a checked table."""
    runs = isoflop_runs(NO_FLOOR_LAW, [1e18, 1e20, 1e22], 6, noise=0.005, seed=seed)
    curves = loss_curves(runs, NO_FLOOR_LAW, 12, noise=0.005, seed=seed + 1000)
    return table_from_frame(runs, "synthetic", curves=curves)


# The quick sweep's design (the demo): its budgets and sizes, 8 curve points per run (every 1/8 of
# training, as the store records them), losses from approach 3's law fitted to the demo.
QUICK_LAW = {"E": 0.81, "A": 80.0, "B": 774.0, "alpha": 0.502, "beta": 0.483}
QUICK_SIZES = {
    3e11: [9456, 16488, 25056, 75072, 124672],
    1e12: [16488, 25056, 75072, 124672, 264400, 372576],
    3e12: [75072, 124672, 264400, 372576, 651168],
}


def quick_design(seed: int, noise: float = 0.006, shift: float = 0.019):
    """The demo's design with noise at the levels seen on the demo: each curve point ·exp(noise·ε),
    each run's whole curve ·exp(shift·z) (a seed moves a run's curve); a checked table."""
    rng = np.random.default_rng(seed)
    runs = pd.DataFrame(
        [
            {"run_id": f"r{i:02d}", "status": "completed", "budget_flops": c, "params": float(n)}
            for i, (c, n) in enumerate((c, n) for c, sizes in QUICK_SIZES.items() for n in sizes)
        ]
    )
    runs["tokens"] = laws.tokens_for_compute(runs["budget_flops"], runs["params"])
    runs["flops"] = flops_6nd(runs["params"], runs["tokens"])
    curves = runs.loc[runs.index.repeat(8), ["run_id", "params", "tokens", "flops"]].reset_index(drop=True)
    fraction = np.tile(np.arange(1, 9) / 8, len(runs))
    curves = curves.assign(step=np.tile(np.arange(1, 9), len(runs)), tokens=curves["tokens"] * fraction)
    curves["flops"] *= fraction
    seed_shift = np.repeat(shift * rng.standard_normal(len(runs)), 8)
    loss = laws.chinchilla_loss(curves["params"], curves["tokens"], **QUICK_LAW)
    curves["val_loss"] = loss * np.exp(noise * rng.standard_normal(len(curves)) + seed_shift)
    runs["val_loss"] = curves.groupby("run_id")["val_loss"].last().to_numpy()
    return table_from_frame(runs, "quick", curves=curves.drop(columns="params").assign(train_loss=curves["val_loss"]))
