"""Real-valued boxes: vector observations and continuous actions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lightning_rl.spaces.base import Box, box_shape

__all__ = ["FloatBox"]


class FloatBox(Box):
    """A box of reals ``low <= x <= high`` (rlpyt ``FloatBox``); bounds may be infinite.

    Args:
        low: Lower bound, scalar or array (``-np.inf`` for unbounded).
        high: Upper bound, scalar or array (``np.inf`` for unbounded).
        shape: Element shape; array bounds broadcast to it (``None``: the bounds' shape).
        dtype: Floating dtype of elements.
        null_value: Fill value for buffers; default 0 clipped into the bounds.

    Attributes:
        low: Lower bounds, an array of the element shape and dtype.
        high: Upper bounds, likewise.

    Examples:
        >>> FloatBox(-1.0, 1.0, shape=(3,)).shape
        (3,)
        >>> FloatBox(np.array([-1.0, -2.0]), np.array([2.0, 4.0])).high
        array([2., 4.], dtype=float32)
    """

    def __init__(
        self,
        low: float | Sequence[float] | np.ndarray,
        high: float | Sequence[float] | np.ndarray,
        shape: Sequence[int] | None = None,
        dtype: Any = np.float32,
        null_value: float | np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self._dtype = np.dtype(dtype)
        if not np.issubdtype(self._dtype, np.floating):
            raise ValueError(f"FloatBox: dtype must be a floating dtype, got dtype={self._dtype}")
        try:
            low_a = np.asarray(low, dtype=np.float64)
            high_a = np.asarray(high, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"FloatBox: low={low!r} and high={high!r} must be real numbers or arrays") from None
        if np.any(np.isnan(low_a)) or np.any(np.isnan(high_a)):
            raise ValueError(f"FloatBox: bounds must not be NaN, got low={low!r}, high={high!r}")
        self._shape = box_shape("FloatBox", shape, low_a, high_a)
        low_a = np.broadcast_to(low_a, self._shape)
        high_a = np.broadcast_to(high_a, self._shape)
        if np.any(low_a > high_a):
            raise ValueError(f"FloatBox: low must not exceed high, got low={low!r}, high={high!r}")
        self.low = low_a.astype(self._dtype)
        self.high = high_a.astype(self._dtype)
        null = np.clip(0.0, low_a, high_a) if null_value is None else np.asarray(null_value, dtype=np.float64)
        null = np.broadcast_to(null, self._shape).astype(self._dtype)
        if not self.contains(null):
            raise ValueError(f"FloatBox: null_value={null_value!r} is outside [{low!r}, {high!r}]")
        self._null = null
        # Masks for sample(): which dims are bounded on which side.
        self._below = np.isfinite(low_a)
        self._above = np.isfinite(high_a)

    @property
    def bounded(self) -> bool:
        """True if every dimension has finite bounds on both sides."""
        return bool(np.all(self._below) and np.all(self._above))

    def sample(self) -> np.ndarray | np.generic:
        """A random element: uniform where bounded on both sides, else normal (unbounded) or
        a bound plus/minus an exponential draw (bounded on one side)."""
        low = self.low.astype(np.float64)
        high = self.high.astype(np.float64)
        both = self._below & self._above
        x = self._rng.standard_normal(self._shape)
        x = np.where(both, self._rng.uniform(np.where(both, low, 0.0), np.where(both, high, 1.0)), x)
        only_low = self._below & ~self._above
        only_high = ~self._below & self._above
        if np.any(only_low) or np.any(only_high):
            e = self._rng.exponential(size=self._shape)
            x = np.where(only_low, np.where(only_low, low, 0.0) + e, x)
            x = np.where(only_high, np.where(only_high, high, 0.0) - e, x)
        # Clip after the cast: rounding to float32 can step just outside a bound.
        x = np.clip(x.astype(self._dtype), self.low, self.high)
        return x[()] if not self._shape else x

    def contains(self, x: Any) -> bool:
        """True if ``x`` has the element shape, a real dtype and lies within the bounds."""
        a = np.asarray(x)
        if a.shape != self._shape:
            return False
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            return False
        return bool(np.all(a >= self.low) and np.all(a <= self.high))
