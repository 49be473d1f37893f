"""CPU/GPU utilization and memory logging."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.callbacks import UtilizationCallback
from lightning_rl.callbacks.utilization import MIB


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_cpu_metrics_cover_the_process_and_its_children():
    callback = UtilizationCallback()
    callback.cpu_metrics()  # starts psutil's clocks
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        busy(0.2)
        metrics = callback.cpu_metrics()
    finally:
        child.kill()
        child.wait()
    assert set(metrics) == {
        "perf/cpu_percent", "perf/system_cpu_percent", "perf/rss_mib", "perf/processes", "perf/system_memory_percent"
    }
    assert metrics["perf/processes"] >= 2
    assert metrics["perf/cpu_percent"] > 5.0  # the busy loop kept a core busy (shared machines: loosely)
    assert metrics["perf/rss_mib"] > 10.0
    assert 0.0 < metrics["perf/system_memory_percent"] <= 100.0


def test_gpu_metrics_are_empty_on_cpu():
    assert UtilizationCallback().gpu_metrics(torch.device("cpu")) == {}


def test_gpu_metrics_from_torch_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (3 * 1024**3, 4 * 1024**3))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 256 * MIB)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 512 * MIB)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 768 * MIB)
    monkeypatch.setattr(torch.cuda, "utilization", lambda device: 42)
    callback = UtilizationCallback()
    callback._has_nvml = True
    metrics = callback.gpu_metrics(torch.device("cuda", 0))
    assert metrics == {
        "perf/gpu_memory_allocated_mib": 256.0,
        "perf/gpu_max_memory_allocated_mib": 512.0,
        "perf/gpu_memory_reserved_mib": 768.0,
        "perf/gpu_memory_used_percent": 25.0,
        "perf/gpu_utilization_percent": 42.0,
    }

    def no_nvml(device):
        raise RuntimeError("NVML driver mismatch")

    monkeypatch.setattr(torch.cuda, "utilization", no_nvml)
    assert "perf/gpu_utilization_percent" not in callback.gpu_metrics(torch.device("cuda", 0))
    assert callback._has_nvml is False


class _TinyModule(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        return self.layer(batch).pow(2).mean()

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("every_n_batches", [0, 2])
def test_logged_during_fit(every_n_batches):
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", logger=False, callbacks=[UtilizationCallback(every_n_batches)],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(_TinyModule())
    assert trainer.callback_metrics["perf/rss_mib"] > 0
    assert "perf/gpu_memory_allocated_mib" not in trainer.callback_metrics


def test_bad_interval_is_rejected():
    with pytest.raises(ValueError, match="every_n_batches must be >= 0, got -1"):
        UtilizationCallback(every_n_batches=-1)
