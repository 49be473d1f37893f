"""Frame deduplication per field of dict/tuple observations.

A ``Dict`` observation ``{"pixels": uint8 [C, H, W] frame stack, "state": float32 vector}`` is
stored with one frame of ``pixels`` per step and ``state`` as it is; replayed observations keep
the namedtuple structure, the stacks rebuilt exactly as :class:`FrameReplayStorage` rebuilds an
Atari stack (zero frames before an episode start, wrap copies, the ``C - 1`` oldest rows of a
full ring never replayed). Expected stacks are written out by hand or come from the brute-force
:class:`~tests.replays.replay_reference.Stream`.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import DqnAgent
from lightning_rl.algos import DQN
from lightning_rl.algos.off_policy import frame_stack_of
from lightning_rl.data import namedarraytuple
from lightning_rl.replays import CompositeFrameReplayStorage, ReplayBuffer
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.replays.replay_reference import Stream
from tests.toy_envs import FrameStackDictEnv

Obs = namedarraytuple("Obs", ["pixels", "state"])
Sensors = namedarraytuple("Sensors", ["camera", "rgb", "speed"])
NestedObs = namedarraytuple("NestedObs", ["sensors", "state"])
Samples = namedarraytuple("Samples", ["observation", "action", "reward", "done", "truncated"])

# One env (B = 1), C = 3 frames of 2x2: the frame of step a is filled with a + 10. The env ran two
# steps before step 0, and step 3 ends an episode, so step 4 is a reset: [0, 0, f(4)].
HAND_STACKS = [
    [8, 9, 10], [9, 10, 11], [10, 11, 12], [11, 12, 13],
    [0, 0, 14], [0, 14, 15], [14, 15, 16], [15, 16, 17], [16, 17, 18], [17, 18, 19],
]
HAND_DONE = [False, False, False, True, False, False, False, False, False, False]


def hand_batch(steps: range) -> Samples:
    """Steps ``steps`` of the hand-written env as ``[T_in, 1]`` samples."""
    pixels = np.array([[np.full((2, 2), v) for v in HAND_STACKS[a]] for a in steps], np.uint8)[:, None]
    state = np.array([[a + 0.25, -a] for a in steps], np.float32)[:, None]
    T_in = len(steps)
    return Samples(
        Obs(pixels, state), np.array(list(steps), np.int64)[:, None], np.ones((T_in, 1), np.float32),
        np.array([HAND_DONE[a] for a in steps])[:, None], np.zeros((T_in, 1), bool),
    )


def hand_example() -> Samples:
    return Samples(Obs(np.zeros((3, 2, 2), np.uint8), np.zeros(2, np.float32)), np.int64(0), np.float32(0),
                   False, False)


def stack_of(step: int) -> np.ndarray:
    return np.array([np.full((2, 2), v) for v in HAND_STACKS[step]], np.uint8)


def test_hand_built_stacks_rebuild_with_zeroed_episode_starts_and_across_the_wrap():
    replay = ReplayBuffer(hand_example(), size=6, B=1, frame_stack={"pixels": 3})
    st = replay.storage
    assert isinstance(st, CompositeFrameReplayStorage) and st.T == 6
    # First append: step 0's two older frames (8, 9) come from its own stack.
    replay.append_samples(hand_batch(range(0, 4)))
    np.testing.assert_array_equal(st.observation(np.arange(4)).pixels, [stack_of(a) for a in range(4)])
    # Steps 4..7 go to rows 4, 5, 0, 1: the write wraps. Steps 2 and 3 (rows 2, 3) are now the
    # C - 1 = 2 oldest rows, whose older frames were overwritten; they are never replayed.
    replay.append_samples(hand_batch(range(4, 8)))
    assert st.age_bounds(1) == (1, 3)  # ages 1 .. 3: steps 6 .. 4 (step 7 has no next row yet)
    rows = np.array([4, 5, 0, 1])
    got = st.observation(rows)
    # Step 4 is a reset: the ring holds 12 and 13 before it, replayed as zeros.
    np.testing.assert_array_equal(got.pixels[0], [np.zeros((2, 2)), np.zeros((2, 2)), np.full((2, 2), 14)])
    np.testing.assert_array_equal(got.pixels, [stack_of(a) for a in range(4, 8)])
    np.testing.assert_array_equal(got.state, [[a + 0.25, -a] for a in range(4, 8)])
    # Every transition the replay samples is a replayable step (4, 5, 6) with its next stack.
    batch = replay.sample_batch(64)
    obs, next_obs = batch.agent_inputs.observation, batch.target_inputs.observation
    assert type(obs).__name__ == "Obs" and obs._fields == ("pixels", "state")
    steps = (obs.state[:, 0] - 0.25).long().tolist()
    assert set(steps) == {4, 5, 6}
    torch.testing.assert_close(obs.state, torch.tensor([[a + 0.25, -a] for a in steps]), rtol=0, atol=0)
    np.testing.assert_array_equal(obs.pixels.numpy(), [stack_of(a) for a in steps])
    np.testing.assert_array_equal(next_obs.pixels.numpy(), [stack_of(a + 1) for a in steps])
    torch.testing.assert_close(batch.action, torch.tensor(steps))


@pytest.mark.parametrize("C,prioritized,n", [(2, False, 1), (4, True, 3)])
def test_dict_stacks_match_the_reference_stream_over_wraps_and_episode_starts(C, prioritized, n):
    stream = Stream(B=3, frame_stack=C, p_done=0.25, seed=C)
    example = stream.example()

    def as_dict(samples):
        # state: (step, env) from the action 10 * a + b; rgb: a channels-last image stored whole.
        a, b = samples.action // 10, samples.action % 10
        state = np.stack([a, b], axis=-1).astype(np.float32)
        rgb = np.broadcast_to(samples.action.astype(np.uint8)[..., None, None, None], samples.action.shape + (5, 5, 3))
        return samples._replace(observation=NestedObs(Sensors(samples.observation, rgb.copy(), state[..., :1]), state))

    dict_example = example._replace(
        observation=NestedObs(Sensors(example.observation, np.zeros((5, 5, 3), np.uint8), np.zeros(1, np.float32)),
                              np.zeros(2, np.float32))
    )
    replay = ReplayBuffer(dict_example, size=3 * 13, B=3, n_step_return=n, prioritized=prioritized,
                          frame_stack={"sensors.camera": C}, seed=1)
    st = replay.storage
    checked_starts = checked_wrapped = 0
    for T_in in [4, 6, 1, 13, 5, 8, 3, 12, 7]:
        replay.append_samples(as_dict(stream.batch(T_in)))
        R = stream.rows
        first = R - st.T + max(1, C - 1) if R >= st.T else 0
        for a in range(first, R):
            got = st.observation(np.full(3, a % st.T) * 3 + np.arange(3))
            np.testing.assert_array_equal(got.sensors.camera, stream.obs[a])
            np.testing.assert_array_equal(got.state, [[a, b] for b in range(3)])
            np.testing.assert_array_equal(got.sensors.rgb, np.broadcast_to(
                np.array([(10 * a + b) % 256 for b in range(3)], np.uint8)[:, None, None, None], (3, 5, 5, 3)))
            checked_starts += int(sum(stream.done[a - 1])) if a > 0 else 0
            checked_wrapped += int(a % st.T < C - 1 and R > st.T)
        batch = replay.sample_batch(32)
        obs, target = batch.agent_inputs.observation, batch.target_inputs.observation
        for i in range(32):
            a, b = (int(x) for x in obs.state[i])
            np.testing.assert_array_equal(obs.sensors.camera[i].numpy(), stream.obs[a][b])
            n_steps = stream.n_step(a, b, n, 0.99)[3]
            np.testing.assert_array_equal(target.sensors.camera[i].numpy(), stream.obs[a + n_steps][b])
            assert float(target.state[i, 0]) == a + n_steps and float(target.sensors.speed[i, 0]) == a + n_steps
    assert checked_starts > 5 and checked_wrapped > 0


def test_image_field_costs_one_frame_per_row_and_vectors_their_size():
    example = Samples(Obs(np.zeros((4, 84, 84), np.uint8), np.zeros(5, np.float32)), np.int64(0), np.float32(0),
                      False, False)
    replay = ReplayBuffer(example, size=1000, B=8, n_step_return=3, frame_stack={"pixels": 4})
    st = replay.storage
    T = 125
    assert st.rings["pixels"].frames.shape == (T + 3, 8, 84, 84) and st.rings["pixels"].frames.dtype == np.uint8
    assert st.buffers["observation"].pixels is None  # not also stored whole
    assert st.buffers["observation"].state.shape == (T, 8, 5)
    # Frames (T + 3) * 8 * 7056, state 20, action 8, reward 4, done 1, truncated 1, return 4,
    # done_n 1, truncated_n 1, n_steps 1 per transition, counters 16.
    assert st.nbytes == (T + 3) * 8 * 7056 + T * 8 * (20 + 8 + 4 + 1 + 1 + 4 + 1 + 1 + 1) + 16
    stacked = ReplayBuffer(example, size=1000, B=8, n_step_return=3)
    assert stacked.storage.nbytes - st.nbytes == T * 8 * 4 * 7056 - (T + 3) * 8 * 7056


def test_state_dict_round_trip_restores_stacks_vectors_and_sampling(tmp_path):
    def fill(replay, rows):
        for start in range(0, rows, 4):
            replay.append_samples(hand_batch(range(start, min(start + 4, rows))))

    kwargs = dict(size=6, B=1, frame_stack={"pixels": 3}, n_step_return=2, prioritized=True, seed=3)
    for rows in (3, 10):  # before and after the ring wraps
        replay = ReplayBuffer(hand_example(), **kwargs)
        fill(replay, rows)
        state = replay.state_dict()
        frames = state["storage"]["frames.pixels"]
        # Only filled rows are kept: rows + C - 1 frames before the wrap, all T + C - 1 after it.
        assert frames.shape == (min(rows, 6) + 2, 1, 2, 2)
        assert "samples.observation.state" in state["storage"]
        assert "samples.observation.pixels" not in state["storage"]
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        restored = ReplayBuffer(hand_example(), **kwargs)
        restored.load_state_dict(torch.load(buf, weights_only=True))
        t = np.arange(min(rows, 6))
        for got, want in zip(restored.storage.observation(t), replay.storage.observation(t), strict=True):
            np.testing.assert_array_equal(got, want)
        a, b = replay.sample_batch(16), restored.sample_batch(16)
        for got, want in zip(b.agent_inputs.observation, a.agent_inputs.observation, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(b.idxs, a.idxs)


def test_frame_stack_of_takes_the_fields_an_env_declares_and_checks_them():
    T, B = 2, 3
    obs = NestedObs(
        Sensors(np.zeros((T, B, 4, 84, 84), np.uint8), np.zeros((T, B, 64, 64, 3), np.uint8),
                np.zeros((T, B, 1), np.float32)),
        np.zeros((T, B, 4, 84, 84), np.float32),  # float, not a uint8 image
    )
    assert frame_stack_of(obs, {"sensors.camera": 4}) == {"sensors.camera": 4}
    assert frame_stack_of(obs, None) is None  # a [4, 84, 84] uint8 field alone turns nothing on
    with pytest.raises(ValueError, match=r"declares field 'sensors.left', but the observation has \['sensors.camera'"):
        frame_stack_of(obs, {"sensors.left": 4})
    with pytest.raises(ValueError, match=r"declares 3 frames, but field 'sensors.camera' are uint8 \[4, 84, 84\]"):
        frame_stack_of(obs, {"sensors.camera": 3})
    with pytest.raises(ValueError, match=r"declares 4 frames, but field 'state' are float32"):
        frame_stack_of(obs, {"state": 4})
    with pytest.raises(ValueError, match="for a dict/tuple observation, which takes a mapping"):
        frame_stack_of(obs, 4)
    assert frame_stack_of(np.zeros((T, B, 4, 84, 84), np.uint8), 4) == 4  # Atari


@pytest.mark.parametrize(
    "frame_stack, match",
    [({}, "frame_stack"), ({"pixels": 0}, "frame_stack"), ({"pixels": 2}, "'pixels'=2"), ({"rgb": 3}, "'rgb'"),
     ({"state": 3}, "'state'=3")],
)
def test_bad_frame_stacks_are_rejected(frame_stack, match):
    with pytest.raises(ValueError, match=match):
        ReplayBuffer(hand_example(), size=12, B=1, frame_stack=frame_stack)


def test_bad_stacked_field_is_rejected_before_writing():
    replay = ReplayBuffer(hand_example(), size=12, B=1, frame_stack={"pixels": 3})
    samples = hand_batch(range(3))
    bad = samples._replace(observation=samples.observation._replace(pixels=samples.observation.pixels[:, :, :2]))
    with pytest.raises(ValueError, match="observation.pixels must be"):
        replay.append_samples(bad)
    assert replay.storage.rows_written == 0 and not replay.storage.buffers["observation"].state.any()


def test_true_stacks_never_warn_but_rgb_images_and_reset_padded_stacks_do():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the hand-built stacks shift one frame per step, zeros after a reset
        replay = ReplayBuffer(hand_example(), size=6, B=1, frame_stack={"pixels": 3})
        for start in range(0, 10, 2):
            replay.append_samples(hand_batch(range(start, start + 2)))
    # A channels-first RGB image [3, 2, 2] has the shape of a 3-frame stack but is none.
    rgb = np.random.default_rng(0).integers(1, 255, (4, 1, 3, 2, 2), dtype=np.uint8)
    samples = hand_batch(range(4))
    replay = ReplayBuffer(hand_example(), size=6, B=1, frame_stack={"pixels": 3})
    with pytest.warns(UserWarning, match="'pixels'.*replayed observations differ"):
        replay.append_samples(samples._replace(observation=samples.observation._replace(pixels=rgb)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per field
        replay.append_samples(samples._replace(observation=samples.observation._replace(pixels=rgb)))
    # A stack padded at reset with copies of the first frame (not zeros): step 4 is [14, 14, 14].
    padded = hand_batch(range(2, 6))
    pixels = padded.observation.pixels.copy()
    pixels[2, 0, :2] = 14
    replay = ReplayBuffer(hand_example(), size=6, B=1, frame_stack={"pixels": 3})
    with pytest.warns(UserWarning, match="'pixels'"):
        replay.append_samples(padded._replace(observation=padded.observation._replace(pixels=pixels)))


def dict_env_dqn() -> DQN:
    return DQN(DqnAgent(hidden_sizes=[16], eps_steps_min=0, eps_steps_max=128),
               SerialSampler(env_id=FrameStackDictEnv, batch_T=8, batch_B=2), batch_size=16, replay_size=64,
               replay_ratio=1, min_steps_learn=32, n_step_return=2, prioritized_replay=True,
               target_update_interval=4, total_env_steps=160, log_interval_steps=32)


def test_dqn_on_a_dict_env_stores_its_image_key_frame_by_frame_and_resumes_it(tmp_path):
    pl.seed_everything(0)
    module = dict_env_dqn()
    make_trainer(callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)]).fit(module)
    assert module.train_state.env_steps == 160 and module.train_state.updates > 0
    st = module.replay.storage
    assert isinstance(st, CompositeFrameReplayStorage)
    assert st.rows_written == 80 > st.T == 32  # wrapped
    assert st.rings["frames"].frames.shape == (st.T + 2, 2, 8, 8)
    batch = module.replay.sample_batch(64)
    for obs in (batch.agent_inputs.observation, batch.target_inputs.observation):
        # FrameStackDictEnv's stack at episode step t: frame k filled with max(0, t - 1 + k).
        t = obs.step[:, 0].long()
        want = (t[:, None] - 1 + torch.arange(3)).clamp(min=0).to(torch.uint8)
        torch.testing.assert_close(obs.frames, want[:, :, None, None].expand(-1, -1, 8, 8))
    # The checkpoint's replay side file brings the frames back into a new module's replay.
    pl.seed_everything(1)
    resumed = dict_env_dqn()
    make_trainer(max_epochs=5, callbacks=[ModelCheckpoint(dirpath=tmp_path / "resumed")]).fit(
        resumed, ckpt_path=str(tmp_path / "last.ckpt"))
    assert resumed.train_state.env_steps == 160
    saved, loaded = module.replay.state_dict(), resumed.replay.state_dict()
    assert saved["storage"]["frames.frames"].shape == (34, 2, 8, 8)
    for key in ("frames.frames", "samples.observation.step", "samples.action", "counters"):
        torch.testing.assert_close(loaded["storage"][key], saved["storage"][key], rtol=0, atol=0)
