"""Hyperparameter laws in words: the fitted LR and batch-size laws with their intervals (`scaling
fit`, the report) and the recommended LR and batch size beside N and D (`scaling optimal`)."""

from __future__ import annotations

import math

from analysis.describe.numbers import num
from analysis.fits.percentiles import level_text
from scaling import hplaws
from scaling.errors import UserError

SYMBOL = {"lr": "η*", "batch_tokens": "B*"}
VARIABLE = {"n_exponent": "N", "d_exponent": "D", "c_exponent": "C"}
HP_LAW_CHOICES = ("fit", *hplaws.PRESETS)  # --hp-law: the FIT.json's own, or a published preset


def value_text(value) -> str:
    """A law's value ({"estimate", "interval"[, "unidentified"]}) as '0.31 [0.2, 0.4]'."""
    if value is None:
        return "unidentified"
    if not isinstance(value, dict):
        return num(float(value))
    if value.get("unidentified"):
        return f"unidentified ({value['unidentified']})"
    interval = value.get("interval")
    text = num(value["estimate"])
    ends = ["unbounded" if end is None else num(end) for end in interval or ()]  # an inf end is saved as null
    return text if not interval else f"{text} [{ends[0]}, {ends[1]}]"


def law_lines(law: dict) -> list[str]:
    """One law: its formula, then each value with its interval."""
    target = law.get("target", "lr")
    exponents = [k for k in VARIABLE if k in law]
    letter = {k: "b" if k == "d_exponent" or target == "batch_tokens" else "a" for k in exponents}
    formula = f"{SYMBOL[target]} = c" + "".join(f"·{VARIABLE[k]}^{letter[k]}" for k in exponents)
    left_out = [f"    note: {law['at_edge']}"] if law.get("at_edge") else []
    if law.get("unidentified"):
        return [f"{formula}: unidentified ({law['unidentified']})", *left_out]
    lines = [f"{formula}   ({law.get('points', '?')} points; {law.get('bootstrap', 'no bootstrap')})", *left_out]
    lines.append(f"    c = {value_text(law.get('coefficient'))}")
    lines += [f"    {letter[k]} ({VARIABLE[k]} exponent) = {value_text(law[k])}" for k in exponents]
    return lines


def hyperparameter_lines(fit: dict) -> list[str]:
    """The text of a `FitReport.hyperparameter_fit`: each target's laws in both forms."""
    if not fit:
        return []
    level = fit.get("level", 0.95)
    lines = [f"hyperparameter laws ({level_text(level)} intervals)"]
    lines += [f"  {note}" for note in fit.get("notes", [])]
    for form, title in (("step_law", "Step Law form"), ("deepseek", "DeepSeek form")):
        for target, law in fit.get(form, {}).items():
            lines.append(f"  {target} ({title}):")
            lines += [f"    {line}" for line in law_lines(law)]
    return lines


def recommendation(law_name: str, choice: str | None, allocation) -> tuple[list[str], dict]:
    """The recommended peak LR and batch size at the allocation's N_opt and D_opt (`scaling
    optimal`), from the FIT.json's own laws (``law_name`` a FIT.json) or a preset (``choice``; None:
    the FIT.json's when it has them, else none); lines for the text and an object for --json."""
    from pathlib import Path

    from analysis.fits.hplaws import n_of_law, value_interval
    from analysis.fits.presets import PRESETS
    from analysis.fits.results import FitReport

    own = law_name not in PRESETS and Path(law_name).is_file()
    report = FitReport.load(law_name) if own else None
    fitted = report.hyperparameter_laws if report else {}
    if choice is None:
        choice = "fit" if fitted else None
    if choice is None:
        return [], {}
    n, d, budget = allocation.n.value, allocation.d.value, allocation.budget.value
    if choice == "fit":
        if not fitted:
            raise UserError(
                f"--hp-law fit: --law {law_name!r} has no 'hyperparameter_laws'; give a FIT.json of a sweep over lr "
                f"(`scaling fit SOURCE --out FIT.json`) or a preset: {', '.join(hplaws.PRESETS)}"
            )
        laws, source = fitted, "fitted (FIT.json hyperparameter_laws)"
    else:
        laws, source = hplaws.PRESETS[choice], hplaws.PRESETS[choice]["source"]
    out = {"source": source}
    lines = [f"hyperparameters from {choice}: {source}"]
    fitted_law, intervals = choice == "fit", False
    n_law, n_note = n_of_law(report.hyperparameter_fit, n, report.n_kind) if fitted_law else (n, "")
    for target, unit in (("lr", "peak learning rate"), ("batch_tokens", "batch size, tokens")):
        law = laws.get(target)
        if isinstance(law, dict):
            value = hplaws.evaluate(law, n_non_embedding=n_law, tokens=d, flops=budget)
            why = _unidentified_exponent(law)
            if unknown := _unknown_where(law, allocation):
                out[target] = None
                lines.append(f"  {target:<18} unidentified (as {unknown}, where it is evaluated)")
            elif math.isfinite(value):
                out[target] = value
                ends = (
                    value_interval(report.hyperparameter_fit, target, {"N_hp": n_law, "D": d}) if fitted_law else None
                )
                shown = num(value) + (f" [{num(ends[0])}, {num(ends[1])}]" if ends else "")
                lines.append(f"  {target:<18} {shown}  ({unit})" + (f": unidentified ({why})" if why else ""))
                out.update({f"{target}_unidentified": why} if why else {})
                out.update({f"{target}_interval": list(ends)} if ends else {})
                intervals = intervals or ends is not None
    if intervals:  # user27: the recommendation had none, beside N_opt's and D_opt's
        lines.append(
            f"  intervals: the law's own ({level_text(report.hyperparameter_fit.get('level', 0.95))}, its points "
            "resampled), at N_opt and D_opt as given: their own uncertainty is not carried into them"
        )
    if n_note:
        lines.append(f"  note: {n_note}")
        out["n_for_laws"] = n_law
    elif not fitted_law and any(law.get("form") == "step_law" for law in laws.values() if isinstance(law, dict)):
        lines.append("  note: the Step Law's N is non-embedding; evaluated here at N_opt as the law gives it")
    return lines, out


def _unknown_where(law: dict, allocation) -> str:
    """What a law is evaluated at that the allocation leaves unidentified ("" when none): N_opt and D_opt for the Step
    Law's form (user29: an LR at an N_opt not printed), the budget for DeepSeek's, of C alone (review19, review20)."""
    if law.get("form") == "step_law" and (allocation.n.unidentified or allocation.d.unidentified):
        return "N_opt and D_opt"
    if allocation.budget.unidentified or not math.isfinite(allocation.budget.value):
        return "the budget"
    return ""


def _unidentified_exponent(law: dict) -> str:
    """Why a fitted law's recommendation is unidentified: an exponent it uses that is ("" when none;
    `hplaws.unidentified_in`)."""
    why = hplaws.unidentified_in(law)
    return next((f"its {VARIABLE[key]} exponent is: {why[key]}" for key in VARIABLE if key in why), "")


LAW_HEADER = ["target", "form", "c", "N exponent", "D exponent", "C exponent", "points"]


def law_rows(fit: dict) -> list[list[str]]:
    """One table row per fitted law (`LAW_HEADER`): values with intervals, '' where the form has none."""
    rows = []
    for form, title in (("step_law", "Step Law"), ("deepseek", "DeepSeek")):
        for target, law in fit.get(form, {}).items():
            if law.get("unidentified"):
                rows.append([target, title, f"unidentified ({law['unidentified']})", "", "", "", str(law["points"])])
                continue
            cells = [value_text(law[k]) if k in law else "" for k in VARIABLE]
            rows.append([target, title, value_text(law.get("coefficient")), *cells, str(law.get("points", ""))])
    return rows
