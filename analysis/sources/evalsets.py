"""``--eval NAME``: analyse the losses of one named evaluation set (scaling.evalsets).

A store whose runs had evaluation sets has, per set NAME, the columns ``val_loss.NAME`` (its loss;
also in curves.csv) and ``eval_fingerprint.NAME`` (the data it is). ``--eval NAME`` reads the loss
from ``val_loss.NAME`` and makes the corpus guard check ``eval_fingerprint.NAME`` instead of the
training corpus: runs trained on different corpora but scored on one set are comparable, runs
scored on different data under one name are not. ``--eval val`` on runs without evaluation sets is
their ``val_loss`` and ``corpus_fingerprint`` (the held-out split of the training corpus).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from scaling.errors import DataError, UserError
from scaling.evalsets import DEFAULT, FINGERPRINT_PREFIX, LOSS_PREFIX, fingerprint_column, loss_column

CORPUS_FINGERPRINT = "corpus_fingerprint"  # the store's column: what `val` is without evaluation sets


def available(frame: pd.DataFrame) -> list[str]:
    """The evaluation sets a table holds: ``val`` and every NAME of a ``val_loss.NAME`` column."""
    named = [str(c)[len(LOSS_PREFIX) :] for c in frame.columns if str(c).startswith(LOSS_PREFIX)]
    return list(dict.fromkeys([DEFAULT, *named]))


def columns_of(frame: pd.DataFrame, name: str, source: str) -> tuple[str | None, str | None]:
    """(loss column, fingerprint column) of set ``name`` in ``frame``; None: the default column (the
    loss) or none to check (the fingerprint). DataError listing the sets when ``name`` is unknown."""
    if loss_column(name) in frame.columns:
        fingerprint = fingerprint_column(name)
        return loss_column(name), fingerprint if fingerprint in frame.columns else None
    if name == DEFAULT:
        return None, CORPUS_FINGERPRINT if CORPUS_FINGERPRINT in frame.columns else None
    raise DataError(
        f"--eval {name!r}: {source!r} has no evaluation set {name!r}; its sets: {', '.join(available(frame))}"
    )


def resolve(frame: pd.DataFrame, columns, source: str):
    """(ColumnMap with the set's loss column, the column the corpus guard checks or None: the
    usual corpus columns). Without ``columns.eval``: (columns, None)."""
    if columns.eval is None:
        return columns, None
    if columns.loss is not None:
        raise UserError(f"--eval {columns.eval!r} reads the loss of that set; drop --loss-column {columns.loss!r}")
    loss, fingerprint = columns_of(frame, columns.eval, source)
    return replace(columns, loss=loss), fingerprint


def same_eval_inputs(inputs: list, name: str) -> tuple[list, str]:
    """The inputs of a comparison (`analysis.compare.Input`) with one column ``eval_fingerprint.NAME``
    holding the data each was scored on under ``--eval NAME`` (for `check_same_eval`), and that column."""
    column = FINGERPRINT_PREFIX + name
    unified = []
    for item in inputs:
        _, found = columns_of(item.frame, name, item.label)
        frame = (
            item.frame.assign(**{column: item.frame[found]})
            if found
            else item.frame.drop(columns=column, errors="ignore")
        )
        unified.append(replace(item, frame=frame))
    return unified, column
