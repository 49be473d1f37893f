"""PPO learns with vector discrete actions: ``MultiDiscrete`` and ``MultiBinary``.

Both envs are one-step (:mod:`tests.toy_envs`), so the best policy reads its action off the
observation. The greedy mean reward is measured here on 200 episodes of a separately seeded
env, stepped by the test, not by the library: before training it is near the random level,
after it must reach 90% of the maximum (SB3's ``test_identity`` threshold).
"""

from __future__ import annotations

import functools
from typing import Any

import pytorch_lightning as pl

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.distributions import Bernoulli, MultiCategorical
from lightning_rl.models import CategoricalPgLstmModel
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.toy_envs import MultiBinaryMatchEnv, MultiDiscreteTargetEnv, greedy_mean_reward

# start offsets, so the actions the agent stores and the env receives are shifted by low.
MULTI_DISCRETE = functools.partial(MultiDiscreteTargetEnv, nvec=(3, 4), start=(1, -2))
MULTI_BINARY = functools.partial(MultiBinaryMatchEnv, n=4)


def fit_ppo(make_env: Any, agent: CategoricalPgAgent | None = None, sampler: SerialSampler | None = None,
            total_env_steps: int = 8192) -> tuple[PPO, float, float]:
    """PPO on ``make_env`` (by default feed-forward, 8,192 env steps); ``(module, greedy reward before, after)``."""
    pl.seed_everything(0)
    module = PPO(agent or CategoricalPgAgent(hidden_sizes=[32]),
                 sampler or SerialSampler(env_id=make_env, batch_T=16, batch_B=8), epochs=4, minibatches=2,
                 learning_rate=3e-3, entropy_loss_coeff=0.0, total_env_steps=total_env_steps, log_interval_steps=1024)
    before: list[float] = []

    class Before(pl.Callback):
        def on_train_start(self, trainer: pl.Trainer, pl_module: PPO) -> None:
            before.append(greedy_mean_reward(pl_module.agent, make_env))
            pl_module.agent.eval_deterministic = False

    make_trainer(callbacks=[Before()]).fit(module)
    assert module.train_state.env_steps == total_env_steps
    return module, before[0], greedy_mean_reward(module.agent, make_env)


def test_ppo_learns_multi_discrete_targets():
    module, before, after = fit_ppo(MULTI_DISCRETE)
    assert isinstance(module.agent.distribution, MultiCategorical)
    best = 2.0  # both dims right; a uniformly random policy gets 1/3 + 1/4
    assert before < 0.5 * best, before
    assert after >= 0.9 * best, (before, after)


def test_ppo_learns_multi_binary_bits():
    module, before, after = fit_ppo(MULTI_BINARY)
    assert isinstance(module.agent.distribution, Bernoulli)
    assert before < 0.75, before  # a uniformly random policy gets 0.5
    assert after >= 0.9, (before, after)


def test_recurrent_ppo_learns_multi_discrete_targets():
    # The LSTM model as a config names it (the agent's model class path), on the same space;
    # recurrent PPO trains on whole [T, B] sequences, so episodes wait for the batch's end
    # (wait_reset) and one-step episodes fill batches of T = 1.
    lstm_model = functools.partial(CategoricalPgLstmModel, hidden_sizes=[32], lstm_size=32)
    agent = CategoricalPgAgent(lstm_size=32, model=lstm_model)
    sampler = SerialSampler(env_id=MULTI_DISCRETE, batch_T=1, batch_B=64, collector="wait_reset")
    module, before, after = fit_ppo(MULTI_DISCRETE, agent, sampler, total_env_steps=4096)
    assert isinstance(module.agent.model, CategoricalPgLstmModel)
    assert isinstance(module.agent.distribution, MultiCategorical)
    best = 2.0  # as above: random 1/3 + 1/4
    assert before < 0.5 * best, before
    assert after >= 0.9 * best, (before, after)
