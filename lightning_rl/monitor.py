"""Track named scalars over a window and log their statistics (digideep ``Monitor``).

Any code in the training process records values by name; :class:`MonitorCallback` logs the
mean, std, min and max of each name's last ``window`` values through the Lightning logger at
every epoch end (``monitor/<name>/mean`` and so on)::

    from lightning_rl.monitor import monitor

    monitor("agent/grad_norm", grad_norm)         # a scalar
    monitor("rollout/value", values)              # an array or tensor: each element counts

The module-level :data:`monitor` is what the callback logs by default. Values recorded in
sampler worker processes stay in those processes (they have their own copy).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

__all__ = ["Monitor", "MonitorCallback", "monitor"]


class Monitor:
    """Windows of the latest values of named scalars, with their mean, std, min and max.

    Args:
        window: Values kept per name; older ones drop out.

    Raises:
        ValueError: If ``window`` is below 1.
    """

    def __init__(self, window: int = 1000) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self._values: dict[str, deque[float]] = {}
        # Values recorded per name since the start, so a reader can tell whether a name is new.
        self._counts: dict[str, int] = {}

    def __call__(self, name: str, value: float | np.ndarray | torch.Tensor) -> None:
        """Record ``value`` under ``name``; every element of an array or tensor is one value."""
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        values = np.asarray(value, dtype=np.float64).reshape(-1)
        window = self._values.setdefault(name, deque(maxlen=self.window))
        window.extend(values.tolist())
        self._counts[name] = self._counts.get(name, 0) + values.size

    def names(self) -> list[str]:
        """Names with at least one value, sorted."""
        return sorted(name for name, values in self._values.items() if values)

    def count(self, name: str) -> int:
        """Values recorded under ``name`` since it first appeared (or the last reset), window or not."""
        return self._counts.get(name, 0)

    def stats(self, name: str) -> dict[str, float]:
        """``mean``, ``std`` (population), ``min``, ``max`` and ``count`` of ``name``'s window.

        Raises:
            ValueError: If ``name`` has no values.
        """
        values = self._values.get(name)
        if not values:
            raise ValueError(f"name={name!r} has no recorded values; known names: {self.names()}")
        array = np.fromiter(values, dtype=np.float64, count=len(values))
        return {
            "mean": float(array.mean()),
            "std": float(array.std()),
            "min": float(array.min()),
            "max": float(array.max()),
            "count": float(array.size),
        }

    def summary(self) -> dict[str, dict[str, float]]:
        """:meth:`stats` of every name."""
        return {name: self.stats(name) for name in self.names()}

    def reset(self, name: str | None = None) -> None:
        """Forget the values of ``name`` (all names if None)."""
        if name is None:
            self._values.clear()
            self._counts.clear()
        else:
            self._values.pop(name, None)
            self._counts.pop(name, None)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}(window={self.window})"]
        for name, s in self.summary().items():
            lines.append(
                f"  {name}: mean {s['mean']:.4g} std {s['std']:.4g} min {s['min']:.4g} max {s['max']:.4g}"
                f" (n={int(s['count'])})"
            )
        return "\n".join(lines)


#: The monitor that code records into and that :class:`MonitorCallback` logs by default.
monitor = Monitor()


class MonitorCallback(pl.Callback):
    """Logs ``<prefix><name>/{mean,std,min,max}`` of a :class:`Monitor` at every train epoch end.

    Only names that received values since the previous epoch end are logged, so a value that
    stopped being recorded does not repeat forever.

    Args:
        monitor: The monitor to log; None: the module-level :data:`lightning_rl.monitor.monitor`.
        prefix: Put before every logged key.
        reset_on_fit_start: Clear the monitor when fitting starts, so values of an earlier run in
            the same process do not leak into this one.
    """

    def __init__(
        self, monitor: Monitor | None = None, prefix: str = "monitor/", reset_on_fit_start: bool = True
    ) -> None:
        self._monitor = monitor
        self.prefix = prefix
        self.reset_on_fit_start = reset_on_fit_start
        self._logged_counts: dict[str, int] = {}

    @property
    def monitor(self) -> Monitor:
        """The monitor this callback logs."""
        return self._monitor if self._monitor is not None else monitor

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self.reset_on_fit_start:
            self.monitor.reset()
        self._logged_counts = {}

    def metrics(self) -> dict[str, float]:
        """The statistics of the names that got values since the last call, as logged keys."""
        out: dict[str, float] = {}
        for name in self.monitor.names():
            count = self.monitor.count(name)
            if count == self._logged_counts.get(name):
                continue
            self._logged_counts[name] = count
            for stat, value in self.monitor.stats(name).items():
                if stat != "count":
                    out[f"{self.prefix}{name}/{stat}"] = value
        return out

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        metrics = self.metrics()
        if metrics:
            pl_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1)
