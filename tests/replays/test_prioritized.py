from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.replays import ReplayBuffer
from tests.replays.replay_reference import Stream, chi_square


def _valid(stream, replay, n):
    """Sum-tree leaves and sample ids of the valid samples, by brute force."""
    T, B = replay.T, replay.B
    pairs = [
        (a, b) for a in range(stream.rows) for b in range(B) if stream.valid(a, b, T, n, replay.storage.off_forward)
    ]
    return [(a % T) * B + b for a, b in pairs], [a * B + b for a, b in pairs]


@pytest.mark.parametrize("n,frame_stack", [(1, None), (3, None), (2, 4)])
def test_tree_is_zero_exactly_at_invalid_slots(n, frame_stack):
    stream = Stream(B=3, frame_stack=frame_stack, p_done=0.2, p_timeout=0.5, seed=n)
    replay = ReplayBuffer(
        stream.example(), size=3 * 15, B=3, n_step_return=n, prioritized=True, alpha=0.5,
        default_priority=4.0, frame_stack=frame_stack,
    )
    for T_in in [2, 6, 15, 1, 4, 9, 3, 11, 5]:
        replay.append_samples(stream.batch(T_in))
        leaves, ids = _valid(stream, replay, n)
        expected = np.zeros(replay.size)
        expected[leaves] = 4.0**0.5
        np.testing.assert_array_equal(replay.sampler.tree.leaves, expected)
        if ids:
            # Updating sampled ones with the same priority must keep the tree as it is.
            batch = replay.sample_batch(8)
            assert set(batch.idxs.tolist()) <= set(ids)
            replay.update_batch_priorities(batch.idxs, torch.full((8,), 4.0))
            np.testing.assert_array_equal(replay.sampler.tree.leaves, expected)


def test_frequencies_match_priorities_chi_square():
    stream = Stream(B=2, p_done=0.1, p_timeout=0.0, seed=1)
    replay = ReplayBuffer(stream.example(), size=2 * 16, B=2, prioritized=True, alpha=0.7, seed=3)
    replay.append_samples(stream.batch(16))
    replay.append_samples(stream.batch(5))
    valid = np.array(_valid(stream, replay, 1)[1])
    priorities = np.linspace(0.2, 3.0, len(valid))
    replay.update_batch_priorities(valid, priorities)
    idxs = np.concatenate([replay.sample_batch(100).idxs.numpy() for _ in range(100)])
    assert set(idxs.tolist()) <= set(valid.tolist())
    counts = np.array([np.sum(idxs == s) for s in valid])
    probs = priorities**0.7 / np.sum(priorities**0.7)
    stat, threshold = chi_square(counts, probs)
    assert stat < threshold


def test_importance_weights_and_beta_annealing():
    stream = Stream(B=2, p_done=0.1, p_timeout=0.0, seed=2)
    replay = ReplayBuffer(
        stream.example(), size=2 * 20, B=2, prioritized=True, alpha=0.6, beta=0.4, beta_final=1.0,
        beta_anneal_steps=4, seed=0,
    )
    replay.append_samples(stream.batch(20))
    valid = np.array(_valid(stream, replay, 1)[1])
    priorities = np.arange(1, len(valid) + 1, dtype=np.float64)
    replay.update_batch_priorities(torch.as_tensor(valid), torch.as_tensor(priorities))
    P = dict(zip(valid.tolist(), priorities**0.6 / np.sum(priorities**0.6), strict=False))
    N = len(valid)
    for k in range(6):
        beta = 0.4 + 0.6 * min(k, 4) / 4
        assert replay.beta == pytest.approx(beta)
        batch = replay.sample_batch(16)
        w = np.array([(N * P[i]) ** -beta for i in batch.idxs.tolist()])
        np.testing.assert_allclose(batch.is_weights.numpy(), w / w.max(), rtol=1e-5)
    replay.set_beta(0.5)
    replay.sample_batch(4)
    assert replay.beta == 0.5


def test_late_update_of_overwritten_samples_is_dropped_and_sequence_reduction():
    stream = Stream(B=1, p_done=0.0, seed=0)
    replay = ReplayBuffer(stream.example(), size=10, B=1, prioritized=True, alpha=1.0)
    replay.append_samples(stream.batch(10))
    batch = replay.sample_batch(50)
    replay.append_samples(stream.batch(10))  # every sampled step is overwritten
    before = replay.sampler.tree.leaves.copy()
    replay.update_batch_priorities(batch.idxs, torch.full((50,), 9.0))
    np.testing.assert_array_equal(replay.sampler.tree.leaves, before)
    leaves, ids = _valid(stream, replay, 1)
    # A current sample takes the update; [T, N] priorities reduce to eta * max + (1 - eta) * mean.
    replay.update_batch_priorities(ids[:1], np.array([[1.0], [3.0], [2.0], [6.0]]))
    assert replay.sampler.tree.leaves[leaves[0]] == pytest.approx(0.9 * 6 + 0.1 * 3)


def test_bad_priority_updates():
    stream = Stream(B=1)
    replay = ReplayBuffer(stream.example(), size=10, B=1, prioritized=True)
    replay.append_samples(stream.batch(5))
    with pytest.raises(ValueError, match="priorities"):
        replay.update_batch_priorities([1, 2], [1.0])
    with pytest.raises(ValueError, match="priorities"):
        replay.update_batch_priorities([1], [-1.0])
    with pytest.raises(ValueError, match="idxs"):
        replay.update_batch_priorities([5], [1.0])
    with pytest.raises(ValueError, match="beta"):
        replay.set_beta(-1)
    uniform = ReplayBuffer(stream.example(), size=10, B=1)
    with pytest.raises(ValueError, match="uniform"):
        uniform.update_batch_priorities([1], [1.0])
