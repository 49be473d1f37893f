"""Epsilon-greedy selection: exact greedy at eps=0, uniform at eps=1, per-env vector epsilon."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.distributions import CategoricalEpsilonGreedy, EpsilonGreedy


def test_epsilon_zero_is_argmax():
    torch.manual_seed(0)
    q = torch.randn(7, 5, 4)
    action = EpsilonGreedy(dim=4, epsilon=0.0).sample(q)
    assert action.dtype == torch.long
    assert torch.equal(action, q.argmax(dim=-1))


def test_epsilon_one_is_uniform():
    torch.manual_seed(1)
    q = torch.tensor([0.0, 5.0, 1.0, 2.0]).expand(40000, 4)
    action = EpsilonGreedy(dim=4, epsilon=1.0).sample(q)
    freq = torch.bincount(action, minlength=4).float() / action.numel()
    assert torch.allclose(freq, torch.full((4,), 0.25), atol=0.01)


def test_scalar_epsilon_greedy_frequency():
    torch.manual_seed(2)
    q = torch.tensor([0.0, 5.0, 1.0, 2.0]).expand(40000, 4)
    action = EpsilonGreedy(dim=4, epsilon=0.4).sample(q)
    freq = torch.bincount(action, minlength=4).float() / action.numel()
    # Greedy action 1: 1 - 0.4 + 0.4 / 4 = 0.7; each other action 0.4 / 4 = 0.1.
    assert torch.allclose(freq, torch.tensor([0.1, 0.7, 0.1, 0.1]), atol=0.01)


def test_vector_epsilon_applies_per_env_across_time():
    torch.manual_seed(3)
    T, B, A = 20000, 3, 4
    q = torch.zeros(T, B, A)
    q[..., 2] = 1.0  # greedy action 2 everywhere
    dist = EpsilonGreedy(dim=A)
    dist.set_epsilon(np.array([0.0, 1.0, 0.5]))
    assert isinstance(dist.epsilon, torch.Tensor) and dist.epsilon.shape == (3,)
    action = dist.sample(q)
    assert action.shape == (T, B)
    greedy_freq = (action == 2).float().mean(dim=0)
    assert greedy_freq[0].item() == 1.0
    assert greedy_freq[1].item() == pytest.approx(0.25, abs=0.015)  # uniform over 4
    assert greedy_freq[2].item() == pytest.approx(0.5 + 0.5 / 4, abs=0.015)
    # [B, A] input uses the same vector.
    assert dist.sample(q[0]).shape == (B,)


def test_set_epsilon_scalar_and_bad_values():
    dist = EpsilonGreedy(dim=3, epsilon=0.5)
    assert dist.epsilon == 0.5
    dist.set_epsilon(torch.tensor(0.1))
    assert dist.epsilon == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"epsilon values must lie in \[0, 1\]"):
        dist.set_epsilon(1.5)
    with pytest.raises(ValueError, match=r"epsilon values must lie in \[0, 1\]"):
        dist.set_epsilon([0.1, -0.2])
    with pytest.raises(ValueError, match=r"scalar or a \[B\] vector"):
        dist.set_epsilon(np.zeros((2, 2)))


def test_vector_epsilon_batch_mismatch_raises():
    dist = EpsilonGreedy(dim=3, epsilon=[0.1, 0.2])
    with pytest.raises(ValueError, match="vector epsilon of length 2"):
        dist.sample(torch.zeros(5, 3))
    with pytest.raises(ValueError, match="vector epsilon of length 2"):
        dist.sample(torch.zeros(3))
    with pytest.raises(ValueError, match="trailing dim of size dim=3"):
        dist.sample(torch.zeros(2, 4))


def _distributional_p() -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.tensor([-10.0, 0.0, 10.0])
    # Expected values: action 0 -> 0, action 1 -> -6 + 4 = -2, action 2 -> -3 + 6 = 3.
    # The most probable single atom belongs to action 0, so argmax must use the means.
    p = torch.tensor([[0.0, 1.0, 0.0], [0.6, 0.0, 0.4], [0.3, 0.1, 0.6]])
    return p, z


def test_categorical_epsilon_greedy_uses_expected_value():
    p, z = _distributional_p()
    dist = CategoricalEpsilonGreedy(dim=3, z=z, epsilon=0.0)
    batch = p.expand(2, 5, 3, 3)  # [T, B, A, n_atoms]
    action = dist.sample(batch)
    assert action.shape == (2, 5)
    assert bool((action == 2).all())
    # z given per call overrides the stored one: flipping z makes action 1 best (+2).
    assert bool((dist.sample(batch, z=-z) == 1).all())


def test_categorical_epsilon_greedy_vector_epsilon():
    torch.manual_seed(4)
    p, z = _distributional_p()
    dist = CategoricalEpsilonGreedy(dim=3, z=z, epsilon=[0.0, 1.0])
    action = dist.sample(p.expand(30000, 2, 3, 3))
    assert bool((action[:, 0] == 2).all())
    assert (action[:, 1] == 2).float().mean().item() == pytest.approx(1 / 3, abs=0.015)


def test_categorical_epsilon_greedy_bad_input():
    p, z = _distributional_p()
    with pytest.raises(ValueError, match="z is None"):
        CategoricalEpsilonGreedy(dim=3, epsilon=0.0).sample(p)
    with pytest.raises(ValueError, match="n_atoms=3"):
        CategoricalEpsilonGreedy(dim=3, z=z).sample(torch.ones(3, 4))
    with pytest.raises(ValueError, match="non-empty"):
        CategoricalEpsilonGreedy(dim=3, z=torch.zeros(2, 2))
