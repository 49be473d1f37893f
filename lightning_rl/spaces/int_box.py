"""Integer boxes: discrete actions, multi-discrete actions and uint8 images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lightning_rl.spaces.base import Box, box_shape

__all__ = ["IntBox"]


def _int_bounds(name: str, value: Any) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype == bool:
        a = a.astype(np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        if not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise ValueError(f"IntBox: {name} must be integer valued, got {value!r}")
    return a.astype(np.int64)


def _scalar_or_full(a: np.ndarray, shape: tuple[int, ...]) -> int | np.ndarray:
    """A scalar bound as a Python int, an array bound as an int64 array of the element shape."""
    return int(a) if a.ndim == 0 else np.broadcast_to(a, shape).copy()


class IntBox(Box):
    """A box of integers ``low <= x < high`` (rlpyt ``IntBox``; ``high`` is exclusive).

    Args:
        low: Lower bound (inclusive), scalar or array.
        high: Upper bound (exclusive), scalar or array (e.g. a MultiDiscrete's ``nvec``).
        shape: Element shape; array bounds broadcast to it (empty: the bounds' shape).
        dtype: Integer (or bool) dtype of elements, e.g. ``np.uint8`` for frames; the bounds may
            exceed it by one (``high=256`` for uint8).
        null_value: Fill value for buffers; default 0 clipped into the bounds.

    Attributes:
        low: Lower bound, an ``int`` if given as a scalar, else an int64 array of the element shape.
        high: Upper bound (exclusive), the same way.

    Examples:
        >>> IntBox(0, 6).n
        6
        >>> IntBox(0, np.array([3, 5])).shape
        (2,)
    """

    def __init__(
        self,
        low: int | Sequence[int] | np.ndarray,
        high: int | Sequence[int] | np.ndarray,
        shape: Sequence[int] | None = (),
        dtype: Any = np.int64,
        null_value: int | np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self._dtype = np.dtype(dtype)
        if not (np.issubdtype(self._dtype, np.integer) or self._dtype == np.dtype(bool)):
            raise ValueError(f"IntBox: dtype must be an integer dtype, got dtype={self._dtype}")
        low_a, high_a = _int_bounds("low", low), _int_bounds("high", high)
        self._shape = box_shape("IntBox", shape, low_a, high_a)
        low_b, high_b = _scalar_or_full(low_a, self._shape), _scalar_or_full(high_a, self._shape)
        if np.any(np.asarray(high_b) <= np.asarray(low_b)):
            raise ValueError(f"IntBox: high must exceed low everywhere, got low={low!r}, high={high!r}")
        info = np.iinfo(self._dtype) if self._dtype != np.dtype(bool) else None
        lo, hi = (0, 1) if info is None else (info.min, info.max)
        if np.any(np.asarray(low_b) < lo) or np.any(np.asarray(high_b) - 1 > hi):
            raise ValueError(f"IntBox: bounds low={low!r}, high={high!r} do not fit dtype={self._dtype}")
        self.low = low_b
        self.high = high_b
        if null_value is None:
            null = np.clip(0, np.asarray(low_b), np.asarray(high_b) - 1)
        else:
            null = np.asarray(null_value)
        null = np.broadcast_to(null, self._shape).astype(self._dtype)
        if not self.contains(null):
            raise ValueError(f"IntBox: null_value={null_value!r} is outside [{low!r}, {high!r})")
        self._null = null

    @property
    def n(self) -> int | np.ndarray:
        """Number of values per dimension, ``high - low`` (an array for non-uniform bounds)."""
        return self.high - self.low

    def sample(self) -> np.ndarray | np.generic:
        """Uniform integers in ``[low, high)``; a numpy scalar for scalar spaces."""
        x = self._rng.integers(self.low, self.high, size=self._shape).astype(self._dtype)
        return x[()] if not self._shape else x

    def contains(self, x: Any) -> bool:
        """True if ``x`` has the element shape, an integer (or bool) dtype and lies in the bounds."""
        a = np.asarray(x)
        if a.shape != self._shape:
            return False
        if not (np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
            return False
        return bool(np.all(a >= self.low) and np.all(a < self.high))
