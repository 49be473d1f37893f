"""Buffer allocation (plain and shared memory), torch/numpy views, and leaf-wise helpers."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
import torch

from lightning_rl.data import (
    NamedArrayTuple,
    NamedArrayTupleSchema,
    NamedTupleSchema,
    buffer_from_example,
    buffer_func,
    buffer_method,
    buffer_nbytes,
    buffer_to,
    get_leading_dims,
    is_namedarraytuple,
    namedarraytuple,
    np_mp_array,
    numpify_buffer,
    torchify_buffer,
)

Sample = namedarraytuple("Sample", ["observation", "reward", "info", "missing"])
Info = namedtuple("Info", ["truncated", "lives"])


def make_example() -> Any:
    """One step: float32 vector obs, Python float reward, nested namedtuple info, a None field."""
    return Sample(
        observation=np.ones(3, dtype=np.float32),
        reward=1.5,
        info=Info(truncated=False, lives=np.int16(3)),
        missing=None,
    )


def _child_writes(buf: Any) -> None:
    buf.observation[1, 0] = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    buf.reward[:, 1] = 4.0
    buf.info.lives[0, 0] = 5


def test_buffer_from_example_shapes_dtypes_and_none() -> None:
    buf = buffer_from_example(make_example(), (4, 2))
    assert type(buf) is Sample and buf.missing is None
    assert is_namedarraytuple(buf.info) and buf.info._fields == ("truncated", "lives")
    assert buf.observation.shape == (4, 2, 3) and buf.observation.dtype == np.float32
    # A Python float example means a float32 field; a Python bool stays bool.
    assert buf.reward.shape == (4, 2) and buf.reward.dtype == np.float32
    assert buf.info.truncated.dtype == np.bool_ and buf.info.lives.dtype == np.int16
    assert not buf.observation.any() and not buf.reward.any()
    # The buffer takes the [T, B] writes that samplers do.
    buf[2, 1] = make_example()
    np.testing.assert_array_equal(buf.observation[2, 1], [1.0, 1.0, 1.0])
    assert buf.reward[2, 1] == 1.5 and buf.info.lives[2, 1] == 3
    assert buf.reward.sum() == 1.5


def test_buffer_from_example_int_leading_dims_tensor_and_array_example() -> None:
    buf = buffer_from_example(torch.zeros(2, dtype=torch.int64), 5)
    assert isinstance(buf, np.ndarray) and buf.shape == (5, 2) and buf.dtype == np.int64
    arr = buffer_from_example(np.zeros((2, 2), dtype=np.uint8), (3,))
    assert arr.shape == (3, 2, 2) and arr.dtype == np.uint8
    assert buffer_from_example(None, (3,)) is None


def test_buffer_from_example_schema_forms() -> None:
    S = NamedTupleSchema("S", ["a", "b"])
    buf = buffer_from_example(S(np.zeros(2), None), (3,))
    assert isinstance(buf, NamedArrayTuple) and buf._schema == NamedArrayTupleSchema("S", ["a", "b"])
    assert buf.a.shape == (3, 2) and buf.b is None
    forced = buffer_from_example(make_example(), (2,), use_NatSchema=True)
    assert isinstance(forced, NamedArrayTuple) and isinstance(forced.info, NamedArrayTuple)
    assert forced.info.lives.shape == (2,)


def test_buffer_from_namedtuple_example_pickles_and_keeps_its_type() -> None:
    buf = buffer_from_example(make_example(), (2, 3))
    again = buffer_from_example(make_example(), (1,))
    assert type(again.info) is type(buf.info)
    buf.info.lives[1, 2] = 4
    back = pickle.loads(pickle.dumps(buf))
    assert type(back) is Sample and type(back.info) is type(buf.info)
    assert back.info.lives[1, 2] == 4 and back.info.lives.sum() == 4 and back.missing is None


def test_buffer_from_example_rejects_plain_tuple() -> None:
    with pytest.raises(TypeError, match="namedtuple"):
        buffer_from_example((np.zeros(2), 1.0), (3,))


def test_shared_memory_writes_from_forked_child_are_seen() -> None:
    ctx = mp.get_context("fork")
    shared = buffer_from_example(make_example(), (2, 2), share_memory=True)
    private = buffer_from_example(make_example(), (2, 2), share_memory=False)
    for buf in (shared, private):
        proc = ctx.Process(target=_child_writes, args=(buf,))
        proc.start()
        proc.join(timeout=60)
        assert proc.exitcode == 0
    np.testing.assert_array_equal(shared.observation[1, 0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(shared.reward, [[0.0, 4.0], [0.0, 4.0]])
    assert shared.info.lives[0, 0] == 5 and shared.info.lives.sum() == 5
    # Control: an ordinary buffer is copied on fork, so the parent sees nothing.
    assert not private.observation.any() and not private.reward.any() and not private.info.lives.any()


def test_np_mp_array_is_zeroed_with_shape_and_dtype() -> None:
    a = np_mp_array((2, 3), np.float64)
    assert a.shape == (2, 3) and a.dtype == np.float64 and not a.any()
    a[1, 2] = 7.0
    assert a.sum() == 7.0
    b = np_mp_array(4, "int32")
    assert b.shape == (4,) and b.dtype == np.int32


def test_torchify_numpify_are_zero_copy_both_ways() -> None:
    buf = buffer_from_example(make_example(), (3,))
    t = torchify_buffer(buf)
    assert type(t) is Sample and t.missing is None
    assert isinstance(t.observation, torch.Tensor) and t.observation.dtype == torch.float32
    assert t.info.lives.dtype == torch.int16
    t.observation[0, 1] = 5.0
    assert buf.observation[0, 1] == 5.0
    buf.reward[2] = -1.0
    assert t.reward[2].item() == -1.0

    n = numpify_buffer(t)
    assert isinstance(n.observation, np.ndarray) and n.missing is None
    n.info.lives[1] = 9
    assert t.info.lives[1].item() == 9 and buf.info.lives[1] == 9
    # Already-converted leaves pass through unchanged.
    assert torchify_buffer(t).observation is t.observation
    assert numpify_buffer(buf).observation is buf.observation


def test_buffer_to_moves_every_leaf() -> None:
    buf = buffer_from_example(make_example(), (2,))
    moved = buffer_to(buf, "cpu")
    assert type(moved) is Sample and moved.missing is None
    assert isinstance(moved.info.truncated, torch.Tensor) and moved.info.truncated.device.type == "cpu"
    buf.reward[1] = 2.5
    assert buffer_to(buf, torch.device("cpu")).reward.tolist() == [0.0, 2.5]


def test_buffer_method_and_func() -> None:
    t = torchify_buffer(buffer_from_example(make_example(), (2,)))
    buffer_method(t, "fill_", 3)
    assert t.observation.sum().item() == 18.0 and t.reward.sum().item() == 6.0
    assert t.info.lives.tolist() == [3, 3] and t.info.truncated.tolist() == [True, True]
    doubled = buffer_method(t, "mul", 2)
    assert doubled.observation[0, 0].item() == 6.0 and t.observation[0, 0].item() == 3.0
    shapes = buffer_func(t, lambda x: tuple(x.shape))
    assert shapes.observation == (2, 3) and shapes.info.lives == (2,) and shapes.missing is None


def test_get_leading_dims_and_mismatch_error() -> None:
    buf = buffer_from_example(make_example(), (4, 2))
    assert get_leading_dims(buf, n_dim=2) == (4, 2)
    assert get_leading_dims(buf) == (4,)
    bad = buf._replace(reward=np.zeros((5, 2)))
    with pytest.raises(ValueError, match="disagree"):
        get_leading_dims(bad)
    with pytest.raises(ValueError, match="no array leaves"):
        get_leading_dims(Sample(None, None, None, None))


def test_buffer_nbytes() -> None:
    buf = buffer_from_example(make_example(), (4, 2))
    # obs 4*2*3*4 + reward 4*2*4 + timeout 4*2*1 + lives 4*2*2
    assert buffer_nbytes(buf) == 96 + 32 + 8 + 16
    assert buffer_nbytes(torchify_buffer(buf)) == 152
