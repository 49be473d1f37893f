from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.replays import ReplayBuffer
from tests.replays.replay_reference import Stream

SEQ_T, N_STEP, INTERVAL = 5, 2, 4


def _valid_starts(stream, replay):
    return {
        (a, b)
        for a in range(stream.rows)
        for b in range(replay.B)
        if stream.valid(a, b, replay.T, N_STEP, replay.storage.off_forward, span=SEQ_T + N_STEP,
                        interval=INTERVAL, exclude_truncated=False)
    }


def _starts(batch, frame_stack):
    obs = batch.agent_inputs.observation.numpy()
    if frame_stack is None:
        return obs[0, :, 0].astype(int), obs[0, :, 1].astype(int)
    pairs = [Stream.decode_frame(None, obs[0, i, -1]) for i in range(obs.shape[1])]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


@pytest.mark.parametrize("frame_stack,prioritized", [(None, False), (None, True), (4, False), (4, True)])
def test_sequences_start_at_stored_states_and_match_brute_force(frame_stack, prioritized):
    stream = Stream(B=2, frame_stack=frame_stack, kind="rnn", p_done=0.15, p_timeout=0.5, seed=11)
    replay = ReplayBuffer(
        stream.example(), size=2 * 38, B=2, discount=0.9, n_step_return=N_STEP, prioritized=prioritized,
        frame_stack=frame_stack, sequence_T=SEQ_T, rnn_state_interval=INTERVAL, seed=5,
    )
    assert replay.T == 40  # rounded up to a multiple of the interval
    for T_in in [7, 9, 3, 13, 10, 6, 11]:
        replay.append_samples(stream.batch(T_in))
        valid = _valid_starts(stream, replay)
        if not valid:
            with pytest.raises(RuntimeError, match="no valid samples"):
                replay.sample_batch(2)
            continue
        batch = replay.sample_batch(300)
        L = SEQ_T + N_STEP
        assert batch.agent_inputs.observation.shape[:2] == (L, 300)
        assert batch.return_.shape == (SEQ_T, 300) and batch.init_rnn_state.h.shape == (300, 1, 3)
        a0, b0 = _starts(batch, frame_stack)
        assert set(zip(a0.tolist(), b0.tolist(), strict=False)) == valid
        np.testing.assert_array_equal(batch.idxs.numpy(), a0 * 2 + b0)
        for i in range(0, 300, 7):
            a, b = a0[i], b0[i]
            assert a % INTERVAL == 0
            np.testing.assert_array_equal(batch.init_rnn_state.h[i].numpy(), stream.rnn_h[a][b])
            np.testing.assert_array_equal(batch.init_rnn_state.c[i].numpy(), -stream.rnn_h[a][b])
            for k in range(L):
                np.testing.assert_array_equal(batch.agent_inputs.observation[k, i].numpy(), stream.obs[a + k][b])
                assert batch.action[k, i].item() == 10 * (a + k) + b
                pa, pr = stream.prev(a + k, b)
                assert batch.agent_inputs.prev_action[k, i].item() == pa
                assert batch.agent_inputs.prev_reward[k, i].item() == pytest.approx(pr)
            for k in range(SEQ_T):
                ret, done_n, truncated_n, n_steps = stream.n_step(a + k, b, N_STEP, 0.9)
                assert batch.return_[k, i].item() == pytest.approx(ret, rel=1e-5, abs=1e-5)
                assert (batch.done_n[k, i].item(), batch.truncated_n[k, i].item()) == (done_n, truncated_n)
                assert batch.n_steps[k, i].item() == n_steps
                assert batch.discount_n[k, i].item() == pytest.approx(0.9**n_steps)
                assert batch.done[k, i].item() == stream.done[a + k][b]
                assert batch.truncated[k, i].item() == stream.truncated[a + k][b]
        if prioritized:
            # Leaves are on exactly at valid starts; [T, N] TD errors reduce with eta.
            leaves = replay.sampler.tree.leaves
            on = {(s // 2, s % 2) for s in np.flatnonzero(leaves)}
            assert on == {((a % replay.T) // INTERVAL, b) for a, b in valid}
            td = torch.rand(SEQ_T, 300)
            replay.update_batch_priorities(batch.idxs, td)
            p = (0.9 * td.max(0).values + 0.1 * td.mean(0)).double().numpy() ** 0.6
            slots = ((a0 % replay.T) // INTERVAL) * 2 + b0
            np.testing.assert_allclose(replay.sampler.tree.leaves[slots[-1]], p[-1])


def test_feedforward_sequences_without_rnn_state():
    stream = Stream(B=1, seed=0)
    replay = ReplayBuffer(stream.example(), size=30, B=1, sequence_T=4)
    replay.append_samples(stream.batch(20))
    batch = replay.sample_batch(3)
    assert batch.init_rnn_state is None and batch.agent_inputs.observation.shape == (5, 3, 3)


def test_rnn_state_arguments():
    with pytest.raises(ValueError, match="rnn_state_interval"):
        ReplayBuffer(Stream(B=1).example(), size=40, B=1, rnn_state_interval=4)
    with pytest.raises(ValueError, match="prev_rnn_state"):
        ReplayBuffer(Stream(B=1, kind="rnn").example(), size=40, B=1)
    with pytest.raises(ValueError, match="rnn_state_interval"):
        ReplayBuffer(Stream(B=1, kind="rnn").example(), size=40, B=1, sequence_T=4, rnn_state_interval=0)
