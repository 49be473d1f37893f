"""The categorical PG agent on vector discrete actions (MultiDiscrete, MultiBinary), and agents that refuse them."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from lightning_rl.agents import (
    AlternatingCategoricalPgAgent,
    CategoricalPgAgent,
    DdpgAgent,
    DqnAgent,
    SacAgent,
    Td3Agent,
)
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


def test_recurrent_agent_feeds_the_model_zero_based_previous_actions(multi_discrete_spaces):
    # MultiDiscrete([3, 4], start=[1, -2]): dim 0 takes 1..3, dim 1 takes -2..1.
    torch.manual_seed(0)
    agent = CategoricalPgAgent(hidden_sizes=(16,), lstm_size=8)
    agent.initialize(multi_discrete_spaces)
    assert agent.model.lstm.lstm.input_size == 16 + (3 + 4) + 1
    obs, reward = torch.rand(3, 7), torch.zeros(3)
    # The last row is the collectors' 0 for "no previous action": clipped into the space it is
    # the null action (1, 0), i.e. indexes (0, 2).
    raw = torch.tensor([[1, -2], [3, 1], [0, 0]])
    zero_based = torch.tensor([[0, 0], [2, 3], [0, 2]])
    with torch.no_grad():
        dist_info, value, state = agent(obs, raw, reward)
        pi, expected_value, expected_state = agent.model(obs, zero_based, reward)
    torch.testing.assert_close(dist_info.prob, pi)
    torch.testing.assert_close(value, expected_value)
    torch.testing.assert_close(state.h, expected_state.h)


def test_recurrent_agent_steps_with_vector_actions(multi_discrete_spaces, multi_binary_spaces):
    for spaces, width in ((multi_discrete_spaces, 7), (multi_binary_spaces, 4)):
        agent = CategoricalPgAgent(hidden_sizes=(16,), lstm_size=8)
        agent.initialize(spaces)
        agent.sample_mode(0)
        step = agent.step(*step_inputs(spaces, B))
        assert step.action.shape == (B, 2 if width == 7 else 4)
        assert step.agent_info.dist_info.prob.shape == (B, width)
        assert step.agent_info.prev_rnn_state.h.shape == (B, 1, 8)
        # The next step feeds the sampled actions back: they must lie in the space.
        assert all(spaces.action.contains(a.numpy()) for a in step.action)
        agent.step(step_inputs(spaces, B)[0], step.action, torch.ones(B))
        assert not torch.equal(agent.prev_rnn_state.h, torch.zeros(1, B, 8))


def test_alternating_recurrent_agent_with_multi_discrete_actions(multi_discrete_spaces):
    agent = AlternatingCategoricalPgAgent(hidden_sizes=(16,), lstm_size=8)
    agent.initialize(multi_discrete_spaces)
    agent.sample_mode(0)
    obs, prev_action, reward = step_inputs(multi_discrete_spaces, B // 2)
    first = agent.step(obs, prev_action, reward)  # half 0
    second = agent.step(obs, first.action, reward)  # half 1 (its own zero state)
    assert first.action.shape == second.action.shape == (B // 2, 2)
    # Half 1 started from zeros, as half 0 did.
    torch.testing.assert_close(second.agent_info.prev_rnn_state.h, torch.zeros(B // 2, 1, 8))
    assert agent.value(obs, second.action, reward).shape == (B // 2,)


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
