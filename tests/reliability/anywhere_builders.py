"""Small runs of every algorithm for the resume-anywhere tests, on any sampler.

Each builder takes ``total_env_steps`` and ``sampler`` (``serial``, ``cpu`` or ``vector``) and
returns a module whose epoch is :data:`~tests.reliability.resume_anywhere.K` sampler iterations.
Nothing in them depends on the budget (no linear schedules), so a run cut by its budget and
continued with a larger one matches the uninterrupted run. The off-policy builders start learning
in the first epoch and keep a replay small enough to wrap around.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from lightning_rl.agents import CatDqnAgent, CategoricalPgAgent, DdpgAgent, DqnAgent, R2d1Agent, SacAgent, Td3Agent
from lightning_rl.algos import A2C, DDPG, DQN, PPO, R2D1, SAC, TD3, CategoricalDQN
from lightning_rl.samplers import CpuSampler, SerialSampler, VectorSampler
from tests.reliability.resume_anywhere import K

SEED = 3
#: Env steps per sampler iteration of every builder (batch_T x batch_B).
T, B = 8, 2
BATCH = T * B


def make_sampler(kind: str, env_id: str, **kwargs: Any) -> Any:
    """A sampler of ``B`` envs x ``T`` steps of ``env_id``: ``serial``, ``cpu`` (two worker processes)
    or ``vector`` (gymnasium's NumPy vector env where one exists, a SyncVectorEnv otherwise)."""
    if kind == "serial":
        return SerialSampler(env_id=env_id, batch_T=T, batch_B=B, **kwargs)
    if kind == "cpu":
        return CpuSampler(env_id=env_id, batch_T=T, batch_B=B, n_workers=2, **kwargs)
    if kind == "vector":
        return VectorSampler(env_id=env_id, batch_T=T, batch_B=B, backend="auto", **kwargs)
    raise ValueError(f"unknown sampler kind {kind!r}")


def common(total_env_steps: int) -> dict[str, Any]:
    return dict(total_env_steps=total_env_steps, log_interval_steps=K * BATCH, seed=SEED, torch_threads=1)


def build_ppo(total_env_steps: int, sampler: str = "serial") -> PPO:
    return PPO(
        CategoricalPgAgent(hidden_sizes=[16]), make_sampler(sampler, "CartPole-v1"),
        epochs=2, minibatches=2, linear_lr_schedule=False,
        lr_scheduler=functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.9), **common(total_env_steps),
    )


def build_a2c(total_env_steps: int, sampler: str = "serial") -> A2C:
    return A2C(CategoricalPgAgent(hidden_sizes=[16]), make_sampler(sampler, "CartPole-v1"), **common(total_env_steps))


def dqn_settings() -> dict[str, Any]:
    return dict(batch_size=16, replay_size=64, replay_ratio=5, min_steps_learn=2 * BATCH, n_step_return=3,
                double_dqn=True, prioritized_replay=True, pri_beta_steps=100, target_update_interval=3,
                learning_rate=1e-3, optimizer_eps=1e-8)


def build_dqn(total_env_steps: int, sampler: str = "serial") -> DQN:
    agent = DqnAgent(hidden_sizes=[16], dueling=True, eps_steps_min=0, eps_steps_max=160, eps_final=0.05)
    return DQN(agent, make_sampler(sampler, "CartPole-v1"), **dqn_settings(), **common(total_env_steps))


def build_c51(total_env_steps: int, sampler: str = "serial") -> CategoricalDQN:
    agent = CatDqnAgent(hidden_sizes=[16], n_atoms=11, V_min=-10.0, V_max=10.0, eps_steps_min=0, eps_steps_max=160)
    return CategoricalDQN(agent, make_sampler(sampler, "CartPole-v1"), **dqn_settings(), **common(total_env_steps))


def build_r2d1(total_env_steps: int, sampler: str = "serial") -> R2D1:
    agent = R2d1Agent(hidden_sizes=(16,), lstm_size=16, head_size=16, eps_steps_min=0, eps_steps_max=160)
    return R2D1(
        agent, make_sampler(sampler, "CartPole-v1", collector="wait_reset"),
        batch_size=4, batch_T=4, warmup_T=2, rnn_state_interval=4, n_step_return=2, min_steps_learn=3 * BATCH,
        replay_size=96, replay_ratio=4, target_update_interval=3, learning_rate=1e-3, optimizer_eps=1e-8,
        **common(total_env_steps),
    )


#: Pendulum's episodes cut at 40 steps (by gymnasium's TimeLimit), so some end in every run.
PENDULUM = {"max_episode_steps": 40}


def pendulum(sampler: str) -> Any:
    return make_sampler(sampler, "Pendulum-v1", env_kwargs=PENDULUM)


def qpg_settings() -> dict[str, Any]:
    return dict(batch_size=16, replay_size=96, replay_ratio=8, min_steps_learn=2 * BATCH, n_step_return=2)


def build_ddpg(total_env_steps: int, sampler: str = "serial") -> DDPG:
    agent = DdpgAgent(hidden_sizes=[16], q_hidden_sizes=[16])
    return DDPG(agent, pendulum(sampler), **qpg_settings(), **common(total_env_steps))


def build_td3(total_env_steps: int, sampler: str = "serial") -> TD3:
    agent = Td3Agent(hidden_sizes=[16], q_hidden_sizes=[16])
    return TD3(agent, pendulum(sampler), **qpg_settings(), **common(total_env_steps))


def build_sac(total_env_steps: int, sampler: str = "serial") -> SAC:
    agent = SacAgent(hidden_sizes=[16], q_hidden_sizes=[16])
    return SAC(agent, pendulum(sampler), **qpg_settings(), target_update_interval=2,
               **common(total_env_steps))
