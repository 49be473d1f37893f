from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.replays import ReplayBuffer, compute_n_step_targets
from tests.replays.replay_reference import Stream


def _targets(reward, done, truncated, n, discount):
    T = len(reward)
    out = dict(
        return_=np.zeros((T, 1), np.float32),
        done_n=np.zeros((T, 1), bool),
        truncated_n=np.zeros((T, 1), bool),
        n_steps=np.zeros((T, 1), np.uint8),
    )
    col = lambda x: np.asarray(x)[:, None]  # noqa: E731
    compute_n_step_targets(
        col(reward).astype(np.float32),
        col(done).astype(bool),
        None if truncated is None else col(truncated).astype(bool),
        np.arange(T - n + 1), n, discount, out["return_"], out["done_n"], out["truncated_n"], out["n_steps"],
    )
    return {k: v[: T - n + 1, 0] for k, v in out.items()}


def test_hand_computed_termination():
    # rewards 1, 2, 4, 8, 16; the episode terminates after step 2; γ = 0.5, n = 2.
    out = _targets([1, 2, 4, 8, 16], [0, 0, 1, 0, 0], None, 2, 0.5)
    np.testing.assert_allclose(out["return_"], [1 + 0.5 * 2, 2 + 0.5 * 4, 4, 8 + 0.5 * 16])
    np.testing.assert_array_equal(out["done_n"], [False, True, True, False])
    np.testing.assert_array_equal(out["n_steps"], [2, 2, 2, 2])


def test_hand_computed_timeout_cuts_window_before_truncated_step():
    # Step 2 is truncated (done and timeout): windows reaching it stop before its reward and
    # bootstrap from observation[2]; step 2 itself has n_steps 0.
    out = _targets([1, 2, 4, 8, 16], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0], 3, 0.5)
    np.testing.assert_allclose(out["return_"], [1 + 0.5 * 2, 2, 0])
    np.testing.assert_array_equal(out["truncated_n"], [True, True, True])
    np.testing.assert_array_equal(out["done_n"], [False, False, False])
    np.testing.assert_array_equal(out["n_steps"], [2, 1, 0])


@pytest.mark.parametrize("n", [1, 3, 5])
def test_incremental_targets_match_brute_force_across_wraps(n):
    stream = Stream(B=3, seed=n)
    replay = ReplayBuffer(stream.example(), size=3 * 23, B=3, discount=0.9, n_step_return=n)
    st = replay.storage
    sizes = [1, 7, 4, 23, 2, 9, 11, 5, 3, 17, 6]
    for T_in in sizes:
        replay.append_samples(stream.batch(T_in))
        # Every row whose window is complete and not overwritten holds the brute-force targets.
        R = stream.rows
        for a in range(max(0, R - st.T), R - n + 1):
            for b in range(3):
                ret, done_n, truncated_n, n_steps = stream.n_step(a, b, n, 0.9)
                t = a % st.T
                assert st.return_[t, b] == pytest.approx(ret, rel=1e-5, abs=1e-5)
                assert st.done_n[t, b] == done_n
                assert st.truncated_n[t, b] == truncated_n
                assert st.n_steps[t, b] == n_steps


def test_sampled_transitions_match_brute_force():
    n, discount = 3, 0.95
    stream = Stream(B=2, p_done=0.15, seed=3)
    replay = ReplayBuffer(stream.example(), size=2 * 40, B=2, discount=discount, n_step_return=n, seed=1)
    for T_in in [13, 8, 30, 21, 5]:
        replay.append_samples(stream.batch(T_in))
        batch = replay.sample_batch(64)
        obs = batch.agent_inputs.observation.numpy()
        for i in range(64):
            a, b = int(obs[i, 0]), int(obs[i, 1])
            ret, done_n, truncated_n, n_steps = stream.n_step(a, b, n, discount)
            assert batch.return_[i].item() == pytest.approx(ret, rel=1e-5, abs=1e-5)
            assert batch.done_n[i].item() == done_n
            assert batch.truncated_n[i].item() == truncated_n
            assert batch.discount_n[i].item() == pytest.approx(discount**n_steps)
            assert batch.done[i].item() == stream.done[a][b]
            assert batch.action[i].item() == 10 * a + b
            assert (batch.agent_inputs.prev_action[i].item(), batch.agent_inputs.prev_reward[i].item()) ==\
                pytest.approx(stream.prev(a, b))
            # The bootstrap state is n_steps later: the last observation before a truncation.
            assert batch.target_inputs.observation[i, 0].item() == a + n_steps
            assert n_steps >= 1
            assert (batch.target_inputs.prev_action[i].item(), batch.target_inputs.prev_reward[i].item()) ==\
                pytest.approx(stream.prev(a + n_steps, b))
    assert batch.return_.dtype == torch.float32 and batch.done_n.dtype == torch.bool
