from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.data import namedarraytuple
from lightning_rl.replays import ReplayBuffer
from tests.replays.replay_reference import Stream, chi_square


def _sampled_steps(replay, n_draws):
    batch = replay.sample_batch(n_draws)
    obs = batch.agent_inputs.observation.numpy()
    return obs[:, 0].astype(int), obs[:, 1].astype(int), batch


@pytest.mark.parametrize("n", [1, 4])
def test_invalid_indexes_never_sampled_and_all_valid_ones_reachable(n):
    stream = Stream(B=2, p_done=0.2, p_timeout=0.5, seed=n)
    replay = ReplayBuffer(stream.example(), size=2 * 16, B=2, n_step_return=n, seed=n)
    for T_in in [3, 5, 1, 9, 16, 2, 7, 4]:
        replay.append_samples(stream.batch(T_in))
        valid = {
            (a, b)
            for a in range(stream.rows)
            for b in range(2)
            if stream.valid(a, b, replay.T, n, replay.storage.off_forward)
        }
        if not valid:
            with pytest.raises(RuntimeError, match="no valid samples"):
                replay.sample_batch(4)
            continue
        a, b, batch = _sampled_steps(replay, 2000)
        assert set(zip(a.tolist(), b.tolist(), strict=False)) == valid
        # idxs name each sample by its absolute step and env.
        np.testing.assert_array_equal(batch.idxs.numpy(), a * 2 + b)
        np.testing.assert_array_equal(batch.is_weights.numpy(), np.ones(2000, np.float32))


def test_uniform_frequencies_chi_square():
    stream = Stream(B=3, p_done=0.1, p_timeout=0.0, seed=5)
    replay = ReplayBuffer(stream.example(), size=3 * 20, B=3, n_step_return=2, seed=7)
    replay.append_samples(stream.batch(20))
    replay.append_samples(stream.batch(6))  # wrapped: 20 rows, 1 oldest and 2 newest invalid
    a, b, _ = _sampled_steps(replay, 10_000)
    keys = sorted(set(zip(a.tolist(), b.tolist(), strict=False)))
    assert len(keys) == (20 - 1 - 2) * 3
    counts = np.array([np.sum((a == k[0]) & (b == k[1])) for k in keys])
    stat, threshold = chi_square(counts, np.full(len(keys), 1 / len(keys)))
    assert stat < threshold


def test_plain_observations_and_stored_prev_fields():
    stream = Stream(B=2, kind="prev", seed=2)
    replay = ReplayBuffer(stream.example(), size=2 * 12, B=2, n_step_return=2, seed=0)
    for T_in in [5, 12, 7]:
        replay.append_samples(stream.batch(T_in))
    a, b, batch = _sampled_steps(replay, 200)
    for i in range(200):
        pa, pr = stream.prev(a[i], b[i])
        assert batch.agent_inputs.prev_action[i].item() == pa
        assert batch.agent_inputs.prev_reward[i].item() == pytest.approx(pr)
        n_steps = int(batch.target_inputs.observation[i, 0].item()) - a[i]
        assert batch.target_inputs.prev_action[i].item() == stream.prev(a[i] + n_steps, b[i])[0]


def test_append_returns_rows_and_wraps():
    stream = Stream(B=1, seed=0)
    replay = ReplayBuffer(stream.example(), size=10, B=1)
    np.testing.assert_array_equal(replay.append_samples(stream.batch(7)), [0, 1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(replay.append_samples(stream.batch(5)), [7, 8, 9, 0, 1])
    assert replay.storage.cursor == 2 and replay.n_stored == 10
    obs = replay.storage.buffers["observation"][:, 0, 0]
    np.testing.assert_array_equal(obs, [10, 11, 2, 3, 4, 5, 6, 7, 8, 9])


def test_bad_samples_raise():
    stream = Stream(B=2, seed=0)
    replay = ReplayBuffer(stream.example(), size=20, B=2)
    with pytest.raises(ValueError, match="leading dims"):
        replay.append_samples(Stream(B=3).batch(2))
    with pytest.raises(ValueError, match="leading dims"):
        replay.append_samples(stream.batch(11))
    with pytest.raises(ValueError, match="batch_B"):
        replay.sample_batch(0)
    NoTimeout = namedarraytuple("NoTimeout", ["observation", "action", "reward", "done"])
    with pytest.raises(ValueError, match="'truncated'"):
        replay.append_samples(NoTimeout(*tuple(stream.batch(3))[:4]))
    assert replay.storage.rows_written == 0
