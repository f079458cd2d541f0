"""Approach 1's grid (`analysis.fits.envelope`): every curve point of every run placed in a compute bin, the lowest
loss per run and bin, the envelope (the lowest over the runs drawn) and which of its points are bracketed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.sources.schema import RunTable


class EnvelopeGrid:
    """Per run and compute bin, the lowest loss the run reached in the bin (∞ where none)."""

    def __init__(self, table: RunTable, bins_per_decade: int):
        runs = table.runs
        self.from_curves = table.curves is not None
        points = table.curves if self.from_curves else runs[["run_id", "N", "C", "loss"]]
        wsd = runs.loc[runs.get("schedule", pd.Series("", runs.index)).astype(str).str.lower() == "wsd"]  # module doc
        if self.from_curves and len(wsd):  # before its cooldown a WSD run's curve is no run's end
            points = pd.concat([points[~points["run_id"].isin(wsd["run_id"])], wsd[points.columns]], ignore_index=True)
        self.wsd = f" ({len(wsd)} WSD runs' final points only)" if self.from_curves and len(wsd) else ""
        self.lowest, self.highest = float(runs["C"].min()), float(runs["C"].max())
        span = (points["C"] >= self.lowest * (1 - 1e-9)) & (points["C"] <= self.highest * (1 + 1e-9))
        points = points[span]
        self.n_points = int(len(points))
        self.run_ids = runs["run_id"].tolist()
        self.n_runs = len(self.run_ids)
        self.run_n = runs["N"].to_numpy()
        self.units = runs["unit"].to_numpy() if "unit" in runs.columns else np.arange(self.n_runs)
        self.budgets = runs["budget"].to_numpy()
        row = pd.Series(np.arange(self.n_runs), index=runs["run_id"]).reindex(points["run_id"]).to_numpy()
        if self.from_curves:
            bins = np.floor(np.log10(points["C"].to_numpy()) * bins_per_decade).astype(int)
            bins -= bins.min()
        else:  # a run's final point is its budget's: a bin per budget (a grid edge split 1e21's runs, and the bin
            # holding only a diverged run at 9.998e20 made it an envelope point: floor_alpha -5.2, user15's t4)
            bins = np.searchsorted(np.unique(self.budgets), self.budgets[row])
        n_bins = int(bins.max()) + 1
        self.loss = np.full((self.n_runs, n_bins), np.inf)
        self.compute = np.full((self.n_runs, n_bins), np.nan)
        cells = pd.DataFrame({"row": row, "bin": bins, "loss": points["loss"].to_numpy(), "C": points["C"].to_numpy()})
        lowest = cells.loc[cells.groupby(["row", "bin"])["loss"].idxmin()]
        self.loss[lowest["row"], lowest["bin"]] = lowest["loss"]
        self.compute[lowest["row"], lowest["bin"]] = lowest["C"]

    def bracketed(self, present: np.ndarray, winner: np.ndarray) -> np.ndarray:
        """(resamples, bins): whether the bin's winning run (``winner``, -1: none) has a run of a smaller and one of
        a larger N among those ``present`` (resamples, runs) with a point in the bin."""
        there = present[:, :, None] & np.isfinite(self.loss)[None]
        n, won = self.run_n[None, :, None], self.run_n[np.maximum(winner, 0)][:, None, :]
        return (there & (n < won)).any(axis=1) & (there & (n > won)).any(axis=1) & (winner >= 0)

    def envelope(self, present: np.ndarray):
        """For each row of ``present`` (resamples × runs, bool): per bin the envelope's compute,
        loss (NaN for bins no drawn run reaches) and the index of the winning run."""
        masked = np.where(present[:, :, None], self.loss[None], np.inf)
        winner = np.argmin(masked, axis=1)
        loss = np.take_along_axis(masked, winner[:, None, :], axis=1)[:, 0, :]
        compute = self.compute[winner, np.arange(self.loss.shape[1])[None, :]]
        empty = ~np.isfinite(loss)
        return np.where(empty, np.nan, compute), np.where(empty, np.nan, loss), np.where(empty, -1, winner)
