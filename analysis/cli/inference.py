"""`scaling optimal --inference-tokens T`: the model size that minimises training plus inference
FLOPs (`analysis.fits.inference`), printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import math

from analysis.describe.numbers import interval_text, num
from analysis.fits.codec import to_jsonable
from analysis.fits.percentiles import level_text
from scaling.errors import UserError


def inference_tokens(text: str) -> float:
    """--inference-tokens: a token count >= 0 (0: the training-optimal answer)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a token count >= 0, e.g. 2e12") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; give a token count >= 0 (tokens served), e.g. 2e12")
    return value


def inference_main(args, law) -> int:
    """Answer `scaling optimal` when --inference-tokens is given (``law`` already resolved)."""
    from analysis.fits.inference import inference_allocation
    from analysis.fits.optimal import ParametricLaw

    if not isinstance(law, ParametricLaw):
        raise UserError(
            f"--inference-tokens needs a law of L(N, D) = E + A/N^alpha + B/D^beta, which {law.name!r} is not; "
            "use --law chinchilla-parametric or a FIT.json with approach 3"
        )
    if args.max_tokens is not None:
        raise UserError("scaling optimal: --inference-tokens does not combine with --max-tokens")
    answer = inference_allocation(law, args.inference_tokens, target_loss=args.target_loss, budget=args.budget)
    if args.json:
        print(json.dumps(to_jsonable({**answer.as_json(), "loss_unit": law.loss_unit})))
    else:
        print(render(answer, law.loss_unit))
    return 0


def render(a, unit: str) -> str:
    """The answer as text: the inference-aware model, its FLOPs, and the training-optimal model of
    the same loss with the saving against it; ``unit``: the law's loss unit."""
    v = a.values
    kind = "non-embedding parameters" if a.n_kind == "non_embedding" else "parameters (total)"
    goal = (
        f"target loss {num(a.target_loss)} {unit}"
        if a.target_loss is not None
        else f"total budget {a.budget:.4g} FLOPs (training + inference)"
    )
    rows = [
        ("inference tokens T", f"{a.inference_tokens:.4g} tokens served"),
        ("N", interval_text(v["N"], num, kind)),
        ("D", interval_text(v["D"], num, "tokens")),
        ("tokens/parameter", interval_text(v["tokens_per_parameter"], num)),
        ("loss", interval_text(v["loss"], unit=unit)),
        ("training FLOPs", f"{interval_text(v['training_flops'])}  (6·N·D)"),
        ("inference FLOPs", f"{interval_text(v['inference_flops'])}  (2·N·T)"),
        ("total FLOPs", interval_text(v["total_flops"])),
        ("training-optimal", f"{_reference(v['reference_N'], v['reference_D'])} (same loss, T = 0)"),
        ("  its total FLOPs", interval_text(v["reference_total_flops"])),
        ("saving", interval_text(v["saving_flops"], unit="FLOPs")),
        ("saving (fraction)", interval_text(v["saving_fraction"], unit="of the training-optimal model's total")),
    ]
    lines = [f"law: {a.law}", f"inference-aware allocation (Sardana et al. 2024): {goal}"]
    lines += [f"  {label:<18} {text}" for label, text in rows]
    if v["N"].interval is not None:
        lines.append(f"  intervals: {level_text(a.level)} bootstrap percentiles")
    lines += [f"  note: {note}" for note in a.notes]
    return "\n".join(lines)


def _reference(n, d) -> str:
    """The training-optimal model's N and D with their intervals; "unidentified (why)" once when both are, alike."""
    if n.unidentified and n.unidentified == d.unidentified:
        return f"N, D unidentified ({n.unidentified})"
    return f"N = {interval_text(n, num)}, D = {interval_text(d, num)}"
