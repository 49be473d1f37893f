from __future__ import annotations

import pickle

import ale_py
import cv2
import numpy as np
import pytest
from ale_py import roms

from lightning_rl.envs import AtariEnv, AtariEnvInfo
from lightning_rl.spaces import IntBox


def manual_ale(game: str, seed: int) -> ale_py.ALEInterface:
    ale = ale_py.ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(roms.get_rom_path(game))
    ale.reset_game()
    return ale


def test_spaces():
    env = AtariEnv("breakout")
    assert env.observation_space == IntBox(0, 256, shape=(4, 84, 84), dtype=np.uint8)
    assert env.action_space.n == 4
    assert env.action_meanings == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    assert env.horizon == 27000
    assert AtariEnv("pong", num_img_obs=2, obs_type="rgb").observation_space.shape == (6, 84, 84)


def test_frames_match_manual_ale_reproduction():
    """Each step: 4 frames of the action, max of the last two grayscale frames, INTER_AREA to 84x84."""
    env = AtariEnv("breakout", max_start_noops=0, episodic_lives=False, clip_reward=False, horizon=None)
    env.seed(7)
    obs = env.reset()
    ale = manual_ale("breakout", 7)
    actions = ale.getMinimalActionSet()
    first = cv2.resize(ale.getScreenGrayscale(), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(obs[-1], first)
    assert not obs[:-1].any()

    rng = np.random.default_rng(0)
    pooled_differs = False
    for _ in range(60):
        a = int(rng.integers(len(actions)))
        step = env.step(a)
        screens, score = [], 0
        for _ in range(4):
            score += ale.act(actions[a])
            screens.append(ale.getScreenGrayscale())
        pooled = np.maximum(screens[-2], screens[-1])
        expected = cv2.resize(pooled, (84, 84), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(step.observation[-1], expected)
        assert step.env_info.game_score == score and step.reward == score
        # The frame stack shifts by one, newest last.
        np.testing.assert_array_equal(step.observation[:-1], obs[1:])
        last_only = cv2.resize(screens[-1], (84, 84), interpolation=cv2.INTER_AREA)
        pooled_differs |= not np.array_equal(expected, last_only)
        obs = step.observation
    # The moving ball makes the two frames differ: the max-pool is exercised.
    assert pooled_differs


def test_frame_skip_one_pools_with_the_previous_frame():
    env = AtariEnv("breakout", frame_skip=1, num_img_obs=2, max_start_noops=0)
    env.seed(1)
    env.reset()
    ale = manual_ale("breakout", 1)
    prev = ale.getScreenGrayscale()
    for a in [1, 2, 2, 3, 0, 1]:
        step = env.step(a)
        ale.act(ale.getMinimalActionSet()[a])
        cur = ale.getScreenGrayscale()
        expected = cv2.resize(np.maximum(prev, cur), (84, 84), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(step.observation[-1], expected)
        prev = cur


def test_rgb_observations_match_manual_reproduction():
    env = AtariEnv("breakout", num_img_obs=2, max_start_noops=0, obs_type="rgb")
    env.seed(2)
    env.reset()
    ale = manual_ale("breakout", 2)
    for a in [1, 2, 3]:
        step = env.step(a)
        screens = []
        for _ in range(4):
            ale.act(ale.getMinimalActionSet()[a])
            screens.append(ale.getScreenRGB())
        expected = cv2.resize(np.maximum(screens[-2], screens[-1]), (84, 84), interpolation=cv2.INTER_AREA)
        np.testing.assert_array_equal(step.observation[3:], expected.transpose(2, 0, 1))


def test_episodic_lives_done_on_life_loss_traj_done_at_game_over():
    env = AtariEnv("breakout", max_start_noops=0, episodic_lives=True)
    env.seed(0)
    env.reset()
    assert env.lives == 5
    rng = np.random.default_rng(0)
    life_losses = 0
    for _ in range(400):
        step = env.step(int(rng.integers(4)))
        if not step.done:
            continue
        assert step.env_info.terminated and not step.env_info.truncated
        if step.env_info.traj_done:
            break
        life_losses += 1
        assert env.lives == 5 - life_losses
        frame_number = env.ale.getEpisodeFrameNumber()
        obs = env.reset()
        # Same game, continued: no new game, lives kept; the frame stack restarts from zeros.
        assert env.ale.getEpisodeFrameNumber() == frame_number
        assert env.lives == 5 - life_losses
        assert not obs[:-1].any()
        np.testing.assert_array_equal(obs[-1], step.observation[-1])
    assert step.env_info.traj_done and env.ale.game_over()
    assert life_losses == 4 and env.lives == 0
    env.reset()
    assert env.lives == 5 and env.ale.getEpisodeFrameNumber() == 0


def test_without_episodic_lives_only_game_over_is_done():
    env = AtariEnv("breakout", max_start_noops=0, episodic_lives=False)
    env.seed(0)
    env.reset()
    rng = np.random.default_rng(0)
    for t in range(400):  # noqa: B007 - t is read after the loop
        step = env.step(int(rng.integers(4)))
        if step.done:
            break
    assert step.env_info.traj_done and step.env_info.terminated and env.lives == 0
    assert t > 100


def test_timeout_at_horizon_then_new_game():
    env = AtariEnv("pong", horizon=5, max_start_noops=0)
    env.seed(0)
    env.reset()
    steps = [env.step(0) for _ in range(5)]
    assert [s.done for s in steps] == [False] * 4 + [True]
    last = steps[-1].env_info
    assert last == AtariEnvInfo(truncated=True, terminated=False, game_score=0.0, traj_done=True)
    assert env.ale.getEpisodeFrameNumber() == 20
    env.reset()
    assert env.ale.getEpisodeFrameNumber() == 0
    assert not env.step(0).done


def first_scoring_step(clip_reward: bool):
    env = AtariEnv("space_invaders", clip_reward=clip_reward, max_start_noops=0)
    env.seed(0)
    env.reset()
    for _ in range(200):
        step = env.step(1)  # FIRE
        if step.env_info.game_score:
            return step
    raise AssertionError("no score within 200 steps")


def test_game_score_is_raw_reward_is_clipped():
    clipped = first_scoring_step(clip_reward=True)
    raw = first_scoring_step(clip_reward=False)
    assert clipped.env_info.game_score == raw.env_info.game_score > 1.0
    assert clipped.reward == 1.0
    assert raw.reward == raw.env_info.game_score


def run(env: AtariEnv, seed: int, n: int = 40) -> np.ndarray:
    env.seed(seed)
    frames = [env.reset()]
    rng = np.random.default_rng(0)
    for _ in range(n):
        step = env.step(int(rng.integers(env.action_space.n)))
        frames.append(step.observation)
        if step.done:
            frames.append(env.reset())
    return np.stack(frames)


def test_seeded_runs_repeat_with_noops_and_sticky_actions():
    kwargs = dict(max_start_noops=30, repeat_action_probability=0.25)
    a = run(AtariEnv("breakout", **kwargs), seed=11)
    b = run(AtariEnv("breakout", **kwargs), seed=11)
    np.testing.assert_array_equal(a, b)
    c = run(AtariEnv("breakout", **kwargs), seed=12)
    assert not np.array_equal(a, c)


def test_start_noops_are_seeded_and_bounded():
    env = AtariEnv("pong", max_start_noops=30)
    counts = []
    for seed in range(4):
        env.seed(seed)
        env.reset()
        counts.append(env.ale.getEpisodeFrameNumber())
    assert all(0 <= c <= 30 for c in counts) and len(set(counts)) > 1
    env.seed(2)
    env.reset()
    assert env.ale.getEpisodeFrameNumber() == counts[2]


def test_fire_on_reset():
    env = AtariEnv("breakout", fire_on_reset=True, max_start_noops=0)
    env.seed(0)
    env.reset()
    # FIRE is held for one step (frame_skip frames) after the reset.
    assert env.ale.getEpisodeFrameNumber() == 4
    with pytest.raises(ValueError, match="fire_on_reset"):
        AtariEnv("freeway", fire_on_reset=True)


def test_pickle_resumes_identically():
    env = AtariEnv("breakout", repeat_action_probability=0.25)
    env.seed(5)
    env.reset()
    for a in [1, 2, 2, 3, 1, 0]:
        env.step(a)
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(8):
        a = env.action_space.sample()
        assert clone.action_space.sample() == a
        s1, s2 = env.step(a), clone.step(a)
        np.testing.assert_array_equal(s1.observation, s2.observation)
        assert s1.env_info == s2.env_info


def test_seed_makes_action_samples_repeat():
    env = AtariEnv("pong")
    env.seed(4)
    first = [int(env.action_space.sample()) for _ in range(20)]
    env.seed(4)
    assert [int(env.action_space.sample()) for _ in range(20)] == first


def test_render_returns_rgb_screen():
    env = AtariEnv("pong")
    env.seed(0)
    env.reset()
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8


def test_bad_arguments():
    with pytest.raises(ValueError, match="game='nope'"):
        AtariEnv("nope")
    with pytest.raises(ValueError, match="frame_skip"):
        AtariEnv("pong", frame_skip=0)
    with pytest.raises(ValueError, match="obs_type"):
        AtariEnv("pong", obs_type="ram")
    with pytest.raises(ValueError, match="repeat_action_probability"):
        AtariEnv("pong", repeat_action_probability=1.5)
    with pytest.raises(ValueError, match="seed"):
        AtariEnv("pong").seed(-1)
    with pytest.raises(RuntimeError, match="reset"):
        AtariEnv("pong").step(0)
