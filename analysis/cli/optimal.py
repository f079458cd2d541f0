"""`scaling optimal`: compute-optimal N and D for a budget, from a preset or a saved fit."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from analysis.cli.argtypes import level, positive_float
from analysis.cli.common import parse
from analysis.cli.inference import inference_main, inference_tokens
from analysis.fits.codec import to_jsonable
from analysis.fits.results import FitReport, no_law
from analysis.sources.budgets import NOMINAL_BUDGETS
from scaling.errors import DataError, Parser, UserError


# ================================================================= scaling optimal
def optimal_parser() -> argparse.ArgumentParser:
    from analysis.describe.hparams import HP_LAW_CHOICES
    from analysis.fits.presets import PRESET_NAMES, REPEAT_PRESET

    p = Parser(
        prog="scaling optimal",
        description="Compute-optimal model size N and tokens D for a FLOP budget "
        "(C = 6·N·D), from a published law or a saved fit.",
    )
    p.add_argument("--budget", type=positive_float("a budget in FLOPs, e.g. 1e21"), help="compute budget C in FLOPs")
    p.add_argument(
        "--law",
        default="chinchilla",
        help=f"{', '.join(PRESET_NAMES)} (published; default chinchilla; {REPEAT_PRESET} needs --unique-tokens), "
        "or a FIT.json written by `scaling fit --out`",
    )
    p.add_argument(
        "--approach",
        choices=["1", "2", "3"],
        help="which approach of FIT.json (default: the highest headlined one, as `scaling fit` prints it: 3, else 2, else 1)",
    )
    p.add_argument(
        "--target-loss",
        type=positive_float("a loss in the law's unit"),
        metavar="L",
        help="instead of --budget: the smallest budget whose optimal loss is L (laws that predict loss), in the "
        "law's loss unit (a FIT.json's own; nats/token for the published laws)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_float("a token count"),
        metavar="D",
        help="data-limited: at most D tokens available; the best N for the budget under that cap",
    )
    p.add_argument(
        "--inference-tokens",
        type=inference_tokens,
        metavar="T",
        help="inference-aware (Sardana et al. 2024): minimise 6·N·D + 2·N·T for --target-loss, or the loss "
        "for a total --budget of training + inference FLOPs (laws of L(N, D): chinchilla-parametric, approach 3)",
    )
    p.add_argument(
        "--unique-tokens",
        type=positive_float("the unique tokens available, e.g. 25e9"),
        metavar="U",
        help="data-constrained: only U unique tokens, repeated as the law (Muennighoff et al. 2023) finds best; "
        "with --law muennighoff or a FIT.json fitted with --approach muennighoff. Prints the epochs D/U",
    )
    p.add_argument("--level", type=level, help="confidence level for a fit's intervals (default: the fit's)")
    p.add_argument(
        "--hp-law",
        choices=HP_LAW_CHOICES,
        help="recommend the peak LR and batch size (tokens) at N_opt, D_opt: fit (the FIT.json's own laws; the "
        "default when it has them), or a published preset",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p


def optimal_main(argv: list[str]) -> int:
    args = parse(optimal_parser(), argv)
    if isinstance(args, int):
        return args
    if args.max_tokens is not None and args.budget is None:
        raise UserError("scaling optimal: --max-tokens needs --budget")
    if (args.budget is None) == (args.target_loss is None):
        raise UserError("scaling optimal: give either --budget C (FLOPs) or --target-loss L")
    from analysis.fits.presets import REPEAT_PRESET

    if args.unique_tokens is not None or args.law == REPEAT_PRESET:
        if args.inference_tokens is not None:
            raise UserError("--inference-tokens with --unique-tokens is not supported: give one of them")
        from analysis.fits.muennighoff_optimal import resolve_repeat_law

        law = resolve_repeat_law(args.law, args.unique_tokens, args.approach, args.max_tokens, args.level)
    else:
        law = resolve_law(args.law, None if args.approach is None else int(args.approach), args.level, args.max_tokens)
    if args.inference_tokens is not None:
        return inference_main(args, law)
    with np.errstate(all="ignore"):  # bootstrap samples of a poorly determined fit may overflow: they become inf
        if args.target_loss is not None:
            allocation = law.budget_for_loss(args.target_loss)
        elif args.max_tokens is not None:
            allocation = law.capped(args.budget, args.max_tokens)
        else:
            allocation = law.allocate(args.budget)
    check_finite(allocation, args.law)
    from analysis.describe.hparams import recommendation

    hp_lines, hp = recommendation(args.law, args.hp_law, allocation)
    if args.json:
        answer = {**allocation.as_json(), "loss_unit": law.loss_unit, **({"hyperparameters": hp} if hp else {})}
        print(json.dumps(to_jsonable(answer)))
    else:
        print("\n".join([render_allocation(allocation, law.loss_unit), *hp_lines]))
    return 0


def _law_warnings(fit) -> list[str]:
    """Approach 3's warnings on its own law, repeated where it allocates: a misfit (user25: a loss 0.09 off, the
    warning dropped), a frontier bent by a run off it (user41: 2.583 [2.19, 2.87] at 1e21 for 2.329, unsaid)."""
    if fit.approach != 3:
        return []
    misfit, bent = fit.convergence.get("misfit"), fit.convergence.get("bent")
    return [
        *(
            [f"the fit warned: {misfit}; --approach 2 allocates without that form (but predicts no loss)"]
            * bool(misfit)
        ),
        *([f"the fit warned: {bent}"] * bool(bent)),
    ]


def resolve_law(name: str, approach: int | None = None, level: float | None = None, max_tokens: float | None = None):
    """A preset by name, or the law of a FIT.json file (of a data-constrained fit alone: with unlimited unique data,
    `fresh_data_law`; ``max_tokens``, a cap on D that does not repeat, is refused there)."""
    from analysis.fits.presets import PRESET_NAMES, PRESETS
    from analysis.fits.saved_law import chosen_fit, law_from_fit

    if name in PRESETS:
        if approach is not None:
            raise UserError(f"--approach applies to a FIT.json law, not to the preset {name!r}")
        return PRESETS[name]()
    if not Path(name).exists():
        raise UserError(
            f"--law {name!r} is neither a preset ({', '.join(PRESET_NAMES)}) nor an existing FIT.json file "
            "(write one with `scaling fit SOURCE --out FIT.json`)"
        )
    try:
        report = FitReport.load(name)
    except DataError as err:  # a table, say: the fit comes first (a damaged fit file: fitted again)
        head = Path(name).read_text(errors="replace")[:4096]
        if '"source"' in head and '"n_kind"' in head:  # how a fit file begins: a damaged one, not a table
            again = (
                ""
                if "scaling fit SOURCE" in str(err)
                else "; fit its source again: `scaling fit SOURCE --out FIT.json`"
            )
            raise UserError(f"--law {name!r}: {err}{again}") from None
        raise UserError(
            f"--law {name!r}: {err}; --law takes a preset ({', '.join(PRESET_NAMES)}) or a FIT.json: for a table of "
            f"runs, `scaling fit {name} --out FIT.json` first"
        ) from None
    if report.muennighoff is not None and not report.fits and approach is None:  # no token repeats: U → ∞
        from analysis.fits.muennighoff_optimal import fresh_data_law

        if max_tokens is not None:
            raise UserError(
                f"--law {name!r} holds a data-constrained fit, whose law lets D repeat the data: instead of "
                "--max-tokens D, give --unique-tokens U (the unique tokens available)"
            )
        return fresh_data_law(report, name, level)
    law, fit = law_from_fit(report, name, approach, level), chosen_fit(report, name, approach)
    left_out = report.headline_left_out()  # says why an approach has no law: one home for that line
    if why := left_out.get(fit.approach):  # no law (`no_law`), or approach 1 from final points
        others = [str(f.approach) for f in report.headline]
        hint = f"give --approach {' or '.join(others)} (the file has a law there)" if others else NEEDS
        what = (
            f"approach {fit.approach}'s law is unidentified ({no_law(fit)})" if no_law(fit) else f"not headlined: {why}"
        )
        raise UserError(f"--law {name!r}: {what}, so it cannot allocate compute; {hint}")
    law.notes += [left_out[f.approach] for f in report.fits if no_law(f)]
    law.notes += [f"the fit warned: {warning}" for warning in report.warnings]  # units, swapped columns, exclusions
    law.notes += _law_warnings(fit)
    # a nominal column: the --budget given is 6·N·D, not one of its values; in a fit saved before, approach 2's was
    law.notes += [f"the fit's {note}" for note in report.notes if NOMINAL_BUDGETS in note or NOMINAL_BEFORE in note]
    if fit.approach == 2 and any(NOMINAL_BEFORE in note for note in report.notes):
        law.notes.append(
            "this fit file was saved before 2026-11-27: its approach 2 placed budgets at the column's values, so its "
            "--budget is in the column's units, not 6·N·D; refit to place them at their runs' 6·N·D"
        )
    return law


# the note of a fit saved before 2026-11-27, whose approach 2 placed budgets at the column's values (review17)
NOMINAL_BEFORE = "approaches 1 and 2 give N_opt against the column's budgets"

NEEDS = (
    "a law needs approach 2 (2+ budgets of 3+ sizes each, the minimum inside them), 3 (6+ runs over N and D) or 1 "
    "(training curves, not final losses alone): fit more runs"
)


def render_allocation(a, unit: str) -> str:
    """The allocation as text: the items of `analysis.describe.allocation`, in columns; ``unit``: the loss's."""
    from analysis.describe.allocation import allocation_items, intervals_line

    lines = [f"law: {a.law}"]
    lines += [f"  {item.label:<18} {item.text}" for item in allocation_items(a, unit).values()]
    lines += [f"  {line}" for line in [intervals_line(a)] if line]
    lines += [f"  note: {note}" for note in a.notes]
    return "\n".join(lines)


def check_finite(a, law_name: str) -> None:
    """A law that gives no finite N, D or budget is an error, never a printed answer (unless the law
    says it is unidentified: a fit without a law N_opt ∝ C^a has no value to give, and says why)."""
    values = {"budget": a.budget, "N_opt": a.n, "D_opt": a.d}
    bad = {k: e.value for k, e in values.items() if not (math.isfinite(e.value) and e.value > 0 or e.unidentified)}
    if bad:
        shown = ", ".join(f"{k} = {v:g}" for k, v in bad.items())
        raise UserError(
            f"--law {law_name!r} gives no usable answer ({shown}); check the law's values (a fit file: write it "
            "again with `scaling fit SOURCE --out FIT.json`)"
        )
