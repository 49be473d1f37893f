from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_rl.models import (
    ATARI_CONVS,
    AtariCatDqnModel,
    AtariDqnModel,
    AtariFfModel,
    AtariLstmModel,
    AtariR2d1Model,
    DistributionalDuelingHeadModel,
    DuelingHeadModel,
)

from .conftest import B, T

IMAGE = (4, 84, 84)
A = 5


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    frames = torch.randint(0, 256, (T, B) + IMAGE, dtype=torch.uint8, generator=gen)
    return frames, torch.randint(0, A, (T, B), generator=gen), torch.randn(T, B, generator=gen)


SMALL = dict(fc_sizes=32)
FF_CASES = [
    pytest.param(lambda: AtariFfModel(IMAGE, A, **SMALL), [(A,), ()], id="ff"),
    pytest.param(
        lambda: AtariFfModel(IMAGE, A, use_maxpool=True, conv="nature", **SMALL), [(A,), ()], id="ff-nature-maxpool"
    ),
    pytest.param(lambda: AtariDqnModel(IMAGE, A, **SMALL), [(A,)], id="dqn"),
    pytest.param(lambda: AtariDqnModel(IMAGE, A, dueling=True, **SMALL), [(A,)], id="dqn-dueling"),
    pytest.param(lambda: AtariCatDqnModel(IMAGE, A, n_atoms=11, **SMALL), [(A, 11)], id="catdqn"),
    pytest.param(lambda: AtariCatDqnModel(IMAGE, A, n_atoms=11, dueling=True, **SMALL), [(A, 11)], id="catdqn-dueling"),
]
LSTM_CASES = [
    pytest.param(lambda: AtariLstmModel(IMAGE, A, fc_sizes=32, lstm_size=16), [(A,), ()], id="lstm"),
    pytest.param(lambda: AtariR2d1Model(IMAGE, A, fc_size=32, lstm_size=16, head_size=16), [(A,)], id="r2d1"),
    pytest.param(
        lambda: AtariR2d1Model(IMAGE, A, fc_size=32, lstm_size=16, head_size=16, dueling=True),
        [(A,)],
        id="r2d1-dueling",
    ),
]


@pytest.mark.parametrize("make, shapes", FF_CASES)
def test_ff_leading_dims(make, shapes, check_leading_dims):
    check_leading_dims(make(), _inputs(), shapes)


@pytest.mark.parametrize("make, shapes", LSTM_CASES)
def test_lstm_leading_dims(make, shapes, check_leading_dims):
    check_leading_dims(make(), _inputs(), shapes, recurrent=True)


@pytest.mark.parametrize("make, shapes", LSTM_CASES)
def test_lstm_stepping_equals_sequence(make, shapes, check_stepping):
    check_stepping(make(), _inputs())


@pytest.mark.parametrize("make, shapes", FF_CASES + LSTM_CASES)
def test_uint8_equals_scaled_float_path(make, shapes):
    model = make()
    frames, prev_action, prev_reward = _inputs()
    with torch.no_grad():
        from_uint8 = model(frames, prev_action, prev_reward)
        from_float = model(frames.float(), prev_action, prev_reward)
        features = model.encoder.conv(frames.view(-1, *IMAGE).float() / 255.0)
        if hasattr(model, "lstm"):
            lstm_out, _ = model.lstm(features, prev_action, prev_reward, None, T, B)
            manual = model.outputs(model.head(lstm_out))
        else:
            manual = model.outputs(model.head(features))
    first = from_uint8[0] if isinstance(from_uint8, tuple) else from_uint8
    assert torch.equal(first, from_float[0] if isinstance(from_float, tuple) else from_float)
    manual = manual[0] if isinstance(manual, tuple) else manual
    # Same ops in the same mode; MKL may still block a GEMM differently by call, so the last
    # bits are allowed to differ.
    torch.testing.assert_close(first, manual.view(first.shape), rtol=1e-6, atol=1e-6)


def test_default_conv_stacks():
    convs = {
        "ff": AtariFfModel(IMAGE, A).encoder.conv.conv,
        "dqn": AtariDqnModel(IMAGE, A).encoder.conv.conv,
    }
    assert convs["ff"].channels == [16, 32] and convs["ff"].strides == [4, 2]
    assert convs["dqn"].channels == [32, 64, 64] and convs["dqn"].paddings == [0, 1, 1]
    # rlpyt's Nature stack with paddings (0, 1, 1): 84 -> 20 -> 10 -> 10.
    assert convs["dqn"].conv_out_shape(84, 84) == (64, 10, 10)
    paper = AtariDqnModel(IMAGE, A, paddings=[0, 0, 0]).encoder.conv.conv
    assert paper.conv_out_shape(84, 84) == (64, 7, 7)
    assert paper.channels == list(ATARI_CONVS["nature"]["channels"])


def test_dqn_heads():
    dqn = AtariDqnModel(IMAGE, A, fc_sizes=[64])
    linears = [m for m in dqn.head.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(6400, 64), (64, A)]
    assert isinstance(AtariDqnModel(IMAGE, A, dueling=True).head, DuelingHeadModel)
    assert isinstance(AtariCatDqnModel(IMAGE, A, dueling=True).head, DistributionalDuelingHeadModel)


def test_probabilities_sum_to_one():
    frames, prev_action, prev_reward = _inputs()
    pi, _ = AtariFfModel(IMAGE, A, fc_sizes=32)(frames)
    torch.testing.assert_close(pi.sum(-1), torch.ones(T, B))
    p = AtariCatDqnModel(IMAGE, A, n_atoms=11, fc_sizes=32)(frames)
    torch.testing.assert_close(p.sum(-1), torch.ones(T, B, A))
    pi, _, _ = AtariLstmModel(IMAGE, A, fc_sizes=32, lstm_size=16)(frames, prev_action, prev_reward)
    torch.testing.assert_close(pi.sum(-1), torch.ones(T, B))


def test_bad_conv_preset():
    with pytest.raises(ValueError, match="conv must be one of"):
        AtariDqnModel(IMAGE, A, conv="huge")
