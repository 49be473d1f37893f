"""Mean, IQM and bootstrap intervals against hand-computed values (and scipy's trimmed mean, rliable's IQM)."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.results.stats import bootstrap_ci, curve_band, iqm, mean


def test_mean_of_all_runs_and_tasks():
    assert mean([1.0, 2.0, 6.0]) == pytest.approx(3.0)
    assert mean([[1.0, 10.0], [3.0, 30.0]]) == pytest.approx(11.0)


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.0, 1.0, 8.0], 3.0),                  # 3 scores: floor(3/4) = 0 dropped, the mean (the median is 1)
        ([0.0, 1.0, 3.0, 100.0], 2.0),           # 4: one dropped at each end, mean of 1 and 3
        ([100.0, 2.0, 4.0, 1.0, 3.0], 3.0),      # 5: floor(5/4) = 1 dropped at each end, mean of 2, 3, 4 (unsorted)
        ([8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0], 4.5),  # 8: two dropped at each end, mean of 3, 4, 5, 6
        ([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]], 9.25),  # runs x tasks pooled: mean of 3, 4, 10, 20
    ],
)
def test_iqm_by_hand(scores, expected):
    assert iqm(scores) == pytest.approx(expected)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 9, 10, 13])
def test_iqm_matches_scipy_trim_mean_as_rliable_uses_it(n):
    trim_mean = pytest.importorskip("scipy.stats").trim_mean  # not a dependency; present with the dev extras

    scores = np.random.default_rng(n).normal(size=(n, 2)) ** 3  # skewed, so trimming changes the value
    assert iqm(scores) == pytest.approx(trim_mean(scores, proportiontocut=0.25, axis=None))


def test_bad_scores_and_arguments_are_named():
    with pytest.raises(ValueError, match="non-empty"):
        iqm([])
    with pytest.raises(ValueError, match="finite"):
        mean([1.0, float("nan")])
    with pytest.raises(ValueError, match="statistic must be one of .*'median'"):
        bootstrap_ci([1.0, 2.0], statistic="median")
    with pytest.raises(ValueError, match="confidence must be in"):
        bootstrap_ci([1.0, 2.0], confidence=1.0)
    with pytest.raises(ValueError, match="reps must be >= 1"):
        bootstrap_ci([1.0, 2.0], reps=0)


def test_single_run_has_no_interval_and_equal_scores_a_point():
    assert bootstrap_ci([5.0]) is None
    assert bootstrap_ci([[5.0, 7.0]]) is None  # one run of two tasks
    assert bootstrap_ci([4.0, 4.0, 4.0]) == (4.0, 4.0)


def test_two_runs_percentiles_by_hand():
    # Resampling [0, 10] twice: mean 0 (p = 1/4), 5 (1/2), 10 (1/4). The 2.5% and 97.5% quantiles are the
    # extremes; the 40% and 60% quantiles (confidence 0.2) both fall on 5.
    assert bootstrap_ci([0.0, 10.0], "mean", confidence=0.95, reps=4000) == (0.0, 10.0)
    assert bootstrap_ci([0.0, 10.0], "mean", confidence=0.2, reps=4000) == (5.0, 5.0)
    # With n = 2 nothing is trimmed: the IQM's interval is the mean's.
    assert bootstrap_ci([0.0, 10.0], "iqm", confidence=0.2, reps=4000) == (5.0, 5.0)


def test_each_task_is_resampled_within_its_own_runs():
    # Task 0 scores 0 or 1, task 1 scores 100 or 101: every stratified replicate holds two of each, so the
    # mean (and the IQM: the mean of the larger task-0 and the smaller task-1 score) stays within [50, 51];
    # pooling the four scores would let a replicate be all task 0 (about 0).
    for statistic in ("mean", "iqm"):
        interval = bootstrap_ci([[0.0, 100.0], [1.0, 101.0]], statistic, confidence=0.99, reps=4000)
        assert interval is not None
        assert 50.0 <= interval[0] <= interval[1] <= 51.0


def test_tasks_are_resampled_independently_not_as_whole_rows():
    # [[0, 0], [10, 10]]: independent columns give means 0, 2.5, 5, 7.5, 10 with p = 1, 4, 6, 4, 1 (/16), so
    # the 10% and 90% quantiles are 2.5 and 7.5; resampling whole rows would give 0 (p = 1/4) and 10.
    assert bootstrap_ci([[0.0, 0.0], [10.0, 10.0]], "mean", confidence=0.8, reps=20000) == (2.5, 7.5)


def test_seeded_generator_reproduces_the_interval():
    scores = [3.0, 9.0, 1.0, 7.0, 4.0]
    assert bootstrap_ci(scores, seed=3) == bootstrap_ci(scores, seed=3)


def test_curve_band_by_hand():
    values = np.array([[0.0, 0.0], [10.0, 20.0]])
    center, low, high = curve_band(values, confidence=0.95, reps=4000)
    np.testing.assert_allclose(center, [5.0, 10.0])
    np.testing.assert_allclose(low, [0.0, 0.0])     # both seeds' resample of the first curve (p = 1/4)
    np.testing.assert_allclose(high, [10.0, 20.0])
    center, low, high = curve_band(values, confidence=0.2, reps=4000)
    np.testing.assert_allclose(low, [5.0, 10.0])
    np.testing.assert_allclose(high, [5.0, 10.0])


def test_curve_band_of_one_seed_is_the_curve():
    center, low, high = curve_band(np.array([[1.0, 2.0, 4.0]]))
    np.testing.assert_allclose(center, [1.0, 2.0, 4.0])
    np.testing.assert_allclose(low, center)
    np.testing.assert_allclose(high, center)
    with pytest.raises(ValueError, match=r"\[seeds, points\]"):
        curve_band(np.array([1.0, 2.0]))
