"""MaskVelocityWrapper and the registered CartPoleNoVelocity-v1 POMDP."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lightning_rl.envs import CARTPOLE_NO_VELOCITY_ID, MaskVelocityWrapper, make_env
from tests.toy_envs import BoxIdentityEnv


def test_cartpole_no_velocity_observes_position_and_angle_only():
    full = gymnasium.make("CartPole-v1")
    masked = gymnasium.make(CARTPOLE_NO_VELOCITY_ID)
    obs_full, _ = full.reset(seed=3)
    obs, _ = masked.reset(seed=3)
    np.testing.assert_array_equal(obs, obs_full[[0, 2]])
    for _ in range(5):
        obs_full, reward_full, terminated_full, _, _ = full.step(1)
        obs, reward, terminated, _, _ = masked.step(1)
        np.testing.assert_array_equal(obs, obs_full[[0, 2]])
        assert (reward, terminated) == (reward_full, terminated_full)
    assert masked.observation_space.shape == (2,)
    assert masked.spec.max_episode_steps == 500


def test_make_env_gives_the_time_limit_as_horizon():
    env = make_env(CARTPOLE_NO_VELOCITY_ID, seed=0)
    assert env.spaces.observation.shape == (2,)
    assert env.horizon == 500


def test_known_envs_need_no_indexes_and_others_must_give_them():
    pendulum = MaskVelocityWrapper(gymnasium.make("Pendulum-v1"))
    assert pendulum.observation_space.shape == (2,)  # cos, sin; the angular velocity is hidden
    with pytest.raises(ValueError, match="keep=None"):
        MaskVelocityWrapper(BoxIdentityEnv())
    assert MaskVelocityWrapper(BoxIdentityEnv(), keep=[0]).observation_space.shape == (1,)


def test_bad_indexes_are_rejected():
    with pytest.raises(ValueError, match="keep=\\[4\\]"):
        MaskVelocityWrapper(gymnasium.make("CartPole-v1"), keep=[4])
