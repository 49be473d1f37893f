"""Preallocated (nested) sample buffers, in ordinary or OS shared memory (rlpyt section 15.5).

A buffer is any structure of tuples, namedtuples, namedarraytuples (both forms), dicts and arrays. The
helpers here walk that structure, leave ``None`` leaves alone and return a matching structure.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from lightning_rl.data.namedarraytuple import (
    NamedArrayTupleSchema_like,
    NamedTuple,
    is_namedarraytuple,
    is_namedtuple,
    namedarraytuple_like,
)

__all__ = [
    "buffer_from_example",
    "buffer_func",
    "buffer_method",
    "buffer_nbytes",
    "buffer_to",
    "build_array",
    "get_leading_dims",
    "np_mp_array",
    "numpify_buffer",
    "torchify_buffer",
]


def _is_struct(x: Any) -> bool:
    return isinstance(x, tuple)


def _rebuild(like: Any, values: Sequence[Any]) -> Any:
    if isinstance(like, NamedTuple):
        return like._new(values)
    if hasattr(type(like), "_make"):
        return type(like)._make(values)
    return type(like)(values)


def buffer_func(buffer_: Any, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Apply ``func(leaf, *args, **kwargs)`` to every non-None leaf; return the same structure."""
    if buffer_ is None:
        return None
    if isinstance(buffer_, dict):
        return type(buffer_)((k, buffer_func(v, func, *args, **kwargs)) for k, v in buffer_.items())
    if _is_struct(buffer_):
        return _rebuild(buffer_, [buffer_func(b, func, *args, **kwargs) for b in buffer_])
    return func(buffer_, *args, **kwargs)


def buffer_method(buffer_: Any, method_name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``leaf.<method_name>(*args, **kwargs)`` on every non-None leaf (e.g. ``"fill_"``)."""
    return buffer_func(buffer_, lambda b: getattr(b, method_name)(*args, **kwargs))


def build_array(example: Any, leading_dims: int | Sequence[int], share_memory: bool = False) -> np.ndarray:
    """Allocate a zeroed numpy array shaped ``leading_dims + example.shape`` with its dtype.

    Args:
        example: Array-like (or scalar) giving trailing shape and dtype; a torch tensor's dtype maps
            to the matching numpy dtype.
        leading_dims: Extra leading dims, e.g. ``(T, B)``.
        share_memory: Allocate in OS shared memory (seen by forked worker processes).
    """
    if isinstance(leading_dims, int):
        leading_dims = (leading_dims,)
    if isinstance(example, torch.Tensor):
        example = example.detach().cpu().numpy()
    a = np.asarray(example)
    if a.dtype == np.float64 and not isinstance(example, (np.ndarray, np.generic)):
        # A Python float example means "a float field", which is float32 everywhere in torch.
        a = a.astype(np.float32)
    if a.dtype == object:
        raise TypeError(f"build_array: cannot allocate an array for an example of type {type(example).__name__}")
    shape = tuple(leading_dims) + a.shape
    if share_memory:
        return np_mp_array(shape, a.dtype)
    return np.zeros(shape, dtype=a.dtype)


def np_mp_array(shape: Sequence[int] | int, dtype: Any) -> np.ndarray:
    """Zeroed numpy array in OS shared memory (``multiprocessing.RawArray``).

    The memory is inherited by forked processes and freed when the last view is dropped, so
    nothing is left behind in ``/dev/shm``.
    """
    if isinstance(shape, int):
        shape = (shape,)
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = mp.RawArray("b", max(size, 1))
    arr = np.frombuffer(raw, dtype=np.uint8, count=size).view(dtype).reshape(shape)
    return arr


def buffer_from_example(
    example: Any,
    leading_dims: int | Sequence[int],
    share_memory: bool = False,
    use_NatSchema: bool | None = None,
) -> Any:
    """Allocate a zeroed buffer with the structure of ``example`` and extra ``leading_dims``.

    Args:
        example: One sample without leading dims: array, scalar, namedtuple or namedarraytuple
            (either form), nested; ``None`` fields stay ``None``.
        leading_dims: e.g. ``(T, B)``.
        share_memory: Allocate every array in OS shared memory.
        use_NatSchema: Return :class:`NamedArrayTuple` schema instances (True), classes (False),
            or whatever form ``example`` has (None).

    Returns:
        A namedarraytuple (for structured examples) or numpy array.
    """
    if example is None:
        return None
    if _is_struct(example):
        if not (is_namedtuple(example) or is_namedarraytuple(example)):
            raise TypeError("buffer_from_example: a structured example must be a namedtuple or namedarraytuple")
        if use_NatSchema is None:
            use_NatSchema = isinstance(example, NamedTuple)
        if use_NatSchema:
            buffer_type = NamedArrayTupleSchema_like(example)
        else:
            buffer_type = namedarraytuple_like(example)
        fields = [buffer_from_example(v, leading_dims, share_memory, use_NatSchema) for v in example]
        return buffer_type(*fields)
    return build_array(example, leading_dims, share_memory)


def torchify_buffer(buffer_: Any) -> Any:
    """Zero-copy view of every numpy leaf as a torch tensor (tensors are left alone)."""
    return buffer_func(buffer_, lambda b: b if isinstance(b, torch.Tensor) else torch.from_numpy(np.asarray(b)))


def numpify_buffer(buffer_: Any) -> Any:
    """Zero-copy view of every CPU torch leaf as a numpy array (arrays are left alone)."""

    def f(b: Any) -> Any:
        if isinstance(b, torch.Tensor):
            return b.detach().cpu().numpy() if b.device.type != "cpu" else b.detach().numpy()
        return b

    return buffer_func(buffer_, f)


def buffer_to(buffer_: Any, device: torch.device | str | None = None, non_blocking: bool = False) -> Any:
    """Move every tensor leaf (numpy leaves are converted first) to ``device``."""

    def f(b: Any) -> Any:
        t = b if isinstance(b, torch.Tensor) else torch.from_numpy(np.asarray(b))
        return t.to(device, non_blocking=non_blocking)

    return buffer_func(buffer_, f)


def get_leading_dims(buffer_: Any, n_dim: int = 1) -> tuple[int, ...]:
    """The first ``n_dim`` dims shared by every leaf; raises ``ValueError`` if leaves disagree."""
    dims: list[tuple[int, ...]] = []
    buffer_func(buffer_, lambda b: dims.append(tuple(b.shape[:n_dim])))
    if not dims:
        raise ValueError("get_leading_dims: buffer has no array leaves")
    if any(d != dims[0] for d in dims):
        raise ValueError(f"get_leading_dims: leaves disagree on their leading dims: {sorted(set(dims))}")
    return dims[0]


def buffer_nbytes(buffer_: Any) -> int:
    """Total bytes held by the buffer's array leaves."""
    total = [0]

    def f(b: Any) -> None:
        total[0] += b.nbytes if isinstance(b, np.ndarray) else b.element_size() * b.nelement()

    buffer_func(buffer_, f)
    return total[0]
