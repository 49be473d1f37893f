"""CPU and GPU utilization and memory of the training process and its sampler workers."""

from __future__ import annotations

import importlib.util
from typing import Any

import psutil
import pytorch_lightning as pl
import torch

MIB = 1024.0**2


class UtilizationCallback(pl.Callback):
    """Logs ``perf/...`` utilization and memory at every train epoch end, or every n batches.

    CPU (psutil), over the time since the previous log:

    * ``perf/cpu_percent``: CPU use of this process and its children (sampler workers); 100 is
      one core fully busy.
    * ``perf/system_cpu_percent``: the whole machine, 100 = all cores busy.
    * ``perf/rss_mib``: resident memory of this process and its children; ``perf/processes``:
      how many that is.
    * ``perf/system_memory_percent``: memory in use on the machine.

    GPU, when the module runs on CUDA (``torch.cuda`` memory statistics of this process):
    ``perf/gpu_memory_allocated_mib``, ``perf/gpu_max_memory_allocated_mib``,
    ``perf/gpu_memory_reserved_mib``, ``perf/gpu_memory_used_percent`` (the device, all processes)
    and, if ``pynvml`` is installed, ``perf/gpu_utilization_percent``.

    Args:
        every_n_batches: Log every this many training batches instead (0: at epoch ends).
    """

    def __init__(self, every_n_batches: int = 0) -> None:
        if every_n_batches < 0:
            raise ValueError(f"every_n_batches must be >= 0, got {every_n_batches}")
        self.every_n_batches = every_n_batches
        self._process = psutil.Process()
        # psutil measures CPU percent between two calls on the same Process object.
        self._tracked: dict[int, psutil.Process] = {}
        self._has_nvml = importlib.util.find_spec("pynvml") is not None

    def _process_tree(self) -> list[psutil.Process]:
        try:
            children = self._process.children(recursive=True)
        except psutil.Error:
            children = []
        alive = {p.pid: self._tracked.get(p.pid, p) for p in [self._process, *children]}
        self._tracked = alive
        return list(alive.values())

    def cpu_metrics(self) -> dict[str, float]:
        """The CPU and memory figures (see the class docstring); the first call starts the clock."""
        cpu = rss = 0.0
        processes = 0
        for process in self._process_tree():
            try:
                with process.oneshot():
                    cpu += process.cpu_percent(interval=None)
                    rss += process.memory_info().rss
                processes += 1
            except psutil.Error:
                continue  # the process ended while being read
        return {
            "perf/cpu_percent": cpu,
            "perf/system_cpu_percent": psutil.cpu_percent(interval=None),
            "perf/rss_mib": rss / MIB,
            "perf/processes": float(processes),
            "perf/system_memory_percent": psutil.virtual_memory().percent,
        }

    def gpu_metrics(self, device: torch.device) -> dict[str, float]:
        """The GPU figures of ``device``; empty unless it is a CUDA device."""
        if device.type != "cuda" or not torch.cuda.is_available():
            return {}
        free, total = torch.cuda.mem_get_info(device)
        metrics = {
            "perf/gpu_memory_allocated_mib": torch.cuda.memory_allocated(device) / MIB,
            "perf/gpu_max_memory_allocated_mib": torch.cuda.max_memory_allocated(device) / MIB,
            "perf/gpu_memory_reserved_mib": torch.cuda.memory_reserved(device) / MIB,
            "perf/gpu_memory_used_percent": 100.0 * (total - free) / max(total, 1),
        }
        if self._has_nvml:
            try:
                metrics["perf/gpu_utilization_percent"] = float(torch.cuda.utilization(device))
            except Exception:  # NVML present but unusable (driver mismatch, no permission)
                self._has_nvml = False
        return metrics

    def metrics(self, device: torch.device) -> dict[str, float]:
        """All figures for a module on ``device``."""
        return {**self.cpu_metrics(), **self.gpu_metrics(device)}

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.cpu_metrics()  # start psutil's CPU clocks

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.every_n_batches and (batch_idx + 1) % self.every_n_batches == 0:
            pl_module.log_dict(self.metrics(pl_module.device), on_step=True, on_epoch=False, batch_size=1)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not self.every_n_batches:
            pl_module.log_dict(self.metrics(pl_module.device), on_step=False, on_epoch=True, batch_size=1)
