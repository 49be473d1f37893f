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

__all__ = ["Space"]


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
