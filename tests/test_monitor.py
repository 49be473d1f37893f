"""Monitor window statistics and their logging through the Lightning logger."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger

from lightning_rl.monitor import Monitor, MonitorCallback, monitor


def test_window_statistics_are_hand_computed():
    m = Monitor(window=3)
    for value in (1.0, 2.0, 3.0, 4.0):
        m("loss", value)
    # The window keeps 2, 3, 4: mean 3, population std sqrt(2/3).
    assert m.stats("loss") == pytest.approx({"mean": 3.0, "std": (2 / 3) ** 0.5, "min": 2.0, "max": 4.0, "count": 3})
    assert m.count("loss") == 4


def test_arrays_and_tensors_count_each_element():
    m = Monitor(window=10)
    m("value", np.array([[1.0, 3.0], [5.0, 7.0]]))
    m("value", torch.tensor(9.0, requires_grad=True))
    assert m.stats("value") == pytest.approx({"mean": 5.0, "std": 8**0.5, "min": 1.0, "max": 9.0, "count": 5})
    m("other", 1)
    assert m.names() == ["other", "value"]
    assert set(m.summary()) == {"other", "value"}
    assert "value: mean 5 std 2.828 min 1 max 9 (n=5)" in repr(m)
    m.reset("value")
    assert m.names() == ["other"] and m.count("value") == 0
    m.reset()
    assert m.names() == []


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        Monitor(window=0)
    with pytest.raises(ValueError, match="name='missing' has no recorded values"):
        Monitor().stats("missing")


def test_callback_logs_only_names_with_new_values():
    m = Monitor(window=2)
    callback = MonitorCallback(m, prefix="mon/")
    m("a", 1.0)
    m("a", 3.0)
    assert callback.metrics() == {"mon/a/mean": 2.0, "mon/a/std": 1.0, "mon/a/min": 1.0, "mon/a/max": 3.0}
    m("b", 5.0)
    assert sorted(callback.metrics()) == ["mon/b/max", "mon/b/mean", "mon/b/min", "mon/b/std"]
    assert callback.metrics() == {}
    assert MonitorCallback().monitor is monitor


class _TinyModule(pl.LightningModule):
    """Records the batch index into the global monitor at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        monitor("probe", float(self.global_step))
        return self.layer(batch).pow(2).mean()

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(torch.ones(3, 2), batch_size=1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_callback_logs_window_stats_through_the_logger(tmp_path):
    monitor("stale", 1.0)  # from an earlier run in this process: cleared at fit start
    trainer = pl.Trainer(
        max_epochs=2, accelerator="cpu", logger=CSVLogger(tmp_path, name="run"), callbacks=[MonitorCallback()],
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
    )
    trainer.fit(_TinyModule())
    with open(tmp_path / "run" / "version_0" / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if row.get("monitor/probe/mean")]
    # The global monitor keeps its default window (1000): epoch 1 saw steps 0..2, epoch 2 steps 0..5.
    assert [float(r["monitor/probe/mean"]) for r in rows] == [1.0, 2.5]
    assert [float(r["monitor/probe/max"]) for r in rows] == [2.0, 5.0]
    assert float(rows[1]["monitor/probe/std"]) == pytest.approx(np.std(np.arange(6)))
    assert "monitor/stale/mean" not in rows[0]
    monitor.reset()
