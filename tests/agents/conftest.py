"""Shared env spaces and input batches for the agent tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lightning_rl.envs import EnvSpaces, make_env
from lightning_rl.spaces import FloatBox, IntBox


@pytest.fixture(scope="session")
def cartpole_spaces() -> EnvSpaces:
    return make_env("CartPole-v1").spaces


@pytest.fixture(scope="session")
def pendulum_spaces() -> EnvSpaces:
    return make_env("Pendulum-v1").spaces


@pytest.fixture(scope="session")
def image_spaces() -> EnvSpaces:
    """Small uint8 frame stacks (the conv stacks accept 36x36) and 4 discrete actions."""
    return EnvSpaces(IntBox(0, 256, shape=(2, 36, 36), dtype=np.uint8), IntBox(0, 4))


@pytest.fixture(scope="session")
def asymmetric_box_spaces() -> EnvSpaces:
    """Vector observations and a 2-D action box with asymmetric bounds ``[0, 4] x [-1, 3]``."""
    return EnvSpaces(FloatBox(-1.0, 1.0, shape=(3,)), FloatBox(np.array([0.0, -1.0]), np.array([4.0, 3.0])))


def batch(spaces: EnvSpaces, B: int, T: int | None = None, seed: int = 0) -> tuple[Any, Any, Any]:
    """Random ``(observation, prev_action, prev_reward)`` numpy inputs with leading ``[B]`` or ``[T, B]``."""
    rng = np.random.default_rng(seed)
    lead = (B,) if T is None else (T, B)
    obs_space, act_space = spaces.observation, spaces.action
    if isinstance(obs_space, IntBox):
        observation = rng.integers(0, 256, size=lead + obs_space.shape).astype(obs_space.dtype)
    else:
        observation = rng.uniform(-1.0, 1.0, size=lead + obs_space.shape).astype(np.float32)
    if isinstance(act_space, IntBox):
        prev_action = rng.integers(0, int(act_space.n), size=lead).astype(np.int64)
    else:
        prev_action = rng.uniform(act_space.low, act_space.high, size=lead + act_space.shape).astype(np.float32)
    prev_reward = rng.normal(size=lead).astype(np.float32)
    return observation, prev_action, prev_reward
