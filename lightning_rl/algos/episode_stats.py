"""Episode statistics of training rollouts, logged through torchmetrics."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytorch_lightning as pl
import torch
from torchmetrics import Metric
from torchmetrics.aggregation import MaxMetric, MeanMetric, MinMetric, SumMetric


class WindowMean(Metric):
    """Mean of the last ``window`` values, updated with a batch of values at a time.

    torchmetrics' ``RunningMean`` keeps one copy of its base metric per *update* and merges them
    all in ``compute``, a cost that grows with the window; this keeps the values in a ring buffer:
    one update per sampler batch, ``compute`` a masked mean.
    Under DDP ``compute`` gathers every rank's window and averages all of their values, so every
    rank must call it at the same point (a collective); it is NaN while no rank has a value.

    Args:
        window: Number of most recent values averaged (per rank).
    """

    full_state_update = False
    # Registered by ``add_state`` in ``__init__``.
    values: torch.Tensor
    count: torch.Tensor

    def __init__(self, window: int) -> None:
        # No cached compute: a rank without new episodes must still join the collective that the
        # ranks with new episodes enter (a cached value skips it and DDP hangs).
        super().__init__(compute_with_cache=False)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.add_state("values", default=torch.zeros(window, dtype=torch.float64), dist_reduce_fx="cat")
        self.add_state("count", default=torch.zeros(1, dtype=torch.long), dist_reduce_fx="cat")

    def update(self, values: torch.Tensor) -> None:
        values = torch.as_tensor(values, dtype=torch.float64, device=self.values.device).flatten()
        n = values.numel()
        kept = values[-self.window :]
        first = self.count + (n - kept.numel())
        self.values[(first + torch.arange(kept.numel(), device=self.values.device)) % self.window] = kept
        self.count += n

    def compute(self) -> torch.Tensor:
        # One row per rank after a DDP sync (a single row otherwise); a rank's ring buffer fills
        # from slot 0, so its first min(count, window) slots hold its values.
        values = self.values.reshape(-1, self.window)
        filled = self.count.reshape(-1, 1).clamp(max=self.window)
        mask = torch.arange(self.window, device=values.device) < filled
        return ((values * mask).sum() / mask.sum()).float()


def _compute(metric: Metric, world_size: int) -> torch.Tensor:
    """``metric.compute()``; in a single process NaN for a window without values.

    Emptiness is read from the metric's values, not from its count of ``update`` calls, which a
    checkpoint does not restore. Under DDP every rank computes (a collective), also a rank that
    finished no episode yet, whose torchmetrics "compute before update" warning says nothing
    wrong: it is silenced there only. Sums are 0 and the epoch's mean, max and min are computed
    only after an episode (see :meth:`EpisodeStatsCallback.on_train_epoch_end`).
    """
    if world_size == 1:
        # Nothing to synchronize: the metric's own compute, without torchmetrics' sync wrapper
        # (a third of the cost, paid at every logged iteration).
        if isinstance(metric, WindowMean) and int(metric.count.sum()) == 0:
            return torch.tensor(float("nan"))
        return type(metric).compute(metric)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*was called before the ``update`` method.*")
        return metric.compute()


def _metric_state(metric: Metric) -> dict[str, torch.Tensor]:
    # Every state here is one tensor (no list states: these metrics do not concatenate).
    return {key: torch.as_tensor(value).detach().cpu().clone() for key, value in metric.metric_state.items()}


def _load_metric_state(metric: Metric, stored: dict[str, torch.Tensor]) -> None:
    for key, value in stored.items():
        current = getattr(metric, key)
        setattr(metric, key, value.to(device=current.device, dtype=current.dtype))


class EpisodeStatsCallback(pl.Callback):
    """Logs ``train/return_mean`` (over the last ``window`` episodes), min/max/length per epoch.

    Reads the episodes the sampler completed (``TrajInfo`` s) after every training batch. Atari
    episodes also give ``train/game_score_mean`` (raw score, before clipping and lives); a
    multi-agent module (one with ``agent.agent_names``) whose episodes record each agent's return
    (:class:`~lightning_rl.envs.MultiAgentTrajInfo`) also gives ``train/return_mean/<agent>``
    beside the team return.

    Args:
        window: Episodes in the running mean, as Stable-Baselines3 and RL papers report it.
    """

    def __init__(self, window: int = 100) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.return_mean = WindowMean(window)
        self.length_mean = WindowMean(window)
        self.game_score_mean = WindowMean(window)
        self.epoch_return_mean = MeanMetric(compute_with_cache=False)
        self.epoch_return_max = MaxMetric(compute_with_cache=False)
        self.epoch_return_min = MinMetric(compute_with_cache=False)
        self.episodes = SumMetric(compute_with_cache=False)
        self.epoch_episodes = SumMetric(compute_with_cache=False)
        self._has_game_score = False
        #: Per-agent window means, by agent name (multi-agent modules; built at fit start).
        self.agent_return_mean: dict[str, WindowMean] = {}
        # In one process the window means change only with new episodes: the last values are
        # kept until then (under DDP every rank computes every time, a collective).
        self._last: dict[str, float] | None = None

    def _base_metrics(self) -> tuple[Metric, ...]:
        return (
            self.return_mean, self.length_mean, self.game_score_mean, self.epoch_return_mean,
            self.epoch_return_max, self.epoch_return_min, self.episodes, self.epoch_episodes,
        )

    def _metrics(self) -> tuple[Metric, ...]:
        return (*self._base_metrics(), *self.agent_return_mean.values())

    _NAMES = (
        "return_mean", "length_mean", "game_score_mean", "epoch_return_mean", "epoch_return_max",
        "epoch_return_min", "episodes", "epoch_episodes",
    )

    def state_dict(self) -> dict[str, Any]:
        """The episode windows, the epoch's running statistics and the episode count, as tensors:
        checkpoint state, so a resumed run logs what the uninterrupted run logs (a resume in the
        middle of an epoch included)."""
        state: dict[str, Any] = {"has_game_score": self._has_game_score}
        epoch_empty = float(self.epoch_episodes.sum_value) == 0
        for name, metric in zip(self._NAMES, self._base_metrics(), strict=True):
            if epoch_empty and name in ("epoch_return_max", "epoch_return_min"):
                continue  # their empty state is an infinity, and a checkpoint holds finite values only
            state[name] = _metric_state(metric)
        if self.agent_return_mean:
            state["agent_return_mean"] = {n: _metric_state(m) for n, m in self.agent_return_mean.items()}
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a checkpoint of a version without it keeps empty windows)."""
        self._has_game_score = bool(state_dict.get("has_game_score", False))
        for name, metric in zip(self._NAMES, self._base_metrics(), strict=True):
            stored = state_dict.get(name)
            if stored is not None:
                _load_metric_state(metric, stored)
        for name, stored in state_dict.get("agent_return_mean", {}).items():
            # Restored before on_fit_start, which keeps the windows of the agents it finds here.
            _load_metric_state(self.agent_return_mean.setdefault(name, WindowMean(self.window)), stored)
        self._last = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        # Every rank knows the agent names from its agent, so all ranks compute the same metrics.
        names = tuple(getattr(getattr(pl_module, "agent", None), "agent_names", ()) or ())
        self.agent_return_mean = {n: self.agent_return_mean.get(n) or WindowMean(self.window) for n in names}
        # Metric states go where the module is, so DDP's collectives can gather them (NCCL only
        # moves CUDA tensors).
        for metric in self._metrics():
            metric.to(pl_module.device)
        self._last = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        infos = pl_module.train_state.pop_traj_infos()
        if infos:
            # One update per metric and batch (each torchmetrics call costs tens of microseconds).
            returns = torch.tensor([float(info.Return) for info in infos], dtype=torch.float64)
            self.return_mean.update(returns)
            self.length_mean.update(torch.tensor([float(info.Length) for info in infos]))
            self.epoch_return_mean.update(returns)
            self.epoch_return_max.update(returns)
            self.epoch_return_min.update(returns)
            scores = [float(info.GameScore) for info in infos if "GameScore" in info]
            if scores:
                self._has_game_score = True
                self.game_score_mean.update(torch.tensor(scores))
            for name, metric in self.agent_return_mean.items():
                agent_returns = [info.AgentReturns[name] for info in infos if name in info.get("AgentReturns", ())]
                if agent_returns:
                    metric.update(torch.tensor(agent_returns, dtype=torch.float64))
            self.episodes.update(len(infos))
            self.epoch_episodes.update(len(infos))
            self._last = None
        # Under DDP every compute below is a collective: whether it runs must not depend on this
        # rank's episodes (ranks finish their first episodes at different iterations), only on
        # the iteration count, which all ranks share.
        if pl_module.logging_due():
            finite = self._window_values(trainer)
            if finite:
                # The module's per-iteration path: straight to the loggers at env steps and into
                # callback_metrics (EarlyStopping, ModelCheckpoint, the progress display), without
                # self.log's per-key bookkeeping, which costs more than a small update.
                pl_module.log_step_metrics(finite, reduce=False)  # synced above

    def _window_values(self, trainer: pl.Trainer) -> dict[str, float]:
        """The window means that hold values (``train/return_mean``, ...); under DDP a collective."""
        world = trainer.world_size
        finite = self._last
        if finite is None or world > 1:
            metrics = {"train/return_mean": _compute(self.return_mean, world),
                       "train/length_mean": _compute(self.length_mean, world)}
            if self._game_scores_possible(trainer):
                metrics["train/game_score_mean"] = _compute(self.game_score_mean, world)
            for name, metric in self.agent_return_mean.items():
                metrics[f"train/return_mean/{name}"] = _compute(metric, world)
            finite = self._last = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
        return finite

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        # A resumed run's windows come from its checkpoint: their means are what the callbacks that
        # read trainer.callback_metrics (the progress display, a user's) saw in the uninterrupted
        # run at this point, logged at the iteration before the save. Nothing goes to the loggers:
        # that iteration's points are in the run's event files already.
        if int(pl_module.train_state.itr) > 0:
            trainer.callback_metrics.update(
                {k: torch.tensor(v) for k, v in self._window_values(trainer).items()})

    def _game_scores_possible(self, trainer: pl.Trainer) -> bool:
        # Single process: only once an episode carried a score. DDP: always (a collective).
        return self._has_game_score or trainer.world_size > 1

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        world = trainer.world_size
        episodes = _compute(self.episodes, world)
        metrics = {"train/episodes": episodes} if episodes > 0 else {}
        if _compute(self.epoch_episodes, world) > 0:
            metrics["train/epoch_return_mean"] = _compute(self.epoch_return_mean, world)
            metrics["train/epoch_return_max"] = _compute(self.epoch_return_max, world)
            metrics["train/epoch_return_min"] = _compute(self.epoch_return_min, world)
        if metrics:
            # train/return_mean was logged per step: its latest value is what EarlyStopping and
            # ModelCheckpoint see at the epoch's end. Env steps are the x-axis here too.
            metrics["step"] = torch.tensor(float(pl_module.global_env_steps))
            pl_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1)
        for metric in (self.epoch_return_mean, self.epoch_return_max, self.epoch_return_min, self.epoch_episodes):
            metric.reset()
