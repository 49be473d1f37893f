"""Trainer callbacks: evaluation, episode statistics, env-step progress, throughput, run directory.

Lightning's own parts do the rest: ``SimpleProfiler`` (``--trainer.profiler simple``) times the
sections the sampler and learner mark (``sampler/obtain``, ``sampler/targets``, ``learner/update``).

Each name is imported on first use (``from lightning_rl.callbacks import X`` works as before), so importing one
submodule does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_rl.lazy import lazy_attributes

if TYPE_CHECKING:
    from lightning_rl.algos.episode_stats import EpisodeStatsCallback
    from lightning_rl.algos.throughput import ThroughputCallback
    from lightning_rl.callbacks.evaluation import EvaluationCallback, evaluate_agent, summarize_trajectories
    from lightning_rl.callbacks.progress import RLProgressBar
    from lightning_rl.callbacks.run_directory import RunDirectoryCallback
    from lightning_rl.callbacks.snapshots import SNAPSHOT_MODES, snapshot_callbacks
    from lightning_rl.callbacks.utilization import UtilizationCallback

#: Each public name and the module that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "EpisodeStatsCallback": "lightning_rl.algos.episode_stats",
    "EvaluationCallback": "lightning_rl.callbacks.evaluation",
    "RLProgressBar": "lightning_rl.callbacks.progress",
    "ThroughputCallback": "lightning_rl.algos.throughput",
    "evaluate_agent": "lightning_rl.callbacks.evaluation",
    "summarize_trajectories": "lightning_rl.callbacks.evaluation",
    "SNAPSHOT_MODES": "lightning_rl.callbacks.snapshots",
    "RunDirectoryCallback": "lightning_rl.callbacks.run_directory",
    "UtilizationCallback": "lightning_rl.callbacks.utilization",
    "snapshot_callbacks": "lightning_rl.callbacks.snapshots",
}

__all__ = [
    "EpisodeStatsCallback", "EvaluationCallback", "RLProgressBar", "ThroughputCallback", "evaluate_agent",
    "summarize_trajectories", "SNAPSHOT_MODES", "RunDirectoryCallback", "UtilizationCallback", "snapshot_callbacks",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
