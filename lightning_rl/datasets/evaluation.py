"""Evaluation episodes on the sampler's separate evaluation envs: the ``validate``/``test`` data
(:class:`EvaluationDataset`) and the summaries the evaluation callback logs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

__all__ = ["EvaluationDataset", "episode_table", "evaluate_agent", "summarize_episodes", "summarize_trajectories"]


def summarize_trajectories(traj_infos: Sequence[Any], prefix: str) -> dict[str, float]:
    """Mean/std/min/max return, mean length and count of finished episodes as ``<prefix>/...``
    (and the mean game score when every episode has one).

    Raises:
        RuntimeError: If no episode finished (raise ``eval_max_steps`` or lower the horizon).
    """
    return summarize_episodes(episode_table(traj_infos), prefix)


def episode_table(traj_infos: Sequence[Any]) -> np.ndarray:
    """``[episodes, 3]`` float64 rows of (return, length, game score or NaN)."""
    rows = [
        (float(t.Return), float(t.Length), float(t.GameScore) if "GameScore" in t else np.nan) for t in traj_infos
    ]
    return np.array(rows, dtype=np.float64).reshape(len(rows), 3)


def summarize_episodes(table: np.ndarray, prefix: str) -> dict[str, float]:
    """:func:`summarize_trajectories` of an :func:`episode_table`.

    Raises:
        RuntimeError: If the table is empty.
    """
    if len(table) == 0:
        raise RuntimeError(
            f"{prefix}: no evaluation episode finished; raise the sampler's eval_max_steps "
            "or eval_max_trajectories so at least one episode ends"
        )
    returns, lengths, scores = table[:, 0], table[:, 1], table[:, 2]
    metrics = {
        f"{prefix}/return_mean": float(returns.mean()),
        f"{prefix}/return_std": float(returns.std()),
        f"{prefix}/return_min": float(returns.min()),
        f"{prefix}/return_max": float(returns.max()),
        f"{prefix}/length_mean": float(lengths.mean()),
        f"{prefix}/episodes": float(len(table)),
    }
    if not np.isnan(scores).any():
        metrics[f"{prefix}/game_score_mean"] = float(scores.mean())
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


class EvaluationDataset(IterableDataset):
    """The ``validate`` subcommand's data: one item, the summary of an evaluation run with the
    module's sampler (its eval envs), acting deterministically unless the module's
    ``eval_deterministic`` is False (``validate --deterministic false``)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        traj_infos = evaluate_agent(self.module, deterministic=bool(getattr(self.module, "eval_deterministic", True)))
        # Kept for the table that `validate`/`test` print (return, length per episode).
        self.module.eval_episodes = [(float(t.Return), float(t.Length)) for t in traj_infos]
        metrics = summarize_trajectories(traj_infos, "eval")
        yield {k: torch.tensor(v) for k, v in metrics.items()}
