"""Row 15: a time limit is not a terminal state. A reward of 1 on every step of an env that never
terminates, cut by ``TimeLimit(8)``, has value ``1 / (1 - gamma) = 50`` at gamma 0.98. Every
algorithm's learned value must reach it (within 1) because truncated steps bootstrap. The same env
ending its episodes by *termination* after 8 steps has values of at most ``(1 - 0.98**8) / 0.02``,
about 7.5 (the observation never changes, so the critics learn about the mean over the 8 steps):
that is what treating the truncation as a termination would learn.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

from lightning_rl.agents import CategoricalPgAgent, DqnAgent, SacAgent, Td3Agent
from lightning_rl.algos import A2C, DQN, PPO, SAC, TD3
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.toy_envs import make_constant_reward_env

GAMMA = 0.98
VALUE = 1.0 / (1.0 - GAMMA)  # 50
TERMINAL_VALUE = (1.0 - GAMMA**8) / (1.0 - GAMMA)  # 7.46: what truncation-as-termination learns at t=0
ZERO = np.zeros((1, 1), np.float32)


class ConstantRewardBoxEnv(gymnasium.Env):
    """Reward 1 on every step, observation always 0, a continuous action it ignores; with
    ``terminate_after`` the episode terminates (not truncates) after that many steps."""

    def __init__(self, terminate_after: int | None = None) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.terminate_after, self._t = terminate_after, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any):
        self._t += 1
        terminated = self.terminate_after is not None and self._t >= self.terminate_after
        return np.zeros(1, np.float32), 1.0, terminated, False, {}


def discrete_sampler(batch_T: int = 16) -> SerialSampler:
    return SerialSampler(env_id=functools.partial(make_constant_reward_env, 8), batch_T=batch_T, batch_B=2)


def box_sampler(terminate: bool = False) -> SerialSampler:
    if terminate:
        return SerialSampler(env_id=lambda: ConstantRewardBoxEnv(terminate_after=8), batch_T=8, batch_B=1)
    return SerialSampler(env_id=lambda: TimeLimit(ConstantRewardBoxEnv(), max_episode_steps=8), batch_T=8, batch_B=1)


def value_of_zero(module: Any) -> float:
    """The module's learned value of the (only) observation 0."""
    agent = module.agent
    obs = torch.as_tensor(ZERO)
    with torch.no_grad():
        if isinstance(module, (A2C, PPO)):
            _, value = agent(obs, torch.zeros(1, dtype=torch.long), torch.zeros(1))
            return float(value[0])
        if isinstance(module, DQN):
            return float(agent(obs, torch.zeros(1, dtype=torch.long), torch.zeros(1)).max())
        action = torch.zeros(1, 1)
        inputs = agent.to_agent_inputs(obs, action, torch.zeros(1))
        critic = agent.q_model if isinstance(module, TD3) else agent.q1_model
        return float(critic(*inputs, action)[0])


def build(name: str, terminate: bool = False) -> Any:
    common = dict(discount=GAMMA, log_interval_steps=2048, torch_threads=1)
    if name == "a2c":
        return A2C(CategoricalPgAgent(hidden_sizes=[16]), discrete_sampler(), learning_rate=0.01,
                   value_loss_coeff=1.0, entropy_loss_coeff=0.0, total_env_steps=12_000, **common)
    if name == "ppo":
        return PPO(CategoricalPgAgent(hidden_sizes=[16]), discrete_sampler(), learning_rate=0.01, epochs=4,
                   minibatches=1, gae_lambda=0.95, value_loss_coeff=1.0, entropy_loss_coeff=0.0,
                   linear_lr_schedule=False, total_env_steps=8_000, **common)
    if name == "dqn":
        return DQN(DqnAgent(hidden_sizes=[16], eps_steps_min=0, eps_steps_max=1000), discrete_sampler(8),
                   learning_rate=0.01, optimizer_eps=1e-8, batch_size=32, replay_size=4096, replay_ratio=8,
                   min_steps_learn=256, target_update_interval=20, n_step_return=3, delta_clip=None,
                   total_env_steps=6_000, **common)
    kwargs = dict(batch_size=32, replay_size=4096, replay_ratio=32, min_steps_learn=256, learning_rate=0.01,
                  q_learning_rate=0.01, total_env_steps=4_000, **common)
    if name == "td3":
        return TD3(Td3Agent(hidden_sizes=[16], q_hidden_sizes=[16]), box_sampler(terminate), target_update_tau=0.2,
                   **kwargs)
    # SAC with a negligible temperature: its soft value then equals the plain value.
    return SAC(SacAgent(hidden_sizes=[16], q_hidden_sizes=[16]), box_sampler(), fixed_alpha=1e-8,
               target_update_tau=0.2, **kwargs)


@pytest.mark.parametrize("name", ["a2c", "ppo", "dqn", "sac", "td3"])
def test_the_value_through_a_time_limit_is_the_infinite_horizon_value(name):
    pl.seed_everything(0)
    module = build(name)
    make_trainer().fit(module)
    value = value_of_zero(module)
    assert abs(value - VALUE) < 1.0, f"{name}: V(s0) = {value:.2f}, expected {VALUE:.0f}"


def test_the_same_env_ending_by_termination_learns_the_short_horizon_value():
    # The control experiment: nothing in the algorithm, only the env's flag, differs.
    pl.seed_everything(0)
    module = build("td3", terminate=True)
    make_trainer().fit(module)
    assert value_of_zero(module) < TERMINAL_VALUE + 1.0
