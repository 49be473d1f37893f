"""The toy envs other tests rely on, checked against their hand-computed returns."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from lightning_rl.envs import GymEnvWrapper, TrajInfo
from tests.toy_envs import (
    BoxIdentityEnv,
    ConstantRewardEnv,
    IdentityEnv,
    LastStepRewardEnv,
    TwoStateChainEnv,
    make_constant_reward_env,
    register_toy_envs,
)


@pytest.mark.parametrize(
    "make", [LastStepRewardEnv, ConstantRewardEnv, TwoStateChainEnv, IdentityEnv, BoxIdentityEnv]
)
def test_passes_gymnasium_checker(make):
    check_env(make(), skip_render_check=True)


def episode(env: GymEnvWrapper, policy, discount: float, max_steps: int = 1000) -> TrajInfo:
    info = TrajInfo(discount=discount)
    obs = env.reset()
    for _ in range(max_steps):
        step = env.step(policy(obs))
        info.step(obs, None, step.reward, step.done, None, step.env_info)
        obs = step.observation
        if step.done:
            return info
    raise AssertionError("episode did not end")


def test_last_step_reward():
    info = episode(GymEnvWrapper(LastStepRewardEnv(episode_length=4)), lambda o: 0, discount=0.9)
    assert (info.Length, info.Return, info.NonzeroRewards) == (4, 1.0, 1)
    assert info.DiscountedReturn == pytest.approx(0.9**3)


def test_constant_reward_truncates_with_geometric_return():
    env = GymEnvWrapper(make_constant_reward_env(max_episode_steps=10))
    info = episode(env, lambda o: 0, discount=0.9)
    assert info.Length == 10 and info.Return == 10.0
    # Truncated geometric sum; bootstrapping the tail gives the infinite-horizon 1 / (1 - gamma).
    assert info.DiscountedReturn == pytest.approx((1 - 0.9**10) / (1 - 0.9))
    assert info.DiscountedReturn + 0.9**10 / (1 - 0.9) == pytest.approx(10.0)


def test_two_state_chain_returns():
    env = GymEnvWrapper(TwoStateChainEnv(episode_length=5))
    best = episode(env, lambda o: 1, discount=0.5)
    assert best.Return == 4.0
    assert best.DiscountedReturn == pytest.approx(0.5 + 0.25 + 0.125 + 0.0625)
    assert episode(env, lambda o: 0, discount=0.5).Return == 0.0
    obs = env.reset()
    np.testing.assert_array_equal(obs, [1.0, 0.0])
    step = env.step(1)
    np.testing.assert_array_equal(step.observation, [0.0, 1.0])
    assert step.env_info.state == 1


def test_identity_rewards_matching_action_and_seeding():
    env = GymEnvWrapper(IdentityEnv(n=3, episode_length=8))
    env.seed(0)
    perfect = episode(env, lambda o: int(np.argmax(o)), discount=1.0)
    assert perfect.Return == 8.0
    wrong = episode(env, lambda o: (int(np.argmax(o)) + 1) % 3, discount=1.0)
    assert wrong.Return == 0.0

    def targets(seed):
        e = IdentityEnv(n=5)
        obs, _ = e.reset(seed=seed)
        return [int(np.argmax(obs))] + [int(np.argmax(e.step(0)[0])) for _ in range(10)]

    assert targets(1) == targets(1) and targets(1) != targets(2)


def test_box_identity_reward():
    env = BoxIdentityEnv(dim=2, episode_length=3)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(obs)
    assert reward == 0.0 and not terminated and not truncated
    # Off by 0.5 in the first coordinate, towards 0 so the action stays inside [-1, 1].
    action = obs - np.array([0.5 * np.sign(obs[0]), 0.0], np.float32)
    obs, reward, _, _, _ = env.step(action)
    assert reward == pytest.approx(-0.25)
    assert env.step(obs)[2]


def test_registration():
    ids = register_toy_envs()
    assert "lightning_rl_test/ConstantReward-v0" in ids
    env = gymnasium.make("lightning_rl_test/ConstantReward-v0")
    assert env.spec.max_episode_steps == 10
    env.reset(seed=0)
    steps = [env.step(0) for _ in range(10)]
    assert steps[-1][3] and not steps[-2][3]
    for env_id in ids:
        gymnasium.make(env_id).reset(seed=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="episode_length"):
        LastStepRewardEnv(episode_length=0)
    with pytest.raises(ValueError, match="n must be"):
        IdentityEnv(n=1)
