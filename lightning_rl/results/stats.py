"""Aggregate scores across seeds: mean, interquartile mean (IQM) and stratified percentile bootstrap intervals.

The definitions follow rliable (Agarwal et al., 2021, "Deep RL at the Edge of the Statistical Precipice",
https://arxiv.org/abs/2108.13264) so that numbers printed here can be compared with numbers computed there,
without depending on it:

* IQM is the 25% trimmed mean of all scores (rliable's ``aggregate_iqm`` is ``scipy.stats.trim_mean(scores,
  0.25, axis=None)``): of ``N`` scores, ``floor(N / 4)`` are dropped at each end and the rest are averaged.
  With fewer than 4 scores nothing is dropped and the IQM equals the mean.
* Confidence intervals are percentile intervals of a stratified bootstrap: each task's runs (a column of
  ``scores``) are resampled with replacement separately, so every replicate keeps one score per run of every
  task, and the statistic is recomputed on each replicate. The generator is seeded, so a table is
  reproducible.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Statistics by name: each maps an array ``[R, N]`` (R replicates of N scores) to ``[R]``.
STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}


def _mean_rows(scores: np.ndarray) -> np.ndarray:
    return scores.mean(axis=1)


def _iqm_rows(scores: np.ndarray) -> np.ndarray:
    n = scores.shape[1]
    cut = n // 4  # rliable/scipy: int(0.25 * n) scores dropped at each end
    return np.sort(scores, axis=1)[:, cut:n - cut].mean(axis=1)


STATISTICS["mean"] = _mean_rows
STATISTICS["iqm"] = _iqm_rows


def _as_scores(scores: np.ndarray | list[float] | list[list[float]]) -> np.ndarray:
    """Scores as a float array ``[runs, tasks]`` (a 1-D input is one task)."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"scores must be a non-empty [runs] or [runs, tasks] array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("scores must be finite (no NaN or inf)")
    return array


def _statistic(name: str) -> Callable[[np.ndarray], np.ndarray]:
    if name not in STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {name!r}")
    return STATISTICS[name]


def mean(scores: np.ndarray | list[float] | list[list[float]]) -> float:
    """The mean of all scores (runs x tasks together).

    Raises:
        ValueError: If ``scores`` is empty, not 1-D or 2-D, or holds NaN or inf.
    """
    return float(_mean_rows(_as_scores(scores).reshape(1, -1))[0])


def iqm(scores: np.ndarray | list[float] | list[list[float]]) -> float:
    """The interquartile mean of all scores (runs x tasks together), rliable's definition (module docstring).

    Examples:
        ``iqm([1, 2, 3, 4, 100])``: 5 scores, ``floor(5 / 4) = 1`` dropped at each end, mean of 2, 3, 4 = 3.0.

    Raises:
        ValueError: If ``scores`` is empty, not 1-D or 2-D, or holds NaN or inf.
    """
    return float(_iqm_rows(_as_scores(scores).reshape(1, -1))[0])


def bootstrap_ci(
    scores: np.ndarray | list[float] | list[list[float]],
    statistic: str = "iqm",
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Stratified percentile bootstrap confidence interval of ``statistic`` (module docstring).

    Args:
        scores: ``[runs]`` for one task, or ``[runs, tasks]``; each task's runs are resampled separately.
        statistic: ``"iqm"`` or ``"mean"``, computed over all runs and tasks of a replicate.
        confidence: Coverage of the interval, in (0, 1); the bounds are the ``(1 - confidence) / 2`` and
            ``(1 + confidence) / 2`` quantiles of the replicates (numpy's linear interpolation).
        reps: Bootstrap replicates.
        seed: Seed of the generator (``numpy.random.default_rng``): the same inputs give the same interval.

    Returns:
        ``(low, high)``, or None with a single run per task (resampling one run says nothing about spread).

    Raises:
        ValueError: If ``scores`` is empty or not finite, ``statistic`` is unknown, ``confidence`` is not in
            (0, 1), or ``reps`` is below 1.
    """
    array = _as_scores(scores)
    function = _statistic(statistic)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    runs, tasks = array.shape
    if runs < 2:
        return None
    rng = np.random.default_rng(seed)
    # One index per (replicate, run, task): row indices drawn within each task's column (the strata).
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    replicates = function(array[rows, np.arange(tasks)].reshape(reps, runs * tasks))
    alpha = 1.0 - confidence
    low, high = np.percentile(replicates, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(low), float(high)


def curve_band(
    values: np.ndarray, confidence: float = 0.95, reps: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean across seeds of learning curves on a common x grid, with a percentile bootstrap band.

    Seeds are resampled with replacement (the same resample at every x, so a replicate is a set of whole
    curves) and the band is the pointwise interval of the replicates' means.

    Args:
        values: ``[seeds, points]`` curves on a common grid.
        confidence: Coverage of the band, in (0, 1).
        reps: Bootstrap replicates.
        seed: Seed of the generator.

    Returns:
        ``(mean, low, high)``, each ``[points]``; with a single seed the band is the curve itself.

    Raises:
        ValueError: If ``values`` is not a non-empty finite 2-D array, or ``confidence``/``reps`` are out of range.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"values must be a non-empty finite [seeds, points] array, got shape {array.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    center = array.mean(axis=0)
    if array.shape[0] < 2:
        return center, center.copy(), center.copy()
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, array.shape[0], size=(reps, array.shape[0]))
    replicates = array[rows].mean(axis=1)  # [reps, points]
    alpha = 1.0 - confidence
    low, high = np.percentile(replicates, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)], axis=0)
    return center, low, high
