"""PPO learns from a channels-last ``[H, W, C]`` uint8 image observation (issue 22).

:class:`tests.toy_envs.BrightHalfImageEnv` shows an 8x8x3 image with one bright pixel; the
one-step reward is 1 if the ``Discrete(2)`` action names the half it lies in. The image is too
small for the Atari convs and channels-last, so this only learns if the agent's conv model reads
the space's layout. The greedy mean reward is measured on 200 episodes of a separately seeded
env stepped by the test: near 0.5 before training, at least 0.9 after.
"""

from __future__ import annotations

import pytorch_lightning as pl

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.models import AtariFfModel
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.toy_envs import BrightHalfImageEnv, greedy_mean_reward


def test_ppo_learns_bright_half_of_channels_last_image():
    pl.seed_everything(0)
    module = PPO(CategoricalPgAgent(), SerialSampler(env_id=BrightHalfImageEnv, batch_T=16, batch_B=8),
                 epochs=4, minibatches=2, learning_rate=1e-3, entropy_loss_coeff=0.0, total_env_steps=8192,
                 log_interval_steps=1024)
    before: list[float] = []

    class Before(pl.Callback):
        def on_train_start(self, trainer: pl.Trainer, pl_module: PPO) -> None:
            before.append(greedy_mean_reward(pl_module.agent, BrightHalfImageEnv))
            pl_module.agent.eval_deterministic = False

    make_trainer(callbacks=[Before()]).fit(module)
    model = module.agent.model
    assert isinstance(model, AtariFfModel)
    # Channels-last, and the small-image convs (3x3), not the 8x8 Atari ones.
    assert model.encoder.channels_last
    assert module.agent.model.encoder.observation_shape == (8, 8, 3)
    assert module.train_state.env_steps == 8192
    after = greedy_mean_reward(module.agent, BrightHalfImageEnv)
    assert before[0] < 0.75, before
    assert after >= 0.9, (before, after)
