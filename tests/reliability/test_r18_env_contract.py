"""A malformed env fails when its sampler is built, with a message naming the env and the rule it
breaks, instead of a shape error deep inside a model; ``lightning-rl check-env <id>`` runs the same
checks (gymnasium's env checker plus lightning_rl's rules) on its own, and every env a shipped
config trains on passes them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.envs.check import EnvCheckError, check_env
from lightning_rl.samplers import SerialSampler


class BadEnv(gymnasium.Env):
    """Declares ``space``; returns ``reset_obs`` from ``reset()`` and ``step_obs`` from ``step()``."""

    def __init__(self, space: spaces.Space, reset_obs: Any, step_obs: Any) -> None:
        self.observation_space, self.action_space = space, spaces.Discrete(2)
        self.reset_obs, self.step_obs = reset_obs, step_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return np.array(self.reset_obs), {}

    def step(self, action: Any):
        return np.array(self.step_obs), 0.0, False, False, {}


class GoodEnv(gymnasium.Env):
    """A well-formed env: observations ``[t / 10, 0, 0]``, episodes of 10 steps."""

    observation_space = BOX = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action: Any):
        self.t += 1
        return np.array([self.t / 10, 0, 0], np.float32), 1.0, self.t >= 10, False, {}


class NoSeedEnv(GoodEnv):
    def reset(self):  # gymnasium 0.21's signature
        self.t = 0
        return np.zeros(3, np.float32), {}


class IntTerminatedEnv(GoodEnv):
    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, int(terminated), truncated, info


class FourTupleEnv(GoodEnv):
    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class LateOutOfSpaceEnv(GoodEnv):
    """Leaves its space at step 3 (the first reset and step are fine)."""

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        return (obs * 10 if self.t == 3 else obs), reward, terminated, truncated, info


BROKEN = [
    (NoSeedEnv, r"reset\(\) must accept the keywords seed and options"),
    (IntTerminatedEnv, r"step\(\) must return terminated as a bool; step 0 returned int 0"),
    (FourTupleEnv, r"step\(\) must return \(observation, reward, terminated, truncated, info\); step 0 "
                   r"returned tuple of length 4"),
    (LateOutOfSpaceEnv, r"the observation returned by step\(\) 2 lies outside the observation space .*"
                        r"values from 0.0 to 3.0"),
]


def build(space: spaces.Space, reset_obs: Any, step_obs: Any) -> None:
    sampler = SerialSampler(env_id=lambda: BadEnv(space, reset_obs, step_obs), batch_T=2, batch_B=1)
    try:
        sampler.initialize(CategoricalPgAgent(hidden_sizes=[4]), seed=0)
    finally:
        sampler.shutdown()


BOX3 = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
ROOT = Path(__file__).resolve().parents[2]


def test_an_observation_of_the_wrong_shape_names_the_env_the_call_and_both_shapes():
    with pytest.raises(ValueError, match=r"env <function .*: the observation returned by reset\(\) has shape \(4,\), "
                                         r"but the observation space Box.* has shape \(3,\)"):
        build(BOX3, np.zeros(4, np.float32), np.zeros(3, np.float32))


def test_an_observation_outside_the_space_is_refused_at_the_first_step():
    with pytest.raises(ValueError, match=r"the observation returned by step\(\) 0 lies outside the observation space "
                                         r".*values from 0.0 to 2.0"):
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


@pytest.mark.parametrize("cls, rule", BROKEN)
def test_broken_envs_are_refused_when_the_sampler_is_built(cls, rule):
    sampler = SerialSampler(env_id=cls, batch_T=2, batch_B=1)
    with pytest.raises(EnvCheckError, match=rf"env <class '.*{cls.__name__}'> breaks the env contract: {rule}"):
        sampler.initialize(CategoricalPgAgent(hidden_sizes=[4]), seed=0)
    sampler.shutdown()


@pytest.mark.parametrize("cls, rule", BROKEN)
def test_check_env_names_the_rule(cls, rule):
    with pytest.raises(EnvCheckError, match=rule):
        check_env(cls)


def test_the_check_can_be_turned_off():
    sampler = SerialSampler(env_id=IntTerminatedEnv, batch_T=2, batch_B=1, check_env=False)
    sampler.initialize(CategoricalPgAgent(hidden_sizes=[4]), seed=0)
    sampler.shutdown()


def shipped_env_ids() -> list[str]:
    ids = set()
    for config in (ROOT / "configs").rglob("*.yaml"):
        ids.update(re.findall(r"^\s*env_id:\s*(\S+)\s*$", config.read_text(), flags=re.MULTILINE))
    return sorted(ids)


def test_the_shipped_configs_name_the_envs_checked_here():
    assert {"CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "ALE/Pong-v5"} <= set(shipped_env_ids())


@pytest.mark.parametrize("env_id", shipped_env_ids())
def test_every_shipped_env_passes(env_id):
    check_env(env_id)


def test_check_env_command(capsys):
    from lightning_rl.cli import main

    with pytest.raises(SystemExit) as ok:
        main(["check-env", "CartPole-v1"])
    assert ok.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("CartPole-v1: passes the env contract checks")
    assert "\x1b[" not in out  # gymnasium's advice without its colour codes
    if "lightning_rl_test/IntTerminated-v0" not in gymnasium.registry:
        gymnasium.register("lightning_rl_test/IntTerminated-v0", entry_point=IntTerminatedEnv)
    with pytest.raises(SystemExit) as bad:
        main(["check-env", "lightning_rl_test/IntTerminated-v0"])
    assert bad.value.code == 2
    assert "step() must return terminated as a bool" in capsys.readouterr().err
