"""The report's hyperparameter laws: the LR and batch-size laws of a sweep over them, with intervals."""

from __future__ import annotations

from analysis.describe.hparams import LAW_HEADER, law_rows
from analysis.fits.results import FitReport
from analysis.report.blocks import Bullets, Heading, Paragraph, Table


def hyperparameter_blocks(fit: FitReport | None) -> list:
    """Nothing without a sweep over hyperparameters; else the laws (`analysis.fits.hplaws`) as a table."""
    if fit is None or not fit.hyperparameter_fit:
        return []
    hp = fit.hyperparameter_fit
    return [
        Heading("Hyperparameter laws"),
        Paragraph(
            f"The optimal peak learning rate η* and batch size B* (tokens) of each (N, D) point, fitted as power "
            f"laws: Step Law η* = c·N^a·D^b, B* = c·D^b (Li et al. 2025); DeepSeek η* = c·C^a, B* = c·C^b "
            f"(DeepSeek LLM 2024). Estimates with {hp.get('level', 0.95):.0%} bootstrap intervals; "
            "`scaling optimal` recommends them, `optim.lr_law=FIT.json` trains with the Step Law ones."
        ),
        Table(LAW_HEADER, law_rows(hp)),
        Bullets([*hp.get("notes", []), *dict.fromkeys(law["at_edge"] for law in _laws(hp) if law.get("at_edge"))]),
    ]


def _laws(hp: dict) -> list[dict]:
    return [law for form in ("step_law", "deepseek") for law in hp.get(form, {}).values()]
