from __future__ import annotations

import pytest
import torch

from lightning_rl.models import (
    CategoricalPgLstmModel,
    CategoricalPgMlpModel,
    GaussianPgLstmModel,
    GaussianPgMlpModel,
)

from .conftest import B, T

OBS = (4,)
A = 3


def _inputs(discrete: bool, obs_shape=OBS, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn((T, B) + obs_shape, generator=gen)
    if discrete:
        prev_action = torch.randint(0, A, (T, B), generator=gen)
    else:
        prev_action = torch.randn(T, B, A, generator=gen)
    return obs, prev_action, torch.randn(T, B, generator=gen)


FF_CASES = [
    pytest.param(lambda: CategoricalPgMlpModel(OBS, A), True, [(A,), ()], id="categorical"),
    pytest.param(
        lambda: CategoricalPgMlpModel(OBS, A, [8], normalize_observation=True), True, [(A,), ()], id="categorical-norm"
    ),
    pytest.param(lambda: GaussianPgMlpModel(OBS, A), False, [(A,), (A,), ()], id="gaussian"),
    pytest.param(
        lambda: GaussianPgMlpModel((2, 2), A, normalize_observation=True), False, [(A,), (A,), ()], id="gaussian-2d-obs"
    ),
]

LSTM_CASES = [
    pytest.param(lambda: CategoricalPgLstmModel(OBS, A, [16], 8), True, [(A,), ()], id="categorical-lstm"),
    pytest.param(
        lambda: GaussianPgLstmModel(OBS, A, [16], 8, normalize_observation=True),
        False,
        [(A,), (A,), ()],
        id="gaussian-lstm",
    ),
]


@pytest.mark.parametrize("make, discrete, shapes", FF_CASES)
def test_ff_leading_dims(make, discrete, shapes, check_leading_dims):
    model = make()
    obs_shape = model.encoder.observation_shape
    check_leading_dims(model, _inputs(discrete, obs_shape), shapes)


@pytest.mark.parametrize("make, discrete, shapes", LSTM_CASES)
def test_lstm_leading_dims(make, discrete, shapes, check_leading_dims):
    check_leading_dims(make(), _inputs(discrete), shapes, recurrent=True)


@pytest.mark.parametrize("make, discrete, shapes", LSTM_CASES)
def test_lstm_stepping_equals_sequence(make, discrete, shapes, check_stepping):
    check_stepping(make(), _inputs(discrete))


@pytest.mark.parametrize("model_cls", [CategoricalPgMlpModel, CategoricalPgLstmModel])
def test_categorical_probabilities(model_cls):
    model = model_cls(OBS, A)
    out = model(*_inputs(True))
    pi = out[0]
    assert (pi > 0).all()
    torch.testing.assert_close(pi.sum(-1), torch.ones(T, B))


def test_categorical_orthogonal_init_starts_near_uniform():
    model = CategoricalPgMlpModel(OBS, A)
    pi, _ = model(torch.randn(100, 4))
    torch.testing.assert_close(pi, torch.full_like(pi, 1 / A), atol=0.02, rtol=0)
    out_layer = model.head.pi.model[-1]
    torch.testing.assert_close(out_layer.weight @ out_layer.weight.T, 1e-4 * torch.eye(A))


def test_gaussian_log_std_and_tanh_mean():
    model = GaussianPgMlpModel(OBS, A, init_log_std=-0.5)
    mu, log_std, value = model(10 * torch.randn(T, B, 4))
    assert torch.equal(log_std, torch.full((T, B, A), -0.5))
    assert (mu.abs() <= 1).all()
    assert log_std.requires_grad
    raw = GaussianPgMlpModel(OBS, A, mu_nonlinearity=None)
    with torch.no_grad():
        raw.head.mu.model[-1].bias.fill_(5.0)
    assert (raw(torch.zeros(4))[0] == 5.0).all()  # no squashing of the mean


@pytest.mark.parametrize("model_cls", [CategoricalPgMlpModel, GaussianPgMlpModel])
def test_observation_normalization_equals_manual(model_cls):
    torch.manual_seed(0)
    normed = model_cls(OBS, A, normalize_observation=True, norm_obs_clip=2.0)
    torch.manual_seed(0)
    plain = model_cls(OBS, A)
    data = 3.0 + 5.0 * torch.randn(T, B, 4)
    normed.update_obs_rms(data)
    plain.update_obs_rms(data)  # no-op without normalization
    rms = normed.encoder.obs_rms
    flat = data.view(-1, 4)
    torch.testing.assert_close(rms.mean, flat.mean(0))
    torch.testing.assert_close(rms.var, flat.var(0, unbiased=False))
    obs = 3.0 + 20.0 * torch.randn(5, 4)
    manual = ((obs - flat.mean(0)) / flat.var(0, unbiased=False).sqrt()).clamp(-2, 2)
    for a, b in zip(normed(obs), plain(manual), strict=False):
        torch.testing.assert_close(a, b)


def test_lstm_uses_prev_action_and_reward():
    model = CategoricalPgLstmModel(OBS, A, [8], 8)
    obs, prev_action, prev_reward = _inputs(True)
    base = model(obs, prev_action, prev_reward)[0]
    assert not torch.allclose(model(obs, (prev_action + 1) % A, prev_reward)[0], base)
    assert not torch.allclose(model(obs, prev_action, prev_reward + 1)[0], base)


def test_bad_action_size():
    with pytest.raises(ValueError, match="action_size"):
        CategoricalPgMlpModel(OBS, 0)
    with pytest.raises(ValueError, match="action_size"):
        GaussianPgLstmModel(OBS, 0)


def _vector_action_inputs(nvec: tuple[int, ...], seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn((T, B) + OBS, generator=gen)
    prev_action = torch.stack([torch.randint(0, n, (T, B), generator=gen) for n in nvec], dim=-1)
    return obs, prev_action, torch.randn(T, B, generator=gen)


@pytest.mark.parametrize(
    "nvec, pi_size",
    [pytest.param((3, 4), 7, id="multi-discrete"), pytest.param((2, 2, 2), 6, id="multi-binary")],
)
def test_lstm_vector_actions_shapes_and_stepping(nvec, pi_size, check_leading_dims, check_stepping):
    # prev_action [T, B, D] in; pi holds one softmax per dim, sum(nvec) wide.
    model = CategoricalPgLstmModel(OBS, nvec, [16], 8)
    inputs = _vector_action_inputs(nvec)
    check_leading_dims(model, inputs, [(pi_size,), ()], recurrent=True)
    check_stepping(model, inputs)
    pi = model(*inputs)[0]
    for block in pi.split(nvec, dim=-1):
        torch.testing.assert_close(block.sum(-1), torch.ones(T, B))


def test_lstm_uses_each_dim_of_a_vector_prev_action():
    model = CategoricalPgLstmModel(OBS, (3, 4), [8], 8)
    obs, prev_action, prev_reward = _vector_action_inputs((3, 4))
    base = model(obs, prev_action, prev_reward)[0]
    for d, n in enumerate((3, 4)):
        changed = prev_action.clone()
        changed[..., d] = (changed[..., d] + 1) % n
        assert not torch.allclose(model(obs, changed, prev_reward)[0], base)
