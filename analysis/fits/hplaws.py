"""Hyperparameter laws fitted to a sweep: the optimal peak LR and batch size as power laws.

From each (N, D) point of a hyperparameter sweep (`analysis.sources.hparams.HyperSweep.optima`: the
LR optimum interpolated in log LR where the grid brackets it, else the best LR; the best batch size
in tokens = batch_size · seq_len), fitted by least squares in log space, in both forms of
`scaling.hplaws`:

    step_law   η* = c · N^a · D^b      B* = c · D^b        N non-embedding when the source has it
    deepseek   η* = c · C^a            B* = c · C^b        C = 6·N·D

Intervals: a bootstrap over the points, resampling within sizes (each N keeps its number of points)
when every size has two points or more, else over all points. An exponent the data cannot pin down
is "unidentified", with the reason: a single N (the N exponent), ln D a linear function of ln N (the Step
Law's D exponent: one budget, or one tokens-per-parameter ratio), a single C, too few points for the law, or a bootstrap interval wider than `MAX_WIDTH`.
A law without an identified term is fitted without it (its exponent 0 in the law, flagged).

The laws are written into FIT.json as ``"hyperparameter_laws": {"lr": LAW, "batch_tokens": LAW}``
(the Step Law form, which `optim.lr_law=FIT.json` evaluates) and in full, both forms with their
points, under ``"hyperparameter_fit"``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.fits.percentiles import level_text, percentile_bounds
from analysis.fits.results import Estimate
from analysis.sources.hparams import BATCH_TOKENS, SEQ_LEN, SEQ_LEN_NAMES
from scaling.hplaws import WITHOUT_TERM

MAX_WIDTH = 2.0  # an exponent whose bootstrap interval is wider than this is unidentified
MAX_EDGE_SHARE = 0.2  # with more of the points' best value at the grid's edge than this, its exponents are unidentified
TERMS = {  # (law, target) -> the regressors of each exponent: (exponent key, column of optima)
    ("step_law", "lr"): (("n_exponent", "N_hp"), ("d_exponent", "D")),
    ("step_law", "batch_tokens"): (("d_exponent", "D"),),
    ("deepseek", "lr"): (("c_exponent", "C"),),
    ("deepseek", "batch_tokens"): (("c_exponent", "C"),),
}
TARGET_COLUMN = {"lr": "lr_opt", "batch_tokens": "batch_tokens"}
EDGE_COLUMN = {"lr": "edge", "batch_tokens": "batch_edge"}  # a point whose best value is at its grid's edge
EDGE_WHAT = {"lr": "LR", "batch_tokens": "batch size"}


def fit_hyperparameter_laws(sweep, *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """``{"step_law": {"lr": LAW, "batch_tokens": LAW}, "deepseek": {...}, "laws": the Step Law ones
    with a coefficient (for FIT.json's ``hyperparameter_laws``), "points": [...], "notes": [...]}``
    for the targets the sweep varied (LR; batch size when swept with seq_len known)."""
    points = sweep.optima
    targets = (["lr"] if sweep.lr_swept else []) + (["batch_tokens"] if sweep.batch_swept else [])
    out: dict = {"step_law": {}, "deepseek": {}, "notes": [], "level": level, "resamples": resamples, "seed": seed}
    n_name = "non-embedding N (column params_non_embedding)" if sweep.n_hp == "non-embedding" else "N as fitted"
    lr = (
        "; η* is the optimum interpolated in log LR where the grid brackets it, else the best LR"
        if "lr" in targets
        else ""
    )
    out["notes"].append(
        f"fitted to {len(points)} (N, D) points of the sweep over {', '.join(sweep.swept)}; N is {n_name}{lr}"
    )
    if sweep.batch_column == "batch_size" and not sweep.batch_swept:  # user27: no seq_len, no law and no reason
        out["notes"].append(
            f"no batch-size law: {sweep.batch_column!r} counts sequences and the table has no {SEQ_LEN!r} column (tokens "
            f"per sequence, or {', '.join(SEQ_LEN_NAMES[1:])}) to make B* a count of tokens; add one, or give the batch "
            f"size in tokens as {BATCH_TOKENS!r}"
        )
    if sweep.batch_column == BATCH_TOKENS and not sweep.batch_swept:
        out["notes"].append(f"no batch-size law: no value of {BATCH_TOKENS!r} reads as a count of tokens")
    if not targets and not sweep.batch_column:
        out["notes"].append(f"no law: neither the LR nor the batch size was swept, only {', '.join(sweep.swept)}")
    if not targets:
        del out["notes"][0]  # fitted to nothing
    for target in targets:
        for form in ("step_law", "deepseek"):
            law = fit_law(points, form, target, resamples=resamples, seed=seed, level=level)
            law["n"] = sweep.n_hp
            out[form][target] = law
    out["laws"] = {target: law for target, law in out["step_law"].items() if law["coefficient"] is not None}
    out["points"] = points[
        [
            "N",
            "N_hp",
            "D",
            "C",
            "budget",
            "runs",
            "lr_best",
            "lr_interp",
            "lr_opt",
            "batch_tokens",
            "edge",
            "batch_edge",
        ]
    ].to_dict(orient="records")
    return out


def fit_law(points, form: str, target: str, *, resamples: int, seed: int, level: float) -> dict:
    """One law (the `scaling.hplaws` schema, each value {"estimate", "interval"[, "unidentified"]})."""
    terms = TERMS[(form, target)]
    y, logs, usable, sizes = _logs(points, form, target)
    edge = usable & np.asarray(points.get(EDGE_COLUMN[target], False), dtype=bool)
    why = {key: _unidentified(key, logs, sizes) for key, _ in terms}
    fitted = [key for key, _ in terms if not why[key]]
    law: dict = {"form": form, "target": target, "points": int(usable.sum())}
    at_edge = (
        f"{int(edge.sum())} of {int(usable.sum())} points have their best {EDGE_WHAT[target]} at the grid's edge (the "
        "optimum lies beyond it there, or fewer than 3 values were swept): the law through the grid's end is biased "
        "towards the grid; widen it there"
    )
    if edge.any():  # user17: 11 of 20 best batch sizes at the grid's ends gave b = 0.446 [0.38, 0.51] for 0.571
        law["at_edge"] = at_edge  # leaving them out biases the other way (b = 0.22 there): the survivors are censored
    if len(y) < len(fitted) + 2:
        reason = f"{len(y)} points, fewer than the {len(fitted) + 2} a law with {len(fitted)} exponent(s) needs"
        law.update(unidentified=reason, coefficient=None)
        law.update({key: None for key, _ in terms})
        return law
    design = np.column_stack([np.ones(len(y))] + [logs[k] for k in fitted])
    value = _solve(design, y)
    samples = _bootstrap(design, y, sizes, resamples, seed)
    law["coefficient"] = _exp_estimate(value[0], samples[:, 0], level)
    for key, _ in terms:
        if why[key]:
            law[key] = Estimate(0.0, unidentified=f"{why[key]}; {WITHOUT_TERM}").as_json()
            continue
        j = 1 + fitted.index(key)
        estimate = Estimate.from_samples(value[j], samples[:, j], level)
        if estimate.interval is not None and estimate.upper - estimate.lower > MAX_WIDTH:
            estimate.unidentified = f"its {level_text(level)} interval is wider than {MAX_WIDTH:g}"
        elif edge.sum() > MAX_EDGE_SHARE * usable.sum():  # the law's `at_edge` note says why at length
            estimate.unidentified = (
                f"best {EDGE_WHAT[target]} at the grid's edge at {int(edge.sum())} of {len(y)} points"
            )
        estimate.unidentified = estimate.unidentified or _along_line(key, why, logs, estimate.value)
        law[key] = estimate.as_json()
    if (loose := [k for k in fitted if law[k].get("unidentified")]) and not law["coefficient"].get("unidentified"):
        # user22: c = 2.108e-05 [1.622e-12, inf] beside unidentified exponents; its inf end, saved as null, crashed
        # `report --fit`: a coefficient at N = D = 1 is pinned only as far as its exponents are
        law["coefficient"]["unidentified"] = f"as its exponent{'s' * (len(loose) > 1)}"
    law["bootstrap"] = _how_resampled(sizes, len(samples))
    return law


def _logs(points, form: str, target: str):
    """ln of the target's optima, ln of each term's regressor (by exponent key), the mask of the usable points, and
    their sizes (the bootstrap's strata)."""
    points = pd.DataFrame(points)
    y = np.asarray(points[TARGET_COLUMN[target]], dtype=float)
    logs = {key: np.log(np.asarray(points[column], dtype=float)) for key, column in TERMS[(form, target)]}
    usable = np.isfinite(y) & (y > 0) & np.all([np.isfinite(v) for v in logs.values()], axis=0)
    sizes = np.asarray(points["N_hp"], dtype=float)[usable]
    return np.log(y[usable]), {k: v[usable] for k, v in logs.items()}, usable, sizes


def value_interval(fit: dict, target: str, at: dict[str, float], *, seed: int = 0) -> tuple[float, float] | None:
    """The ``fit``'s (a `fit_hyperparameter_laws` result, as FIT.json keeps it) Step Law law of ``target``
    evaluated at ``at`` ({"N_hp", "D"}): its interval at the fit's level, from the law refitted to resamples of
    its points as `fit_law` draws them (exponents and coefficient together: their errors are correlated). None
    where the law is not fitted, or an exponent is unidentified (its interval says nothing of the value)."""
    law = fit.get("step_law", {}).get(target)
    if not fit.get("points") or not law or law.get("unidentified"):
        return None
    keys = [key for key, _ in TERMS[("step_law", target)] if law.get(key) is not None]
    if any(law[key].get("unidentified") for key in keys):
        return None
    y, logs, _, sizes = _logs(fit["points"], "step_law", target)
    fitted = [key for key in keys if not _unidentified(key, logs, sizes)]
    design = np.column_stack([np.ones(len(y))] + [logs[k] for k in fitted])
    samples = _bootstrap(design, y, sizes, int(fit.get("resamples", 1000)), int(fit.get("seed", seed)))
    column = dict(TERMS[("step_law", target)])
    where = np.array([1.0] + [np.log(at[column[k]]) for k in fitted])
    predicted = samples @ where
    if len(predicted) < 2:
        return None
    low, high = percentile_bounds(predicted, float(fit.get("level", 0.95)))
    return float(np.exp(low)), float(np.exp(high))


def _unidentified(key: str, logs: dict, sizes: np.ndarray) -> str:
    """Why the data cannot pin the exponent ``key`` (empty when they can)."""
    x = logs[key]
    if x.size == 0 or np.ptp(x) < 1e-6:
        return {"n_exponent": "a single N", "c_exponent": "a single C"}.get(key, "a single D")
    if key == "d_exponent" and "n_exponent" in logs and _on_one_line(logs["n_exponent"], x):
        return "ln D a linear function of ln N over the points (one budget, or one D/N): D's effect cannot be told from N's"
    return ""


def _along_line(key: str, why: dict[str, str], logs: dict, value: float) -> str:
    """Why N's exponent is not N's ("" when it is): with D's term left out because ln D = k·ln N + const over the
    points (`_unidentified`), k ≠ 0, the fitted exponent is η*'s along that line, a + k·b, D's share included
    (user36: 20 tokens per parameter gave a = -0.353 [-0.52, -0.22] for the Step Law's -0.713, its b 0.307 unsaid)."""
    if key != "n_exponent" or not why.get("d_exponent", "").startswith("ln D a linear function"):
        return ""
    slope = float(np.polyfit(logs["n_exponent"], logs["d_exponent"], 1)[0])
    if abs(slope) < 1e-3:
        return ""
    return (
        f"ln D = {slope:.3g}·ln N + const over the points: {value:.4g} is η*'s exponent along that line, "
        f"a + {slope:.3g}·b, D's share included, not N's alone; points off that line tell them apart"
    )


def _on_one_line(log_n: np.ndarray, log_d: np.ndarray) -> bool:
    """Whether ln D is a linear function of ln N (its residual spans under 1e-3): the Step Law's design matrix is
    then singular. Each size at one budget is not (user17: an IsoFLOP grid, 5 sizes per budget, no size at two
    budgets, had D's exponent left out as "a single D per N" and N's printed -0.63 [-0.71, -0.54] for -0.713)."""
    design = np.column_stack([np.ones_like(log_n), log_n])
    residual = log_d - design @ np.linalg.lstsq(design, log_d, rcond=None)[0]
    return bool(np.ptp(residual) < 1e-3)


def _solve(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(design, y, rcond=None)[0]


def _bootstrap(design: np.ndarray, y: np.ndarray, sizes: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(resamples, parameters): refits on points drawn with replacement, within sizes when each
    size has two points or more. Resamples whose design is singular are left out."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(sizes == n) for n in np.unique(sizes)]
    within = all(len(g) >= 2 for g in groups)
    out = []
    for _ in range(resamples):
        if within:
            pick = np.concatenate([rng.choice(g, size=len(g)) for g in groups])
        else:
            pick = rng.integers(0, len(y), size=len(y))
        if np.linalg.matrix_rank(design[pick]) < design.shape[1]:
            continue
        out.append(_solve(design[pick], y[pick]))
    return np.asarray(out).reshape(-1, design.shape[1])


def _how_resampled(sizes: np.ndarray, done: int) -> str:
    groups = [np.sum(sizes == n) for n in np.unique(sizes)]
    how = "within sizes" if all(g >= 2 for g in groups) else "over all points (a size has a single point)"
    return f"{done} resamples {how}"


def _exp_estimate(log_value: float, log_samples: np.ndarray, level: float) -> dict:
    est = Estimate.from_samples(log_value, log_samples, level)
    out = Estimate(float(np.exp(est.value)), unidentified=est.unidentified)
    if est.interval is not None:
        out.lower, out.upper = float(np.exp(est.lower)), float(np.exp(est.upper))
    return out.as_json()


def n_of_law(fit: dict, n: float, n_kind: str) -> tuple[float, str]:
    """The N the fitted laws of ``fit`` (FIT.json's `hyperparameter_fit`) are evaluated at for an allocation's ``n``
    of the approaches' kind ``n_kind``, and a note ("" when it is ``n`` itself). Laws fitted in non-embedding N (the
    table's `params_non_embedding`, `N_hp`) beside total-N approaches take the non-embedding count the swept points
    pair with ``n``: a power law through their two counts (the embedding's share falls with size). user33: the total
    N_opt was given to a law of non-embedding N, its LR ~15% low, the interval missing the truth in 4 of 5 tables."""
    laws = [law for law in (fit.get("laws") or {}).values() if isinstance(law, dict)]
    points = pd.DataFrame(fit.get("points") or [])
    if n_kind == "non_embedding" or not any(law.get("n") == "non-embedding" for law in laws) or points.empty:
        return n, ""
    logs = np.log(points[["N", "N_hp"]].to_numpy(dtype=float))
    logs = logs[np.isfinite(logs).all(axis=1)]
    if len(logs) == 0:
        return n, ""
    if np.ptp(logs[:, 0]) > 0:
        slope, intercept = np.polyfit(logs[:, 0], logs[:, 1], 1)
    else:
        slope, intercept = 1.0, float(np.mean(logs[:, 1] - logs[:, 0]))
    at = float(np.exp(intercept + slope * np.log(n)))
    return at, (
        f"the LR and batch laws are of non-embedding N: evaluated at {at:.4g}, the non-embedding count the swept "
        f"points pair with N_opt = {n:.4g} (a power law through their two counts)"
    )
