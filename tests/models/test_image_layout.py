"""Single-array image observations: channels order from the space, convs that fit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent, DqnAgent
from lightning_rl.models import AtariDqnModel, AtariFfModel, AtariLstmModel, ImageEncoder
from lightning_rl.spaces import IntBox

A = 3


def _frames(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (2, 5) + shape, dtype=torch.uint8, generator=gen)


def _spaces(shape: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(observation=IntBox(0, 256, shape=shape, dtype="uint8"), action=IntBox(0, A))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda shape, last: AtariFfModel(shape, A, fc_sizes=16, channels_last=last), id="ff"),
        pytest.param(lambda shape, last: AtariDqnModel(shape, A, fc_sizes=16, channels_last=last), id="dqn"),
    ],
)
@pytest.mark.parametrize("hw", [(8, 6), (40, 44)], ids=["small", "large"])
def test_channels_last_equals_channels_first_permuted(make, hw):
    h, w = hw
    chw = make((3, h, w), False)
    hwc = make((h, w, 3), True)
    assert list(hwc.state_dict()) == list(chw.state_dict())
    hwc.load_state_dict(chw.state_dict())
    frames = _frames((3, h, w))
    prev_action, prev_reward = torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5)
    expected = chw(frames, prev_action, prev_reward)
    got = hwc(frames.permute(0, 1, 3, 4, 2), prev_action, prev_reward)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got, strict=True):
        assert e.shape[:2] == (2, 5)
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6)


def test_lstm_channels_last_equals_channels_first_permuted():
    chw = AtariLstmModel((1, 8, 8), A, fc_sizes=16, lstm_size=8)
    hwc = AtariLstmModel((8, 8, 1), A, fc_sizes=16, lstm_size=8, channels_last=True)
    hwc.load_state_dict(chw.state_dict())
    frames = _frames((1, 8, 8))
    prev = torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5)
    pi, value, _ = chw(frames, *prev, None)
    pi_last, value_last, _ = hwc(frames.permute(0, 1, 3, 4, 2), *prev, None)
    torch.testing.assert_close(pi_last, pi, rtol=0, atol=1e-6)
    torch.testing.assert_close(value_last, value, rtol=0, atol=1e-6)


def test_small_images_get_3x3_convs_and_large_keep_the_preset():
    small = AtariFfModel((8, 8, 3), A, channels_last=True).encoder.conv.conv
    large = AtariFfModel((4, 84, 84), A).encoder.conv.conv
    assert [c.kernel_size for c in small.modules() if isinstance(c, torch.nn.Conv2d)] == [(3, 3), (3, 3)]
    assert [c.kernel_size for c in large.modules() if isinstance(c, torch.nn.Conv2d)] == [(8, 8), (4, 4)]




@pytest.mark.parametrize("agent_cls", [CategoricalPgAgent, DqnAgent])
@pytest.mark.parametrize(
    "shape, channels_last", [((8, 8, 3), True), ((8, 8, 1), True), ((3, 8, 8), False), ((4, 84, 84), False)]
)
def test_agents_read_the_layout_from_the_space(agent_cls, shape, channels_last):
    agent = agent_cls()
    spaces = _spaces(shape)
    kwargs = agent.make_env_to_model_kwargs(spaces)
    # Atari frame stacks get exactly the arguments they always had.
    expected = {"image_shape": shape, "output_size": A} | ({"channels_last": True} if channels_last else {})
    assert kwargs == expected
    model = agent.make_model(spaces)
    assert model.encoder.channels_last is channels_last
    out = model(_frames(shape), torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5))
    out = out[0] if isinstance(out, tuple) else out
    assert out.shape == (2, 5, A)


def test_atari_state_dict_keys_unchanged():
    """The keys the ``[C, 84, 84]`` models had before channels-last support (checkpoints still load)."""
    convs = [f"encoder.conv.conv.conv.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")]
    assert list(AtariFfModel((4, 84, 84), A).state_dict()) == convs[:4] + [
        "encoder.conv.head.model.0.weight",
        "encoder.conv.head.model.0.bias",
        "head.pi.model.0.weight",
        "head.pi.model.0.bias",
        "head.value.model.0.weight",
        "head.value.model.0.bias",
    ]
    assert list(AtariDqnModel((4, 84, 84), A).state_dict()) == convs + [
        "head.model.0.weight",
        "head.model.0.bias",
        "head.model.2.weight",
        "head.model.2.bias",
    ]


def test_make_encoder_gives_vector_models_a_conv_encoder_for_an_image_space():
    import numpy as np

    from lightning_rl.models import make_encoder
    from lightning_rl.spaces import FloatBox, IntBox

    hwc = make_encoder(IntBox(0, 256, shape=(8, 8, 3), dtype=np.uint8), hidden_sizes=[32])
    assert isinstance(hwc, ImageEncoder) and hwc.channels_last
    assert hwc.output_size == 32  # 256-unit layer after the convs, then the hidden size
    frames = torch.zeros(5, 8, 8, 3, dtype=torch.uint8)
    frames[:, 2, 6] = 255
    assert hwc(frames).shape == (5, 32)
    # 3x3 convs below 36 px a side: stride 2 then 1 with padding 1 leave 4x4x32 features.
    first_fc = next(m for m in hwc.modules() if isinstance(m, torch.nn.Linear))
    assert first_fc.in_features == 4 * 4 * 32 and first_fc.out_features == 256
    chw = make_encoder(IntBox(0, 256, shape=(4, 84, 84), dtype=np.uint8))
    assert isinstance(chw, ImageEncoder) and not chw.channels_last and chw.output_size == 256
    with pytest.raises(ValueError, match="a space must be a Composite or a uint8 image"):
        make_encoder(FloatBox(-1, 1, shape=(3,)))
