"""DQN, categorical DQN and R2D1 agents: actions, Q outputs, target networks, atoms, bad spaces."""

from __future__ import annotations

import pytest
import torch

from lightning_rl.agents import CatDqnAgent, DqnAgent, R2d1Agent, rnn_state_from_samples
from lightning_rl.models import AtariDqnModel, AtariR2d1Model, DuelingHeadModel

from .conftest import batch

B, T = 4, 3


def _greedy(agent):
    agent.eval_mode(1)
    agent.distribution.set_epsilon(0.0)
    return agent


def test_dqn_step_on_cartpole(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(16,))
    agent.initialize(cartpole_spaces)
    agent.sample_mode(0)
    step = agent.step(*batch(cartpole_spaces, B))
    assert step.action.shape == (B,) and step.action.dtype == torch.long
    assert step.agent_info.q.shape == (B, 2) and step.agent_info.q.device.type == "cpu"
    greedy = _greedy(agent).step(*batch(cartpole_spaces, B))
    torch.testing.assert_close(greedy.action, greedy.agent_info.q.argmax(-1))


def test_dqn_dueling_and_frames(image_spaces):
    agent = DqnAgent(dueling=True)
    agent.initialize(image_spaces)
    assert isinstance(agent.model, AtariDqnModel)
    assert any(isinstance(m, DuelingHeadModel) for m in agent.model.modules())
    assert agent.step(*batch(image_spaces, 2)).agent_info.q.shape == (2, 4)


def test_target_starts_equal_and_moves_by_tau(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(16,))
    agent.initialize(cartpole_spaces)
    inputs = batch(cartpole_spaces, B)
    torch.testing.assert_close(agent.target(*inputs), agent(*inputs))
    assert not agent.target(*inputs).requires_grad
    with torch.no_grad():
        for p in agent.model.parameters():
            p.fill_(1.0)
        for p in agent.target_model.parameters():
            p.fill_(0.0)
    agent.update_target(tau=0.25)
    # 0.25 * 1 + 0.75 * 0
    assert all(torch.all(p == 0.25) for p in agent.target_model.parameters())
    agent.update_target(tau=0.5)
    # 0.5 * 1 + 0.5 * 0.25
    assert all(torch.all(p == 0.625) for p in agent.target_model.parameters())
    agent.update_target()
    assert all(torch.all(p == 1.0) for p in agent.target_model.parameters())
    with pytest.raises(ValueError, match="tau"):
        agent.update_target(tau=1.5)


def test_categorical_dqn_atoms_and_greedy_action(cartpole_spaces):
    agent = CatDqnAgent(hidden_sizes=(16,), n_atoms=5, V_min=-2.0, V_max=2.0)
    agent.initialize(cartpole_spaces)
    torch.testing.assert_close(agent.z, torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0]))
    step = _greedy(agent).step(*batch(cartpole_spaces, B))
    p = step.agent_info.p
    assert p.shape == (B, 2, 5) and step.action.shape == (B,) and step.action.dtype == torch.long
    torch.testing.assert_close(p.sum(-1), torch.ones(B, 2))
    torch.testing.assert_close(step.action, (p * agent.z).sum(-1).argmax(-1))
    assert agent.target(*batch(cartpole_spaces, B)).shape == (B, 2, 5)


@pytest.mark.parametrize("kwargs, match", [(dict(n_atoms=1), "n_atoms=1"), (dict(V_min=1.0, V_max=1.0), "V_max=1.0")])
def test_categorical_dqn_bad_atoms_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CatDqnAgent(**kwargs)


def test_r2d1_step_training_pass_and_target(cartpole_spaces):
    agent = R2d1Agent(hidden_sizes=(16,), lstm_size=8, head_size=16, dueling=True)
    agent.initialize(cartpole_spaces)
    agent.sample_mode(0)
    agent.step(*batch(cartpole_spaces, B))
    step = agent.step(*batch(cartpole_spaces, B, seed=1))
    assert step.action.shape == (B,) and step.agent_info.q.shape == (B, 2)
    assert step.agent_info.prev_rnn_state.h.shape == (B, 1, 8)
    init = rnn_state_from_samples(step.agent_info.prev_rnn_state)
    q, state = agent(*batch(cartpole_spaces, B, T=T), init)
    target_q, target_state = agent.target(*batch(cartpole_spaces, B, T=T), init)
    assert q.shape == (T, B, 2) and q.requires_grad and state.h.shape == (1, B, 8)
    torch.testing.assert_close(target_q, q.detach())
    assert not target_q.requires_grad


def test_r2d1_on_frames(image_spaces):
    agent = R2d1Agent(lstm_size=8, head_size=16)
    agent.initialize(image_spaces)
    assert isinstance(agent.model, AtariR2d1Model)
    assert agent.step(*batch(image_spaces, 2)).agent_info.q.shape == (2, 4)


@pytest.mark.parametrize("cls", [DqnAgent, CatDqnAgent, R2d1Agent])
def test_value_agents_reject_a_continuous_action_space(pendulum_spaces, cls):
    with pytest.raises(ValueError, match=f"{cls.__name__} needs a discrete action space.*FloatBox"):
        cls().initialize(pendulum_spaces)
