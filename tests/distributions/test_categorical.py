"""Categorical distribution against torch.distributions and hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical as TorchCategorical
from torch.distributions import kl_divergence

from lightning_rl.distributions import Categorical, DistInfo


def _random_prob(*shape: int) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape), dim=-1)


@pytest.mark.parametrize("lead", [(), (5,), (3, 4)])
def test_sample_keeps_leading_dims_and_dtype(lead):
    torch.manual_seed(0)
    dist = Categorical(dim=6)
    x = dist.sample(DistInfo(prob=_random_prob(*lead, 6)))
    assert x.shape == lead
    assert x.dtype == torch.long
    assert bool(((x >= 0) & (x < 6)).all())


def test_sample_frequencies_follow_prob():
    torch.manual_seed(1)
    dist = Categorical(dim=3)
    prob = torch.tensor([0.2, 0.0, 0.8]).expand(20000, 3)
    x = dist.sample(DistInfo(prob=prob))
    freq = torch.bincount(x, minlength=3).float() / x.numel()
    assert freq[1] == 0  # a zero-probability category is never drawn
    assert torch.allclose(freq, torch.tensor([0.2, 0.0, 0.8]), atol=0.015)


def test_log_likelihood_and_ratio_match_torch():
    torch.manual_seed(2)
    dist = Categorical(dim=5)
    old, new = _random_prob(3, 4, 5), _random_prob(3, 4, 5)
    x = torch.randint(5, (3, 4))
    ll = dist.log_likelihood(x, DistInfo(prob=new))
    assert ll.shape == (3, 4)
    assert torch.allclose(ll, TorchCategorical(probs=new).log_prob(x), atol=1e-6)
    ratio = dist.likelihood_ratio(x, DistInfo(prob=old), DistInfo(prob=new))
    expected = torch.exp(TorchCategorical(probs=new).log_prob(x) - TorchCategorical(probs=old).log_prob(x))
    assert torch.allclose(ratio, expected, rtol=1e-5)


def test_likelihood_ratio_gradient_flows_to_new_prob():
    logits = torch.zeros(2, 3, requires_grad=True)
    new = torch.softmax(logits, dim=-1)
    old = torch.full((2, 3), 1 / 3)
    ratio = Categorical(3).likelihood_ratio(torch.tensor([0, 2]), DistInfo(old), DistInfo(new))
    ratio.sum().backward()
    # d ratio_0 / d logit_0 = p0 (1 - p0) / old_p = (1/3)(2/3) * 3 = 2/3.
    assert logits.grad[0, 0].item() == pytest.approx(2 / 3, abs=1e-6)


def test_kl_entropy_perplexity_match_torch():
    torch.manual_seed(3)
    dist = Categorical(dim=4)
    old, new = _random_prob(2, 3, 4), _random_prob(2, 3, 4)
    kl = dist.kl(DistInfo(prob=old), DistInfo(prob=new))
    assert kl.shape == (2, 3)
    assert torch.allclose(kl, kl_divergence(TorchCategorical(probs=old), TorchCategorical(probs=new)), atol=1e-6)
    ent = dist.entropy(DistInfo(prob=old))
    assert torch.allclose(ent, TorchCategorical(probs=old).entropy(), atol=1e-6)
    assert torch.allclose(dist.perplexity(DistInfo(prob=old)), torch.exp(ent))


def test_hand_computed_values():
    dist = Categorical(dim=2)
    half = DistInfo(prob=torch.tensor([0.5, 0.5]))
    skew = DistInfo(prob=torch.tensor([0.25, 0.75]))
    assert dist.entropy(half).item() == pytest.approx(math.log(2))
    assert dist.perplexity(half).item() == pytest.approx(2.0)
    # KL = 0.5 log(0.5 / 0.25) + 0.5 log(0.5 / 0.75) = 0.5 log 2 + 0.5 log(2/3).
    assert dist.kl(half, skew).item() == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), abs=1e-6)
    assert dist.log_likelihood(torch.tensor(1), skew).item() == pytest.approx(math.log(0.75))
    # A zero probability contributes 0 log 0 = 0 to the entropy, not nan.
    assert dist.entropy(DistInfo(prob=torch.tensor([1.0, 0.0]))).item() == pytest.approx(0.0, abs=1e-7)


def test_mean_kl_and_mean_entropy_respect_valid():
    dist = Categorical(dim=2)
    old = DistInfo(prob=torch.tensor([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]]))
    new = DistInfo(prob=torch.tensor([[0.5, 0.5], [0.25, 0.75], [0.1, 0.9]]))
    kl = dist.kl(old, new)
    valid = torch.tensor([1.0, 1.0, 0.0])
    assert dist.mean_kl(old, new, valid).item() == pytest.approx((kl[0] + kl[1]).item() / 2)
    assert dist.mean_kl(old, new).item() == pytest.approx(kl.mean().item())
    ent = dist.entropy(old)
    assert dist.mean_entropy(old, valid).item() == pytest.approx((ent[0] + ent[1]).item() / 2)
    assert dist.mean_perplexity(old, valid).item() == pytest.approx(2.0)


def test_onehot_round_trip():
    dist = Categorical(dim=4)
    idx = torch.tensor([[0, 3], [2, 1]])
    onehot = dist.to_onehot(idx)
    assert onehot.shape == (2, 2, 4) and onehot.dtype == torch.float32
    assert onehot.sum().item() == 4 and onehot[0, 1, 3].item() == 1
    assert torch.equal(dist.from_onehot(onehot), idx)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        Categorical(dim=0)
    with pytest.raises(ValueError, match="trailing dim of size dim=3"):
        Categorical(dim=3).sample(DistInfo(prob=torch.ones(2, 4) / 4))
