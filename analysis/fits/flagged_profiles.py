"""IsoFLOP profiles that hold a run the outlier rule flagged and the fit kept: each budget's N_opt interval spans
its parabola's minimum with and without those runs (user40: a run 15-60% high at a budget's largest N, flagged and
kept, moved that budget's N_opt to 2.47e8 [1.76e8, 3.11e8] for a true 3.74e8, unsaid; the bent rule
(`analysis.fits.bent_profiles`) fires only where the parabola's minimum falls 10% below every run).

The kept run may be a true loss or a broken one; the rule cannot tell. An interval that spans both readings is honest
under either; where they agree (a clean run flagged by chance) nothing changes and nothing is said."""

from __future__ import annotations

import copy

import numpy as np

from analysis.fits.bent_profiles import is_bent
from analysis.fits.bootstrap import scale_identification
from analysis.fits.isoflop import budget_profile
from analysis.fits.results import Parabola
from analysis.fits.vertex_intervals import VERTEX_DRAWS, n_opt_intervals
from analysis.sources.schema import RunTable


def widen_for_flagged(
    table: RunTable, profiles: list[Parabola], flagged: set[str], resamples: int, seed: int, level: float
) -> list[str]:
    """Widen in place the N_opt interval of each of ``profiles`` holding a run of ``flagged`` (run ids the outlier
    rule flagged, kept in ``table``) to cover that budget's minimum refitted without them; a budget left without a
    parabola or a bounded N_opt has its N_opt unidentified. Returns a warning line per budget changed. A bent profile
    (`is_bent`) says so itself; one already unidentified stays as it is."""
    lines = []
    for k, p in enumerate(profiles):
        marked = sorted(run for run in p.run_id if run in flagged)
        if not marked or is_bent(p) or p.n_opt_unidentified or p.n_opt_interval is None:
            continue
        alt, why = _without(table, profiles, k, set(marked), resamples, seed, level)
        who = f"{', '.join(marked)}, flagged an outlier and kept"
        if alt is None:
            p.n_opt_unidentified = f"it rests on {who}: without {'it' if len(marked) == 1 else 'them'} {why}"
            lines.append(f"budget {p.budget:.3g}: its N_opt is unidentified: {p.n_opt_unidentified}{_REMEDY}")
            continue
        lower, upper = p.n_opt_interval
        union = [min(lower, alt.n_opt_interval[0]), max(upper, alt.n_opt_interval[1])]
        if union == [lower, upper]:
            continue
        p.n_opt_interval = union
        p.n_opt_unidentified = scale_identification(*union)
        lines.append(
            f"budget {p.budget:.3g} holds {who}: its N_opt is {p.n_opt:.4g} [{lower:.4g}, {upper:.4g}] with "
            f"{'it' if len(marked) == 1 else 'them'} and {alt.n_opt:.4g} [{alt.n_opt_interval[0]:.4g}, "
            f"{alt.n_opt_interval[1]:.4g}] without; its interval spans both, [{union[0]:.4g}, {union[1]:.4g}]"
            + (f" ({p.n_opt_unidentified}: unidentified)" if p.n_opt_unidentified else "")
            + _REMEDY
        )
    return lines


_REMEDY = " (--exclude-outliers drops it from every fit)"


def _without(table, profiles, k, drop, resamples, seed, level) -> tuple[Parabola | None, str]:
    """Budget ``k``'s profile refitted without the runs ``drop``, its N_opt interval drawn as the fit drew them all
    (`n_opt_intervals`, the others' pooled scatter as it was), or None and why it gives no N_opt."""
    kept = table.without_runs(drop)
    idx = np.flatnonzero(kept.runs["budget"].to_numpy() == profiles[k].budget)
    alt, why = budget_profile(kept, profiles[k].budget, idx)
    if alt is None:
        return None, why[why.find(": ") + 2 :]
    copies = copy.deepcopy(profiles)
    copies[k] = alt
    n_opt_intervals(copies, max(resamples, VERTEX_DRAWS), seed, level)
    if alt.n_opt_unidentified or alt.n_opt_interval is None or is_bent(alt):
        return None, f"its N_opt is unidentified ({alt.n_opt_unidentified or 'bent'})"
    return alt, ""
