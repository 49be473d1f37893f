from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.spaces import FloatBox


def test_scalar_bounds_with_shape():
    box = FloatBox(-1.0, 1.0, shape=(3, 4))
    assert box.shape == (3, 4)
    assert box.dtype == np.float32
    assert box.low.shape == (3, 4) and box.low.dtype == np.float32
    box.seed(0)
    for _ in range(20):
        x = box.sample()
        assert x.dtype == np.float32 and box.contains(x)
    assert box.bounded


def test_array_bounds():
    box = FloatBox(np.array([-1.0, -2.0]), np.array([2.0, 4.0]))
    assert box.shape == (2,)
    np.testing.assert_array_equal(box.high, [2.0, 4.0])
    np.testing.assert_array_equal(box.null_value(), [0.0, 0.0])
    assert box.contains(np.array([2.0, -2.0]))
    assert not box.contains(np.array([2.5, 0.0]))
    assert not box.contains(np.array([0.0]))


def test_unbounded_and_half_bounded_sampling():
    box = FloatBox(np.array([-np.inf, 0.0, -np.inf]), np.array([np.inf, np.inf, 5.0]))
    assert not box.bounded
    box.seed(1)
    xs = np.stack([box.sample() for _ in range(500)])
    assert np.all(np.isfinite(xs))
    assert xs[:, 0].min() < 0 < xs[:, 0].max()
    assert np.all(xs[:, 1] >= 0.0)
    assert np.all(xs[:, 2] <= 5.0)


def test_null_value_clipped_and_dtype():
    box = FloatBox(1.0, 3.0, shape=(2,), dtype=np.float64)
    np.testing.assert_array_equal(box.null_value(), [1.0, 1.0])
    assert box.null_value().dtype == np.float64
    assert FloatBox(-1.0, 1.0, shape=(2,), null_value=0.5).null_value().tolist() == [0.5, 0.5]


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype"):
        FloatBox(0.0, 1.0, shape=(2,), dtype=np.int64)
    with pytest.raises(ValueError, match="low must not exceed high"):
        FloatBox(1.0, 0.0)
    with pytest.raises(ValueError, match="NaN"):
        FloatBox(np.nan, 1.0)
    with pytest.raises(ValueError, match="null_value"):
        FloatBox(0.0, 1.0, shape=(2,), null_value=2.0)
    with pytest.raises(ValueError, match="broadcast"):
        FloatBox(np.zeros(3), np.ones(3), shape=(2,))


def test_boxes_are_equal_exactly_when_kind_shape_dtype_and_bounds_are():
    from lightning_rl.spaces import IntBox

    assert FloatBox(-1.0, 1.0, shape=(2,)) == FloatBox(np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    assert FloatBox(-1.0, 1.0, shape=(2,)) != FloatBox(-1.0, 2.0, shape=(2,))
    assert FloatBox(-1.0, 1.0, shape=(2,)) != FloatBox(-2.0, 1.0, shape=(2,))
    assert FloatBox(-1.0, 1.0, shape=(2,)) != FloatBox(-1.0, 1.0, shape=(3,))
    assert FloatBox(-1.0, 1.0) != FloatBox(-1.0, 1.0, dtype=np.float64)
    # Same shape and bounds as numbers, other kind: a float box never equals an int box.
    assert FloatBox(0.0, 1.0) != IntBox(0, 1) and IntBox(0, 1) != FloatBox(0.0, 1.0)
    assert IntBox(0, 4) == IntBox(0, 4) and IntBox(0, 4) != IntBox(0, 4, dtype=np.uint8)
    with pytest.raises(TypeError):
        hash(FloatBox(-1.0, 1.0))
    assert repr(IntBox(0, 3)) == "IntBox(low=0, high=3, shape=(), dtype=int64)"
    assert repr(FloatBox(0.0, 1.0)).startswith("FloatBox(low=array(0., dtype=float32), high=array(1., dtype=float32)")
