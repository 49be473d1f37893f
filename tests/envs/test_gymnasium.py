from __future__ import annotations

import pickle
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces as gs

from lightning_rl.data import buffer_from_example
from lightning_rl.envs import EnvStep, GymEnvWrapper
from lightning_rl.spaces import FloatBox, IntBox
from tests.toy_envs import LastStepRewardEnv, make_constant_reward_env


def test_spaces_and_horizon_from_cartpole():
    env = GymEnvWrapper(gymnasium.make("CartPole-v1", max_episode_steps=7))
    assert env.horizon == 7
    assert isinstance(env.observation_space, FloatBox) and env.observation_space.shape == (4,)
    assert isinstance(env.action_space, IntBox) and env.action_space.n == 2
    assert env.spaces.action is env.action_space
    assert GymEnvWrapper(LastStepRewardEnv()).horizon is None


def test_truncation_is_done_with_timeout():
    env = GymEnvWrapper(gymnasium.make("CartPole-v1", max_episode_steps=5))
    env.seed(0)
    obs = env.reset()
    assert obs.dtype == np.float32 and obs.shape == (4,)
    steps = [env.step(t % 2) for t in range(5)]
    assert [s.done for s in steps] == [False] * 4 + [True]
    assert [s.env_info.truncated for s in steps] == [False] * 4 + [True]
    assert not any(s.env_info.terminated for s in steps)
    assert all(isinstance(s, EnvStep) and s.reward == 1.0 and type(s.reward) is float for s in steps)
    assert type(steps[-1].done) is bool and type(steps[-1].env_info.truncated) is bool


def test_termination_is_done_without_timeout():
    env = GymEnvWrapper(gymnasium.make("CartPole-v1"))
    env.seed(0)
    env.reset()
    for t in range(100):  # noqa: B007 - t is read after the loop
        step = env.step(1)
        if step.done:
            break
    # Pushing right all the time topples the pole within a dozen steps: a termination.
    assert t < 20
    assert step.env_info.terminated and not step.env_info.truncated


def test_toy_envs_flags():
    last = GymEnvWrapper(LastStepRewardEnv(episode_length=3))
    last.reset()
    steps = [last.step(0) for _ in range(3)]
    assert [s.reward for s in steps] == [0.0, 0.0, 1.0]
    assert [s.done for s in steps] == [False, False, True]
    assert steps[-1].env_info.terminated and not steps[-1].env_info.truncated

    const = GymEnvWrapper(make_constant_reward_env(max_episode_steps=4))
    assert const.horizon == 4
    const.reset()
    steps = [const.step(1) for _ in range(4)]
    assert [s.done for s in steps] == [False, False, False, True]
    assert steps[-1].env_info.truncated and not steps[-1].env_info.terminated
    # After the reset the TimeLimit counts again from zero.
    const.reset()
    assert not const.step(0).done


class InfoEnv(gymnasium.Env):
    """Emits changing info dicts, to check the fixed env_info structure."""

    observation_space = gs.Box(-1.0, 1.0, shape=(2,), dtype=np.float64)
    action_space = gs.Discrete(2)

    def __init__(self):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {"ale.lives": 3, "reset only": 1.5}

    def step(self, action):
        self.t += 1
        info: dict[str, Any] = {
            "ale.lives": 3 - self.t,
            "vec": np.full(2, self.t, np.float32),
            "name": "x",
            "np_name": np.str_("y"),
            "objs": np.array([None]),
        }
        if self.t == 1:
            info["nested"] = {"a": True, "b c": np.int16(4)}
        if self.t >= 2:
            info.pop("vec")
            info["new_key"] = 1.0
            info["terminated"] = 7
        return np.full(2, 0.5), 0.5, self.t >= 3, False, info


def test_info_filtered_to_first_structure():
    env = GymEnvWrapper(InfoEnv())
    obs = env.reset()
    assert obs.dtype == np.float32
    assert env.info_fields is None
    first = env.step(0).env_info
    # timeout/terminated first, then reset keys, then first-step keys; non-numeric values are dropped.
    assert env.info_fields == ("truncated", "terminated", "ale_lives", "reset_only", "vec", "nested")
    assert first.ale_lives == 2 and first.reset_only == 0.0
    np.testing.assert_array_equal(first.vec, [1.0, 1.0])
    assert first.nested.a is True and first.nested.b_c == 4 and first.nested.b_c.dtype == np.int16
    second = env.step(0).env_info
    assert env.info_fields == first._fields
    assert second.ale_lives == 1
    # Missing keys give zeros of the example's type; the new key is dropped; the info key
    # "terminated" does not overwrite the flag.
    np.testing.assert_array_equal(second.vec, [0.0, 0.0])
    assert second.vec.dtype == np.float32
    assert second.nested.a is False and second.nested.b_c == 0
    assert second.terminated is False
    assert "new_key" not in second._fields
    third = env.step(0)
    assert third.done and third.env_info.terminated


def test_env_info_builds_a_buffer_and_pickles():
    env = GymEnvWrapper(InfoEnv())
    env.reset()
    step = env.step(0)
    buf = buffer_from_example(step, (4, 2))
    assert buf.env_info.truncated.dtype == np.bool_ and buf.env_info.truncated.shape == (4, 2)
    assert buf.env_info.vec.shape == (4, 2, 2)
    assert buf.env_info.nested.b_c.dtype == np.int16
    buf[1, 0] = step
    assert buf.env_info.ale_lives[1, 0] == 2
    again = pickle.loads(pickle.dumps(step.env_info))
    assert again._fields == step.env_info._fields
    assert again.ale_lives == 2 and again.nested.b_c == 4
    np.testing.assert_array_equal(again.vec, step.env_info.vec)


def test_info_value_with_wrong_shape_raises():
    class ShapeEnv(InfoEnv):
        def step(self, action):
            self.t += 1
            return np.zeros(2), 0.0, False, False, {"vec": np.zeros(self.t)}

    env = GymEnvWrapper(ShapeEnv())
    env.reset()
    env.step(0)
    with pytest.raises(ValueError, match="vec"):
        env.step(0)


def rollout(env: GymEnvWrapper, seed: int, n: int = 30) -> tuple[np.ndarray, list[int]]:
    env.seed(seed)
    obs = [env.reset()]
    actions = []
    for _ in range(n):
        a = env.action_space.sample()
        actions.append(int(a))
        step = env.step(a)
        obs.append(step.observation)
        if step.done:
            obs.append(env.reset())
    return np.stack(obs), actions


def test_seeding_is_deterministic():
    make = lambda: GymEnvWrapper(gymnasium.make("CartPole-v1"))  # noqa: E731
    obs_a, act_a = rollout(make(), 1)
    obs_b, act_b = rollout(make(), 1)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert act_a == act_b
    obs_c, act_c = rollout(make(), 2)
    assert not np.array_equal(obs_a[0], obs_c[0])
    assert act_a != act_c


def test_seed_applies_to_the_next_reset_only():
    env = GymEnvWrapper(gymnasium.make("CartPole-v1"))
    env.seed(3)
    first = env.reset()
    second = env.reset()
    env.seed(3)
    np.testing.assert_array_equal(env.reset(), first)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "InvertedPendulum-v5"])
def test_pickled_env_continues_identically(env_id):
    env = GymEnvWrapper(gymnasium.make(env_id))
    env.seed(0)
    env.reset()
    for _ in range(3):
        env.step(env.action_space.sample())
    # MuJoCo envs unpickle freshly built (gymnasium's EzPickle): the wrapper restores their state.
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(30):
        action = env.action_space.sample()
        s1, s2 = env.step(action), clone.step(action)
        np.testing.assert_array_equal(s1.observation, s2.observation)
        assert s1.reward == s2.reward and s1.done == s2.done
        if s1.done:
            np.testing.assert_array_equal(env.reset(), clone.reset())


class DictEnv(gymnasium.Env):
    observation_space = gs.Dict({"pos": gs.Box(-1.0, 1.0, (2,)), "mode": gs.Discrete(3)})
    action_space = gs.Dict({"move": gs.Box(-1.0, 1.0, (2,)), "fire": gs.Discrete(2)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = np.zeros(2, np.float32)
        return {"pos": self.pos.copy(), "mode": 1}, {}

    def step(self, action):
        assert self.action_space.contains(action)
        self.pos = np.clip(self.pos + action["move"], -1, 1).astype(np.float32)
        return {"pos": self.pos.copy(), "mode": action["fire"]}, float(action["fire"]), False, False, {}


def test_dict_observations_and_actions():
    env = GymEnvWrapper(DictEnv())
    obs = env.reset()
    assert obs._fields == ("mode", "pos")
    assert int(obs.mode) == 1
    action = env.action_space.null_value()._replace(move=np.array([0.5, -0.25], np.float32), fire=np.int64(1))
    step = env.step(action)
    np.testing.assert_array_equal(step.observation.pos, [0.5, -0.25])
    assert int(step.observation.mode) == 1 and step.reward == 1.0


def test_rejects_non_gymnasium_env():
    with pytest.raises(ValueError, match="gymnasium.Env"):
        GymEnvWrapper("CartPole-v1")


class _RecordActionEnv(gymnasium.Env):
    """Records the action it is stepped with; Box(-1, 1, (2,)) unless another space is given."""

    def __init__(self, action_space: gymnasium.Space | None = None) -> None:
        self.observation_space = gs.Box(-1.0, 1.0, (1,), dtype=np.float32)
        self.action_space = action_space or gs.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.received: list[Any] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_box_actions_are_clipped_to_the_bounds_before_the_env_and_the_callers_array_is_untouched():
    inner = _RecordActionEnv()
    env = GymEnvWrapper(inner)
    env.reset()
    action = np.array([3.0, -0.25], dtype=np.float32)  # a Gaussian sample outside the bounds
    env.step(action)
    np.testing.assert_array_equal(inner.received[-1], [1.0, -0.25])
    np.testing.assert_array_equal(action, [3.0, -0.25])  # the sample (for its log-likelihood) stays raw
    env.step(np.array([-7.0, 0.5], dtype=np.float32))
    np.testing.assert_array_equal(inner.received[-1], [-1.0, 0.5])
    # Unbounded boxes and discrete actions pass as they are.
    unbounded = _RecordActionEnv(gs.Box(-np.inf, np.inf, (2,), dtype=np.float32))
    GymEnvWrapper(unbounded).step(np.array([5.0, -5.0], dtype=np.float32))
    np.testing.assert_array_equal(unbounded.received[-1], [5.0, -5.0])
    discrete = _RecordActionEnv(gs.Discrete(3))
    GymEnvWrapper(discrete).step(2)
    assert int(discrete.received[-1]) == 2
