"""Epsilon-greedy schedules: linear annealing, eval epsilon, per-env log-spaced epsilon, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents import CatDqnAgent, DqnAgent, R2d1Agent, log_spaced_epsilons

from .conftest import batch


def _dqn(spaces, **kwargs):
    agent = DqnAgent(hidden_sizes=(8,), **kwargs)
    agent.initialize(spaces)
    return agent


@pytest.mark.parametrize(
    "itr, expected",
    # eps = (1 - prog) * 1.0 + prog * 0.1 with prog = (itr - 10) / 20 clipped to [0, 1].
    [(0, 1.0), (10, 1.0), (15, 0.775), (20, 0.55), (25, 0.325), (30, 0.1), (1000, 0.1)],
)
def test_linear_annealing_by_iteration(cartpole_spaces, itr, expected):
    agent = _dqn(cartpole_spaces, eps_init=1.0, eps_final=0.1, eps_itr_min=10, eps_itr_max=30)
    agent.sample_mode(itr)
    assert agent.epsilon == pytest.approx(expected)
    assert agent.distribution.epsilon == pytest.approx(expected)


def test_eval_mode_uses_eval_epsilon_and_sample_mode_returns_to_the_schedule(cartpole_spaces):
    agent = _dqn(cartpole_spaces, eps_init=1.0, eps_final=0.1, eps_itr_min=10, eps_itr_max=30, eps_eval=0.05)
    agent.eval_mode(20)
    assert agent.distribution.epsilon == pytest.approx(0.05)
    agent.sample_mode(20)
    assert agent.distribution.epsilon == pytest.approx(0.55)


def test_equal_min_and_max_iteration_is_a_step(cartpole_spaces):
    agent = _dqn(cartpole_spaces, eps_init=0.9, eps_final=0.2, eps_itr_min=5, eps_itr_max=5)
    assert agent.epsilon_at(4) == pytest.approx(0.9)
    assert agent.epsilon_at(5) == pytest.approx(0.2)


def test_log_spaced_epsilons_by_hand():
    # 10^-3 .. 10^-1 in 5 steps of 10^0.5.
    np.testing.assert_allclose(
        log_spaced_epsilons(0.001, 0.1, 5), [0.001, 0.0031622777, 0.01, 0.0316227766, 0.1], rtol=1e-7
    )


def test_per_env_final_epsilons_follow_the_global_env_index(cartpole_spaces):
    agent = DqnAgent(
        hidden_sizes=(8,), eps_init=1.0, eps_final=0.1, eps_final_min=0.001, eps_itr_min=10, eps_itr_max=30
    )
    # Global envs get [0.001, 0.01, 0.1]; this rank holds global envs 2 and 0.
    agent.initialize(cartpole_spaces, global_B=3, env_ranks=[2, 0])
    torch.testing.assert_close(agent.eps_final, torch.tensor([0.1, 0.001]))
    agent.sample_mode(0)
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([1.0, 1.0]))
    agent.sample_mode(20)
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.55, 0.5005]))
    agent.sample_mode(30)
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.1, 0.001]))
    agent.eval_mode(30)
    assert agent.distribution.epsilon == pytest.approx(0.001)
    # A worker holding only global env 1 recomputes its own value.
    agent.collector_initialize(global_B=3, env_ranks=[1])
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.01]))


def test_per_env_epsilon_acts_greedily_in_env_0_and_randomly_in_env_1(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,), eps_init=1.0, eps_final=1.0, eps_final_min=1e-9, eps_itr_min=0, eps_itr_max=0)
    agent.initialize(cartpole_spaces, global_B=2)
    agent.sample_mode(1)
    obs = np.repeat(batch(cartpole_spaces, 1)[0], 2, axis=0)
    actions = torch.stack([agent.step(obs, np.zeros(2, np.int64), np.zeros(2)).action for _ in range(60)])
    greedy = int(agent.step(obs, np.zeros(2, np.int64), np.zeros(2)).agent_info.q[0].argmax())
    assert torch.all(actions[:, 0] == greedy)
    assert set(actions[:, 1].tolist()) == {0, 1}


@pytest.mark.parametrize("cls", [DqnAgent, CatDqnAgent, R2d1Agent])
def test_schedule_state_is_in_the_state_dict(cartpole_spaces, cls):
    kwargs = dict(hidden_sizes=(8,), eps_final=0.1, eps_final_min=0.001, eps_itr_min=10, eps_itr_max=30)
    agent = cls(**kwargs)
    agent.initialize(cartpole_spaces, global_B=3, env_ranks=[0, 1])
    agent.sample_mode(20)
    restored = cls(**kwargs)
    restored.initialize(cartpole_spaces, global_B=3, env_ranks=[0, 1])
    restored.load_state_dict(agent.state_dict())
    torch.testing.assert_close(restored.eps_sample, torch.tensor([0.5005, 0.505]))
    torch.testing.assert_close(restored.distribution.epsilon, torch.tensor([0.5005, 0.505]))
    assert restored.state_dict()["_extra_state"]["epsilon"]["itr"] == 20


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eps_init=1.5), "eps_init=1.5"),
        (dict(eps_eval=-0.1), "eps_eval=-0.1"),
        (dict(eps_final=0.1, eps_final_min=0.5), "eps_final_min=0.5"),
        (dict(eps_itr_min=10, eps_itr_max=5), "eps_itr_max=5"),
    ],
)
def test_bad_schedules_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DqnAgent(**kwargs)


def test_env_ranks_outside_global_B_raise(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,), eps_final_min=0.001)
    with pytest.raises(ValueError, match="env_ranks"):
        agent.initialize(cartpole_spaces, global_B=2, env_ranks=[2])
