"""CompositeEncoder: one encoder per field of a dict or tuple observation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from lightning_rl.agents import CategoricalPgAgent, DqnAgent, SacAgent, check_observation_space
from lightning_rl.data import NamedArrayTupleSchema
from lightning_rl.envs import EnvSpaces
from lightning_rl.models import CompositeEncoder, DqnMlpModel, PiMlpModel, QofMuMlpModel, R2d1MlpModel, image_layout
from lightning_rl.spaces import Composite, FloatBox, IntBox, Space, from_gymnasium


def space() -> Composite:
    """image [H=8, W=6, C=3] (channels last), nested {a [2, 2], b Discrete(5)}, vec [3] (gymnasium sorts the keys)."""
    return from_gymnasium(
        spaces.Dict(
            {
                "image": spaces.Box(0, 255, (8, 6, 3), np.uint8),
                "vec": spaces.Box(-1.0, 1.0, (3,)),
                "nested": spaces.Dict({"a": spaces.Box(-1.0, 1.0, (2, 2)), "b": spaces.Discrete(5)}),
            }
        )
    )


def observation(lead: tuple[int, ...], seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    s = space()
    # namedarraytuples, as the samplers' buffers hold: obs[t] indexes every field.
    nested = NamedArrayTupleSchema("obs_nested", s.spaces[1].names)(
        a=torch.randn(*lead, 2, 2, generator=g) * 3 + 1, b=torch.randint(0, 5, lead, generator=g))
    return NamedArrayTupleSchema("obs", s.names)(
        image=torch.randint(0, 256, (*lead, 8, 6, 3), dtype=torch.uint8, generator=g),
        nested=nested, vec=torch.randn(*lead, 3, generator=g) * 2 - 5)


def test_output_size_is_the_sum_of_the_fields():
    enc = CompositeEncoder(space())
    # Image: 3x3 convs, stride 2 then 1, padding 1: 8x6 -> 4x3 -> 4x3, 32 channels = 384, then fc 256.
    conv = enc.encoders[0].conv
    assert conv.head.model[0].in_features == 32 * 4 * 3
    # 256 (image) + 4 (a, flattened) + 5 (b, Discrete(5) one-hot) + 3 (vec).
    assert enc.output_size == 256 + 4 + 5 + 3 == enc(observation((5,))).shape[-1]
    assert CompositeEncoder(space(), hidden_sizes=[16, 7]).output_size == 7


def test_large_images_get_the_nature_convs_and_channel_order_comes_from_the_space():
    big = from_gymnasium(spaces.Dict({"frames": spaces.Box(0, 255, (4, 40, 40), np.uint8)}))
    enc = CompositeEncoder(big)
    # 40 -> (40-8)/4+1 = 9 -> (9-4)/2+1 = 3 -> (3-3)/1+1 = 1: 64 features into fc 256.
    assert enc.encoders[0].conv.head.model[0].in_features == 64 and enc.output_size == 256
    assert image_layout(IntBox(0, 256, shape=(4, 84, 84), dtype=np.uint8)) == "CHW"
    assert image_layout(IntBox(0, 256, shape=(64, 64, 3), dtype=np.uint8)) == "HWC"
    assert image_layout(IntBox(0, 256, shape=(3, 3, 3), dtype=np.uint8)) == "CHW"  # ambiguous: channels first
    assert image_layout(FloatBox(0.0, 1.0, shape=(64, 64, 3))) is None  # float: a vector field
    assert image_layout(IntBox(0, 256, shape=(8, 8), dtype=np.uint8)) is None


def test_channels_last_images_are_permuted_not_transposed():
    hwc = CompositeEncoder(space())
    chw_space = Composite([IntBox(0, 256, shape=(3, 8, 6), dtype=np.uint8), *space().spaces[1:]],
                          space().NamedTupleCls)
    chw = CompositeEncoder(chw_space)
    chw.load_state_dict(hwc.state_dict())
    obs = observation((4,))
    as_chw = obs._new([obs.image.permute(0, 3, 1, 2), obs.nested, obs.vec])
    torch.testing.assert_close(hwc(obs), chw(as_chw))


def test_each_vector_field_keeps_its_own_statistics_and_images_none():
    enc = CompositeEncoder(space(), normalize_observation=True)
    image_before = enc(observation((6,), seed=1))[:, :256]
    data = observation((3, 4))  # [T, B] leading dims
    enc.update_obs_rms(data)
    vec = data.vec.reshape(12, 3)
    a = data.nested.a.reshape(12, 4)
    for rms, x in ((enc.encoders[2].obs_rms, vec), (enc.encoders[1].encoders[0].obs_rms, a)):
        torch.testing.assert_close(rms.mean, x.mean(0))
        torch.testing.assert_close(rms.var, ((x - x.mean(0)) ** 2).mean(0))
        assert rms.count == 12
    assert enc.encoders[0].obs_rms is None
    assert enc.encoders[1].encoders[1].obs_rms is None  # b is Discrete(5): one-hot, never normalized
    probe = observation((6,), seed=1)
    features = enc(probe)
    torch.testing.assert_close(features[:, :256], image_before)  # images are never normalized
    expected_vec = (probe.vec - vec.mean(0)) / ((vec - vec.mean(0)) ** 2).mean(0).sqrt()
    # Features: image 0:256, a 256:260, b's one-hot 260:265, vec 265:268.
    torch.testing.assert_close(features[:, 260:265], torch.eye(5)[probe.nested.b])
    torch.testing.assert_close(features[:, 265:268], expected_vec, rtol=1e-4, atol=1e-5)


def test_state_dict_round_trip_keeps_the_statistics():
    enc = CompositeEncoder(space(), normalize_observation=True)
    enc.update_obs_rms(observation((10,)))
    state = enc.state_dict()
    assert {"encoders.2.obs_rms.mean", "encoders.1.encoders.0.obs_rms.var", "encoders.1.encoders.0.obs_rms.count"} \
        <= set(state)
    fresh = CompositeEncoder(space(), normalize_observation=True)
    probe = observation((5,), seed=3)
    assert not torch.allclose(fresh(probe), enc(probe))
    fresh.load_state_dict(state)
    torch.testing.assert_close(fresh(probe), enc(probe))


@pytest.mark.parametrize("make", [
    lambda s: DqnMlpModel(s, 4, hidden_sizes=[8]),
    lambda s: PiMlpModel(s, 2, hidden_sizes=[8]),
])
def test_models_handle_leading_dims(make):
    torch.manual_seed(0)
    model = make(space())
    obs = observation((3, 2))
    out_tb = model(obs)
    outs = out_tb if isinstance(out_tb, tuple) else (out_tb,)
    assert all(o.shape[:2] == (3, 2) for o in outs)
    out_b = model(obs[1])  # namedarraytuple indexing: time step 1, every field
    out_b = out_b if isinstance(out_b, tuple) else (out_b,)
    out_one = model(obs[1, 0])
    out_one = out_one if isinstance(out_one, tuple) else (out_one,)
    for o_tb, o_b, o_one in zip(outs, out_b, out_one, strict=True):
        torch.testing.assert_close(o_tb[1], o_b)
        torch.testing.assert_close(o_tb[1, 0], o_one)


def test_critic_and_recurrent_model_take_composite_observations():
    torch.manual_seed(0)
    q = QofMuMlpModel(space(), 2, hidden_sizes=[8])
    obs = observation((3, 2))
    action = torch.randn(3, 2, 2)
    values = q(obs, None, None, action)
    assert values.shape == (3, 2)
    torch.testing.assert_close(values[2], q(obs[2], None, None, action[2]))
    r2d1 = R2d1MlpModel(space(), 4, hidden_sizes=[8], lstm_size=6, head_size=5)
    q_values, state = r2d1(obs, torch.zeros(3, 2, dtype=torch.long), torch.zeros(3, 2))
    assert q_values.shape == (3, 2, 4) and state.h.shape == (1, 2, 6)


def test_mismatched_leading_dims_are_rejected():
    obs = observation((3, 2))
    enc = CompositeEncoder(space())
    with pytest.raises(ValueError, match="infer_leading_dims"):
        enc.infer_leading_dims(obs._new([obs.image[None, None], obs.nested, obs.vec]))


def test_single_array_models_are_unchanged():
    model = DqnMlpModel((4,), 2, hidden_sizes=[8])
    assert list(model.state_dict()) == ["head.model.0.weight", "head.model.0.bias", "head.model.2.weight",
                                        "head.model.2.bias"]
    assert type(model.encoder).__name__ == "VectorEncoder"


def test_agents_build_composite_models_and_name_bad_spaces():
    discrete = EnvSpaces(space(), IntBox(0, 4))
    for agent in (CategoricalPgAgent(hidden_sizes=[8]), DqnAgent(hidden_sizes=[8])):
        agent.initialize(discrete)
        assert agent.model.encoder.output_size == 268  # 256 + 4 + 5 (b one-hot) + 3
    sac = SacAgent(hidden_sizes=[8], q_hidden_sizes=[8])
    sac.initialize(EnvSpaces(space(), FloatBox(-1.0, 1.0, shape=(2,))))
    assert sac.q1_model.encoder.output_size == 268
    with pytest.raises(ValueError, match="observation space must be an IntBox, a FloatBox or a Composite"):
        check_observation_space(object(), "DqnAgent")
    nested_schema = space().spaces[1].NamedTupleCls
    with pytest.raises(ValueError, match=r"observation field observation\.b must be"):
        check_observation_space(Composite([FloatBox(-1.0, 1.0, shape=(2,)), _NotABox()], nested_schema), "DqnAgent")
    with pytest.raises(ValueError, match=r"observation\.b space .* has no fields"):
        check_observation_space(Composite([FloatBox(-1.0, 1.0, shape=(2,)), _EmptyComposite()], nested_schema),
                                "DqnAgent")


class _EmptyComposite(Composite):
    def __init__(self) -> None:
        from lightning_rl.data import NamedTupleSchema

        super().__init__([], NamedTupleSchema("empty", []))


class _NotABox(Space):
    """A space the encoders cannot take (neither a box nor a Composite), e.g. a text space."""

    shape = ()
    dtype = np.dtype(object)

    def sample(self):
        return ""

    def null_value(self):
        return ""

    def contains(self, x):
        return isinstance(x, str)
