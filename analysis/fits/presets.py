"""The published laws as allocation laws of `analysis.fits.optimal` (`scaling optimal --law NAME`):
Chinchilla's Table 3 rule, its approach-3 law, Kaplan's law, and the names of every preset (sources: docs/NOTES.md; their numbers:
`analysis.published`)."""

from __future__ import annotations

import math

from analysis.fits import laws
from analysis.fits.identified import TrainedRange
from analysis.fits.optimal import Law, ParametricLaw, PowerLawAllocation
from analysis.published import (
    CHINCHILLA_APPROACH3,
    CHINCHILLA_BUDGETS,
    CHINCHILLA_SIZES,
    CHINCHILLA_TOKENS_PER_PARAM,
    KAPLAN,
)
from scaling.flops import PF_DAY_FLOPS


def _chinchilla() -> Law:
    return PowerLawAllocation(
        "chinchilla",
        {"N_coefficient": (6.0 * CHINCHILLA_TOKENS_PER_PARAM) ** -0.5, "a": 0.5},
        notes=[
            "Hoffmann et al. 2022, Table 3 (approaches 1-2, a = b = 0.5): N_opt = sqrt(C/120), D_opt = 20·N_opt; "
            "this rule predicts no loss"
        ],
        fitted_compute_min=CHINCHILLA_BUDGETS[0],
        fitted_compute_max=CHINCHILLA_BUDGETS[1],
    )


def _chinchilla_parametric() -> Law:
    law = ParametricLaw(
        "chinchilla-parametric",
        dict(CHINCHILLA_APPROACH3),
        notes=[
            "Hoffmann et al. 2022, approach 3: L = 1.69 + 406.4/N^0.34 + 410.7/D^0.28, "
            "N_opt = G·(C/6)^0.46 with G = (αA/(βB))^(1/(α+β))"
        ],
        fitted_compute_min=CHINCHILLA_BUDGETS[0],
        fitted_compute_max=CHINCHILLA_BUDGETS[1],
    )
    law.trained = TrainedRange(*CHINCHILLA_SIZES, ratio_min=0.0, ratio_max=math.inf)  # D/N: not published
    return law


def _kaplan() -> Law:
    k = KAPLAN
    pf = PF_DAY_FLOPS
    return PowerLawAllocation(
        "kaplan",
        {
            "N_coefficient": k["N_e"] * pf ** -k["p_N"],
            "a": k["p_N"],
            "loss_A": (k["C_c_pf_days"] * pf) ** k["alpha_C"],
            "loss_alpha": k["alpha_C"],
        },
        n_kind="non_embedding",
        point_loss=lambda n, d: laws.kaplan_joint_loss(n, d, k["N_c"], k["D_c"], k["alpha_N"], k["alpha_D"]),
        notes=[
            "Kaplan et al. 2020: N counts non-embedding parameters; their compute unit is the PF-day "
            f"(1 PF-day = {pf:.3g} FLOPs), converted here: N_opt = 1.3e9·(C/PF-day)^0.73 (Table 6), "
            "loss on the frontier (3.1e8 PF-days / C)^0.050 (Eq. 1.3)"
        ],
    )


PRESETS = {"chinchilla": _chinchilla, "chinchilla-parametric": _chinchilla_parametric, "kaplan": _kaplan}
# the data-constrained preset, which needs --unique-tokens (analysis.fits.muennighoff_optimal.published)
REPEAT_PRESET = "muennighoff"
PRESET_NAMES = (*PRESETS, REPEAT_PRESET)  # every `--law NAME`: the help and the errors list these
