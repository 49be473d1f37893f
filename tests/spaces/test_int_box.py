from __future__ import annotations

import pickle

import numpy as np
import pytest

from lightning_rl.spaces import IntBox


def test_discrete_box_n_sample_null():
    box = IntBox(0, 6)
    assert box.n == 6
    assert box.shape == ()
    assert box.dtype == np.int64
    box.seed(0)
    samples = [box.sample() for _ in range(200)]
    assert set(int(s) for s in samples) == set(range(6))
    assert all(s.dtype == np.int64 and s.shape == () for s in samples)
    assert box.null_value() == 0
    assert box.contains(5) and not box.contains(6) and not box.contains(-1)
    assert not box.contains(2.0)


def test_array_high_gives_shape_and_n_array():
    box = IntBox(0, np.array([3, 3, 5]))
    assert box.shape == (3,)
    np.testing.assert_array_equal(box.n, [3, 3, 5])
    box.seed(1)
    for _ in range(50):
        x = box.sample()
        assert x.shape == (3,) and box.contains(x)
    assert box.contains(np.array([2, 2, 4]))
    assert not box.contains(np.array([2, 3, 4]))


def test_uint8_image_box_high_256():
    box = IntBox(0, 256, shape=(2, 4, 4), dtype=np.uint8)
    assert box.n == 256
    x = box.sample()
    assert x.dtype == np.uint8 and x.shape == (2, 4, 4)
    null = box.null_value()
    assert null.dtype == np.uint8 and not null.any()
    # A fresh copy each call: writing to it does not change the space.
    null[0] = 7
    assert not box.null_value().any()


def test_null_value_defaults_into_bounds_and_custom():
    assert IntBox(3, 7).null_value() == 3
    assert IntBox(-5, -2).null_value() == -3
    assert IntBox(0, 4, null_value=2).null_value() == 2
    with pytest.raises(ValueError, match="null_value"):
        IntBox(0, 4, null_value=4)


def test_seeded_samples_repeat():
    a, b = IntBox(0, 100, shape=(5,)), IntBox(0, 100, shape=(5,))
    a.seed(3)
    b.seed(3)
    np.testing.assert_array_equal(a.sample(), b.sample())
    b.seed(4)
    assert not all(np.array_equal(a.sample(), b.sample()) for _ in range(3))


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype"):
        IntBox(0, 3, dtype=np.float32)
    with pytest.raises(ValueError, match="high must exceed low"):
        IntBox(3, 3)
    with pytest.raises(ValueError, match="integer valued"):
        IntBox(0, 2.5)
    with pytest.raises(ValueError, match="do not fit dtype"):
        IntBox(0, 257, dtype=np.uint8)
    with pytest.raises(ValueError, match="broadcast"):
        IntBox(0, np.array([2, 3]), shape=(3,))


def test_pickle_and_equality():
    box = IntBox(1, np.array([4, 5]), dtype=np.int32)
    again = pickle.loads(pickle.dumps(box))
    assert again == box
    assert again != IntBox(1, np.array([4, 6]), dtype=np.int32)
