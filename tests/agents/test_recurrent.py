"""Recurrent agents: per-env RNN state across steps, resets, mode switches, alternation, checkpoints."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from lightning_rl.agents import (
    AlternatingCategoricalPgAgent,
    CategoricalPgAgent,
    R2d1Agent,
    rnn_state_from_samples,
    rnn_state_to_samples,
)
from lightning_rl.models import RnnState

from .conftest import batch

B = 3


def _agent(spaces, cls=CategoricalPgAgent):
    agent = cls(hidden_sizes=(8,), lstm_size=6)
    agent.set_steps_per_itr(B)  # as RLModule.setup does (epsilon schedules count env steps)
    agent.initialize(spaces)
    agent.sample_mode(0)
    return agent


def _clone(state: RnnState) -> RnnState:
    return RnnState(state.h.clone(), state.c.clone())


def test_state_is_carried_from_step_to_step(cartpole_spaces):
    agent = _agent(cartpole_spaces)
    inputs = batch(cartpole_spaces, B)
    first = agent.step(*inputs)
    # The first step starts from zeros, recorded as [B, N, H].
    assert first.agent_info.prev_rnn_state.h.shape == (B, 1, 6)
    assert torch.count_nonzero(first.agent_info.prev_rnn_state.h) == 0
    after_first = _clone(agent.prev_rnn_state)
    assert after_first.h.shape == (1, B, 6) and torch.count_nonzero(after_first.h) > 0
    second = agent.step(*inputs)
    torch.testing.assert_close(second.agent_info.prev_rnn_state.h, rnn_state_to_samples(after_first).h)
    torch.testing.assert_close(second.agent_info.prev_rnn_state.c, rnn_state_to_samples(after_first).c)
    # Same inputs, different memory: different policies.
    assert not torch.allclose(first.agent_info.dist_info.prob, second.agent_info.dist_info.prob)


def test_training_pass_from_recorded_state_reproduces_the_steps(cartpole_spaces):
    agent = _agent(cartpole_spaces)
    obs, _, rewards = batch(cartpole_spaces, B, T=4)
    prev_action = torch.zeros(B, dtype=torch.long)
    steps, prev_actions = [], []
    for t in range(4):
        prev_actions.append(prev_action)
        steps.append(agent.step(obs[t], prev_action, rewards[t]))
        prev_action = steps[-1].action
    # Train on t = 1..3, starting from the state recorded at t = 1 (nonzero after a warm-up step).
    init = rnn_state_from_samples(steps[1].agent_info.prev_rnn_state)
    assert init.h.shape == (1, B, 6) and init.h.is_contiguous()
    dist_info, value, _ = agent(obs[1:], torch.stack(prev_actions[1:]), rewards[1:], init)
    torch.testing.assert_close(dist_info.prob, torch.stack([s.agent_info.dist_info.prob for s in steps[1:]]))
    torch.testing.assert_close(value, torch.stack([s.agent_info.value for s in steps[1:]]))


def test_reset_one_zeroes_only_that_env(cartpole_spaces):
    agent = _agent(cartpole_spaces, R2d1Agent)
    agent.step(*batch(cartpole_spaces, B))
    before = _clone(agent.prev_rnn_state)
    agent.reset_one(1)
    state = agent.prev_rnn_state
    assert torch.count_nonzero(state.h[:, 1]) == 0 and torch.count_nonzero(state.c[:, 1]) == 0
    torch.testing.assert_close(state.h[:, [0, 2]], before.h[:, [0, 2]])
    torch.testing.assert_close(state.c[:, [0, 2]], before.c[:, [0, 2]])
    # The next step records the zeroed state for env 1.
    step = agent.step(*batch(cartpole_spaces, B))
    assert torch.count_nonzero(step.agent_info.prev_rnn_state.h[1]) == 0


def test_reset_clears_every_env(cartpole_spaces):
    agent = _agent(cartpole_spaces)
    agent.step(*batch(cartpole_spaces, B))
    agent.reset()
    assert agent.prev_rnn_state is None
    assert torch.count_nonzero(agent.step(*batch(cartpole_spaces, B)).agent_info.prev_rnn_state.c) == 0


@pytest.mark.parametrize("other_mode", ["train_mode", "eval_mode"])
def test_leaving_sample_mode_stashes_and_returning_restores(cartpole_spaces, other_mode):
    agent = _agent(cartpole_spaces)
    agent.step(*batch(cartpole_spaces, B))
    sampling_state = agent.prev_rnn_state
    saved = _clone(sampling_state)
    getattr(agent, other_mode)(1)
    assert agent.prev_rnn_state is None
    agent.step(*batch(cartpole_spaces, 2, seed=1))  # eval/train steps use their own state
    agent.reset()
    agent.sample_mode(1)
    assert agent.prev_rnn_state is sampling_state
    torch.testing.assert_close(agent.prev_rnn_state.h, saved.h)
    # Staying in sample mode keeps the state.
    agent.sample_mode(2)
    assert agent.prev_rnn_state is sampling_state


def test_feed_forward_pg_agent_rejects_an_rnn_state(cartpole_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces)
    state = RnnState(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="init_rnn_state"):
        agent(*batch(cartpole_spaces, 2), state)


def test_alternating_agent_swaps_between_two_states(cartpole_spaces):
    agent = _agent(cartpole_spaces, AlternatingCategoricalPgAgent)
    half_a, half_b = batch(cartpole_spaces, 2, seed=1), batch(cartpole_spaces, 2, seed=2)
    agent.step(*half_a)
    state_a = _clone(agent._rnn_state_pair[0])
    assert agent.prev_rnn_state is None  # half B has not acted yet
    agent.step(*half_b)
    state_b = _clone(agent._rnn_state_pair[1])
    assert agent.prev_rnn_state is agent._rnn_state_pair[0]
    again_a = agent.step(*half_a)
    torch.testing.assert_close(again_a.agent_info.prev_rnn_state.h, rnn_state_to_samples(state_a).h)
    # Env 3 is env 1 of the second half.
    agent.reset_one(3)
    assert torch.count_nonzero(agent._rnn_state_pair[1].h[:, 1]) == 0
    torch.testing.assert_close(agent._rnn_state_pair[1].h[:, 0], state_b.h[:, 0])
    with pytest.raises(ValueError, match="idx=4"):
        agent.reset_one(4)


def test_sampling_state_survives_a_checkpoint(cartpole_spaces):
    agent = _agent(cartpole_spaces, R2d1Agent)
    agent.step(*batch(cartpole_spaces, B))
    saved = _clone(agent.prev_rnn_state)
    agent.train_mode(1)  # checkpoints are taken between updates
    buf = io.BytesIO()
    torch.save(agent.state_dict(), buf)
    buf.seek(0)
    restored = R2d1Agent(hidden_sizes=(8,), lstm_size=6)
    restored.set_steps_per_itr(B)
    restored.initialize(cartpole_spaces)
    restored.load_state_dict(torch.load(buf, weights_only=True))
    restored.sample_mode(1)
    torch.testing.assert_close(restored.prev_rnn_state.h, saved.h)
    torch.testing.assert_close(restored.prev_rnn_state.c, saved.c)
    obs, prev_action, prev_reward = batch(cartpole_spaces, B, seed=5)
    agent.sample_mode(1)
    agent.distribution.set_epsilon(0.0)
    restored.distribution.set_epsilon(0.0)
    original_q = agent.step(obs, prev_action, prev_reward).agent_info.q
    np.testing.assert_allclose(original_q, restored.step(obs, prev_action, prev_reward).agent_info.q)
