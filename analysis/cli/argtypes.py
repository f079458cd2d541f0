"""The analysis verbs' value types for argparse: each bad value is one line naming it (`scaling.errors.Parser`)."""

from __future__ import annotations

import argparse
import math


def positive_float(what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; give {what}") from None
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not valid; give {what} (a finite number > 0)")
        return value

    return parse


def level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; give a confidence level between 0 and 1, e.g. 0.95")
    return value


def whole(least: int):
    """An argparse type: a whole number >= ``least`` (user20: --seed -1 ended in numpy's traceback,
    --bins-per-decade 0 was taken and approach 1 skipped)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid; give a whole number >= {least}")
        return value

    return parse


count = whole(0)
