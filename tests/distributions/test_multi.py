"""MultiCategorical and Bernoulli against numbers worked by hand (math.log of explicit probabilities)."""

from __future__ import annotations

import math

import pytest
import torch

from lightning_rl.distributions import Bernoulli, DistInfo, MultiCategorical

# Two rows of a MultiCategorical with nvec (2, 3): dim 0's two probabilities, then dim 1's three.
ROW_A = [0.25, 0.75, 0.2, 0.3, 0.5]
ROW_B = [0.5, 0.5, 0.6, 0.1, 0.3]
LOW = (1, -1)  # dim 0 takes values 1..2, dim 1 takes -1..1


def info(*rows: list[float]) -> DistInfo:
    return DistInfo(prob=torch.tensor(rows, dtype=torch.float64))


def test_multi_categorical_log_likelihood_sums_dims_after_removing_low():
    dist = MultiCategorical(nvec=[2, 3], low=LOW)
    x = torch.tensor([[2, -1], [1, 1]])  # indexes (1, 0) in row A and (0, 2) in row B
    got = dist.log_likelihood(x, info(ROW_A, ROW_B))
    expected = [math.log(0.75) + math.log(0.2), math.log(0.5) + math.log(0.3)]
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64))


def test_multi_categorical_entropy_kl_and_ratio():
    dist = MultiCategorical(nvec=[2, 3], low=LOW)
    entropy = dist.entropy(info(ROW_A, ROW_B))
    h_a = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) - (
        0.2 * math.log(0.2) + 0.3 * math.log(0.3) + 0.5 * math.log(0.5))
    h_b = -(0.5 * math.log(0.5) * 2) - (0.6 * math.log(0.6) + 0.1 * math.log(0.1) + 0.3 * math.log(0.3))
    assert torch.allclose(entropy, torch.tensor([h_a, h_b], dtype=torch.float64))

    kl = dist.kl(info(ROW_A), info(ROW_B))  # KL(A || B): dim 0's KL plus dim 1's
    kl_ab = (0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
             + 0.2 * math.log(0.2 / 0.6) + 0.3 * math.log(0.3 / 0.1) + 0.5 * math.log(0.5 / 0.3))
    assert kl.item() == pytest.approx(kl_ab)
    assert dist.kl(info(ROW_A), info(ROW_A)).item() == pytest.approx(0.0, abs=1e-12)

    x = torch.tensor([[2, 1]])  # indexes (1, 2): old (A) 0.75 * 0.5, new (B) 0.5 * 0.3
    ratio = dist.likelihood_ratio(x, info(ROW_A), info(ROW_B))
    assert ratio.item() == pytest.approx((0.5 * 0.3) / (0.75 * 0.5))


def test_multi_categorical_sampling_frequencies_and_bounds():
    torch.manual_seed(0)
    dist = MultiCategorical(nvec=[2, 3], low=LOW)
    n = 20000
    prob = torch.tensor([0.25, 0.75, 0.4, 0.0, 0.6]).expand(n, 5)
    x = dist.sample(DistInfo(prob=prob))
    assert x.shape == (n, 2) and x.dtype == torch.long
    dim0 = torch.bincount(x[:, 0] - 1, minlength=2).float() / n
    dim1 = torch.bincount(x[:, 1] + 1, minlength=3).float() / n
    assert torch.allclose(dim0, torch.tensor([0.25, 0.75]), atol=0.015)
    assert dim1[1] == 0  # a zero-probability value is never drawn
    assert torch.allclose(dim1, torch.tensor([0.4, 0.0, 0.6]), atol=0.015)


def test_multi_categorical_mode_is_each_dims_argmax_and_never_padding():
    # nvec (3, 2): dim 1's padding cell reads entry 0 (dim 0's 0.98); it must stay masked.
    dist = MultiCategorical(nvec=[3, 2], low=[0, 5])
    prob = torch.tensor([[0.98, 0.01, 0.01, 0.4, 0.6], [0.1, 0.2, 0.7, 0.9, 0.1]])
    assert dist.mode(DistInfo(prob=prob)).tolist() == [[0, 6], [2, 5]]
    torch.manual_seed(1)
    x = dist.sample(DistInfo(prob=prob.expand(500, 2, 5)))
    assert bool(((x[..., 1] == 5) | (x[..., 1] == 6)).all())


def test_multi_categorical_gradient_raises_the_chosen_actions_probability():
    dist = MultiCategorical(nvec=[2, 3])
    logits = torch.zeros(5, requires_grad=True)
    x = torch.tensor([1, 2])

    def prob() -> torch.Tensor:
        return torch.cat([torch.softmax(logits[:2], -1), torch.softmax(logits[2:], -1)])

    dist.log_likelihood(x, DistInfo(prob=prob())).backward()
    with torch.no_grad():
        logits += 0.5 * logits.grad
    p = prob()
    assert p[1] > 0.5 and p[4] > 1 / 3


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(nvec=[]), "nvec"), (dict(nvec=[2, 0]), "nvec"), (dict(nvec=[[2, 3]]), "nvec"),
    (dict(nvec=[2, 3], low=[0, 0, 0]), "low"),
])
def test_multi_categorical_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiCategorical(**kwargs)


def test_multi_categorical_wrong_prob_size_is_named():
    with pytest.raises(ValueError, match=r"sum\(nvec\)=5"):
        MultiCategorical(nvec=[2, 3]).sample(DistInfo(prob=torch.full((4,), 0.25)))


BITS_A = [0.2, 0.9, 0.5]  # P(bit = 1) per dim
BITS_B = [0.5, 0.6, 0.25]


def test_bernoulli_log_likelihood_entropy_kl_and_ratio():
    dist = Bernoulli(dim=3)
    x = torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=torch.int8)
    got = dist.log_likelihood(x, info(BITS_A, BITS_B))
    expected = [math.log(0.2) + math.log(0.1) + math.log(0.5), math.log(0.5) + math.log(0.6) + math.log(0.25)]
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64))

    def h(p: float) -> float:
        return -(p * math.log(p) + (1 - p) * math.log(1 - p))

    assert torch.allclose(dist.entropy(info(BITS_A, BITS_B)),
                          torch.tensor([sum(map(h, BITS_A)), sum(map(h, BITS_B))], dtype=torch.float64))

    kl_ab = sum(p * math.log(p / r) + (1 - p) * math.log((1 - p) / (1 - r))
                for p, r in zip(BITS_A, BITS_B, strict=True))
    assert dist.kl(info(BITS_A), info(BITS_B)).item() == pytest.approx(kl_ab)

    ratio = dist.likelihood_ratio(x[:1], info(BITS_A), info(BITS_B))
    assert ratio.item() == pytest.approx((0.5 * 0.4 * 0.25) / (0.2 * 0.1 * 0.5))


def test_bernoulli_entropy_of_a_certain_bit_is_zero():
    assert Bernoulli(dim=2).entropy(info([0.0, 1.0])).item() == pytest.approx(0.0, abs=1e-6)


def test_bernoulli_sampling_frequencies_and_mode():
    torch.manual_seed(2)
    dist = Bernoulli(dim=4)
    n = 20000
    x = dist.sample(DistInfo(prob=torch.tensor([0.0, 0.3, 0.8, 1.0]).expand(n, 4)))
    assert x.shape == (n, 4) and x.dtype == torch.long
    assert torch.allclose(x.double().mean(0), torch.tensor([0.0, 0.3, 0.8, 1.0], dtype=torch.float64), atol=0.015)
    assert x[:, 0].max() == 0 and x[:, 3].min() == 1
    assert dist.mode(info([0.9, 0.2, 0.6, 0.5])).tolist() == [[1, 0, 1, 0]]


def test_bernoulli_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="dim"):
        Bernoulli(dim=0)
    with pytest.raises(ValueError, match="dim=3"):
        Bernoulli(dim=3).sample(DistInfo(prob=torch.full((2,), 0.5)))
