"""Row 23: observation-normalization statistics travel with the checkpoint into play, and
evaluation and play use them frozen (only training rollouts update them)."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.callbacks.evaluation import evaluate_agent
from lightning_rl.play import play_episodes
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer


def cartpole_ppo() -> PPO:
    return PPO(CategoricalPgAgent(hidden_sizes=[16], normalize_observation=True),
               SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=2, eval_n_envs=2, eval_max_trajectories=2,
                             eval_max_steps=200),
               minibatches=1, epochs=1, total_env_steps=192, log_interval_steps=64)


def stats(module: PPO) -> dict[str, torch.Tensor]:
    rms = module.agent.model.encoder.obs_rms
    return {"mean": rms.mean.clone(), "var": rms.var.clone(), "count": rms.count.clone()}


class EvaluateEachEpoch(pl.Callback):
    """Runs an evaluation at every epoch end and records the statistics before and after it."""

    def __init__(self) -> None:
        self.pairs: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = []

    def on_train_epoch_end(self, trainer, pl_module):
        before = stats(pl_module)
        episodes = evaluate_agent(pl_module, deterministic=True)
        assert episodes
        self.pairs.append((before, stats(pl_module)))


def test_statistics_round_trip_into_play_and_stay_frozen_outside_training(tmp_path):
    pl.seed_everything(0)
    trained, evaluations = cartpole_ppo(), EvaluateEachEpoch()
    make_trainer(callbacks=[evaluations, ModelCheckpoint(dirpath=tmp_path, save_last=True)]).fit(trained)
    saved = stats(trained)
    assert float(saved["count"]) == 192  # three rollouts of 64 observations
    assert float(saved["var"].min()) > 0 and not torch.equal(saved["mean"], torch.zeros(4))

    # Evaluation acts with the statistics and leaves them as they are.
    assert len(evaluations.pairs) == 3
    for before, after in evaluations.pairs:
        for key in before:
            assert torch.equal(before[key], after[key]), key

    # play: a fresh module loads them from the checkpoint, and playing does not change them.
    fresh = cartpole_ppo()
    play_episodes(fresh, ckpt_path=str(tmp_path / "last.ckpt"), episodes=2, deterministic=True, video_folder=None,
                  seed=0, max_steps_per_episode=200)
    for key, value in stats(fresh).items():
        assert torch.equal(value, saved[key]), key
