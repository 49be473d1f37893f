from __future__ import annotations

import pickle
from collections import namedtuple

import numpy as np
import pytest

from lightning_rl.data import NamedTupleSchema, buffer_from_example
from lightning_rl.spaces import Composite, FloatBox, IntBox, to_field_names

Obs = namedtuple("Obs", ["image", "vector"])


def make_space():
    return Composite([IntBox(0, 256, shape=(2, 3), dtype=np.uint8), FloatBox(-1.0, 1.0, shape=(4,))], Obs)


def test_sample_null_shape_dtype_are_namedtuples():
    space = make_space()
    space.seed(0)
    x = space.sample()
    assert isinstance(x, Obs)
    assert x.image.shape == (2, 3) and x.image.dtype == np.uint8
    assert space.contains(x)
    null = space.null_value()
    assert not null.image.any() and not null.vector.any()
    assert space.shape == Obs((2, 3), (4,))
    assert space.dtype == Obs(np.dtype(np.uint8), np.dtype(np.float32))
    assert space.names == ("image", "vector")
    assert space.spaces[1] == FloatBox(-1.0, 1.0, shape=(4,))


def test_contains_checks_every_part():
    space = make_space()
    good = space.null_value()
    assert space.contains(good)
    assert not space.contains(good._replace(vector=np.full(4, 2.0, np.float32)))
    assert not space.contains((good.image,))


def test_seed_repeats_samples():
    a, b = make_space(), make_space()
    a.seed(5)
    b.seed(5)
    xa, xb = a.sample(), b.sample()
    np.testing.assert_array_equal(xa.image, xb.image)
    np.testing.assert_array_equal(xa.vector, xb.vector)


def test_schema_form_pickles_and_builds_buffers():
    space = Composite([IntBox(0, 3), FloatBox(0.0, 1.0, shape=(2,))], NamedTupleSchema("act", ["a", "b"]))
    again = pickle.loads(pickle.dumps(space))
    assert again == space
    buf = buffer_from_example(space.null_value(), (5, 2))
    assert buf.a.shape == (5, 2) and buf.a.dtype == np.int64
    assert buf.b.shape == (5, 2, 2) and buf.b.dtype == np.float32


def test_bad_arguments():
    with pytest.raises(ValueError, match="2 fields"):
        Composite([IntBox(0, 2)], Obs)
    with pytest.raises(ValueError, match="Space objects"):
        Composite([IntBox(0, 2), "not a space"], Obs)


def test_to_field_names():
    keys = ["ale.lives", "_private", 0, "class", "get", "a_b", "a.b", "", "x y"]
    assert to_field_names(keys) == ["ale_lives", "private", "f0", "class_", "get_", "a_b", "a_b_1", "f", "x_y"]
    assert to_field_names(["timeout", "t"], reserved=["timeout"]) == ["timeout_", "t"]
