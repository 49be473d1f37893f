"""Trainer callbacks: evaluation, episode statistics, throughput."""

from lightning_rl.callbacks.episode_stats import EpisodeStatsCallback
from lightning_rl.callbacks.evaluation import EvaluationCallback, evaluate_agent, summarize_trajectories
from lightning_rl.callbacks.progress import RLProgressBar
from lightning_rl.callbacks.throughput import ThroughputCallback

__all__ = [
    "EpisodeStatsCallback",
    "EvaluationCallback",
    "RLProgressBar",
    "ThroughputCallback",
    "evaluate_agent",
    "summarize_trajectories",
]
from lightning_rl.callbacks.run_directory import RunDirectoryCallback
from lightning_rl.callbacks.utilization import UtilizationCallback
from lightning_rl.monitor import MonitorCallback

__all__ += ["MonitorCallback", "RunDirectoryCallback", "UtilizationCallback"]
