"""``[T, B]`` array helpers, each checked on numpy and torch against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.data import (
    empty,
    extract_sequences,
    from_onehot,
    infer_leading_dims,
    iterate_mb_idxs,
    restore_leading_dims,
    select_at_indexes,
    to_onehot,
    zeros,
)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [((3,), (0, 1, 1, (3,))), ((5, 3), (1, 1, 5, (3,))), ((4, 5, 3), (2, 4, 5, (3,)))],
    ids=["[]", "[B]", "[T,B]"],
)
def test_infer_and_restore_leading_dims_round_trip(shape: tuple, expected: tuple) -> None:
    x = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    lead_dim, T, B, data_shape = infer_leading_dims(x, 1)
    assert (lead_dim, T, B, data_shape) == expected
    flat = x.reshape(T * B, *data_shape)
    # A model sees [T*B, 3] and outputs two things: the input doubled and its row sums.
    out, sums = restore_leading_dims((flat * 2, flat.sum(-1)), lead_dim, T, B)
    assert torch.equal(out, x * 2)
    assert torch.equal(sums, x.sum(-1))
    single = restore_leading_dims(flat, lead_dim, T, B)
    assert torch.equal(single, x)


def test_infer_leading_dims_image_and_numpy() -> None:
    frames = np.zeros((7, 4, 84, 84), dtype=np.uint8)
    assert infer_leading_dims(frames, 3) == (1, 1, 7, (4, 84, 84))


def test_infer_leading_dims_wrong_ndim() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3, 4, 5\)"):
        infer_leading_dims(torch.zeros(2, 3, 4, 5), 1)
    with pytest.raises(ValueError, match="expected 2 data dims"):
        infer_leading_dims(torch.zeros(3), 2)


def test_restore_leading_dims_errors() -> None:
    with pytest.raises(ValueError, match="lead_dim must be 0, 1 or 2, got 3"):
        restore_leading_dims(torch.zeros(2, 1), 3)
    with pytest.raises(ValueError, match="leading size 1"):
        restore_leading_dims(torch.zeros(2, 1), 0)


def test_select_at_indexes_numpy_and_torch() -> None:
    q = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    idx = np.array([2, 0])
    np.testing.assert_array_equal(select_at_indexes(idx, q), [3.0, 4.0])
    out = select_at_indexes(torch.from_numpy(idx), torch.from_numpy(q))
    assert isinstance(out, torch.Tensor) and out.tolist() == [3.0, 4.0]

    # [T, B] leading dims with a trailing atom dim: out[t, b] = p[t, b, idx[t, b], :].
    p = np.arange(2 * 2 * 3 * 2).reshape(2, 2, 3, 2)
    tb_idx = np.array([[0, 2], [1, 1]])
    expected = np.array([[[0, 1], [10, 11]], [[14, 15], [20, 21]]])
    np.testing.assert_array_equal(select_at_indexes(tb_idx, p), expected)
    got = select_at_indexes(torch.from_numpy(tb_idx), torch.from_numpy(p))
    assert torch.equal(got, torch.from_numpy(expected))


def test_select_at_indexes_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="must equal indexes shape"):
        select_at_indexes(np.array([0, 1, 0]), np.zeros((2, 3)))


def test_to_onehot_from_onehot() -> None:
    idx = np.array([[2, 0], [1, 2]])
    oh = to_onehot(idx, 3)
    assert oh.dtype == np.float32 and oh.shape == (2, 2, 3)
    np.testing.assert_array_equal(oh[0], [[0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(oh[1], [[0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(from_onehot(oh), idx)
    assert from_onehot(oh, dtype=np.int32).dtype == np.int32

    t = to_onehot(torch.tensor([1, 0]), 2, dtype=torch.int64)
    assert t.dtype == torch.int64 and t.tolist() == [[0, 1], [1, 0]]
    assert from_onehot(t).tolist() == [1, 0]
    assert from_onehot(t.float(), dtype=torch.int32).dtype == torch.int32



def test_iterate_mb_idxs_in_order_covers_all() -> None:
    batches = list(iterate_mb_idxs(12, 4))
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_iterate_mb_idxs_drops_remainder_equal_sizes() -> None:
    batches = list(iterate_mb_idxs(10, 3))
    assert [len(b) for b in batches] == [3, 3, 3]
    assert np.concatenate(batches).tolist() == list(range(9))


def test_iterate_mb_idxs_shuffle_reproducible_with_generator() -> None:
    a = list(iterate_mb_idxs(12, 4, shuffle=True, generator=np.random.default_rng(3)))
    b = list(iterate_mb_idxs(12, 4, shuffle=True, generator=np.random.default_rng(3)))
    c = list(iterate_mb_idxs(12, 4, shuffle=True, generator=np.random.default_rng(4)))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert [x.tolist() for x in a] != [x.tolist() for x in c]
    assert sorted(np.concatenate(a).tolist()) == list(range(12))
    assert np.concatenate(a).tolist() != list(range(12))


@pytest.mark.parametrize("size", [0, 13, -1])
def test_iterate_mb_idxs_bad_size(size: int) -> None:
    with pytest.raises(ValueError, match=f"minibatch_size={size}"):
        list(iterate_mb_idxs(12, size))


def test_extract_sequences_wraps_around() -> None:
    # data[t, b] = 10 * t + b, with a trailing dim of size 2 holding (v, -v).
    v = 10 * np.arange(5)[:, None] + np.arange(2)[None, :]
    data = np.stack([v, -v], axis=-1)
    out = extract_sequences(data, T_idxs=np.array([3, 1]), B_idxs=np.array([1, 0]), T=4)
    assert out.shape == (4, 2, 2)
    # Sequence 0 starts at t=3 in env 1 and wraps: t = 3, 4, 0, 1.
    np.testing.assert_array_equal(out[:, 0, 0], [31, 41, 1, 11])
    np.testing.assert_array_equal(out[:, 1, 0], [10, 20, 30, 40])
    np.testing.assert_array_equal(out[..., 1], -out[..., 0])
    t_out = extract_sequences(torch.from_numpy(data), [3, 1], [1, 0], 4)
    assert torch.equal(t_out, torch.from_numpy(out))


def test_zeros_and_empty_pick_numpy_or_torch() -> None:
    z = zeros((2, 3), np.float32)
    assert isinstance(z, np.ndarray) and z.dtype == np.float32 and not z.any()
    zt = zeros((2,), torch.int64)
    assert isinstance(zt, torch.Tensor) and zt.dtype == torch.int64 and zt.sum().item() == 0
    assert isinstance(zeros(3), torch.Tensor)
    assert empty((4,), np.int8).shape == (4,)
    assert empty((4,), torch.float32).shape == (4,)
