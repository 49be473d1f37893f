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


def test_running_stats_merge_every_ranks_batch_in_rank_order():
    from lightning_rl.models.normalization import RunningMeanStdModel

    gen = torch.Generator().manual_seed(0)
    first = torch.randn(50, 3, generator=gen) * 2 + 1
    batches = [torch.randn(7, 3, generator=gen), torch.randn(13, 3, generator=gen) * 3 - 2]
    # What each rank contributes to the gather (a world of one gathers just its own row).
    contributed = []
    for x in batches:
        RunningMeanStdModel((3,)).update(x, all_gather=lambda t: contributed.append(t) or t[None])
    stacked = torch.stack(contributed)  # what all_gather returns on every rank
    ranks = []
    for x in batches:
        rms = RunningMeanStdModel((3,))
        rms.update(first)
        rms.update(x, all_gather=lambda t: stacked)
        ranks.append(rms)
    reference = torch.cat([first, *batches])
    for rms in ranks:
        assert float(rms.count) == 70
        torch.testing.assert_close(rms.mean, reference.mean(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rms.var, reference.var(0, unbiased=False), rtol=1e-5, atol=1e-5)
    assert torch.equal(ranks[0].mean, ranks[1].mean) and torch.equal(ranks[0].var, ranks[1].var)
