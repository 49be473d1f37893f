"""A malformed env fails when its sampler is built, with a message naming the env and the rule it
breaks, instead of a shape error deep inside a model."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.samplers import SerialSampler


class BadEnv(gymnasium.Env):
    """Declares ``space``; returns ``reset_obs`` from ``reset()`` and ``step_obs`` from ``step()``."""

    def __init__(self, space: spaces.Space, reset_obs: Any, step_obs: Any) -> None:
        self.observation_space, self.action_space = space, spaces.Discrete(2)
        self.reset_obs, self.step_obs = reset_obs, step_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self.reset_obs, {}

    def step(self, action: Any):
        return self.step_obs, 0.0, False, False, {}


def build(space: spaces.Space, reset_obs: Any, step_obs: Any) -> None:
    sampler = SerialSampler(env_id=lambda: BadEnv(space, reset_obs, step_obs), batch_T=2, batch_B=1)
    try:
        sampler.initialize(CategoricalPgAgent(hidden_sizes=[4]), seed=0)
    finally:
        sampler.shutdown()


BOX3 = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)


def test_an_observation_of_the_wrong_shape_names_the_env_the_call_and_both_shapes():
    with pytest.raises(ValueError, match=r"env <function .*: the observation returned by reset\(\) has shape \(4,\), "
                                         r"but the observation space FloatBox.* has shape \(3,\)"):
        build(BOX3, np.zeros(4, np.float32), np.zeros(3, np.float32))


def test_an_observation_outside_the_space_is_refused_at_the_first_step():
    with pytest.raises(ValueError, match=r"the observation returned by step\(\) lies outside the observation space "
                                         r".*values from 0.0 to 2.0, bounds -1.0 to 1.0"):
        build(BOX3, np.zeros(3, np.float32), np.array([0.0, 2.0, 0.0], np.float32))


def test_a_well_formed_env_builds():
    build(BOX3, np.zeros(3, np.float32), np.ones(3, np.float32))


def test_check_observation_rules_for_integer_and_composite_spaces():
    # Envs written against lightning_rl's own Env interface are not cast by the gymnasium
    # adapter, so the dtype rule is theirs; composite observations are checked field by field.
    from lightning_rl.data.namedarraytuple import NamedTupleSchema
    from lightning_rl.samplers.base import check_observation
    from lightning_rl.spaces import Composite, FloatBox, IntBox

    frames = IntBox(0, 256, shape=(2, 2), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"env 'Mine-v0': the observation returned by reset\(\) has dtype float32, "
                                         r"but the observation space IntBox.* holds integers \(uint8\)"):
        check_observation(frames, np.zeros((2, 2), np.float32), "Mine-v0", "reset()")
    check_observation(frames, np.zeros((2, 2), np.uint8), "Mine-v0", "reset()")
    Obs = NamedTupleSchema("Obs", ["pixels", "speed"])
    space = Composite([frames, FloatBox(-1.0, 1.0, shape=(1,))], Obs)
    with pytest.raises(ValueError, match=r"the observation.speed returned by step\(\) has shape \(2,\)"):
        check_observation(space, Obs(np.zeros((2, 2), np.uint8), np.zeros(2, np.float32)), "Mine-v0", "step()")
