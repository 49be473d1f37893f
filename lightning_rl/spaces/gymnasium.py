"""Conversion between gymnasium spaces (and their values) and lightning_rl spaces.

``Dict`` and ``Tuple`` spaces become :class:`Composite` spaces whose elements are
:class:`~lightning_rl.data.NamedTupleSchema` instances: no module-level class is needed, so they
pickle under the ``spawn`` start method and buffers built from them are namedarraytuples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces as gym_spaces

from lightning_rl.data.namedarraytuple import NamedTupleSchema
from lightning_rl.spaces.base import Space
from lightning_rl.spaces.composite import Composite, to_field_names
from lightning_rl.spaces.float_box import FloatBox
from lightning_rl.spaces.int_box import IntBox

__all__ = ["from_gymnasium", "from_gymnasium_value", "to_gymnasium_value"]


def _uniform_to_scalar(a: np.ndarray) -> int | np.ndarray:
    """An integer bound array as one Python int when all entries agree (image boxes), else int64."""
    a = np.asarray(a).astype(np.int64)
    if a.size and np.all(a == a.flat[0]):
        return int(a.flat[0])
    return a


def from_gymnasium(space: gym_spaces.Space, name: str = "obs", force_float32: bool = True) -> Space:
    """Build the lightning_rl space matching a gymnasium space.

    ============== ===============================================================
    gymnasium      lightning_rl
    ============== ===============================================================
    Box (float)    ``FloatBox`` (float32 if ``force_float32``, else the box dtype)
    Box (int/bool) ``IntBox(low, high + 1)`` with the box dtype (uint8 frames stay uint8)
    Discrete       ``IntBox(start, start + n)``
    MultiDiscrete  ``IntBox(start, start + nvec)``
    MultiBinary    ``IntBox(0, 2, shape, dtype=int8)``
    Dict / Tuple   ``Composite`` with fields named after the keys (``f0, f1, ...`` for a Tuple)
    ============== ===============================================================

    Args:
        space: The gymnasium space.
        name: Type name of the named tuples of a Dict/Tuple space (nested ones get
            ``<name>_<field>``).
        force_float32: Convert float boxes (of any float dtype) to float32.

    Returns:
        The lightning_rl space.

    Raises:
        ValueError: For spaces without a fixed-shape array form (Text, Graph, Sequence, OneOf...).
    """
    if isinstance(space, gym_spaces.Box):
        if np.issubdtype(space.dtype, np.floating):
            dtype = np.float32 if force_float32 else space.dtype
            return FloatBox(space.low, space.high, shape=space.shape, dtype=dtype)
        # int64 first: ``high + 1`` would wrap around in the box's own dtype (uint8 255 + 1 = 0).
        low, high = _uniform_to_scalar(space.low), _uniform_to_scalar(space.high)
        return IntBox(low, high + 1, shape=space.shape, dtype=space.dtype)
    if isinstance(space, gym_spaces.Discrete):
        start = int(space.start)
        return IntBox(start, start + int(space.n), dtype=space.dtype)
    if isinstance(space, gym_spaces.MultiDiscrete):
        # ``high`` stays an array, so ``n`` is the array of category counts (``nvec``).
        starts = np.asarray(space.start, dtype=np.int64)
        high = starts + space.nvec.astype(np.int64)
        return IntBox(_uniform_to_scalar(starts), high, shape=space.shape, dtype=space.dtype)
    if isinstance(space, gym_spaces.MultiBinary):
        return IntBox(0, 2, shape=space.shape, dtype=space.dtype)
    if isinstance(space, (gym_spaces.Dict, gym_spaces.Tuple)):
        is_dict = isinstance(space, gym_spaces.Dict)
        keys: list[Any]
        subs: list[gym_spaces.Space[Any]]
        if isinstance(space, gym_spaces.Dict):
            keys, subs = list(space.spaces.keys()), list(space.spaces.values())
        else:
            keys, subs = list(range(len(space.spaces))), list(space.spaces)
        fields = to_field_names(keys)
        converted = [from_gymnasium(s, f"{name}_{f}", force_float32) for s, f in zip(subs, fields, strict=True)]
        return Composite(converted, NamedTupleSchema(name, fields), keys=keys if is_dict else None)
    raise ValueError(
        f"from_gymnasium: unsupported space {space!r} ({type(space).__name__}); supported are Box, "
        "Discrete, MultiDiscrete, MultiBinary, Dict and Tuple"
    )


def from_gymnasium_value(space: Space, value: Any) -> Any:
    """Convert a gymnasium value (array, dict, tuple) to an element of ``space``.

    Dicts are read by the space's original keys and tuples by position, giving named tuples;
    arrays are cast to the space's dtype (float64 -> float32 under ``force_float32``).

    Args:
        space: A space built by :func:`from_gymnasium`.
        value: The gymnasium value (an observation, usually).
    """
    if isinstance(space, Composite):
        items = value if space.keys is None else [value[k] for k in space.keys]
        return space.NamedTupleCls(*(from_gymnasium_value(s, v) for s, v in zip(space.spaces, items, strict=False)))
    return np.asarray(value, dtype=space.dtype)


def to_gymnasium_value(space: Space, value: Any) -> Any:
    """Convert an element of ``space`` (e.g. an agent's action) to the gymnasium form.

    Named tuples become dicts with the original keys (or plain tuples), torch tensors become
    numpy arrays, scalar integer elements become Python ``int`` (as ``Discrete`` expects) and
    other arrays are cast to the space's dtype.

    Args:
        space: A space built by :func:`from_gymnasium`.
        value: The element, e.g. one env's action.
    """
    if isinstance(space, Composite):
        items = [to_gymnasium_value(s, v) for s, v in zip(space.spaces, value, strict=False)]
        return tuple(items) if space.keys is None else dict(zip(space.keys, items, strict=True))
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(space, IntBox) and not space.shape:
        return int(value)
    return np.asarray(value, dtype=space.dtype)
