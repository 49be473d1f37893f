"""PPO, DQN and SAC learn from a channels-last ``[H, W, C]`` uint8 image observation.

:class:`tests.toy_envs.BrightHalfImageEnv` shows an 8x8x3 image with one bright pixel; the
one-step reward is 1 if the ``Discrete(2)`` action names the half it lies in. The image is too
small for the Atari convs and channels-last, so this only learns if the agent's conv model reads
the space's layout. The greedy mean reward is measured on 200 episodes of a separately seeded
env stepped by the test: near 0.5 before training, at least 0.9 after.
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import CategoricalPgAgent, DqnAgent, GaussianPgAgent, SacAgent
from lightning_rl.algos import DQN, PPO, SAC
from lightning_rl.models import AtariFfModel, ImageEncoder
from lightning_rl.replays import ReplayStorage
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.toy_envs import BrightColumnImageEnv, BrightHalfImageEnv, greedy_mean_reward


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


def test_dqn_learns_channels_last_image_with_whole_observations_in_the_replay():
    # A uint8 [8, 8, 3] image is no frame stack: the replay must store it whole. Taking its
    # first dim for 8 stacked frames kept only the last image row per step, and the greedy
    # reward stopped near 0.79.
    pl.seed_everything(0)
    module = DQN(DqnAgent(eps_steps_min=0, eps_steps_max=1024, eps_final=0.05, eps_eval=0.0),
                 SerialSampler(env_id=BrightHalfImageEnv, batch_T=16, batch_B=4), batch_size=32,
                 replay_size=10_000, replay_ratio=8, min_steps_learn=256, target_update_interval=50,
                 learning_rate=1e-3, optimizer_eps=1e-8, total_env_steps=4096, log_interval_steps=1024)
    make_trainer().fit(module)
    assert type(module.replay.storage) is ReplayStorage
    batch = module.replay.sample_batch(16)
    observation = batch.agent_inputs.observation
    assert observation.shape == (16, 8, 8, 3) and observation.dtype == torch.uint8
    # Every stored image holds exactly one bright pixel (three channels of 255).
    assert torch.equal((observation == 255).flatten(1).sum(1), torch.full((16,), 3))
    assert greedy_mean_reward(module.agent, BrightHalfImageEnv) >= 0.9


# Continuous actions on an image (:class:`tests.toy_envs.BrightColumnImageEnv`): a uniformly random
# action scores -0.625 and the best constant action -0.5; reading the image earns up to 0.


def test_gaussian_ppo_learns_from_a_channels_last_image():
    pl.seed_everything(0)
    module = PPO(GaussianPgAgent(init_log_std=-0.5), SerialSampler(env_id=BrightColumnImageEnv, batch_T=16, batch_B=8),
                 epochs=4, minibatches=2, learning_rate=1e-3, entropy_loss_coeff=0.0, total_env_steps=8192,
                 log_interval_steps=1024)
    make_trainer().fit(module)
    encoder = module.agent.model.encoder
    assert isinstance(encoder, ImageEncoder) and encoder.channels_last
    assert greedy_mean_reward(module.agent, BrightColumnImageEnv) >= -0.15


@pytest.mark.slow
def test_sac_learns_from_a_channels_last_image():
    pl.seed_everything(0)
    module = SAC(SacAgent(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]),
                 SerialSampler(env_id=BrightColumnImageEnv, batch_T=16, batch_B=4), batch_size=64,
                 replay_size=10_000, replay_ratio=32, min_steps_learn=256, learning_rate=1e-3,
                 total_env_steps=3072, log_interval_steps=1024, torch_threads=1)
    make_trainer().fit(module)
    # The policy and both critics see the image through their own conv encoders.
    for net in (module.agent.model, module.agent.q1_model, module.agent.q2_model):
        assert isinstance(net.encoder, ImageEncoder)
    assert type(module.replay.storage) is ReplayStorage  # an image, no frame stack: stored whole
    assert greedy_mean_reward(module.agent, BrightColumnImageEnv) >= -0.15
