"""Bootstrap resampling shared by the fits: which runs each resample draws, and the summaries.

A resample draws as many runs as the data holds, with replacement (Efron 1979). Fits that sum
over runs take the draw as integer weights (a run drawn twice counts twice), which is the same
objective as refitting the duplicated table, without copying it.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from analysis.fits.results import Bootstrap, Estimate

MIN_SUCCESS = 0.5  # with fewer resamples than this fraction refitted, intervals are withheld


def one_blas_thread():
    """Context: BLAS on one thread. The fits run thousands of tiny optimizer steps; OpenBLAS
    threads synchronising on 5-element vectors made each step ~40x slower on this 2-core machine."""
    return threadpool_limits(limits=1, user_api="blas")


def resample_weights(rng: np.random.Generator, n_runs: int, resamples: int) -> np.ndarray:
    """(resamples, n_runs) integer weights: how many times each run is drawn in each resample."""
    return rng.multinomial(n_runs, np.full(n_runs, 1.0 / n_runs), size=resamples).astype(float)


def resample_within_groups(rng: np.random.Generator, groups: list[np.ndarray], resamples: int) -> list[np.ndarray]:
    """For each group of run indices (e.g. one compute budget), a (resamples, group size) array of
    indices drawn with replacement inside the group: the group sizes never change (stratified)."""
    return [group[rng.integers(0, len(group), size=(resamples, len(group)))] for group in groups]


def estimates_from_samples(
    values: dict[str, float], samples: dict[str, np.ndarray], level: float
) -> dict[str, Estimate]:
    """An `Estimate` per name: the full-sample value with the percentile interval of its samples."""
    return {
        name: (Estimate.from_samples(value, samples[name], level) if name in samples else Estimate(value))
        for name, value in values.items()
    }


def summarize(
    samples: dict[str, np.ndarray], resamples: int, failed: int, level: float, seed: int, notes: list[str]
) -> tuple[dict[str, np.ndarray], Bootstrap]:
    """The `Bootstrap` record and the samples to make intervals from. When more than half the
    resamples failed the samples are dropped, so no interval is reported: the few resamples that
    could be refitted are the ones most like the data, not a sample of the estimates' spread."""
    if failed > resamples * (1 - MIN_SUCCESS):
        notes = [*notes, f"{failed} of {resamples} resamples failed, so no intervals are given: fit more runs"]
        samples = {}
    return samples, Bootstrap(
        resamples=resamples,
        failed=failed,
        level=level,
        seed=seed,
        samples={k: np.asarray(v).tolist() for k, v in samples.items()},
        notes=notes,
    )
