"""IsoFLOP profiles bent by a run off them: a parabola whose minimum loss lies far below every run of its budget
(approach 2's warning; `analysis.fits.isoflop` keeps it in its diagnostics)."""

from __future__ import annotations

import numpy as np

from analysis.fits.results import Parabola
from analysis.fits.vertex_intervals import parabola_coefficients

BENT_SHARE = 0.1  # a parabola's minimum loss this share below its budget's lowest run: bent by a run off it
BENT_REASON = f"bent: the parabola's minimum loss lies more than {BENT_SHARE:.0%} below every run of its budget"


def is_bent(p: Parabola) -> bool:
    """Whether a run off the profile bends ``p`` (`BENT_SHARE`), its minimum inside its sizes: its vertex is then that
    run's, not the loss's (outside them it is an extrapolation, said as such; review24: clean sizes at 0.001-0.01x
    N_opt were called bent)."""
    return bool(p.inside_range and p.loss_opt < (1.0 - BENT_SHARE) * min(p.loss))


def bent(profiles: list[Parabola], flagged=frozenset()) -> list[str]:
    """A line per budget whose parabola's minimum loss lies more than `BENT_SHARE` below its every run's: a run off
    the profile bends it (user20: a finite 7.5 among 2.3s put N_opt at 1.225e9 [8.28e8, 1.504e9] for 1.824e9). The run
    named is the budget's run the outlier rule ``flagged`` (run ids) when it holds one, else `_bends_most`'s."""
    lines = []
    for p in profiles:
        if not is_bent(p):
            continue
        marked = [k for k, run in enumerate(p.run_id) if run in flagged]
        k = max(marked, key=lambda k: p.loss[k]) if marked else _bends_most(p)
        who = f"{p.run_id[k]}, loss {p.loss[k]:.4g}"
        who = f"{who}, flagged by the outlier rule: --exclude-outliers drops it" if marked else f"most, {who}"
        lines.append(
            f"budget {p.budget:.3g}: its parabola's minimum loss {p.loss_opt:.4g} lies {1 - p.loss_opt / min(p.loss):.0%} "
            f"below its lowest run's ({min(p.loss):.4g}): a run off the profile bends it, and its N_opt with it ({who}"
            f"{'' if marked else '; --exclude-outliers drops it if the outlier rule flagged it'})"
        )
    return lines


def _bends_most(p: Parabola) -> int:
    """The run whose leaving out (with its size's other seeds) raises the parabola's minimum most (review16: name it,
    not only the outliers); where no size can be left out with a parabola remaining (3 sizes), the run of the highest
    loss: each of 3 points lies as far off the line through the other two, so only the loss tells a diverged run
    (user38: the first run was named, a good one, beside a diverged loss of 7.5 among 2.9s)."""
    u, y = np.log(p.n) - p.center, np.asarray(p.loss)
    others = u[None, :] != u[:, None]  # each run left out with its size's other seeds (review24: a seed's twin stayed)
    c0, c1, c2 = parabola_coefficients(u[None], y[None], others.astype(float)).T
    raised = np.where(c2 > 0, c0 - c1 * c1 / (4 * c2), -np.inf)
    return int(np.nanargmax(raised)) if np.isfinite(raised).any() else int(np.argmax(y))
