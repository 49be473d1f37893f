from __future__ import annotations

import pickle

import numpy as np
import pytest
from gymnasium import spaces as gs

from lightning_rl.spaces import (
    Composite,
    FloatBox,
    IntBox,
    from_gymnasium,
    from_gymnasium_value,
    to_gymnasium_value,
)


def test_float_box_force_float32():
    g = gs.Box(-2.0, 3.0, shape=(3,), dtype=np.float64)
    s = from_gymnasium(g)
    assert isinstance(s, FloatBox) and s.dtype == np.float32 and s.shape == (3,)
    np.testing.assert_array_equal(s.low, [-2.0] * 3)
    assert from_gymnasium(g, force_float32=False).dtype == np.float64
    assert from_gymnasium_value(s, np.ones(3)).dtype == np.float32


def test_uint8_image_box_keeps_dtype_high_exclusive():
    g = gs.Box(0, 255, shape=(84, 84, 4), dtype=np.uint8)
    s = from_gymnasium(g)
    assert isinstance(s, IntBox)
    assert s.dtype == np.uint8 and s.shape == (84, 84, 4)
    assert (s.low, s.high, s.n) == (0, 256, 256)
    assert s.contains(np.full((84, 84, 4), 255, np.uint8))


def test_integer_box_with_array_bounds():
    g = gs.Box(np.array([0, -3]), np.array([2, 4]), dtype=np.int32)
    s = from_gymnasium(g)
    np.testing.assert_array_equal(s.low, [0, -3])
    np.testing.assert_array_equal(s.high, [3, 5])
    assert s.dtype == np.int32
    s.seed(0)
    assert all(g.contains(s.sample()) for _ in range(50))


def test_discrete_with_start():
    s = from_gymnasium(gs.Discrete(5, start=2))
    assert (s.low, s.high, s.n) == (2, 7, 5)
    assert s.dtype == np.int64 and s.shape == ()
    assert s.null_value() == 2
    s.seed(0)
    assert all(2 <= int(s.sample()) < 7 for _ in range(50))
    assert to_gymnasium_value(s, np.int64(4)) == 4
    assert type(to_gymnasium_value(s, np.array(4))) is int


def test_multi_discrete_n_is_nvec():
    g = gs.MultiDiscrete([3, 3, 2])
    s = from_gymnasium(g)
    np.testing.assert_array_equal(s.n, [3, 3, 2])
    assert s.shape == (3,)
    s.seed(1)
    assert all(g.contains(s.sample()) for _ in range(50))


def test_multi_binary():
    s = from_gymnasium(gs.MultiBinary(4))
    assert (s.low, s.high, s.n) == (0, 2, 2)
    assert s.dtype == np.int8 and s.shape == (4,)


def nested_dict_space():
    return gs.Dict(
        {
            "pixels": gs.Box(0, 255, shape=(3, 5, 5), dtype=np.uint8),
            "robot.state": gs.Box(-1.0, 1.0, shape=(2,), dtype=np.float64),
            "extra": gs.Tuple((gs.Discrete(3), gs.Dict({"flag": gs.MultiBinary(2)}))),
        }
    )


def test_nested_dict_tuple_round_trip():
    g = nested_dict_space()
    s = from_gymnasium(g, name="obs")
    assert isinstance(s, Composite)
    # gymnasium sorts the keys of a plain dict; fields follow its order, made identifiers.
    assert s.names == ("extra", "pixels", "robot_state")
    assert s.keys == ("extra", "pixels", "robot.state")
    extra = s.spaces[0]
    assert extra.names == ("f0", "f1") and extra.keys is None
    assert extra.spaces[1].names == ("flag",)

    g.seed(0)
    value = g.sample()
    x = from_gymnasium_value(s, value)
    assert s.contains(x)
    assert x.robot_state.dtype == np.float32
    np.testing.assert_array_equal(x.pixels, value["pixels"])
    assert int(x.extra.f0) == value["extra"][0]
    np.testing.assert_array_equal(x.extra.f1.flag, value["extra"][1]["flag"])

    back = to_gymnasium_value(s, x)
    assert set(back) == {"pixels", "robot.state", "extra"}
    assert isinstance(back["extra"], tuple) and isinstance(back["extra"][1], dict)
    assert g.contains({**back, "robot.state": back["robot.state"].astype(np.float64)})


def test_composite_sample_and_null_inside_gym_space():
    g = nested_dict_space()
    s = from_gymnasium(g, force_float32=False)
    s.seed(3)
    for value in (s.sample(), s.null_value()):
        assert s.contains(value)
        assert g.contains(to_gymnasium_value(s, value))
    assert s.dtype.robot_state == np.float64
    assert s.shape.pixels == (3, 5, 5)


def test_converted_composite_pickles():
    s = from_gymnasium(nested_dict_space())
    again = pickle.loads(pickle.dumps(s))
    assert again == s
    assert again.null_value().extra.f1.flag.shape == (2,)


def test_to_gymnasium_value_accepts_tensors():
    torch = pytest.importorskip("torch")
    s = from_gymnasium(gs.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))
    out = to_gymnasium_value(s, torch.tensor([0.5, -0.5]))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    assert to_gymnasium_value(from_gymnasium(gs.Discrete(3)), torch.tensor(2)) == 2


@pytest.mark.parametrize(
    "space",
    [gs.Text(5), gs.Sequence(gs.Discrete(2)), gs.Graph(gs.Box(0, 1, (2,)), gs.Discrete(2))],
    ids=["Text", "Sequence", "Graph"],
)
def test_unsupported_space_raises(space):
    with pytest.raises(ValueError, match=type(space).__name__):
        from_gymnasium(space)


def test_unsupported_space_nested_raises():
    with pytest.raises(ValueError, match="Text"):
        from_gymnasium(gs.Dict({"ok": gs.Discrete(2), "bad": gs.Text(3)}))
