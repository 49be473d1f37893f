"""Episode statistics of training rollouts, logged through torchmetrics."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from torchmetrics.aggregation import MaxMetric, MeanMetric, MinMetric, RunningMean, SumMetric


class EpisodeStatsCallback(pl.Callback):
    """Logs ``train/return_mean`` (over the last ``window`` episodes), min/max/length per epoch.

    Reads the episodes the sampler completed (``TrajInfo`` s) after every training batch. Atari
    episodes also give ``train/game_score_mean`` (raw score, before clipping and lives).

    Args:
        window: Episodes in the running mean, as Stable-Baselines3 and RL papers report it.
    """

    def __init__(self, window: int = 100) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.return_mean = RunningMean(window=window)
        self.length_mean = RunningMean(window=window)
        self.game_score_mean = RunningMean(window=window)
        self.epoch_return_mean = MeanMetric()
        self.epoch_return_max = MaxMetric()
        self.epoch_return_min = MinMetric()
        self.episodes = SumMetric()
        self._has_game_score = False
        self._seen_any = False

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        infos = pl_module.train_state.pop_traj_infos()
        for info in infos:
            self.return_mean.update(float(info.Return))
            self.length_mean.update(float(info.Length))
            self.epoch_return_mean.update(float(info.Return))
            self.epoch_return_max.update(float(info.Return))
            self.epoch_return_min.update(float(info.Return))
            if "GameScore" in info:
                self._has_game_score = True
                self.game_score_mean.update(float(info.GameScore))
        if infos:
            self._seen_any = True
            self.episodes.update(len(infos))
        if self._seen_any and pl_module.logging_due():
            metrics = {"train/return_mean": self.return_mean.compute(), "train/length_mean": self.length_mean.compute()}
            if self._has_game_score:
                metrics["train/game_score_mean"] = self.game_score_mean.compute()
            pl_module.log_dict(metrics, on_step=True, on_epoch=False, prog_bar=True, batch_size=1)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not self._seen_any:
            return
        # train/return_mean was logged per step: its latest value is what EarlyStopping and
        # ModelCheckpoint see at the epoch's end.
        metrics = {"train/episodes": self.episodes.compute()}
        if self.epoch_return_mean.update_count:
            metrics["train/epoch_return_mean"] = self.epoch_return_mean.compute()
            metrics["train/epoch_return_max"] = self.epoch_return_max.compute()
            metrics["train/epoch_return_min"] = self.epoch_return_min.compute()
        pl_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1)
        for metric in (self.epoch_return_mean, self.epoch_return_max, self.epoch_return_min):
            metric.reset()
