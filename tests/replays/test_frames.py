from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.data import namedarraytuple
from lightning_rl.replays import FrameReplayStorage, ReplayBuffer
from tests.replays.replay_reference import Stream


@pytest.mark.parametrize("C", [1, 2, 4])
def test_reconstruction_equals_true_stack_at_episode_starts_and_wrap(C):
    stream = Stream(B=3, frame_stack=C, p_done=0.25, seed=C)
    replay = ReplayBuffer(stream.example(), size=3 * 13, B=3, n_step_return=2, frame_stack=C)
    st = replay.storage
    checked_starts = checked_wrapped = 0
    for T_in in [4, 6, 1, 13, 5, 8, 3, 12, 7]:
        replay.append_samples(stream.batch(T_in))
        R = stream.rows
        # Every row the ring may replay (its older frames not overwritten) rebuilds exactly.
        first = R - st.T + st.off_forward if R >= st.T else 0
        for a in range(first, R):
            t = np.full(3, a % st.T)
            got = st.observation(t * 3 + np.arange(3))
            np.testing.assert_array_equal(got, stream.obs[a])
            checked_starts += int(sum(stream.done[a - 1])) if a > 0 else 0
            checked_wrapped += int(a % st.T < C - 1 and R > st.T)
    assert checked_starts > 5 and (C == 1 or checked_wrapped > 0)


def test_first_observation_keeps_its_older_frames():
    # The envs ran 3 steps before the replay started, so the first stack has no zero frames.
    stream = Stream(B=2, frame_stack=4, p_done=0.0, prehistory=3, seed=0)
    replay = ReplayBuffer(stream.example(), size=2 * 10, B=2, frame_stack=4)
    replay.append_samples(stream.batch(3))
    got = replay.storage.observation(np.array([0, 1]))  # envs 0 and 1 at row 0
    assert (got.reshape(2, 4, -1) != 0).any(axis=2).all()
    np.testing.assert_array_equal(got, stream.obs[0])


def test_sampled_batches_rebuild_both_stacks():
    stream = Stream(B=2, frame_stack=4, p_done=0.2, seed=4)
    replay = ReplayBuffer(stream.example(), size=2 * 30, B=2, n_step_return=3, frame_stack=4, prioritized=True)
    for T_in in [17, 20, 9, 25]:
        replay.append_samples(stream.batch(T_in))
    batch = replay.sample_batch(128)
    obs = batch.agent_inputs.observation.numpy()
    target = batch.target_inputs.observation.numpy()
    assert obs.shape == (128, 4, 2, 2) and obs.dtype == np.uint8
    for i in range(128):
        a, b = stream.decode_frame(obs[i, -1])
        np.testing.assert_array_equal(obs[i], stream.obs[a][b])
        _, _, _, n_steps = stream.n_step(a, b, 3, 0.99)
        np.testing.assert_array_equal(target[i], stream.obs[a + n_steps][b])


def test_atari_bytes_per_transition():
    Atari = namedarraytuple("Atari", ["observation", "action", "reward", "done", "truncated"])
    example = Atari(np.zeros((4, 84, 84), np.uint8), np.int64(0), np.float32(0), False, False)
    size = 100_000
    replay = ReplayBuffer(example, size=size, B=8, n_step_return=3, frame_stack=4, prioritized=True)
    per = replay.nbytes / replay.size
    # One 84x84 frame, action 8 + reward 4 + done 1 + timeout 1 + n-step targets 7, sum tree ~8.
    assert 7056 + 21 <= per <= 7200
    expected = (replay.T + 3) * 8 * 7056 + replay.size * (8 + 4 + 1 + 1 + 4 + 1 + 1 + 1) + 16
    assert replay.storage.nbytes == expected
    assert replay.nbytes == expected + replay.sampler.tree.nbytes


def test_bad_frame_observation_is_rejected_before_writing():
    stream = Stream(B=2, frame_stack=4)
    replay = ReplayBuffer(stream.example(), size=20, B=2, frame_stack=4)
    samples = stream.batch(3)
    with pytest.raises(ValueError, match="observation must be"):
        replay.append_samples(samples._replace(observation=samples.observation[:, :, :3]))
    assert replay.storage.rows_written == 0 and not replay.storage.buffers["action"].any()


def test_frame_stack_must_match_observation():
    stream = Stream(B=1, frame_stack=4)
    with pytest.raises(ValueError, match="frame_stack"):
        FrameReplayStorage(stream.example(), 10, 1, frame_stack=3)
    with pytest.raises(ValueError, match="frame_stack"):
        ReplayBuffer(Stream(B=1).example(), size=10, B=1, frame_stack=4)
