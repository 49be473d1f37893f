"""The categorical PG agent on vector discrete actions (MultiDiscrete, MultiBinary), and agents that refuse them."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent, DdpgAgent, DqnAgent, SacAgent, Td3Agent
from lightning_rl.distributions import Bernoulli, Categorical, MultiCategorical
from lightning_rl.envs import EnvSpaces, make_env
from lightning_rl.spaces import FloatBox, IntBox
from tests.toy_envs import IdentityEnv, MultiBinaryMatchEnv, MultiDiscreteTargetEnv

B, T = 6, 3


@pytest.fixture(scope="module")
def multi_discrete_spaces() -> EnvSpaces:
    # gymnasium's MultiDiscrete([3, 4], start=[1, -2]) through the library's conversion.
    return make_env(functools.partial(MultiDiscreteTargetEnv, nvec=(3, 4), start=(1, -2))).spaces


@pytest.fixture(scope="module")
def multi_binary_spaces() -> EnvSpaces:
    return make_env(functools.partial(MultiBinaryMatchEnv, n=4)).spaces


def step_inputs(spaces: EnvSpaces, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    obs = torch.rand(n, *spaces.observation.shape)
    prev_action = torch.as_tensor(np.stack([spaces.action.null_value()] * n)).long()
    return obs, prev_action, torch.zeros(n)


def test_scalar_int_box_keeps_the_categorical_distribution():
    spaces = make_env(functools.partial(IdentityEnv, n=4)).spaces
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(spaces)
    assert type(agent.distribution) is Categorical and agent.distribution.dim == 4
    step = agent.step(*step_inputs(spaces, B))
    assert step.action.shape == (B,) and step.agent_info.dist_info.prob.shape == (B, 4)


def test_multi_discrete_actions_are_shifted_by_low_and_probabilities_are_per_dim(multi_discrete_spaces):
    torch.manual_seed(0)
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(multi_discrete_spaces)
    dist = agent.distribution
    assert isinstance(dist, MultiCategorical) and dist.nvec == (3, 4) and dist.low == (1, -2)
    agent.sample_mode(0)
    step = agent.step(*step_inputs(multi_discrete_spaces, 200))
    action, prob = step.action, step.agent_info.dist_info.prob
    assert action.shape == (200, 2) and action.dtype == torch.long and prob.shape == (200, 7)
    torch.testing.assert_close(prob[:, :3].sum(-1), torch.ones(200))
    torch.testing.assert_close(prob[:, 3:].sum(-1), torch.ones(200))
    # Every value of each dim's range (1..3 and -2..1) is drawn, and nothing outside it.
    assert sorted(action[:, 0].unique().tolist()) == [1, 2, 3]
    assert sorted(action[:, 1].unique().tolist()) == [-2, -1, 0, 1]
    assert all(multi_discrete_spaces.action.contains(a.numpy()) for a in action)


def test_multi_discrete_eval_mode_acts_with_each_dims_argmax(multi_discrete_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(multi_discrete_spaces)
    agent.eval_mode(0)
    agent.eval_deterministic = True
    step = agent.step(*step_inputs(multi_discrete_spaces, B))
    prob = step.agent_info.dist_info.prob
    expected = torch.stack([prob[:, :3].argmax(-1) + 1, prob[:, 3:].argmax(-1) - 2], dim=-1)
    assert torch.equal(step.action, expected)


def test_multi_binary_gets_a_bernoulli_over_each_bit(multi_binary_spaces):
    torch.manual_seed(1)
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(multi_binary_spaces)
    assert isinstance(agent.distribution, Bernoulli) and agent.distribution.dim == 4
    step = agent.step(*step_inputs(multi_binary_spaces, 200))
    prob = step.agent_info.dist_info.prob
    assert step.action.shape == (200, 4) and prob.shape == (200, 4)
    # An untrained policy (policy gain 0.01) sets each bit with probability close to one half.
    assert bool(((prob > 0.4) & (prob < 0.6)).all())
    assert set(step.action.unique().tolist()) == {0, 1}
    agent.eval_mode(0)
    agent.eval_deterministic = True
    greedy = agent.step(*step_inputs(multi_binary_spaces, B))
    assert torch.equal(greedy.action, (greedy.agent_info.dist_info.prob > 0.5).long())


def test_training_pass_gives_per_datum_log_likelihood_with_grad(multi_discrete_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(multi_discrete_spaces)
    obs = torch.rand(T, B, 7)
    action = torch.tensor([3, 1]).expand(T, B, 2)
    dist_info, value = agent(obs, action, torch.zeros(T, B))
    log_prob = agent.distribution.log_likelihood(action, dist_info)
    assert log_prob.shape == (T, B) and value.shape == (T, B) and log_prob.requires_grad
    assert bool((log_prob < 0).all())


def test_lstm_with_vector_actions_fails_naming_lstm_size(multi_discrete_spaces):
    with pytest.raises(ValueError, match="lstm_size=8 is not supported with a vector action space"):
        CategoricalPgAgent(lstm_size=8).initialize(multi_discrete_spaces)


def test_two_dimensional_int_box_actions_fail_naming_the_space():
    spaces = EnvSpaces(FloatBox(-1.0, 1.0, shape=(3,)), IntBox(0, 3, shape=(2, 2)))
    with pytest.raises(ValueError, match=r"CategoricalPgAgent needs a scalar or 1-D IntBox .*shape=\(2, 2\)"):
        CategoricalPgAgent().initialize(spaces)


def test_dqn_on_multi_discrete_fails_naming_the_space(multi_discrete_spaces):
    with pytest.raises(ValueError, match=r"DqnAgent needs a discrete action space .*IntBox\(low=array\(\[ 1, -2\]\)"):
        DqnAgent().initialize(multi_discrete_spaces)


@pytest.mark.parametrize("agent_cls", [SacAgent, DdpgAgent, Td3Agent])
def test_continuous_agents_on_discrete_actions_fail_naming_the_space(agent_cls, multi_binary_spaces):
    discrete = make_env(functools.partial(IdentityEnv, n=4)).spaces
    for spaces in (discrete, multi_binary_spaces):
        with pytest.raises(ValueError, match=rf"{agent_cls.__name__} needs a continuous action space .*IntBox\("):
            agent_cls().initialize(spaces)
