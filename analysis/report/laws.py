"""The report's fitted laws: each approach's parameters with intervals and diagnostics, IsoFLOP minima, held-out validation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.describe.numbers import count_label, flops_label, interval_text, num, times
from analysis.fits.results import Estimate, FitReport
from analysis.report.blocks import FLAG, Bullets, Heading, Paragraph, Table
from analysis.sources.schema import Source

# ---------------------------------------------------------------- fitted laws
MEANINGS = {
    "E": "irreducible loss (nats/token)",
    "A": "model-size term coefficient",
    "alpha": "model-size exponent α",
    "B": "data term coefficient",
    "beta": "data exponent β",
    "a": "N_opt ∝ C^a",
    "b": "D_opt ∝ C^b",
    "G": "N_opt = G·(C/6)^a",
    "N_coefficient": "k_N in N_opt = k_N·C^a",
    "D_coefficient": "k_D in D_opt = k_D·C^b",
    "loss_A": "L = A·C^(−α): A",
    "loss_alpha": "L = A·C^(−α): α",
    "floor_E": "L = E + A·C^(−α): E (nats/token)",
    "floor_A": "L = E + A·C^(−α): A",
    "floor_alpha": "L = E + A·C^(−α): α",
}
TITLES = {
    1: "Approach 1: envelope of the training curves (Hoffmann et al. 2022, §3.1)",
    2: "Approach 2: IsoFLOP profiles (Hoffmann et al. 2022, §3.2)",
    3: "Approach 3: parametric L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, §3.3)",
}


def fitted_laws_blocks(fit: FitReport | None, source: Source) -> list:
    blocks: list = [Heading("Fitted laws")]
    if fit is None:
        return blocks + [Paragraph("No approach could be fitted to these runs.")]
    level = next((f.bootstrap.level for f in fit.fits if f.bootstrap), None)
    blocks.append(
        Paragraph(
            "Estimates with "
            + (
                f"{level:.0%} bootstrap percentile intervals [lower, upper]."
                if level
                else "no intervals (no bootstrap)."
            )
        )
    )
    for f in fit.fits:
        blocks.append(Heading(TITLES[f.approach], 3))
        blocks.append(
            Table(
                ["parameter", "estimate [interval]", "meaning"],
                [[k, interval_text(e), MEANINGS.get(k, "")] for k, e in f.estimates.items()],
            )
        )
        blocks.append(Bullets(_diagnostics(f, source)))
        if f.approach == 2:
            blocks += _minima(f)
    for approach, why in fit.skipped.items():
        blocks.append(Paragraph(f"Approach {approach} was not fitted: {why}"))
    return blocks


def _diagnostics(f, source: Source) -> list[str]:
    lines = []
    if f.approach == 3:
        c = f.convergence
        lines.append(
            f"Optimizer: {'converged' if c['converged'] else 'NOT converged'} ({c['optimizer']}; "
            f"{c['starts_agreeing']} of {c['refined_starts']} best grid starts reach the optimum; max |gradient| "
            f"{c['gradient_max_abs']:.2g}; Huber δ = {f.huber_delta:g}, objective {f.objective:.6g}; "
            f"{len(f.n)} runs)."
        )
        lines += [f"{FLAG} {c[key]}" for key in ("warning", "note") if c.get(key)]
        lines += _loss_floor(f, source)
    elif f.approach == 1:
        d = f.diagnostics
        lines.append(
            f"{d['envelope_points']} envelope points from {d['points_used']} ({d['bins_per_decade']} bins per "
            f"decade, compute {flops_label(d['compute_range'][0])} to {flops_label(d['compute_range'][1])} "
            f"FLOPs); the law with a floor: {d['loss_law_with_floor']}."
        )
    lines.append(_bootstrap_line(f.bootstrap))
    return lines


def _loss_floor(f, source: Source) -> list[str]:
    """The corpus' true lowest loss when the records know it (synthetic corpora), beside the fitted E."""
    floors = pd.to_numeric(source.frame.get("loss_floor", pd.Series([], dtype=float)), errors="coerce").dropna()
    if not len(floors):
        return []
    return [
        f"The corpus' lowest reachable loss (loss_floor of the records) is {floors.min():.4g} nats/token; "
        f"compare E = {f.estimates['E'].value:.4g}."
    ]


def _bootstrap_line(boot) -> str:
    if boot is None:
        return "No bootstrap (0 resamples): no intervals."
    notes = "".join(f"; {n}" for n in boot.notes)
    intervals = f"{boot.level:.0%} percentile intervals" if boot.samples else "no intervals"
    return f"Bootstrap: {boot.resamples} resamples (seed {boot.seed}), {boot.failed} unusable; {intervals}{notes}."


def _minima(f) -> list:
    rows = []
    for p in f.profiles:
        n = np.asarray(p.n)
        where = (
            "inside the trained sizes"
            if p.inside_range
            else f"{FLAG} outside the trained sizes: the parabola is extrapolated to its minimum"
        )
        n_opt = Estimate(p.n_opt, *(p.n_opt_interval or (None, None)), unidentified=p.n_opt_unidentified)
        rows.append(
            [
                flops_label(p.budget),
                f"{len(set(p.n))} ({count_label(n.min())} to {count_label(n.max())})",
                interval_text(n_opt, count_label),
                count_label(p.d_opt),
                num(p.loss_opt),
                where,
            ]
        )
    blocks = [
        Paragraph("The minimum of each budget's parabola:"),
        Table(
            ["budget C (FLOPs)", "sizes trained (N)", "N_opt [interval]", "D_opt", "loss at N_opt", "where"],
            rows,
            {i for i, p in enumerate(f.profiles) if not p.inside_range},
        ),
    ]
    if f.dropped:
        blocks.append(Bullets([f"Budget without a parabola: {why}" for why in f.dropped]))
    return blocks


# ---------------------------------------------------------------- validation
def validation_blocks(fit: FitReport | None) -> list:
    blocks: list = [Heading("Held-out validation")]
    checked = [f for f in (fit.fits if fit else []) if getattr(f, "validation", None)]
    if not checked:
        return blocks + [Paragraph("Not run (it needs at least two budgets).")]
    blocks.append(Paragraph("Each law is refitted without the runs of the largest budget and asked to predict them."))
    for f in checked:
        v = f.validation
        if "skipped" in v:
            blocks.append(Paragraph(f"Approach {f.approach}: skipped ({v['skipped']})."))
            continue
        where = (
            f"held out {flops_label(v['held_out_budget'])} FLOPs, {times(v['extrapolation_factor'])} beyond the "
            "budgets fitted" + (f" ({FLAG} an extrapolation)" if v["extrapolation"] else "")
        )
        if f.approach == 1:
            blocks.append(
                Paragraph(
                    f"Approach 1 ({where}): the lowest loss there predicted {num(v['loss_predicted'])} "
                    f"against {num(v['loss_observed'])} ({v['loss_relative_error']:+.2%}), and the size "
                    f"that reaches it {count_label(v['n_opt_predicted'])} against "
                    f"{count_label(v['n_opt_observed'])} ({v['n_opt_relative_error']:+.1%}); observed: "
                    f"that budget's best run, {v['best_run_id']}."
                )
            )
        elif f.approach == 3:
            blocks.append(
                Paragraph(
                    f"Approach 3 ({where}): the loss of its {v['held_out_runs']} runs is predicted within "
                    f"{v['loss_relative_error_mean_abs']:.2%} on average, "
                    f"{v['loss_relative_error_max_abs']:.2%} at worst."
                )
            )
            blocks.append(
                Table(
                    ["run", "observed loss", "predicted loss", "error"],
                    [
                        [
                            r["run_id"],
                            num(r["observed"]),
                            num(r["predicted"]),
                            f"{r['predicted'] / r['observed'] - 1:+.2%}",
                        ]
                        for r in v["runs"]
                    ],
                )
            )
        else:
            blocks.append(
                Paragraph(
                    f"Approach 2 ({where}): N_opt predicted {count_label(v['n_opt_predicted'])} against "
                    f"{count_label(v['n_opt_observed'])} from that budget's own parabola "
                    f"({v['n_opt_relative_error']:+.1%})."
                )
            )
    return blocks
