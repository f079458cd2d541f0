"""One description of a compute-optimal allocation (`analysis.fits.optimal.Allocation`): the items
`scaling optimal` prints and the report's allocation tables show, each estimate with its interval.
The CLI's items carry 4 significant digits; the report's cells compact numbers (67.2k, 2.5M, 1e21)."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.describe.numbers import FLAG, count_label, flops_label, interval_text, num, times
from analysis.fits.identified import AS_N, below_range_note
from analysis.fits.muennighoff_optimal import RepeatAllocation
from analysis.fits.percentiles import level_text
from analysis.sources.schema import DEFAULT_LOSS_UNIT
from scaling.flops import flops_6nd


@dataclass
class Item:
    label: str
    text: str  # "value [lower, upper] unit"


def allocation_items(a, unit: str = DEFAULT_LOSS_UNIT) -> dict[str, Item]:
    """budget, N_opt, D_opt, tokens/parameter, predicted loss and the 6·N·D check, by key; ``unit``:
    the law's loss unit (`analysis.fits.optimal.Law.loss_unit`)."""
    count = num  # the CLI: 4 significant digits
    n_kind = "non-embedding parameters" if a.n_kind == "non_embedding" else "parameters (total)"
    loss = "- (this law does not predict loss)" if a.loss is None else interval_text(a.loss, unit=unit)
    if a.loss_rests_on_e:  # data-constrained with an unidentified E: the value holds as far as E
        loss += f" ({a.loss_rests_on_e})"
    items = {
        "budget": Item(
            "budget C",
            interval_text(a.budget, unit="FLOPs") + ("   EXTRAPOLATION" if a.extrapolation else ""),
        ),
        "n": Item("N_opt", interval_text(a.n, count, n_kind)),
        "d": Item("D_opt", interval_text(a.d, count, "tokens")),
        "tokens_per_parameter": Item("tokens/parameter", interval_text(a.tokens_per_parameter, count)),
        "loss": Item("predicted loss", loss),
        "check": Item(
            "check",
            f"6·N·D = {flops_6nd(a.n.value, a.d.value):.6g} FLOPs"
            if a.n.value > 0 and not a.budget.unidentified
            else "–",
        ),
    }
    if isinstance(a, RepeatAllocation) and a.epochs is not None:  # data-constrained: the epochs D/U, the lowest loss
        items["epochs"] = Item("epochs D/U", f"{interval_text(a.epochs)} of {num(a.unique_tokens)} unique tokens")
        lowest = f"{interval_text(a.lowest_loss, unit=unit)} with unbounded compute on U"
        if a.lowest_loss_unidentified:  # as the fit prints an unidentified E: no number that reads as a finding
            lowest = f"unidentified ({a.lowest_loss_unidentified})"
        items["lowest_loss"] = Item("lowest loss", lowest)
    if a.target_loss is not None:
        items = {"target_loss": Item("target loss", f"{num(a.target_loss)} {unit}"), **items}
    return items


def intervals_line(a) -> str | None:
    return f"intervals: {level_text(a.level)} bootstrap percentiles" if a.n.interval is not None else None


AS_N_OPT = "unidentified (as N_opt)"  # the report's cell of a D or D/N unidentified with N_opt (`AS_N_OPT_NOTE`)
AS_N_OPT_NOTE = (
    f"{AS_N_OPT}: D_opt = C/(6·N_opt) and D/N = C/(6·N_opt²) follow N_opt, which is unidentified at that budget; "
    "its cell says why"
)


def follows_n_cell(e, fmt=count_label) -> str:
    """A report cell of a value that follows N_opt (D, D/N): `AS_N_OPT` when it is unidentified with N_opt (the
    reason is N_opt's cell, said once beside the table), else `interval_text`."""
    return AS_N_OPT if e.unidentified.startswith(AS_N) else interval_text(e, fmt)


def allocation_cells(a, reference, fitted_compute_max: float, fitted_compute_min: float | None = None) -> list[str]:
    """One row of the report's ladder: budget, N_opt, D_opt, tokens/parameter, loss (with intervals),
    the reference law's N and D, and the note: an extrapolation beyond the largest fitted run, or a
    budget below the law's smallest fitted one (``a.below_range``, `below_range_note`, as `scaling optimal`
    says). D and D/N unidentified with N_opt read `AS_N_OPT`."""
    c = a.budget.value
    note = ""
    if a.extrapolation:
        note = f"{FLAG} extrapolation: {times(c / fitted_compute_max)} the largest fitted run"
    elif a.below_range:
        note = f"{FLAG} {below_range_note(c, fitted_compute_min)}"
    return [
        flops_label(c),
        interval_text(a.n, count_label),
        follows_n_cell(a.d),
        follows_n_cell(a.tokens_per_parameter),
        interval_text(a.loss),
        count_label(reference.n.value),
        count_label(reference.d.value),
        note,
    ]


def n_opt_cell(a) -> str:
    return interval_text(a.n, count_label)
