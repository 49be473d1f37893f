"""Array and tensor helpers for ``[T, B, ...]`` data (rlpyt sections 15.1 to 15.3).

Every function takes numpy arrays or torch tensors and returns the same kind it was given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "empty",
    "extract_sequences",
    "from_onehot",
    "infer_leading_dims",
    "iterate_mb_idxs",
    "restore_leading_dims",
    "select_at_indexes",
    "to_onehot",
    "zeros",
]

Array = Any  # np.ndarray | torch.Tensor


def infer_leading_dims(tensor: Array, dim: int) -> tuple[int, int, int, tuple[int, ...]]:
    """Find the ``[]``, ``[B]`` or ``[T, B]`` leading dims of ``tensor`` with ``dim`` data dims.

    Call at the start of a model's ``forward``; finish with :func:`restore_leading_dims`.

    Args:
        tensor: Input with 0, 1 or 2 leading dims before ``dim`` data dims.
        dim: Number of data (trailing) dims.

    Returns:
        ``(lead_dim, T, B, shape)``: number of leading dims found, the time size (1 unless two),
        the batch size (1 if none) and the trailing data shape.

    Raises:
        ValueError: If the tensor has fewer than ``dim`` or more than ``dim + 2`` dims.
    """
    lead_dim = tensor.ndim - dim
    if lead_dim not in (0, 1, 2):
        raise ValueError(
            f"infer_leading_dims: input of shape {tuple(tensor.shape)} has {tensor.ndim} dims; "
            f"expected {dim} data dims plus 0, 1 or 2 leading dims ([], [B] or [T,B])"
        )
    T = B = 1
    shape = tuple(tensor.shape[lead_dim:])
    if lead_dim == 2:
        T, B = tensor.shape[:2]
    elif lead_dim == 1:
        B = tensor.shape[0]
    return lead_dim, int(T), int(B), shape


def restore_leading_dims(tensors: Array | Sequence[Array], lead_dim: int, T: int = 1, B: int = 1) -> Any:
    """Reshape outputs with a flat leading ``[T*B]`` dim back to ``[]``, ``[B]`` or ``[T, B]``.

    Args:
        tensors: One tensor or a tuple/list of them, each with leading dim ``T*B``.
        lead_dim: As returned by :func:`infer_leading_dims`.
        T: Time size.
        B: Batch size.

    Returns:
        The reshaped tensor(s), a tuple if a sequence came in.
    """
    is_seq = isinstance(tensors, (tuple, list))
    ts: Sequence[Any] = tensors if is_seq else (tensors,)
    if lead_dim == 2:
        out = tuple(t.reshape((T, B) + tuple(t.shape[1:])) for t in ts)
    elif lead_dim == 1:
        out = tuple(t.reshape((B,) + tuple(t.shape[1:])) for t in ts)
    elif lead_dim == 0:
        if any(t.shape[0] != 1 for t in ts):
            raise ValueError("restore_leading_dims: lead_dim=0 needs outputs with leading size 1")
        out = tuple(t[0] for t in ts)
    else:
        raise ValueError(f"restore_leading_dims: lead_dim must be 0, 1 or 2, got {lead_dim}")
    return out if is_seq else out[0]


def select_at_indexes(indexes: Array, tensor: Array) -> Array:
    """Pick ``tensor[..., indexes]`` elementwise over the leading dims.

    Args:
        indexes: Integer array with shape ``[*lead]``.
        tensor: Array with shape ``[*lead, A, ...]``.

    Returns:
        Shape ``[*lead, ...]``: ``out[i] = tensor[i, indexes[i]]``.
    """
    lead = tuple(indexes.shape)
    if tuple(tensor.shape[: len(lead)]) != lead:
        raise ValueError(
            f"select_at_indexes: leading dims of tensor {tuple(tensor.shape)} must equal indexes shape {lead}"
        )
    if isinstance(tensor, torch.Tensor):
        idx = indexes.long().reshape(lead + (1,) + (1,) * (tensor.ndim - len(lead) - 1))
        idx = idx.expand(lead + (1,) + tuple(tensor.shape[len(lead) + 1 :]))
        return tensor.gather(len(lead), idx).squeeze(len(lead))
    idx = np.asarray(indexes).astype(np.int64).reshape(lead + (1,) + (1,) * (tensor.ndim - len(lead) - 1))
    return np.take_along_axis(tensor, idx, axis=len(lead)).squeeze(len(lead))


def to_onehot(indexes: Array, num: int, dtype: Any = None) -> Array:
    """One-hot encode integer ``indexes`` into a new trailing dim of size ``num``."""
    if isinstance(indexes, torch.Tensor):
        out = torch.zeros(tuple(indexes.shape) + (num,), dtype=dtype or torch.float32, device=indexes.device)
        out.scatter_(-1, indexes.long().unsqueeze(-1), 1)
        return out
    indexes = np.asarray(indexes)
    out_np = np.zeros(indexes.shape + (num,), dtype=dtype or np.float32)
    np.put_along_axis(out_np, indexes.astype(np.int64)[..., None], 1, axis=-1)
    return out_np


def from_onehot(onehot: Array, dim: int = -1, dtype: Any = None) -> Array:
    """Argmax over ``dim`` (inverse of :func:`to_onehot`), optionally cast to ``dtype``."""
    if isinstance(onehot, torch.Tensor):
        out = torch.argmax(onehot, dim=dim)
        return out if dtype is None else out.to(dtype)
    out = np.argmax(onehot, axis=dim)
    return out if dtype is None else out.astype(dtype)


def iterate_mb_idxs(
    data_length: int, minibatch_size: int, shuffle: bool = False, generator: np.random.Generator | None = None
) -> Iterator[np.ndarray]:
    """Yield index arrays of ``minibatch_size`` covering ``range(data_length)``.

    A trailing remainder smaller than ``minibatch_size`` is dropped, so every minibatch has the
    same size (the rlpyt behaviour).

    Args:
        data_length: Number of items.
        minibatch_size: Items per minibatch (1 to ``data_length``).
        shuffle: Permute the items first.
        generator: Random generator used when shuffling (default: numpy's global state).
    """
    if minibatch_size < 1 or minibatch_size > data_length:
        raise ValueError(f"iterate_mb_idxs: minibatch_size={minibatch_size} must be in [1, {data_length}]")
    if shuffle:
        idxs = generator.permutation(data_length) if generator is not None else np.random.permutation(data_length)
    else:
        idxs = np.arange(data_length)
    for start in range(0, data_length - minibatch_size + 1, minibatch_size):
        yield idxs[start : start + minibatch_size]


def extract_sequences(array_or_tensor: Array, T_idxs: Array, B_idxs: Array, T: int) -> Array:
    """Cut sequences of length ``T`` from a ``[T_total, B, ...]`` ring buffer, wrapping in time.

    Args:
        array_or_tensor: Data with ``[T_total, B]`` leading dims.
        T_idxs: Start time index of each sequence, shape ``[N]``.
        B_idxs: Env index of each sequence, shape ``[N]``.
        T: Sequence length.

    Returns:
        Shape ``[T, N, ...]``: ``out[t, n] = data[(T_idxs[n] + t) % T_total, B_idxs[n]]``.
    """
    T_total = array_or_tensor.shape[0]
    if isinstance(array_or_tensor, torch.Tensor):
        t_idx = torch.as_tensor(T_idxs, device=array_or_tensor.device).long()
        b_idx = torch.as_tensor(B_idxs, device=array_or_tensor.device).long()
        t = (t_idx.unsqueeze(0) + torch.arange(T, device=t_idx.device).unsqueeze(1)) % T_total
        return array_or_tensor[t, b_idx.unsqueeze(0)]
    t_np = np.asarray(T_idxs, dtype=np.int64)
    b_np = np.asarray(B_idxs, dtype=np.int64)
    t_rows = (t_np[None, :] + np.arange(T)[:, None]) % T_total
    return array_or_tensor[t_rows, b_np[None, :]]


def zeros(shape: Sequence[int] | int, dtype: Any = None) -> Array:
    """Zeros as a numpy array if ``dtype`` is a numpy dtype, else a torch tensor."""
    if _is_numpy_dtype(dtype):
        return np.zeros(shape, dtype=dtype)
    return torch.zeros(shape, dtype=dtype)


def empty(shape: Sequence[int] | int, dtype: Any = None) -> Array:
    """Uninitialized array: numpy if ``dtype`` is a numpy dtype, else torch."""
    if _is_numpy_dtype(dtype):
        return np.empty(shape, dtype=dtype)
    return torch.empty(shape, dtype=dtype)


def _is_numpy_dtype(dtype: Any) -> bool:
    if dtype is None or isinstance(dtype, torch.dtype):
        return False
    try:
        np.dtype(dtype)
    except TypeError:
        return False
    return True


def non_finite_keys(tensors: Mapping[str, Any]) -> list[str]:
    """Names of the floating-point tensors in ``tensors`` that hold a NaN or an infinity."""
    return [
        k for k, v in tensors.items()
        if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())
    ]
