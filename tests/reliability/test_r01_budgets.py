"""Budgets are exact and mean one thing: ``total_env_steps`` and ``log_interval_steps`` both count
env steps over all DDP ranks, in whole sampler iterations, and no run steps an env past its budget."""

from __future__ import annotations

from types import SimpleNamespace

import pytorch_lightning as pl

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer


def ppo(total_env_steps: int, log_interval_steps: int = 128) -> PPO:
    # One sampler iteration: 16 steps x 4 envs = 64 env steps.
    return PPO(CategoricalPgAgent(hidden_sizes=[8]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4),
               epochs=1, minibatches=1, total_env_steps=total_env_steps, log_interval_steps=log_interval_steps)


def test_a_budget_between_two_iterations_stops_at_the_last_whole_one():
    pl.seed_everything(0)
    module = ppo(total_env_steps=500)
    make_trainer().fit(module)
    # By hand: 7 iterations are 448 env steps; an 8th would end at 512 > 500.
    assert module.train_state.env_steps == 448
    assert module.sampler.env_steps == 448
    assert module.train_state.itr == 7


def test_a_budget_of_whole_iterations_is_reached_exactly():
    pl.seed_everything(0)
    module = ppo(total_env_steps=512)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 512


def test_under_ddp_both_budgets_count_every_rank():
    module = ppo(total_env_steps=1000, log_interval_steps=512)
    # Two ranks, each stepping 64 env steps per iteration: 128 per iteration over the ranks.
    module._trainer = SimpleNamespace(world_size=2)
    assert module.steps_per_iteration == 128
    assert module.iterations_per_epoch == 4  # 512 / 128, not 512 / 64
    module.train_state.env_steps = 7 * 64  # per rank, after 7 iterations: 896 over the ranks
    assert module.global_env_steps == 896
    assert module.budget_reached  # an 8th iteration would end at 1024 > 1000
    module.train_state.env_steps = 6 * 64  # 768: a 7th ends at 896 <= 1000
    assert not module.budget_reached
    module._trainer = None
    assert module.iterations_per_epoch == 8  # one process: 512 / 64
