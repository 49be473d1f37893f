"""Per-field encoder settings (``field_encoders``) and one-hot discrete fields.

The space is the one of ``test_composite_encoder``: ``image`` uint8 ``[8, 6, 3]`` (channels
last), ``nested`` ``{a: Box(2, 2), b: Discrete(5)}``, ``vec`` ``Box(3)``. Sizes are worked out
by hand in each test.
"""

from __future__ import annotations

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.models import (
    CategoricalPgMlpModel,
    CompositeEncoder,
    FieldEncoder,
    ImageEncoder,
    OneHotEncoder,
    VectorEncoder,
    make_encoder,
)
from lightning_rl.samplers import SerialSampler
from lightning_rl.spaces import IntBox
from tests.agents.test_model_factory import build_agent
from tests.algos.test_on_policy import make_trainer
from tests.models.test_composite_encoder import observation, space
from tests.toy_envs import DiscreteFieldEnv, greedy_mean_reward


def test_one_hot_encoder_by_hand():
    # MultiDiscrete([3, 4], start=[1, -2]): element 0 in {1, 2, 3}, element 1 in {-2, ..., 1}.
    enc = OneHotEncoder(IntBox(np.array([1, -2]), np.array([4, 2])))
    assert enc.nvec == (3, 4) and enc.output_size == 7
    x = torch.tensor([[2, 0], [1, -2], [3, 1]])
    expected = torch.tensor([
        [0, 1, 0, 0, 0, 1, 0],  # 2 is the second of {1, 2, 3}; 0 the third of {-2, -1, 0, 1}
        [1, 0, 0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 1],
    ], dtype=torch.float32)
    torch.testing.assert_close(enc(x), expected)
    scalar = OneHotEncoder(IntBox(0, 5))
    torch.testing.assert_close(scalar(torch.tensor([4, 0])), torch.eye(5)[[4, 0]])
    assert list(enc.state_dict()) == []  # derived from the space: nothing to save


def test_discrete_fields_default_to_one_hot_unless_binary_or_too_wide():
    from gymnasium import spaces

    from lightning_rl.spaces import Composite
    from lightning_rl.spaces.gymnasium import from_gymnasium

    s = from_gymnasium(spaces.Dict({
        "bits": spaces.MultiBinary(3), "cell": spaces.Discrete(6), "huge": spaces.Discrete(5000),
    }))
    assert isinstance(s, Composite)
    enc = CompositeEncoder(s)
    bits, cell, huge = enc.encoders
    assert isinstance(bits, VectorEncoder) and bits.output_size == 3  # 0/1 enter as they are
    assert isinstance(cell, OneHotEncoder) and cell.output_size == 6
    assert isinstance(huge, VectorEncoder) and huge.output_size == 1  # 5000 > MAX_AUTO_ONE_HOT
    forced = CompositeEncoder(
        s, field_encoders={"huge": FieldEncoder(one_hot=True), "cell": FieldEncoder(one_hot=False)}
    )
    assert forced.encoders[2].output_size == 5000 and isinstance(forced.encoders[1], VectorEncoder)


def test_field_settings_build_the_networks_they_name():
    settings = {
        "image": FieldEncoder(channels=(8,), kernel_sizes=(3,), strides=(1,), fc_size=16),
        "nested.b": FieldEncoder(one_hot=False, normalize=True),
        "vec": FieldEncoder(hidden_sizes=(7,)),
    }
    enc = CompositeEncoder(space(), field_encoders=settings)
    image, nested, vec = enc.encoders
    # One 3x3 conv, stride 1, no padding, on 3 x 8 x 6: 8 channels x 6 x 4 = 192 -> fc 16.
    assert isinstance(image, ImageEncoder)
    linear = [m for m in image.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(192, 16)]
    # b: a normalized number (one feature with running statistics), a: 4 numbers unnormalized.
    assert nested.encoders[1].output_size == 1 and nested.encoders[1].obs_rms is not None
    assert nested.encoders[0].obs_rms is None
    # vec: 3 -> 7 on its own.
    assert vec.output_size == 7
    assert enc.output_size == 16 + 4 + 1 + 7 == enc(observation((2,))).shape[-1]


def test_bad_field_settings_are_named():
    with pytest.raises(ValueError, match=r"\['vec\.x'\] name no field .* \['image', 'nested', 'nested\.a'"):
        CompositeEncoder(space(), field_encoders={"vec.x": FieldEncoder()})
    with pytest.raises(ValueError, match=r"\['vec'\]: \{'channels': \(8,\)\} do not apply to a non-image"):
        CompositeEncoder(space(), field_encoders={"vec": FieldEncoder(channels=(8,))})
    with pytest.raises(ValueError, match=r"\['vec'\]: \{'one_hot': True\} do not apply to a non-discrete"):
        CompositeEncoder(space(), field_encoders={"vec": FieldEncoder(one_hot=True)})
    with pytest.raises(ValueError, match=r"field_encoders\['image'\]: \{'normalize': True\} do not apply to an image"):
        CompositeEncoder(space(), field_encoders={"image": FieldEncoder(normalize=True)})
    with pytest.raises(ValueError, match=r"field_encoders\['nested'\]: .* do not apply to a nested dict"):
        CompositeEncoder(space(), field_encoders={"nested": FieldEncoder(hidden_sizes=(4,))})
    with pytest.raises(ValueError, match="give channels, kernel_sizes and strides together"):
        CompositeEncoder(space(), field_encoders={"image": FieldEncoder(channels=(8,))})
    with pytest.raises(ValueError, match=r"field_encoders: \['x'\] are settings for the fields of a dict"):
        make_encoder((4,), field_encoders={"x": FieldEncoder()})


def test_field_encoders_come_from_the_yaml(monkeypatch, tmp_path):
    from lightning_rl.envs import EnvSpaces

    model = {"class_path": "lightning_rl.models.CategoricalPgMlpModel",
             "init_args": {"hidden_sizes": [8], "field_encoders": {
                 "vec": {"hidden_sizes": [7]},
                 "image": {"channels": [8], "kernel_sizes": [3], "strides": [1], "fc_size": 16}}}}
    agent = build_agent("ppo/cartpole.yaml", monkeypatch, tmp_path, model=model)
    agent.initialize(EnvSpaces(space(), IntBox(0, 4)))
    assert isinstance(agent.model, CategoricalPgMlpModel)
    # 16 (image) + 4 (a) + 5 (b one-hot) + 7 (vec) features into the 8-unit policy MLP.
    assert agent.model.encoder.output_size == 32
    assert agent.model.head.pi.model[0].in_features == 32


def test_ppo_learns_a_table_over_a_discrete_field():
    # With the cell fed as one number (FieldEncoder(one_hot=False)) the same run reached 0.605:
    # an unordered table is hard to fit as a function of the index.
    pl.seed_everything(0)
    module = PPO(CategoricalPgAgent(hidden_sizes=[32]), SerialSampler(env_id=DiscreteFieldEnv, batch_T=16, batch_B=4),
                 epochs=4, minibatches=2, learning_rate=3e-3, entropy_loss_coeff=0.0, total_env_steps=4096,
                 log_interval_steps=1024)
    make_trainer().fit(module)
    assert isinstance(module.agent.model.encoder.encoders[0], OneHotEncoder)  # "cell" (gymnasium sorts keys)
    assert greedy_mean_reward(module.agent, DiscreteFieldEnv) >= 0.95
