"""Throughput: env steps and updates per second, and where the time goes."""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl


class ThroughputCallback(pl.Callback):
    """Logs ``perf/env_steps_per_s``, ``perf/updates_per_s`` and ``perf/sampler_fraction`` per epoch.

    ``perf/sampler_fraction`` is the share of wall time spent collecting samples; the rest is
    learning and framework overhead.
    """

    def __init__(self) -> None:
        self._t0 = 0.0
        self._env_steps0 = 0
        self._updates0 = 0
        self._sampler_time0 = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        state = pl_module.train_state
        self._t0 = time.perf_counter()
        self._env_steps0, self._updates0, self._sampler_time0 = state.env_steps, state.updates, state.sampler_time

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        state = pl_module.train_state
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        sampler_time = state.sampler_time - self._sampler_time0
        pl_module.log_dict(
            {
                "perf/env_steps_per_s": (state.env_steps - self._env_steps0) * trainer.world_size / elapsed,
                "perf/updates_per_s": (state.updates - self._updates0) / elapsed,
                "perf/sampler_fraction": sampler_time / elapsed,
                "perf/learner_s": elapsed - sampler_time,
                "step": float(pl_module.global_env_steps),  # env steps: the x-axis of every scalar
            },
            on_step=False,
            on_epoch=True,
            batch_size=1,
        )
