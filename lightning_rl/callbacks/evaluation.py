"""Evaluation of the agent in eval mode on the sampler's separate evaluation envs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info

from lightning_rl.datasets.evaluation import (
    episode_table,
    evaluate_agent,
    summarize_episodes,
    summarize_trajectories,
)

__all__ = [
    "EvaluationCallback", "checkpoint_dir", "episode_table", "evaluate_agent", "gather_episodes",
    "summarize_episodes", "summarize_trajectories",
]


def gather_episodes(trainer: pl.Trainer, table: np.ndarray) -> np.ndarray:
    """Every rank's :func:`episode_table` rows, in rank order (the table itself in one process).

    Two collectives (the row counts, then the rows padded to the longest), so every rank must call
    it at the same point; every rank gets the same table.
    """
    if trainer.world_size <= 1:
        return table
    strategy = trainer.strategy
    device = strategy.root_device
    counts = strategy.all_gather(torch.tensor([len(table)], device=device)).reshape(-1).tolist()
    padded = np.full((max(max(counts), 1), 3), np.nan)
    padded[: len(table)] = table
    rows = strategy.all_gather(torch.as_tensor(padded, device=device)).reshape(len(counts), -1, 3).cpu().numpy()
    return np.concatenate([rows[r, :n] for r, n in enumerate(counts)])


class EvaluationCallback(pl.Callback):
    """Evaluates every ``every_n_epochs`` epochs, logs ``eval/return_mean`` and friends against env
    steps, and keeps the best agent in ``best.ckpt``.

    Episodes run on the sampler's evaluation envs (``eval_n_envs``, ``eval_max_steps``,
    ``eval_max_trajectories``; those the config leaves unset take the sampler's defaults, 4 envs
    and 10 episodes), separate from the training envs, with the agent in eval mode. Each
    new best ``eval/return_mean`` writes ``best.ckpt`` (weights, counters and config; no optimizer
    state or replay) beside the run's other checkpoints and logs ``hp_metric``, the best eval return
    so far, which TensorBoard's HPARAMS tab shows beside the run's hyperparameters.

    Args:
        every_n_epochs: Evaluation interval in Lightning epochs (``log_interval_steps`` each).
        deterministic: Act with the mode of the policy (greedy / mean action) instead of sampling.
        save_best: Write ``best.ckpt`` whenever the eval return improves.
        video_every_n_epochs: Record one evaluation episode as a video every this many epochs (a
            multiple of ``every_n_epochs`` is best), saved under the run's ``videos/`` and logged to
            TensorBoard as ``eval/video``; 0: no videos.

    Raises:
        ValueError: If ``every_n_epochs`` is below 1 or ``video_every_n_epochs`` is negative.
    """

    def __init__(
        self, every_n_epochs: int = 1, deterministic: bool = False, save_best: bool = True,
        video_every_n_epochs: int = 0,
    ) -> None:
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be >= 1, got {every_n_epochs}")
        if video_every_n_epochs < 0:
            raise ValueError(f"video_every_n_epochs must be >= 0, got {video_every_n_epochs}")
        self.every_n_epochs = every_n_epochs
        self.deterministic = deterministic
        self.save_best = save_best
        self.video_every_n_epochs = video_every_n_epochs
        self.last_metrics: dict[str, float] = {}
        self.best_return: float | None = None
        self.best_checkpoint_path: str | None = None

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        sampler = pl_module.sampler
        if stage == "fit" and not sampler.initialized:
            # Evaluation settings the config leaves unset take their defaults (4 envs, 10 episodes).
            used = sampler.use_eval_defaults()
            if used:
                rank_zero_info(f"EvaluationCallback: evaluating on {sampler.eval_n_envs} envs (defaults: "
                               f"{', '.join(used)})")

    def state_dict(self) -> dict[str, Any]:
        return {"best_return": self.best_return}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_return = state_dict.get("best_return")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        epoch = trainer.current_epoch + 1
        if self.video_every_n_epochs and epoch % self.video_every_n_epochs == 0:
            from lightning_rl.video import record_eval_video

            record_eval_video(trainer, pl_module, deterministic=self.deterministic)
        if epoch % self.every_n_epochs:
            return
        traj_infos = evaluate_agent(pl_module, self.deterministic)
        # Every rank evaluates its own envs; the metrics cover the episodes of all ranks.
        self.last_metrics = summarize_episodes(gather_episodes(trainer, episode_table(traj_infos)), "eval")
        value = self.last_metrics["eval/return_mean"]
        # The same value on every rank; rank 0's decision all the same, so all ranks save together.
        improved = bool(trainer.strategy.broadcast(self.best_return is None or value > self.best_return, 0))
        if improved:
            self.best_return = float(trainer.strategy.broadcast(value, 0))
            if self.save_best:
                self.best_checkpoint_path = os.path.join(checkpoint_dir(trainer), "best.ckpt")
                trainer.save_checkpoint(self.best_checkpoint_path, weights_only=True)
        metrics = {**self.last_metrics, "step": float(pl_module.global_env_steps)}
        if self.best_return is not None:
            metrics["hp_metric"] = self.best_return
        pl_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1, prog_bar=False)


def checkpoint_dir(trainer: pl.Trainer) -> str:
    """The run's checkpoint directory: the first ``ModelCheckpoint``'s, else ``<log_dir>/checkpoints``."""
    callback = trainer.checkpoint_callback
    dirpath = getattr(callback, "dirpath", None) if callback is not None else None
    if dirpath:
        return str(dirpath)
    return os.path.join(trainer.log_dir or trainer.default_root_dir, "checkpoints")
