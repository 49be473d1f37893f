"""Gaussian distribution against torch.distributions, change of variables and Monte Carlo."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import (
    AffineTransform,
    Independent,
    Normal,
    TanhTransform,
    TransformedDistribution,
    kl_divergence,
)

from lightning_rl.distributions import DistInfoStd, Gaussian


def _info(*shape: int, dtype: torch.dtype = torch.float32) -> DistInfoStd:
    return DistInfoStd(mean=torch.randn(*shape, dtype=dtype), log_std=0.5 * torch.randn(*shape, dtype=dtype))


def _reference(info: DistInfoStd) -> Independent:
    return Independent(Normal(info.mean, info.log_std.exp()), 1)


def test_learned_std_log_likelihood_entropy_perplexity_match_torch():
    torch.manual_seed(0)
    dist = Gaussian(dim=3)
    info = _info(4, 5, 3)
    x = torch.randn(4, 5, 3)
    ref = _reference(info)
    assert dist.log_likelihood(x, info).shape == (4, 5)
    assert torch.allclose(dist.log_likelihood(x, info), ref.log_prob(x), atol=1e-5)
    assert torch.allclose(dist.entropy(info), ref.entropy(), atol=1e-5)
    assert torch.allclose(dist.perplexity(info), ref.entropy().exp(), rtol=1e-5)
    assert dist.mean_entropy(info).item() == pytest.approx(ref.entropy().mean().item(), abs=1e-5)


@pytest.mark.parametrize("std", [0.3, [0.1, 0.5]])
def test_fixed_std_ignores_log_std(std):
    torch.manual_seed(1)
    dist = Gaussian(dim=2, std=std)
    info = DistInfoStd(mean=torch.randn(6, 2), log_std=None)
    x = torch.randn(6, 2)
    ref = Independent(Normal(info.mean, torch.as_tensor(std).expand(6, 2)), 1)
    assert torch.allclose(dist.log_likelihood(x, info), ref.log_prob(x), atol=1e-5)
    assert torch.allclose(dist.entropy(info), ref.entropy(), atol=1e-5)
    ignored = DistInfoStd(mean=info.mean, log_std=torch.full((6, 2), 5.0))
    assert torch.allclose(dist.log_likelihood(x, ignored), ref.log_prob(x), atol=1e-5)


def test_state_independent_log_std_broadcasts():
    torch.manual_seed(2)
    dist = Gaussian(dim=2)
    info = DistInfoStd(mean=torch.randn(3, 2), log_std=torch.tensor([0.2, -0.4]))
    x = torch.randn(3, 2)
    ref = Independent(Normal(info.mean, info.log_std.exp().expand(3, 2)), 1)
    assert torch.allclose(dist.log_likelihood(x, info), ref.log_prob(x), atol=1e-5)
    assert dist.entropy(info).shape == (3,)


def test_kl_and_likelihood_ratio_match_torch():
    torch.manual_seed(3)
    dist = Gaussian(dim=4)
    old, new = _info(2, 3, 4), _info(2, 3, 4)
    expected = kl_divergence(_reference(old), _reference(new))
    assert torch.allclose(dist.kl(old, new), expected, atol=1e-5)
    valid = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert dist.mean_kl(old, new, valid).item() == pytest.approx((expected * valid).sum().item() / 3, rel=1e-5)
    x = torch.randn(2, 3, 4)
    ratio = dist.likelihood_ratio(x, old, new)
    assert torch.allclose(ratio, (_reference(new).log_prob(x) - _reference(old).log_prob(x)).exp(), rtol=1e-4)


def test_kl_hand_computed_fixed_std():
    dist = Gaussian(dim=2, std=0.5)
    old = DistInfoStd(mean=torch.tensor([0.0, 1.0]), log_std=None)
    new = DistInfoStd(mean=torch.tensor([1.0, 1.0]), log_std=None)
    # Equal stds: KL = sum (mu_old - mu_new)^2 / (2 std^2) = 1 / 0.5 = 2.
    assert dist.kl(old, new).item() == pytest.approx(2.0)


def test_kl_is_unchanged_by_squash():
    torch.manual_seed(4)
    old, new = _info(5, 3), _info(5, 3)
    assert torch.allclose(Gaussian(3, squash=2.0).kl(old, new), Gaussian(3).kl(old, new))


def test_min_max_std_clamp_enters_formulas():
    dist = Gaussian(dim=2, min_std=0.1, max_std=2.0)
    info = DistInfoStd(mean=torch.zeros(2), log_std=torch.tensor([-10.0, 10.0]))
    x = torch.tensor([0.3, -1.0])
    ref = Independent(Normal(torch.zeros(2), torch.tensor([0.1, 2.0])), 1)
    assert dist.log_likelihood(x, info).item() == pytest.approx(ref.log_prob(x).item(), abs=1e-5)
    assert dist.entropy(info).item() == pytest.approx(ref.entropy().item(), abs=1e-5)


def test_sample_statistics_shape_and_reparameterization():
    torch.manual_seed(5)
    dist = Gaussian(dim=2)
    mean = torch.tensor([1.0, -2.0], requires_grad=True)
    log_std = torch.log(torch.tensor([0.5, 2.0])).requires_grad_()
    info = DistInfoStd(mean=mean.expand(50000, 2), log_std=log_std.expand(50000, 2))
    x = dist.sample(info)
    assert x.shape == (50000, 2)
    assert torch.allclose(x.mean(0), torch.tensor([1.0, -2.0]), atol=0.03)
    assert torch.allclose(x.std(0), torch.tensor([0.5, 2.0]), atol=0.03)
    x.mean().backward()
    assert mean.grad is not None and torch.allclose(mean.grad, torch.full((2,), 0.5))
    assert log_std.grad is not None


def test_noise_clip_and_clip():
    torch.manual_seed(6)
    mean = torch.full((1000, 3), 0.4)
    info = DistInfoStd(mean=mean, log_std=None)
    noisy = Gaussian(dim=3, std=5.0, noise_clip=0.5).sample(info)
    assert bool(((noisy - mean).abs() <= 0.5 + 1e-6).all())
    assert ((noisy - mean).abs() > 0.49).float().mean() > 0.9  # wide noise piles up at the bound
    dist = Gaussian(dim=3, std=5.0)
    dist.set_clip(1.0)
    clipped = dist.sample(info)
    assert bool((clipped.abs() <= 1.0).all())
    dist.set_noise_clip(0.1)
    assert bool(((dist.sample(info) - mean).abs() <= 0.1 + 1e-6).all())


def test_squash_log_likelihood_matches_tanh_transformed_distribution():
    torch.manual_seed(7)
    scale = 2.0
    dist = Gaussian(dim=3, squash=scale)
    info = _info(4, 3, dtype=torch.float64)
    u = info.mean + info.log_std.exp() * torch.randn(4, 3, dtype=torch.float64)
    ref = TransformedDistribution(
        Normal(info.mean, info.log_std.exp()), [TanhTransform(), AffineTransform(0.0, scale)]
    )
    expected = ref.log_prob(scale * torch.tanh(u)).sum(-1)
    assert torch.allclose(dist.log_likelihood(u, info), expected, atol=1e-8)


def test_squash_log_likelihood_change_of_variables_by_hand():
    dist = Gaussian(dim=1, std=1.0, squash=1.0)
    info = DistInfoStd(mean=torch.zeros(1, dtype=torch.float64), log_std=None)
    u = torch.tensor([0.5], dtype=torch.float64)
    # log N(0.5; 0, 1) - log(1 - tanh(0.5)^2).
    expected = -0.5 * 0.25 - 0.5 * math.log(2 * math.pi) - math.log(1 - math.tanh(0.5) ** 2)
    assert dist.log_likelihood(u, info).item() == pytest.approx(expected, abs=1e-12)


def test_squash_log_likelihood_stable_for_large_u():
    dist = Gaussian(dim=2, std=1.0, squash=1.0)
    info = DistInfoStd(mean=torch.zeros(2), log_std=None)
    u = torch.tensor([30.0, -30.0])
    # In float32 tanh(30) == 1, so log(1 - tanh^2) would be -inf; the stable form gives
    # log(1 - tanh(u)^2) = 2 (log 2 - |u| - log(1 + e^{-2|u|})) ~ 2 log 2 - 60 per dim.
    expected = -0.5 * 1800 - math.log(2 * math.pi) - 2 * (2 * math.log(2) - 60.0)
    assert dist.log_likelihood(u, info).item() == pytest.approx(expected, rel=1e-6)


def test_squash_density_monte_carlo_histogram():
    """Bin frequencies of squashed samples match the integral of exp(log_likelihood) per bin."""
    torch.manual_seed(8)
    scale, n = 2.0, 200000
    dist = Gaussian(dim=1, squash=scale)
    info = DistInfoStd(mean=torch.full((n, 1), 0.3), log_std=torch.full((n, 1), math.log(0.8)))
    x = dist.sample(info)[:, 0]
    assert bool((x.abs() < scale).all())
    edges = torch.linspace(-scale, scale, 21, dtype=torch.float64)
    freq = torch.histc(x.double(), bins=20, min=-scale, max=scale) / n
    grid_info = DistInfoStd(
        mean=torch.full((1, 1), 0.3, dtype=torch.float64),
        log_std=torch.full((1, 1), math.log(0.8), dtype=torch.float64),
    )
    probs = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=False):
        xs = torch.linspace(lo.item(), hi.item(), 401, dtype=torch.float64).clamp(-scale + 1e-12, scale - 1e-12)
        u = torch.atanh(xs / scale).unsqueeze(-1)
        density = dist.log_likelihood(u, grid_info).exp()
        probs.append(torch.trapezoid(density, xs))
    probs = torch.stack(probs)
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-4)
    assert torch.allclose(freq, probs, atol=0.004)


def test_sample_loglikelihood_consistent_and_differentiable():
    torch.manual_seed(9)
    scale = 1.5
    dist = Gaussian(dim=2, squash=scale)
    mean = torch.zeros(64, 2, dtype=torch.float64, requires_grad=True)
    log_std = torch.full((64, 2), -0.5, dtype=torch.float64, requires_grad=True)
    info = DistInfoStd(mean=mean, log_std=log_std)
    action, logli = dist.sample_loglikelihood(info)
    assert action.shape == (64, 2) and logli.shape == (64,)
    assert bool((action.abs() < scale).all())
    u = torch.atanh(action.detach() / scale)
    assert torch.allclose(logli.detach(), dist.log_likelihood(u, info).detach(), atol=1e-8)
    (action.sum() + logli.sum()).backward()
    assert mean.grad is not None and log_std.grad is not None
    assert bool(torch.isfinite(mean.grad).all())


def test_sample_loglikelihood_without_squash_is_plain_gaussian():
    torch.manual_seed(10)
    dist = Gaussian(dim=3)
    info = _info(5, 3)
    action, logli = dist.sample_loglikelihood(info)
    assert torch.allclose(logli, _reference(info).log_prob(action), atol=1e-5)


def test_squash_entropy_raises():
    with pytest.raises(ValueError, match="no closed form with squash"):
        Gaussian(dim=2, squash=1.0).entropy(_info(2))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        Gaussian(dim=0)
    with pytest.raises(ValueError, match="std must be positive"):
        Gaussian(dim=2, std=0.0)
    with pytest.raises(ValueError, match=r"std must be a scalar or \[dim=2\]"):
        Gaussian(dim=2, std=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="clip must be positive"):
        Gaussian(dim=2, clip=-1.0)
    with pytest.raises(ValueError, match="noise_clip must be positive"):
        Gaussian(dim=2).set_noise_clip(0.0)
    with pytest.raises(ValueError, match="squash must be positive"):
        Gaussian(dim=2, squash=0.0)
    with pytest.raises(ValueError, match="min_std=2.0 must not exceed max_std=1.0"):
        Gaussian(dim=2, min_std=2.0, max_std=1.0)
    with pytest.raises(ValueError, match="trailing dim of size dim=2"):
        Gaussian(dim=2).sample(_info(3))
    with pytest.raises(ValueError, match="log_std is None"):
        Gaussian(dim=2).sample(DistInfoStd(mean=torch.zeros(2), log_std=None))
