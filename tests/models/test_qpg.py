from __future__ import annotations

import pytest
import torch

from lightning_rl.models import MuMlpModel, PiMlpModel, QofMuMlpModel

from .conftest import B, T

OBS = (6,)
A = 2


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn((T, B) + OBS, generator=gen)
    return obs, torch.randn(T, B, A, generator=gen), torch.randn(T, B, generator=gen)


@pytest.mark.parametrize(
    "make, extra_action, shapes",
    [
        pytest.param(lambda: MuMlpModel(OBS, A, [16, 16], output_max=2.0), False, [(A,)], id="mu"),
        pytest.param(lambda: PiMlpModel(OBS, A, [16, 16]), False, [(A,), (A,)], id="pi"),
        pytest.param(lambda: QofMuMlpModel(OBS, A, [16, 16]), True, [()], id="q"),
    ],
)
def test_leading_dims(make, extra_action, shapes, check_leading_dims):
    args = _inputs()
    if extra_action:
        args = args + (torch.randn(T, B, A),)
    check_leading_dims(make(), args, shapes)


def test_mu_bounded_by_output_max():
    model = MuMlpModel(OBS, A, [16], output_max=2.0)
    mu = model(100 * torch.randn(50, 6))
    assert (mu.abs() <= 2.0).all() and mu.abs().max() > 1.0
    torch.testing.assert_close(model(torch.zeros(6)), 2.0 * torch.tanh(model.head(torch.zeros(1, 6)))[0])


def test_pi_splits_mean_and_log_std():
    model = PiMlpModel(OBS, A, [16])
    obs = torch.randn(4, 6)
    mu, log_std = model(obs)
    raw = model.head(obs)
    assert torch.equal(mu, raw[:, :A]) and torch.equal(log_std, raw[:, A:])


def test_q_uses_action():
    model = QofMuMlpModel(OBS, A, [16])
    obs = torch.randn(4, 6)
    action = torch.randn(4, A)
    q = model(obs, None, None, action)
    expected = model.mlp(torch.cat([obs, action], -1)).squeeze(-1)
    torch.testing.assert_close(q, expected)
    assert not torch.allclose(q, model(obs, None, None, action + 1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="output_max"):
        MuMlpModel(OBS, A, output_max=0.0)
    with pytest.raises(ValueError, match="action_size"):
        QofMuMlpModel(OBS, 0)
