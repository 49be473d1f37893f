"""PPO, DQN, R2D1, SAC, DDPG and TD3 learn on a ``Dict``-observation env with their default models.

:class:`tests.toy_envs.DictTargetEnv` shows ``{"target", "noise"}`` with one-step episodes; the
reward depends on ``"target"`` only, so a policy must read that field through the
:class:`~lightning_rl.models.CompositeEncoder` and learn to ignore a distractor 5x its scale.
Each test measures the deterministic policy on 200 fresh episodes of a separately seeded env,
stepped here (not by the library), before and after training:

* discrete (4 targets; PPO, DQN, R2D1): mean reward >= 0.9, SB3's ``test_identity`` threshold (90%
  of the best, 1); a uniform random policy gets 0.25.
* continuous (SAC, DDPG, TD3; 2-D target, reward ``-mean|a - target|``): mean reward >= -0.15,
  i.e. within 0.15 of each coordinate on average, where a uniform random action is 2/3 away and
  the best constant action (0) 1/2.

Where measured, the untrained policy must lie at the level of ignoring the target (below 0.5
discrete; at most -0.4 continuous, whose untrained deterministic policies act near 0, the best
constant action), so the rise is the training's doing.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import CategoricalPgAgent, DdpgAgent, DqnAgent, R2d1Agent, SacAgent, Td3Agent
from lightning_rl.algos import DDPG, DQN, PPO, R2D1, SAC, TD3
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.off_policy import frame_stack_of
from lightning_rl.data import NamedArrayTupleSchema
from lightning_rl.models import CompositeEncoder
from lightning_rl.replays import ReplayBuffer
from lightning_rl.samplers import SerialSampler
from lightning_rl.spaces import from_gymnasium
from tests.algos.test_on_policy import make_trainer
from tests.toy_envs import DictTargetEnv, greedy_mean_reward

DISCRETE = functools.partial(DictTargetEnv, n=4)
CONTINUOUS = functools.partial(DictTargetEnv, n=2, continuous=True)


def fit_measured(module: RLModule, make_env: Any) -> tuple[float, float]:
    """Fit ``module``; its greedy mean reward on ``make_env`` before and after training."""
    before: list[float] = []

    class Before(pl.Callback):
        def on_train_start(self, trainer: pl.Trainer, pl_module: RLModule) -> None:
            before.append(greedy_mean_reward(pl_module.agent, make_env))

    make_trainer(callbacks=[Before()]).fit(module)
    assert isinstance(module.agent.model.encoder, CompositeEncoder)
    return before[0], greedy_mean_reward(module.agent, make_env)


def test_ppo_learns_from_the_target_field():
    pl.seed_everything(0)
    module = PPO(CategoricalPgAgent(hidden_sizes=[32], normalize_observation=True),
                 SerialSampler(env_id=DISCRETE, batch_T=16, batch_B=4), epochs=4, minibatches=2,
                 learning_rate=3e-3, entropy_loss_coeff=0.0, total_env_steps=4096, log_interval_steps=1024)
    make_trainer().fit(module)
    assert isinstance(module.agent.model.encoder, CompositeEncoder)
    assert module.train_state.env_steps == 4096
    assert greedy_mean_reward(module.agent, DISCRETE) >= 0.9


def test_dqn_learns_from_the_target_field():
    pl.seed_everything(0)
    module = DQN(DqnAgent(hidden_sizes=[32], eps_steps_min=0, eps_steps_max=1024, eps_final=0.05, eps_eval=0.0),
                 SerialSampler(env_id=DISCRETE, batch_T=16, batch_B=4), batch_size=32, replay_size=10_000,
                 replay_ratio=8, min_steps_learn=256, target_update_interval=50, learning_rate=1e-3,
                 optimizer_eps=1e-8, total_env_steps=4096, log_interval_steps=1024)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 4096
    assert greedy_mean_reward(module.agent, DISCRETE) >= 0.9


def test_sac_learns_from_the_target_field():
    pl.seed_everything(0)
    module = SAC(SacAgent(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]),
                 SerialSampler(env_id=CONTINUOUS, batch_T=16, batch_B=4), batch_size=64, replay_size=10_000,
                 replay_ratio=64, min_steps_learn=256, learning_rate=1e-3, total_env_steps=4096,
                 log_interval_steps=1024, torch_threads=1)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 4096
    assert greedy_mean_reward(module.agent, CONTINUOUS) >= -0.15


def test_r2d1_learns_from_the_target_field():
    # One-step episodes: each replayed sequence is one training row (batch_T=1) from the stored
    # state, with no burn-in (warmup_T=0), the whole episode being one row.
    pl.seed_everything(0)
    agent = R2d1Agent(hidden_sizes=(32,), lstm_size=32, head_size=32, eps_steps_min=0, eps_steps_max=1024,
                      eps_final=0.05, eps_eval=0.0)
    module = R2D1(agent, SerialSampler(env_id=DISCRETE, batch_T=16, batch_B=4), batch_size=64, batch_T=1,
                  warmup_T=0, rnn_state_interval=1, n_step_return=1, replay_size=10_000, replay_ratio=4,
                  min_steps_learn=128, target_update_interval=50, learning_rate=1e-3, optimizer_eps=1e-8,
                  total_env_steps=2048, log_interval_steps=1024)
    before, after = fit_measured(module, DISCRETE)
    assert module.train_state.env_steps == 2048
    assert before < 0.5, before  # random 0.25
    assert after >= 0.9, (before, after)


@pytest.mark.parametrize("algo, agent_cls", [(DDPG, DdpgAgent), (TD3, Td3Agent)], ids=["ddpg", "td3"])
def test_deterministic_policy_gradients_learn_from_the_target_field(algo, agent_cls):
    # DDPG and TD3 share SAC's Q-of-(observation, action) model code (models/qpg.py).
    pl.seed_everything(0)
    module = algo(agent_cls(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]),
                  SerialSampler(env_id=CONTINUOUS, batch_T=16, batch_B=4), batch_size=64, replay_size=10_000,
                  replay_ratio=64, min_steps_learn=256, learning_rate=1e-3, total_env_steps=4096,
                  log_interval_steps=1024, torch_threads=1)
    before, after = fit_measured(module, CONTINUOUS)
    assert isinstance(module.agent.q_model.encoder, CompositeEncoder)
    assert module.train_state.env_steps == 4096
    assert before <= -0.4, before  # near the best constant action's -1/2
    assert after >= -0.15, (before, after)


def test_replay_stores_dict_observations_field_by_field():
    space = from_gymnasium(DISCRETE().observation_space)  # fields noise [3], target [4]
    Example = NamedArrayTupleSchema("Example", ["observation", "action", "reward", "done"])
    T_in, B = 5, 2
    # noise = (t, b, 0) identifies each row; target = one-hot of t.
    t_idx, b_idx = np.meshgrid(np.arange(T_in), np.arange(B), indexing="ij")
    noise = np.stack([t_idx, b_idx, np.zeros_like(t_idx)], axis=-1).astype(np.float32)
    target = np.eye(4, dtype=np.float32)[t_idx % 4]
    # The sampler's buffers are namedarraytuples with the space's field names.
    Obs = NamedArrayTupleSchema("obs", space.names)
    samples = Example(Obs(noise=noise, target=target), np.zeros((T_in, B), np.int64),
                      np.ones((T_in, B), np.float32), np.zeros((T_in, B), bool))
    example = Example(Obs(*space.null_value()), np.int64(0), np.float32(0), False)
    assert frame_stack_of(samples.observation, None) is None  # no frame deduplication for dict observations
    replay = ReplayBuffer(example, size=T_in * B, B=B, discount=0.9, seed=0)
    replay.append_samples(samples)
    batch = replay.sample_batch(64)
    obs, next_obs = batch.agent_inputs.observation, batch.target_inputs.observation
    assert obs.noise.shape == (64, 3) and obs.target.shape == (64, 4)
    t = obs.noise[:, 0].long()
    torch.testing.assert_close(obs.target, torch.eye(4)[t % 4])  # fields of one row stay together
    torch.testing.assert_close(next_obs.noise[:, 0], obs.noise[:, 0] + 1)  # the next row, same env
    torch.testing.assert_close(next_obs.noise[:, 1], obs.noise[:, 1])
