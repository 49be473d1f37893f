"""Replay n-step targets (:func:`compute_n_step_targets`) against numbers worked out by hand.

Rewards are powers of two and ``discount = 0.5``, so every term of a window sum is visible in
the result; ``.ci/mutation_check.py`` relies on these tests to kill its mutants of
:mod:`lightning_rl.replays.n_step`.
"""

from __future__ import annotations

import numpy as np

from lightning_rl.replays import compute_n_step_targets

REWARD = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def _targets(reward, done, truncated, n, rows=None, discount=0.5):
    """Targets of ``rows`` (default: every row) of a ``[T, 1]`` ring, as 1-D arrays."""
    T = len(reward)
    col = lambda x: np.asarray(x)[:, None]  # noqa: E731
    return_ = np.full((T, 1), -99.0, np.float32)
    done_n, truncated_n = np.zeros((T, 1), bool), np.zeros((T, 1), bool)
    n_steps = np.full((T, 1), 99, np.uint8)
    rows = np.arange(T) if rows is None else np.asarray(rows)
    compute_n_step_targets(
        col(reward).astype(np.float32),
        col(done).astype(bool),
        None if truncated is None else col(truncated).astype(bool),
        rows, n, discount, return_, done_n, truncated_n, n_steps,
    )
    return return_[:, 0], done_n[:, 0], truncated_n[:, 0], n_steps[:, 0]


def test_three_step_windows_with_termination_and_ring_wrap():
    # Termination after step 2; gamma = .5, n = 3. Rows 4 and 5 wrap around the ring to rows 0, 1.
    ret, done_n, truncated_n, n_steps = _targets(REWARD, [0, 0, 1, 0, 0, 0], None, 3)
    np.testing.assert_allclose(
        ret,
        [
            1 + 0.5 * 2 + 0.25 * 4,  # 3: the terminal step's reward counts
            2 + 0.5 * 4,  # 4: stops after the termination
            4,
            8 + 0.5 * 16 + 0.25 * 32,  # 24
            16 + 0.5 * 32 + 0.25 * 1,  # 32.25: rows 5, 0
            32 + 0.5 * 1 + 0.25 * 2,  # 33: rows 0, 1
        ],
    )
    np.testing.assert_array_equal(done_n, [True, True, True, False, False, False])
    np.testing.assert_array_equal(truncated_n, [False] * 6)
    np.testing.assert_array_equal(n_steps, [3] * 6)


def test_three_step_windows_cut_by_timeout():
    # Step 2 is truncated (done and timeout): its reward is not summed, the window bootstraps
    # from observation[2]: n_steps = 2, 1, 0 for rows 0, 1, 2; no termination.
    ret, done_n, truncated_n, n_steps = _targets(REWARD, [0, 0, 1, 0, 0, 0], [0, 0, 1, 0, 0, 0], 3, rows=[0, 1, 2, 3])
    np.testing.assert_allclose(ret[:4], [1 + 0.5 * 2, 2, 0, 8 + 0.5 * 16 + 0.25 * 32])
    np.testing.assert_array_equal(done_n[:4], [False, False, False, False])
    np.testing.assert_array_equal(truncated_n[:4], [True, True, True, False])
    np.testing.assert_array_equal(n_steps[:4], [2, 1, 0, 3])
    # Rows not asked for are left alone.
    np.testing.assert_array_equal(ret[4:], [-99.0, -99.0])
    np.testing.assert_array_equal(n_steps[4:], [99, 99])


def test_timeout_after_a_termination_in_the_window_is_ignored():
    # Termination after step 1, a timeout at step 2 (a new episode): row 0 ends at the termination,
    # so the later timeout does not cut its window: return 1 + .5*2 = 2, done_n, n_steps = 3.
    ret, done_n, truncated_n, n_steps = _targets(REWARD, [0, 1, 1, 0, 0, 0], [0, 0, 1, 0, 0, 0], 3, rows=[0, 1])
    np.testing.assert_allclose(ret[:2], [1 + 0.5 * 2, 2])
    np.testing.assert_array_equal(done_n[:2], [True, True])
    np.testing.assert_array_equal(truncated_n[:2], [False, False])
    np.testing.assert_array_equal(n_steps[:2], [3, 3])


def test_two_step_windows_with_done_before_the_last_reward():
    # n = 2: row 0 sums 1 + .5*2 = 2 (done at step 1 is the window's last step); row 1 ends at once.
    ret, done_n, truncated_n, n_steps = _targets(REWARD[:4], [0, 1, 0, 0], None, 2, rows=[0, 1, 2])
    np.testing.assert_allclose(ret[:3], [2.0, 2.0, 4 + 0.5 * 8])
    np.testing.assert_array_equal(done_n[:3], [True, True, False])
    np.testing.assert_array_equal(n_steps[:3], [2, 2, 2])


def test_one_step_targets_with_timeout_and_termination():
    # n = 1: a terminated step keeps its reward and done_n; a truncated one has no target
    # (return 0, n_steps 0, timeout_n) and is not a termination.
    ret, done_n, truncated_n, n_steps = _targets([1.0, 2.0, 4.0, 8.0], [0, 1, 1, 0], [0, 0, 1, 0], 1)
    np.testing.assert_allclose(ret, [1.0, 2.0, 0.0, 8.0])
    np.testing.assert_array_equal(done_n, [False, True, False, False])
    np.testing.assert_array_equal(truncated_n, [False, False, True, False])
    np.testing.assert_array_equal(n_steps, [1, 1, 0, 1])
    # Without timeouts every done is a termination.
    ret, done_n, truncated_n, n_steps = _targets([1.0, 2.0, 4.0, 8.0], [0, 1, 1, 0], None, 1)
    np.testing.assert_allclose(ret, [1.0, 2.0, 4.0, 8.0])
    np.testing.assert_array_equal(done_n, [False, True, True, False])
    np.testing.assert_array_equal(n_steps, [1, 1, 1, 1])


def test_discount_applies_per_env_column():
    # Two envs, n = 2, gamma = .5: env 0 rewards 1, 2, 4; env 1 rewards 10, 20, 40 and a
    # termination after step 0.
    reward = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]], np.float32)
    done = np.array([[0, 1], [0, 0], [0, 0]], bool)
    return_ = np.zeros((3, 2), np.float32)
    done_n, truncated_n = np.zeros((3, 2), bool), np.zeros((3, 2), bool)
    n_steps = np.zeros((3, 2), np.uint8)
    compute_n_step_targets(reward, done, None, np.array([0, 1]), 2, 0.5, return_, done_n, truncated_n, n_steps)
    np.testing.assert_allclose(return_[:2], [[1 + 0.5 * 2, 10], [2 + 0.5 * 4, 20 + 0.5 * 40]])
    np.testing.assert_array_equal(done_n[:2], [[False, True], [False, False]])
