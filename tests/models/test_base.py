from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_rl.models import FeedForwardModel, ImageEncoder, MlpModel, VectorEncoder


def test_vector_encoder_flattens_and_normalizes():
    enc = VectorEncoder((2, 2), hidden_sizes=None, normalize_observation=True)
    assert enc.output_size == 4 and enc.obs_ndim == 2
    obs = torch.arange(8.0).view(2, 2, 2)
    torch.testing.assert_close(enc(obs), obs.view(2, 4))  # fresh stats: mean 0, var 1
    enc.update_obs_rms(obs.view(1, 2, 2, 2))  # any leading dims
    # Each feature sees two values 4 apart: mean at the middle, std 2, so +-1.
    expected = torch.tensor([[-1.0] * 4, [1.0] * 4])
    torch.testing.assert_close(enc(obs), expected, atol=1e-3, rtol=0)


def test_vector_encoder_without_normalization_ignores_update():
    enc = VectorEncoder((3,), hidden_sizes=[5])
    assert enc.obs_rms is None and enc.output_size == 5
    enc.update_obs_rms(torch.randn(4, 3))
    assert enc(torch.zeros(2, 3)).shape == (2, 5)


def test_image_encoder_scales_without_touching_float_input():
    enc = ImageEncoder((2, 8, 8), [4], [3], [1], fc_sizes=None)
    frames = torch.randint(0, 256, (3, 2, 8, 8), dtype=torch.uint8)
    as_float = frames.float()
    copy = as_float.clone()
    out_uint8 = enc(frames)
    assert torch.equal(out_uint8, enc(as_float))
    assert torch.equal(as_float, copy)
    assert torch.equal(out_uint8, enc.conv(frames.float() / 255.0))


def test_feed_forward_model_bad_leading_dims():
    model = FeedForwardModel(VectorEncoder((3,)), MlpModel(3, None, 2))
    assert model(torch.zeros(4, 5, 3)).shape == (4, 5, 2)
    with pytest.raises(ValueError, match="leading dims"):
        model(torch.zeros(1, 2, 3, 3))


def test_feed_forward_model_outputs_hook():
    class Doubled(FeedForwardModel):
        def outputs(self, head_output):
            return 2 * head_output, head_output

    model = Doubled(VectorEncoder((1,)), nn.Identity())
    a, b = model(torch.tensor([[1.0], [2.0]]))
    assert torch.equal(a, torch.tensor([[2.0], [4.0]])) and torch.equal(b, torch.tensor([[1.0], [2.0]]))
