"""Episode statistics: the windowed mean against a brute-force reference, batched updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.callbacks.episode_stats import WindowMean


def test_window_mean_matches_the_mean_of_the_last_values():
    rng = np.random.default_rng(0)
    metric, seen = WindowMean(7), []
    for step in range(60):
        values = rng.normal(size=int(rng.integers(0, 12))).tolist()  # batches larger than the window too
        seen += values
        if values:
            metric.update(torch.tensor(values))
        if seen:
            expected = np.mean(seen[-7:])
            assert float(metric.compute()) == pytest.approx(expected, rel=1e-6), step


def test_window_mean_rejects_an_empty_window():
    with pytest.raises(ValueError, match="window must be >= 1"):
        WindowMean(0)
