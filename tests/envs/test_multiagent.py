"""CoopGrid: registration, spaces, seeding, moves, blocking, rewards and rendering."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lightning_rl.envs import COOP_GRID_ID, CoopGridEnv, make_env
from lightning_rl.spaces import Composite, FloatBox, IntBox

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def placed(positions, targets, **kwargs) -> CoopGridEnv:
    """A reset env with agents and targets moved to the given (row, column) cells."""
    env = CoopGridEnv(**kwargs)
    env.reset(seed=0)
    env.positions = np.array(positions, dtype=np.int64)
    env.targets = np.array(targets, dtype=np.int64)
    return env


def act(env: CoopGridEnv, a0: int, a1: int):
    return env.step({"agent_0": a0, "agent_1": a1})


def test_registered_id_gives_dict_spaces_and_a_20_step_horizon():
    env = make_env(COOP_GRID_ID, seed=0)
    assert env.horizon == 20
    assert isinstance(env.action_space, Composite)
    assert env.action_space.names == env.action_space.keys == ("agent_0", "agent_1")
    assert all(isinstance(s, IntBox) and s.n == 5 for s in env.action_space.spaces)
    assert env.observation_space.names == ("agent_0", "agent_1")
    assert all(isinstance(s, FloatBox) and s.shape == (6,) for s in env.observation_space.spaces)
    env.reset()
    for t in range(20):
        step = env.step(env.action_space.null_value())
        assert step.done == (t == 19)
    assert step.env_info.truncated and not step.env_info.terminated
    assert step.env_info.agent_rewards._fields == ("agent_0", "agent_1")


def test_same_seed_same_episode_other_seed_other_start():
    def episode(seed: int) -> list:
        env = gymnasium.make(COOP_GRID_ID)
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        out = [obs]
        for _ in range(20):
            obs, reward, *_ = env.step(env.action_space.sample())
            out.append((obs, reward))
        return out

    a, b, c = episode(3), episode(3), episode(4)
    assert_same_tree(a, b)
    # Another seed starts elsewhere: some agent's first observation differs.
    assert any(not np.array_equal(a[0][name], c[0][name]) for name in a[0])


def assert_same_tree(x, y) -> None:
    """Equal nested lists / tuples / dicts of arrays and numbers, value by value."""
    assert type(x) is type(y)
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            assert_same_tree(x[k], y[k])
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            assert_same_tree(u, v)
    else:
        np.testing.assert_array_equal(x, y)


def test_per_agent_observation_is_own_cell_then_offsets_scaled_by_size_minus_one():
    env = placed([[0, 0], [4, 2]], [[1, 3], [4, 4]])
    obs, *_ = act(env, STAY, STAY)
    np.testing.assert_allclose(obs["agent_0"], np.array([0, 0, 1, 3, 4, 2]) / 4)
    np.testing.assert_allclose(obs["agent_1"], np.array([4, 2, 0, 2, -4, -2]) / 4)


def test_shared_observation_holds_both_cells_and_targets():
    env = placed([[0, 0], [4, 2]], [[1, 3], [4, 4]], observation_mode="shared")
    obs, *_ = act(env, STAY, STAY)
    np.testing.assert_allclose(obs, np.array([0, 0, 4, 2, 1, 3, 4, 4]) / 4)
    assert env.observation_space.contains(obs)


def test_moves_stop_at_the_walls():
    env = placed([[0, 0], [4, 4]], [[2, 2], [3, 3]])
    act(env, UP, DOWN)
    np.testing.assert_array_equal(env.positions, [[0, 0], [4, 4]])
    act(env, RIGHT, LEFT)
    np.testing.assert_array_equal(env.positions, [[0, 1], [4, 3]])


@pytest.mark.parametrize(
    "positions, actions, expected",
    [
        ([[1, 1], [1, 3]], (RIGHT, LEFT), [[1, 1], [1, 3]]),  # both into the same cell
        ([[1, 1], [1, 2]], (RIGHT, LEFT), [[1, 1], [1, 2]]),  # swap
        ([[1, 1], [1, 2]], (RIGHT, STAY), [[1, 1], [1, 2]]),  # into a standing agent
        ([[1, 1], [1, 2]], (RIGHT, RIGHT), [[1, 2], [1, 3]]),  # following is fine
    ],
)
def test_agents_block_each_other(positions, actions, expected):
    env = placed(positions, [[4, 4], [0, 0]])
    act(env, *actions)
    np.testing.assert_array_equal(env.positions, expected)


def test_rewards_half_per_agent_on_target_plus_half_each_when_both_are():
    env = placed([[0, 0], [4, 4]], [[0, 1], [3, 4]])
    _, reward, _, _, info = act(env, RIGHT, STAY)
    assert info["agent_rewards"] == {"agent_0": 0.5, "agent_1": 0.0} and reward == 0.5
    _, reward, _, _, info = act(env, STAY, UP)
    assert info["agent_rewards"] == {"agent_0": 1.0, "agent_1": 1.0} and reward == 2.0


def test_rgb_and_ansi_rendering():
    env = placed([[0, 0], [2, 1]], [[0, 1], [2, 2]], size=3, render_mode="rgb_array")
    frame = env.render()
    assert frame.shape == (24, 24, 3) and frame.dtype == np.uint8
    np.testing.assert_array_equal(frame[4, 4], [230, 60, 60])  # agent_0 fills cell (0, 0)
    text = placed([[0, 0], [2, 1]], [[0, 1], [2, 2]], size=3, render_mode="ansi").render()
    assert text == "Aa.\n...\n.Bb\n"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(size=1), "size"),
        (dict(observation_mode="global"), "observation_mode"),
        (dict(render_mode="human"), "render_mode"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CoopGridEnv(**kwargs)


def test_action_dict_must_name_both_agents():
    env = placed([[0, 0], [4, 4]], [[0, 1], [3, 4]])
    with pytest.raises(ValueError, match="agent_0"):
        env.step({"agent_0": 1})
