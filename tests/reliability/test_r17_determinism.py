"""Row 17: the same seed twice gives the same run (actions, rewards, losses, weights), and a
sampler's envs start from different observations."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import CategoricalPgAgent, DqnAgent, SacAgent
from lightning_rl.algos import DQN, PPO, SAC
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer


def build(name: str) -> Any:
    if name == "ppo":
        return PPO(CategoricalPgAgent(hidden_sizes=[16]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
                   minibatches=2, epochs=2, total_env_steps=128, log_interval_steps=32)
    if name == "dqn":
        return DQN(DqnAgent(hidden_sizes=[16], eps_steps_min=0, eps_steps_max=64),
                   SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2), batch_size=16, replay_size=512,
                   min_steps_learn=32, replay_ratio=4, total_env_steps=128, log_interval_steps=32)
    return SAC(SacAgent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler(env_id="Pendulum-v1", batch_T=16,
               batch_B=2), batch_size=16, replay_size=512, min_steps_learn=32, replay_ratio=4, total_env_steps=128,
               log_interval_steps=32)


class Record(pl.Callback):
    """Every batch's env rewards and actions, and every logged loss."""

    def __init__(self) -> None:
        self.rewards: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        samples = pl_module.sampler.samples
        self.rewards.append(np.array(samples.env.reward))
        self.actions.append(np.array(samples.agent.action))
        self.losses += [float(v) for k, v in sorted(trainer.callback_metrics.items()) if "loss" in k]


def run(name: str, seed: int) -> tuple[Record, dict[str, torch.Tensor]]:
    pl.seed_everything(seed)
    module, record = build(name), Record()
    make_trainer(callbacks=[record]).fit(module)
    return record, {k: v for k, v in module.state_dict().items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("name", ["ppo", "dqn", "sac"])
def test_the_same_seed_twice_gives_the_same_run_bit_for_bit(name):
    (a, weights_a), (b, weights_b) = run(name, 3), run(name, 3)
    assert len(a.rewards) == 4 and a.losses
    for x, y in zip(a.rewards + a.actions, b.rewards + b.actions, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.losses == b.losses
    for key in weights_a:
        assert torch.equal(weights_a[key], weights_b[key]), key
    # Another seed is another run.
    c, _ = run(name, 4)
    assert any(not np.array_equal(x, y) for x, y in zip(a.actions, c.actions, strict=True))


def test_a_samplers_envs_start_from_different_observations():
    sampler = SerialSampler(env_id="CartPole-v1", batch_T=1, batch_B=4)
    try:
        sampler.initialize(CategoricalPgAgent(hidden_sizes=[4]), seed=0)
        samples, _ = sampler.obtain_samples(0)
        first = np.array(samples.env.observation[0])  # [B, 4]: each env's first observation
    finally:
        sampler.shutdown()
    assert len({row.tobytes() for row in first}) == 4
