"""Trainer callbacks: evaluation, episode statistics, env-step progress, throughput, run directory.

Lightning's own parts do the rest: ``SimpleProfiler`` (``--trainer.profiler simple``) times the
sections the sampler and learner mark (``sampler/obtain``, ``sampler/targets``, ``learner/update``).
"""

from lightning_rl.algos.episode_stats import EpisodeStatsCallback
from lightning_rl.algos.throughput import ThroughputCallback
from lightning_rl.callbacks.evaluation import EvaluationCallback, evaluate_agent, summarize_trajectories
from lightning_rl.callbacks.progress import RLProgressBar

__all__ = [
    "EpisodeStatsCallback",
    "EvaluationCallback",
    "RLProgressBar",
    "ThroughputCallback",
    "evaluate_agent",
    "summarize_trajectories",
]
from lightning_rl.callbacks.run_directory import RunDirectoryCallback
from lightning_rl.callbacks.snapshots import SNAPSHOT_MODES, snapshot_callbacks
from lightning_rl.callbacks.utilization import UtilizationCallback

__all__ += ["SNAPSHOT_MODES", "RunDirectoryCallback", "UtilizationCallback", "snapshot_callbacks"]
