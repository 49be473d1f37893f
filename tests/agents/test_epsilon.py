"""Epsilon-greedy schedules: linear annealing in env steps, eval epsilon, per-env log-spaced
epsilon, the steps-per-iteration handshake and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents import CatDqnAgent, CategoricalPgAgent, DqnAgent, MultiAgent, R2d1Agent, log_spaced_epsilons
from lightning_rl.envs import COOP_GRID_ID, make_env

from .conftest import batch


def _dqn(spaces, steps_per_itr=None, **kwargs):
    agent = DqnAgent(hidden_sizes=(8,), **kwargs)
    if steps_per_itr is not None:
        agent.set_steps_per_itr(steps_per_itr)
    agent.initialize(spaces)
    return agent


@pytest.mark.parametrize(
    "itr, expected",
    # 256 env steps per iteration: iteration itr starts after 256 * itr env steps.
    # prog = clip((256 * itr - 512) / (2560 - 512), 0, 1); eps = (1 - prog) * 1.0 + prog * 0.1.
    [
        (0, 1.0),  # 0 steps: before the start, prog 0
        (2, 1.0),  # 512 steps: the start, prog 0
        (4, 0.775),  # 1024 steps: prog 512 / 2048 = 0.25 -> 0.75 + 0.025
        (6, 0.55),  # 1536 steps: prog 1024 / 2048 = 0.5 -> 0.5 + 0.05
        (8, 0.325),  # 2048 steps: prog 0.75 -> 0.25 + 0.075
        (10, 0.1),  # 2560 steps: the end, prog 1
        (20, 0.1),  # 5120 steps: after the end
    ],
)
def test_epsilon_anneals_over_env_steps(cartpole_spaces, itr, expected):
    agent = _dqn(cartpole_spaces, 256, eps_init=1.0, eps_final=0.1, eps_steps_min=512, eps_steps_max=2560)
    agent.sample_mode(itr)
    assert agent.epsilon == pytest.approx(expected)
    assert agent.distribution.epsilon == pytest.approx(expected)


def test_an_end_inside_an_iteration_is_reached_at_the_next_iteration(cartpole_spaces):
    # SB3's CartPole setting, 1 -> 0.04 over 8000 env steps, with 256-step iterations.
    agent = _dqn(cartpole_spaces, 256, eps_init=1.0, eps_final=0.04, eps_steps_min=0, eps_steps_max=8000)
    # Iteration 31 starts after 7936 steps: prog 0.992 -> 0.008 * 1 + 0.992 * 0.04 = 0.04768.
    assert agent.epsilon_at(31) == pytest.approx(0.04768)
    assert agent.epsilon_at(32) == pytest.approx(0.04)  # 8192 steps


def test_the_same_steps_give_the_same_epsilon_whatever_the_iteration_size(cartpole_spaces):
    # 1536 env steps: iteration 6 of 256 steps, iteration 3 of 512; prog (1536 - 512) / 2048 = 0.5.
    kwargs = dict(eps_init=1.0, eps_final=0.1, eps_steps_min=512, eps_steps_max=2560)
    assert _dqn(cartpole_spaces, 256, **kwargs).epsilon_at(6) == pytest.approx(0.55)
    assert _dqn(cartpole_spaces, 512, **kwargs).epsilon_at(3) == pytest.approx(0.55)


def test_eval_mode_uses_eval_epsilon_and_sample_mode_returns_to_the_schedule(cartpole_spaces):
    agent = _dqn(cartpole_spaces, 100, eps_init=1.0, eps_final=0.1, eps_steps_min=1000, eps_steps_max=3000,
                 eps_eval=0.05)
    agent.eval_mode(20)
    assert agent.distribution.epsilon == pytest.approx(0.05)
    agent.sample_mode(20)  # 2000 steps: prog 0.5
    assert agent.distribution.epsilon == pytest.approx(0.55)


def test_equal_start_and_end_is_a_step(cartpole_spaces):
    agent = _dqn(cartpole_spaces, 256, eps_init=0.9, eps_final=0.2, eps_steps_min=1280, eps_steps_max=1280)
    assert agent.epsilon_at(4) == pytest.approx(0.9)  # 1024 steps
    assert agent.epsilon_at(5) == pytest.approx(0.2)  # 1280 steps


def test_epsilon_after_iteration_0_needs_the_steps_per_iteration(cartpole_spaces):
    agent = _dqn(cartpole_spaces, eps_steps_min=0, eps_steps_max=1000)
    agent.sample_mode(0)  # no env steps yet: known without it
    assert agent.epsilon == pytest.approx(1.0)
    with pytest.raises(RuntimeError, match=r"set_steps_per_itr\(batch_T \* batch_B \* world_size\)"):
        agent.sample_mode(1)
    agent.set_steps_per_itr(250)
    agent.sample_mode(1)  # 250 steps: prog 0.25 -> 0.75 + 0.25 * 0.01
    assert agent.epsilon == pytest.approx(0.7525)


def test_a_schedule_that_ends_at_0_steps_needs_no_steps_per_iteration(cartpole_spaces):
    agent = _dqn(cartpole_spaces, eps_init=1.0, eps_final=0.3, eps_steps_min=0, eps_steps_max=0)
    agent.sample_mode(7)
    assert agent.epsilon == pytest.approx(0.3)


def test_setting_the_steps_per_iteration_updates_the_sampling_epsilon(cartpole_spaces):
    agent = _dqn(cartpole_spaces, 100, eps_init=1.0, eps_final=0.1, eps_steps_min=0, eps_steps_max=1000)
    agent.sample_mode(5)  # 500 steps: prog 0.5
    assert agent.distribution.epsilon == pytest.approx(0.55)
    agent.set_steps_per_itr(200)  # 1000 steps: prog 1
    assert agent.distribution.epsilon == pytest.approx(0.1)


@pytest.mark.parametrize("value", [0, -256, 2.5, True])
def test_bad_steps_per_iteration_raise(value):
    with pytest.raises(ValueError, match="steps_per_itr"):
        DqnAgent().set_steps_per_itr(value)


def test_other_agents_keep_the_steps_per_iteration():
    agent = CategoricalPgAgent()
    assert agent.steps_per_itr is None
    agent.set_steps_per_itr(2048)
    assert agent.steps_per_itr == 2048


def test_multi_agent_passes_the_steps_per_iteration_to_its_sub_agents():
    agent = MultiAgent(DqnAgent(hidden_sizes=(8,), eps_steps_min=0, eps_steps_max=1000))
    agent.set_steps_per_itr(100)  # before initialize, as RLModule.setup calls it
    agent.initialize(make_env(COOP_GRID_ID).spaces)
    for name in agent.agent_names:
        sub = agent.sub_agent(name)
        assert sub.steps_per_itr == 100
    agent.sample_mode(5)  # 500 steps: prog 0.5 -> 0.5 + 0.5 * 0.01
    assert agent.sub_agent("agent_0").epsilon == pytest.approx(0.505)


def test_log_spaced_epsilons_by_hand():
    # 10^-3 .. 10^-1 in 5 steps of 10^0.5.
    np.testing.assert_allclose(
        log_spaced_epsilons(0.001, 0.1, 5), [0.001, 0.0031622777, 0.01, 0.0316227766, 0.1], rtol=1e-7
    )


def test_per_env_final_epsilons_follow_the_global_env_index(cartpole_spaces):
    agent = DqnAgent(
        hidden_sizes=(8,), eps_init=1.0, eps_final=0.1, eps_final_min=0.001, eps_steps_min=1000, eps_steps_max=3000
    )
    agent.set_steps_per_itr(100)
    # Global envs get [0.001, 0.01, 0.1]; this rank holds global envs 2 and 0.
    agent.initialize(cartpole_spaces, global_B=3, env_ranks=[2, 0])
    torch.testing.assert_close(agent.eps_final, torch.tensor([0.1, 0.001]))
    agent.sample_mode(0)
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([1.0, 1.0]))
    agent.sample_mode(20)  # 2000 steps: prog 0.5 -> [0.5 + 0.05, 0.5 + 0.0005]
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.55, 0.5005]))
    agent.sample_mode(30)  # 3000 steps: prog 1
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.1, 0.001]))
    agent.eval_mode(30)
    assert agent.distribution.epsilon == pytest.approx(0.001)
    # A worker holding only global env 1 recomputes its own value.
    agent.collector_initialize(global_B=3, env_ranks=[1])
    torch.testing.assert_close(agent.distribution.epsilon, torch.tensor([0.01]))


def test_per_env_epsilon_acts_greedily_in_env_0_and_randomly_in_env_1(cartpole_spaces):
    agent = DqnAgent(
        hidden_sizes=(8,), eps_init=1.0, eps_final=1.0, eps_final_min=1e-9, eps_steps_min=0, eps_steps_max=0
    )
    agent.initialize(cartpole_spaces, global_B=2)
    agent.sample_mode(1)
    obs = np.repeat(batch(cartpole_spaces, 1)[0], 2, axis=0)
    actions = torch.stack([agent.step(obs, np.zeros(2, np.int64), np.zeros(2)).action for _ in range(60)])
    greedy = int(agent.step(obs, np.zeros(2, np.int64), np.zeros(2)).agent_info.q[0].argmax())
    assert torch.all(actions[:, 0] == greedy)
    assert set(actions[:, 1].tolist()) == {0, 1}


@pytest.mark.parametrize("cls", [DqnAgent, CatDqnAgent, R2d1Agent])
def test_schedule_state_is_in_the_state_dict(cartpole_spaces, cls):
    kwargs = dict(hidden_sizes=(8,), eps_final=0.1, eps_final_min=0.001, eps_steps_min=1000, eps_steps_max=3000)
    agent = cls(**kwargs)
    agent.set_steps_per_itr(100)
    agent.initialize(cartpole_spaces, global_B=3, env_ranks=[0, 1])
    agent.sample_mode(20)  # 2000 steps: prog 0.5; finals [0.001, 0.01] -> [0.5005, 0.505]
    restored = cls(**kwargs)
    restored.initialize(cartpole_spaces, global_B=3, env_ranks=[0, 1])
    restored.load_state_dict(agent.state_dict())
    torch.testing.assert_close(restored.eps_sample, torch.tensor([0.5005, 0.505]))
    torch.testing.assert_close(restored.distribution.epsilon, torch.tensor([0.5005, 0.505]))
    assert restored.state_dict()["_extra_state"]["epsilon"]["itr"] == 20
    # The resumed schedule goes on from the stored iteration: 2500 steps, prog 0.75.
    restored.set_steps_per_itr(100)
    restored.sample_mode(25)
    torch.testing.assert_close(restored.distribution.epsilon, torch.tensor([0.25075, 0.2575]))


def test_a_checkpoint_of_the_iteration_counted_schedule_still_loads(cartpole_spaces):
    # What DqnAgent stored before the schedule counted env steps: the iteration, the per-env
    # epsilons and the sampling epsilon (here eps_itr_min=10, eps_itr_max=30 at iteration 20).
    source = DqnAgent(hidden_sizes=(8,))
    source.initialize(cartpole_spaces)
    state = source.state_dict()
    state["_extra_state"] = {"epsilon": {"itr": 20, "eps_init": 1.0, "eps_final": 0.1, "eps_sample": 0.55}}
    # The same schedule in env steps at 100 steps per iteration: 1000 .. 3000.
    agent = DqnAgent(hidden_sizes=(8,), eps_init=1.0, eps_final=0.1, eps_steps_min=1000, eps_steps_max=3000)
    agent.set_steps_per_itr(100)
    agent.initialize(cartpole_spaces)
    agent.load_state_dict(state)
    assert agent.distribution.epsilon == pytest.approx(0.55)
    assert agent.state_dict()["_extra_state"]["epsilon"]["itr"] == 20
    agent.sample_mode(21)  # 2100 steps: prog 0.55 -> 0.45 + 0.055
    assert agent.distribution.epsilon == pytest.approx(0.505)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eps_init=1.5), "eps_init=1.5"),
        (dict(eps_eval=-0.1), "eps_eval=-0.1"),
        (dict(eps_final=0.1, eps_final_min=0.5), "eps_final_min=0.5"),
        (dict(eps_steps_min=-1), "eps_steps_min=-1"),
        (dict(eps_steps_min=1000, eps_steps_max=500), "eps_steps_max=500"),
        (dict(eps_steps_max=2.5), "eps_steps_max=2.5"),
    ],
)
def test_bad_schedules_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DqnAgent(**kwargs)


def test_env_ranks_outside_global_B_raise(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,), eps_final_min=0.001)
    with pytest.raises(ValueError, match="env_ranks"):
        agent.initialize(cartpole_spaces, global_B=2, env_ranks=[2])
