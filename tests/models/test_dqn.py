from __future__ import annotations

import pytest
import torch

from lightning_rl.models import CatDqnMlpModel, DqnMlpModel, DuelingHeadModel, R2d1MlpModel, update_state_dict

from .conftest import B, T

OBS = (5,)
A = 4


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn((T, B) + OBS, generator=gen)
    return obs, torch.randint(0, A, (T, B), generator=gen), torch.randn(T, B, generator=gen)


@pytest.mark.parametrize(
    "make, shapes",
    [
        pytest.param(lambda: DqnMlpModel(OBS, A), [(A,)], id="dqn"),
        pytest.param(lambda: DqnMlpModel(OBS, A, [8], dueling=True), [(A,)], id="dqn-dueling"),
        pytest.param(lambda: CatDqnMlpModel(OBS, A, [8], n_atoms=11), [(A, 11)], id="catdqn"),
        pytest.param(lambda: CatDqnMlpModel(OBS, A, [8], n_atoms=11, dueling=True), [(A, 11)], id="catdqn-dueling"),
    ],
)
def test_ff_leading_dims(make, shapes, check_leading_dims):
    check_leading_dims(make(), _inputs(), shapes)


R2D1_CASES = [
    pytest.param(lambda: R2d1MlpModel(OBS, A, [16], 8, 8), id="r2d1"),
    pytest.param(lambda: R2d1MlpModel(OBS, A, [16], 8, 8, dueling=True), id="r2d1-dueling"),
]


@pytest.mark.parametrize("make", R2D1_CASES)
def test_r2d1_leading_dims(make, check_leading_dims):
    check_leading_dims(make(), _inputs(), [(A,)], recurrent=True)


@pytest.mark.parametrize("make", R2D1_CASES)
def test_r2d1_stepping_equals_sequence(make, check_stepping):
    check_stepping(make(), _inputs())


def test_dqn_dueling_uses_dueling_head():
    model = DqnMlpModel(OBS, A, [8], dueling=True)
    assert isinstance(model.head, DuelingHeadModel)
    obs = torch.randn(6, 5)
    x = model.encoder(obs)
    advantage = model.head.advantage(x)
    expected = model.head.value(x) + advantage - advantage.mean(-1, keepdim=True)
    torch.testing.assert_close(model(obs), expected)


@pytest.mark.parametrize("dueling", [False, True])
def test_catdqn_softmax_over_atoms(dueling):
    model = CatDqnMlpModel(OBS, A, [8], n_atoms=7, dueling=dueling)
    obs = torch.randn(T, B, 5)
    p = model(obs)
    assert (p > 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(T, B, A))
    logits = model.head(model.encoder(obs.view(-1, 5))).view(T, B, A, 7)
    torch.testing.assert_close(p, torch.softmax(logits, dim=-1))


def test_r2d1_uses_prev_action():
    model = R2d1MlpModel(OBS, A, [8], 8, 8)
    obs, action, reward = _inputs()
    q, _ = model(obs, action, reward)
    q2, _ = model(obs, (action + 1) % A, reward)
    assert not torch.allclose(q, q2)


def test_soft_target_update_on_model():
    online, target = DqnMlpModel(OBS, A), DqnMlpModel(OBS, A)
    expected = {k: 0.5 * v + 0.5 * target.state_dict()[k] for k, v in online.state_dict().items()}
    update_state_dict(target, online.state_dict(), tau=0.5)
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, expected[k])
