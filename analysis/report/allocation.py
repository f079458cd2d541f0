"""The report's compute-optimal allocation along a ladder of budgets, extrapolations flagged."""

from __future__ import annotations

from analysis.describe.allocation import AS_N_OPT, AS_N_OPT_NOTE, allocation_cells, n_opt_cell
from analysis.describe.numbers import count_label, flops_label
from analysis.fits.identified import EXTRAPOLATION_FACTOR
from analysis.fits.presets import PRESETS
from analysis.fits.results import FitReport
from analysis.fits.saved_law import chosen_fit, law_from_fit
from analysis.report.blocks import FLAG, Heading, Paragraph, Table
from analysis.sources.schema import Source

REPEAT_ONLY = (
    "The fit holds the data-constrained law only, which allocates compute under a number of unique tokens U: "
    "`scaling optimal --law FIT.json --unique-tokens U --budget C` gives N, D and the epochs D/U there (without "
    "--unique-tokens: with unlimited unique data)."
)
HEADLINE_BUDGETS = (1e18, 1e21, 1e24)  # FLOPs: always in the allocation table, for orientation
LADDER_DECADES = 6  # the ladder runs from the smallest swept budget to 10^6 times it


# ---------------------------------------------------------------- compute-optimal allocation
def budget_ladder(smallest: float) -> list[float]:
    """The smallest swept budget times 10^k for k = 0…`LADDER_DECADES`, with `HEADLINE_BUDGETS`, ascending; each
    rung to the 3 digits it is shown with (user31: a clustered smallest of 1.0003e17 gave 1e18 and 1e21 twice, and
    its 1e23 rung, 1.0003e23, was flagged an extrapolation where `scaling optimal --budget 1e23` was not)."""
    ladder = {float(f"{smallest * 10.0**k:.3g}") for k in range(LADDER_DECADES + 1)} | set(HEADLINE_BUDGETS)
    return sorted(ladder)


def _passed_over(fit: FitReport, approach: int) -> str:
    """``; approach 3 has no law, a unidentified`` for each fitted approach above ``approach`` (`no_law`)."""
    return "".join(f"; approach {f.approach} has no law, a unidentified" for f in fit.fits if f.approach > approach)


def allocation_blocks(fit: FitReport | None, source: Source) -> list:
    blocks: list = [Heading("Compute-optimal allocation")]
    if fit is None:
        return blocks + [Paragraph("No law was fitted, so no allocation can be given.")]
    if not fit.fits and fit.muennighoff is not None:  # a saved data-constrained fit only
        return blocks + [Paragraph(REPEAT_ONLY)]
    if not fit.headline:  # a saved fit of approaches not to allocate with (`FitReport.headline_left_out`)
        why = "; ".join(fit.headline_left_out().values())
        return blocks + [Paragraph(f"No fitted approach has a law to allocate with ({why}), so none is given.")]
    approach = chosen_fit(fit, "this fit").approach
    law = law_from_fit(fit, "this fit", approach)
    reference = PRESETS["chinchilla"]()
    ladder = budget_ladder(float(source.table.budget_compute.min()))  # where the fits place the smallest budget
    allocations = [law.allocate(c) for c in ladder]
    smallest = law.fitted_compute_min  # as `scaling optimal` flags a budget below it (`Allocation.below_range`)
    rows = [
        allocation_cells(a, reference.allocate(c), law.fitted_compute_max, smallest)
        for a, c in zip(allocations, ladder)
    ]
    flagged = {i for i, a in enumerate(allocations) if a.extrapolation or a.below_range}
    fitted_max = law.fitted_compute_max
    blocks += [
        Paragraph(
            f"From approach {approach}'s law (the most complete fitted: 3 predicts loss at any N and D, "
            f"then 2, then 1{_passed_over(fit, approach)}), for budgets from the smallest swept to 10^{LADDER_DECADES} times it and "
            f"{', '.join(flops_label(b) for b in HEADLINE_BUDGETS)} FLOPs. D = C/(6·N), so 6·N·D = C in "
            f"every row. The largest fitted run used {flops_label(fitted_max)} FLOPs; budgets beyond "
            f"{EXTRAPOLATION_FACTOR:g}× that are extrapolations, flagged {FLAG}: treat them as speculation; "
            f"so are budgets below the smallest fitted budget ({flops_label(smallest)} FLOPs), flagged {FLAG} too. "
            "Chinchilla: the published rule (Hoffmann et al. 2022, Table 3: N_opt = sqrt(C/120), "
            "20 tokens per parameter) for reference."
            + (
                ""
                if source.table.n_kind == "total"
                else " Note: N here counts non-embedding parameters, Chinchilla's N counts all."
            )
        ),
        Table(
            [
                "budget C (FLOPs)",
                "N_opt [interval]",
                "D_opt [interval]",
                "tokens/parameter",
                f"predicted loss ({fit.loss_unit})",
                "Chinchilla N_opt",
                "Chinchilla D_opt",
                "note",
            ],
            rows,
            flagged,
        ),
    ]
    if any(AS_N_OPT in row for row in rows):  # the reason of those cells, once
        blocks.append(Paragraph(AS_N_OPT_NOTE + "."))
    if len(fit.fits) > 1:
        blocks += _approaches_side_by_side(fit, ladder, reference)
    return blocks


def _approaches_side_by_side(fit: FitReport, ladder: list[float], reference) -> list:
    laws = {f.approach: law_from_fit(fit, "fit", f.approach) for f in fit.fits}
    allocations = [[law.allocate(c) for law in laws.values()] for c in ladder]
    rows = [
        [flops_label(c)] + [n_opt_cell(a) for a in row] + [count_label(reference.allocate(c).n.value)]
        for c, row in zip(ladder, allocations)
    ]
    # flagged where every approach's is: beyond 10x the largest fitted run of all, or below the smallest of all
    flagged = {
        i for i, row in enumerate(allocations) if all(a.extrapolation for a in row) or all(a.below_range for a in row)
    }
    return [
        Paragraph(
            "N_opt by approach (the approaches disagree when the data cannot pin the exponent down); flagged "
            f"{FLAG}: beyond {EXTRAPOLATION_FACTOR:g}× the largest fitted run, or below the smallest fitted budget:"
        ),
        Table(["budget C (FLOPs)"] + [f"approach {k}" for k in laws] + ["Chinchilla"], rows, flagged),
    ]
