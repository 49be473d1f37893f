from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.models import RunningMeanStdModel


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 2, 3)).astype(np.float32) for n in (1, 7, 50, 13)]
    rms = RunningMeanStdModel((2, 3), clip=None)
    for batch in batches:
        rms.update(torch.from_numpy(batch))
    data = np.concatenate(batches).astype(np.float64)
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rms.var.numpy(), data.var(axis=0), rtol=1e-5, atol=1e-5)
    assert rms.count.item() == 71


def test_running_mean_std_leading_dims_and_by_hand():
    rms = RunningMeanStdModel(1)
    rms.update(torch.tensor([[[1.0], [3.0]]]))  # [T=1, B=2, 1]
    assert rms.mean.item() == 2.0 and rms.var.item() == 1.0
    rms.update(torch.tensor([[5.0], [7.0]]))
    # All of 1, 3, 5, 7: mean 4, population variance (9 + 1 + 1 + 9) / 4 = 5.
    assert rms.mean.item() == 4.0 and rms.var.item() == 5.0


def test_running_mean_std_forward_normalizes_and_clips():
    rms = RunningMeanStdModel(2, clip=1.5)
    with torch.no_grad():
        rms.mean.copy_(torch.tensor([1.0, -1.0]))
        rms.var.copy_(torch.tensor([4.0, 0.0]))
    out = rms(torch.tensor([[2.0, -1.0], [9.0, -1.0005]]))
    # (2 - 1) / 2 = 0.5; var 0 is raised to 1e-6: -0.0005 / 1e-3 = -0.5; (9 - 1) / 2 = 4 -> 1.5.
    torch.testing.assert_close(out, torch.tensor([[0.5, 0.0], [1.5, -0.5]]), atol=1e-4, rtol=1e-4)


def test_running_mean_std_state_dict():
    rms = RunningMeanStdModel(3)
    rms.update(torch.randn(10, 3))
    restored = RunningMeanStdModel(3)
    restored.load_state_dict(rms.state_dict())
    assert set(rms.state_dict()) == {"mean", "var", "count"}
    assert torch.equal(restored.mean, rms.mean) and restored.count.item() == 10
    assert list(rms.parameters()) == []


def test_running_mean_std_bad_input():
    with pytest.raises(ValueError, match="does not end in"):
        RunningMeanStdModel(3).update(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="clip"):
        RunningMeanStdModel(3, clip=0.0)
    with pytest.raises(ValueError, match="var_clip"):
        RunningMeanStdModel(3, var_clip=-1.0)
