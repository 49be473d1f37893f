"""The space interface: what an env's observations and actions look like (rlpyt section 10).

Spaces describe the values crossing the env/agent boundary so that samplers can preallocate
buffers (``null_value()`` is the fill for "no value yet") and agents can size their models.
Every space owns a numpy ``Generator`` for :meth:`Space.sample`, seeded by :meth:`Space.seed`,
so sampling does not touch numpy's global random state.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

__all__ = ["Box", "Space"]


class Space(abc.ABC):
    """Base class of lightning_rl spaces."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng()

    @abc.abstractmethod
    def sample(self) -> Any:
        """Draw a uniformly random element of the space (from the space's own generator)."""

    @abc.abstractmethod
    def null_value(self) -> Any:
        """The value that fills buffers where no element exists (e.g. ``prev_action`` at a reset)."""

    @abc.abstractmethod
    def contains(self, x: Any) -> bool:
        """Whether ``x`` is an element of the space (right shape, dtype kind and bounds)."""

    @property
    @abc.abstractmethod
    def shape(self) -> Any:
        """Shape of one element (a tuple; a namedtuple of shapes for composite spaces)."""

    @property
    @abc.abstractmethod
    def dtype(self) -> Any:
        """numpy dtype of one element (a namedtuple of dtypes for composite spaces)."""

    def seed(self, seed: int | None = None) -> None:
        """Reseed the generator behind :meth:`sample` (``None``: fresh OS entropy)."""
        self._rng = np.random.default_rng(seed)

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)


class Box(Space):
    """What :class:`~lightning_rl.spaces.FloatBox` and :class:`~lightning_rl.spaces.IntBox` share:
    bounds ``low`` and ``high``, an element shape and dtype, a null value, equality and ``repr``.

    A subclass's ``__init__`` checks its arguments and sets ``low``, ``high``, ``_shape`` (see
    :func:`box_shape`), ``_dtype`` and ``_null`` (an array of the element shape and dtype).
    Two boxes are equal when their shapes, dtypes and bounds are; a ``FloatBox`` (floating dtype)
    never equals an ``IntBox`` (integer dtype).
    """

    low: Any
    high: Any
    _shape: tuple[int, ...]
    _dtype: np.dtype
    _null: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        """Element shape."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """Element dtype."""
        return self._dtype

    def null_value(self) -> np.ndarray | np.generic:
        """Fresh copy of the null value (a numpy scalar for scalar spaces)."""
        return self._null[()] if not self._shape else self._null.copy()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self._shape == other._shape
            and self._dtype == other._dtype
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable: __eq__ compares contents

    def __repr__(self) -> str:
        return f"{type(self).__name__}(low={self.low!r}, high={self.high!r}, shape={self._shape}, dtype={self._dtype})"


def box_shape(cls_name: str, shape: Any, low: np.ndarray, high: np.ndarray) -> tuple[int, ...]:
    """Shape of a box space: ``shape`` broadcast with the shapes of its bounds.

    Scalar bounds take ``shape``; array bounds give their own shape when ``shape`` is empty.

    Raises:
        ValueError: If the bounds do not broadcast to ``shape``.
    """
    requested = () if shape is None else (tuple(int(s) for s in shape) if np.ndim(shape) else (int(shape),))
    try:
        full = tuple(np.broadcast_shapes(requested, low.shape, high.shape))
    except ValueError:
        raise ValueError(
            f"{cls_name}: low (shape {low.shape}) and high (shape {high.shape}) do not broadcast to "
            f"shape={requested}"
        ) from None
    if requested and full != requested:
        raise ValueError(
            f"{cls_name}: low (shape {low.shape}) and high (shape {high.shape}) do not broadcast to "
            f"shape={requested}"
        )
    return full
