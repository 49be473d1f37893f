"""Agents under alternating samplers: bootstrap values and per-env epsilons of each half."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from lightning_rl.agents import (
    AlternatingCategoricalPgAgent,
    AlternatingR2d1Agent,
    CategoricalPgAgent,
    DqnAgent,
    R2d1Agent,
    log_spaced_epsilons,
)
from lightning_rl.samplers import AlternatingSampler

from .conftest import batch


def _lstm_pg(spaces, cls):
    torch.manual_seed(0)
    agent = cls(hidden_sizes=(8,), lstm_size=6)
    agent.initialize(spaces)
    agent.sample_mode(0)
    return agent


def test_value_reads_the_state_of_the_half_it_is_asked_for(cartpole_spaces):
    alternating = _lstm_pg(cartpole_spaces, AlternatingCategoricalPgAgent)
    # One ordinary recurrent agent per half, with the same weights, is what each half must see.
    plain = _lstm_pg(cartpole_spaces, CategoricalPgAgent)
    plain.load_state_dict(alternating.state_dict())
    half_a, half_b = copy.deepcopy(plain), copy.deepcopy(plain)
    steps_a = [batch(cartpole_spaces, 2, seed=s) for s in (1, 2)]
    steps_b = [batch(cartpole_spaces, 2, seed=s) for s in (3, 4)]
    for inputs_a, inputs_b in zip(steps_a, steps_b, strict=False):
        alternating.step(*inputs_a)
        half_a.step(*inputs_a)
        alternating.step(*inputs_b)
        half_b.step(*inputs_b)
    # The sampler's end of batch: value of half 0, then of half 1, with no step in between.
    last_a, last_b = batch(cartpole_spaces, 2, seed=5), batch(cartpole_spaces, 2, seed=6)
    torch.testing.assert_close(alternating.value(*last_a), half_a.value(*last_a))
    torch.testing.assert_close(alternating.value(*last_b), half_b.value(*last_b))
    assert not torch.allclose(half_a.value(*last_b), half_b.value(*last_b))  # the halves' states differ
    # Values do not advance the states: the next step of half 0 continues from its own state.
    next_step = alternating.step(*last_a).agent_info.prev_rnn_state
    torch.testing.assert_close(next_step.h, half_a.step(*last_a).agent_info.prev_rnn_state.h)


def test_alternating_sampler_bootstraps_each_half_from_its_own_state(cartpole_spaces):
    agent = AlternatingCategoricalPgAgent(hidden_sizes=(8,), lstm_size=6)
    sampler = AlternatingSampler("CartPole-v1", batch_T=5, batch_B=4, n_workers=2, collector="wait_reset")
    sampler.initialize(agent, seed=0, bootstrap_value=True)
    try:
        samples, _ = sampler.obtain_samples(0)
        sb = sampler.step_buffer
        for half, rows in enumerate((slice(0, 2), slice(2, 4))):
            state = agent._rnn_state_pair[half]
            with torch.no_grad():
                inputs = agent.to_agent_inputs(sb.observation[rows], sb.prev_action[rows], sb.prev_reward[rows])
                expected = agent.model(*inputs, state)[-2]
            np.testing.assert_allclose(samples.agent.bootstrap_value[rows], expected.numpy(), rtol=1e-6)
    finally:
        sampler.shutdown()


def _r2d1(cls, steps_per_itr=16, **kwargs):
    # Annealed by 160 env steps: by iteration 10 at 16 env steps per iteration.
    settings = dict(hidden_sizes=(8,), lstm_size=6, head_size=6, eps_final=0.1, eps_final_min=0.001, eps_steps_min=0,
                    eps_steps_max=160)
    settings.update(kwargs)
    agent = cls(**settings)
    agent.set_steps_per_itr(steps_per_itr)
    return agent


def test_alternating_agent_has_one_epsilon_per_env_pair(cartpole_spaces):
    agent = _r2d1(AlternatingR2d1Agent)
    # Rank 1 of 2, 4 envs each: its envs 4..7 form pairs 2 and 3 of the 4 global pairs.
    agent.initialize(cartpole_spaces, global_B=8, env_ranks=[4, 5, 6, 7])
    agent.sample_mode(10)
    expected = torch.as_tensor(log_spaced_epsilons(0.001, 0.1, 4)[[2, 3]], dtype=torch.float32)
    torch.testing.assert_close(agent.distribution.epsilon, expected)
    for seed in range(4):  # the two halves take turns, 2 envs each
        assert agent.step(*batch(cartpole_spaces, 2, seed=seed)).action.shape == (2,)
    # Without the flag the vector has one entry per env and a half's step cannot use it.
    plain = _r2d1(R2d1Agent)
    plain.initialize(cartpole_spaces, global_B=8, env_ranks=[4, 5, 6, 7])
    plain.sample_mode(10)
    with pytest.raises(ValueError, match="vector epsilon of length 4"):
        plain.step(*batch(cartpole_spaces, 2))


def test_each_half_explores_with_its_pairs_epsilons(cartpole_spaces):
    # Pairs get epsilon [~0, 1]: env 0 of each half acts greedily, env 1 uniformly at random.
    agent = _r2d1(AlternatingR2d1Agent, eps_final=1.0, eps_final_min=1e-9, eps_steps_max=0)
    agent.initialize(cartpole_spaces, global_B=4, env_ranks=[0, 1, 2, 3])
    agent.sample_mode(0)
    torch.manual_seed(0)
    observation, prev_action, prev_reward = batch(cartpole_spaces, 1)
    same = [np.repeat(x, 2, axis=0) for x in (observation, prev_action, prev_reward)]
    actions, greedy = [], []
    for _ in range(40):
        step = agent.step(*same)
        actions.append(step.action.numpy())
        greedy.append(step.agent_info.q.argmax(-1).numpy())
    actions, greedy = np.array(actions), np.array(greedy)
    np.testing.assert_array_equal(actions[:, 0], greedy[:, 0])
    assert (actions[:, 1] != greedy[:, 1]).sum() > 10


def test_alternating_agent_needs_env_pairs(cartpole_spaces):
    agent = _r2d1(AlternatingR2d1Agent)
    with pytest.raises(ValueError, match="pairs"):
        agent.initialize(cartpole_spaces, global_B=6, env_ranks=[1, 2, 3, 4])


@pytest.mark.parametrize("recurrent", [True, False])
def test_vector_epsilon_agents_sample_with_an_alternating_sampler(recurrent):
    if recurrent:
        agent = _r2d1(AlternatingR2d1Agent)
    else:
        agent = DqnAgent(hidden_sizes=(8,), eps_final=0.1, eps_final_min=0.001, eps_steps_min=0, eps_steps_max=160)
        agent.alternating = True  # feed-forward agents have no alternating class: set the flag
        agent.set_steps_per_itr(16)
    sampler = AlternatingSampler("CartPole-v1", batch_T=4, batch_B=4, n_workers=2)
    sampler.initialize(agent, seed=0)
    try:
        samples, _ = sampler.obtain_samples(20)
        assert samples.agent.action.shape == (4, 4)
        assert agent.distribution.epsilon.shape == (2,)
    finally:
        sampler.shutdown()
