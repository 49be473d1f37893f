"""Prioritized replay: sum-tree leaves ``p^alpha`` and importance weights worked out by hand.

``.ci/mutation_check.py`` relies on these tests to kill its mutants of
:mod:`lightning_rl.replays.prioritized`.
"""

from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.replays import ReplayBuffer
from tests.replays.replay_reference import Stream


def _replay(**kwargs):
    # One env, no episode ends; 6 steps in a 10-row ring. With n = 1 a start row needs one newer
    # row, so steps 0..4 are valid (sample ids 0..4, leaves 0..4) and step 5 is not yet.
    stream = Stream(B=1, p_done=0.0, seed=0)
    replay = ReplayBuffer(stream.example(), size=10, B=1, prioritized=True, seed=0, **kwargs)
    replay.append_samples(stream.batch(6))
    return replay


def test_new_samples_get_default_priority_to_the_alpha():
    replay = _replay(alpha=0.5, default_priority=9.0)
    # 9 ** 0.5 = 3 on valid leaves, 0 elsewhere.
    np.testing.assert_allclose(replay.sampler.tree.leaves, [3, 3, 3, 3, 3, 0, 0, 0, 0, 0])


def test_updated_priorities_and_importance_weights():
    replay = _replay(alpha=0.5, beta=0.5)
    replay.update_batch_priorities(np.arange(5), np.array([4.0, 4.0, 64.0, 4.0, 4.0]))
    # Leaves p^alpha: sqrt(4) = 2, sqrt(64) = 8; total 16, so P = 1/8 (x4) and 1/2.
    np.testing.assert_allclose(replay.sampler.tree.leaves, [2, 2, 8, 2, 2, 0, 0, 0, 0, 0])
    batch = replay.sample_batch(400)
    idxs = batch.idxs.numpy()
    # w_i = (N P_i)^-beta / max_j w_j: (5/8)^-.5 for the low ones (the max), (5/2)^-.5 for slot 2;
    # their ratio is (1/4)^.5 = 0.5.
    expected = np.where(idxs == 2, 0.5, 1.0)
    np.testing.assert_allclose(batch.is_weights.numpy(), expected, rtol=1e-6)
    # About half the draws are slot 2 (binomial(400, 1/2): sd 10; allow 5 sd).
    assert abs(np.sum(idxs == 2) - 200) < 50


def test_weights_normalized_by_the_batch_max_not_by_one():
    # Priorities 16 and 256 with alpha = .5: leaves 4 and 16 (neither 1), beta = 1: the weight
    # ratio is 4 / 16 = .25, and the low-priority samples (the largest weight) get exactly 1.
    replay = _replay(alpha=0.5, beta=1.0)
    replay.update_batch_priorities(np.arange(5), np.array([16.0, 256.0, 16.0, 16.0, 16.0]))
    batch = replay.sample_batch(64)
    idxs = batch.idxs.numpy()
    assert (idxs == 1).any() and (idxs != 1).any()
    np.testing.assert_allclose(batch.is_weights.numpy(), np.where(idxs == 1, 0.25, 1.0), rtol=1e-6)
    assert batch.is_weights.max().item() == pytest.approx(1.0)
