"""Evaluation of the agent in eval mode on the sampler's separate evaluation envs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import IterableDataset


def summarize_trajectories(traj_infos: Sequence[Any], prefix: str) -> dict[str, float]:
    """Mean/std/min/max return, mean length and count of finished episodes as ``<prefix>/...``.

    Raises:
        RuntimeError: If no episode finished (raise ``eval_max_steps`` or lower the horizon).
    """
    if not traj_infos:
        raise RuntimeError(
            f"{prefix}: no evaluation episode finished; raise the sampler's eval_max_steps "
            "or eval_max_trajectories so at least one episode ends"
        )
    returns = np.array([float(t.Return) for t in traj_infos])
    metrics = {
        f"{prefix}/return_mean": float(returns.mean()),
        f"{prefix}/return_std": float(returns.std()),
        f"{prefix}/return_min": float(returns.min()),
        f"{prefix}/return_max": float(returns.max()),
        f"{prefix}/length_mean": float(np.mean([float(t.Length) for t in traj_infos])),
        f"{prefix}/episodes": float(len(traj_infos)),
    }
    if all("GameScore" in t for t in traj_infos):
        metrics[f"{prefix}/game_score_mean"] = float(np.mean([float(t.GameScore) for t in traj_infos]))
    return metrics


def evaluate_agent(pl_module: Any, deterministic: bool) -> list[Any]:
    """Run the sampler's eval collector with the agent in eval mode; return finished episodes."""
    agent, sampler = pl_module.agent, pl_module.sampler
    if not getattr(sampler, "eval_n_envs", 0):
        raise ValueError("evaluation needs eval envs: set the sampler's eval_n_envs > 0 in the config")
    previous = getattr(agent, "eval_deterministic", False)
    agent.eval_deterministic = deterministic
    agent.sync_shared_memory()
    try:
        with torch.no_grad():
            return sampler.evaluate_agent(pl_module.train_state.itr)
    finally:
        agent.eval_deterministic = previous
        agent.train_mode(pl_module.train_state.itr)


class EvaluationCallback(pl.Callback):
    """Evaluates every ``every_n_epochs`` epochs and logs ``eval/return_mean`` and friends.

    Episodes run on the sampler's evaluation envs (``eval_n_envs``, ``eval_max_steps``,
    ``eval_max_trajectories``), separate from the training envs, with the agent in eval mode.

    Args:
        every_n_epochs: Evaluation interval in Lightning epochs (``log_interval_steps`` each).
        deterministic: Act with the mode of the policy (greedy / mean action) instead of sampling.
    """

    def __init__(self, every_n_epochs: int = 1, deterministic: bool = False) -> None:
        if every_n_epochs < 1:
            raise ValueError(f"every_n_epochs must be >= 1, got {every_n_epochs}")
        self.every_n_epochs = every_n_epochs
        self.deterministic = deterministic
        self.last_metrics: dict[str, float] = {}

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        if not getattr(pl_module.sampler, "eval_n_envs", 0):
            raise ValueError("EvaluationCallback needs eval envs: set the sampler's eval_n_envs > 0 in the config")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if (trainer.current_epoch + 1) % self.every_n_epochs:
            return
        traj_infos = evaluate_agent(pl_module, self.deterministic)
        self.last_metrics = summarize_trajectories(traj_infos, "eval")
        pl_module.log_dict(self.last_metrics, on_step=False, on_epoch=True, batch_size=1, prog_bar=False)


class EvaluationDataset(IterableDataset):
    """The ``validate`` subcommand's data: one item, the summary of an evaluation run with the
    module's sampler (its eval envs)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        metrics = summarize_trajectories(evaluate_agent(self.module, deterministic=False), "eval")
        yield {k: torch.tensor(v) for k, v in metrics.items()}
