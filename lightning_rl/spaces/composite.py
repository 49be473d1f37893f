"""Composite spaces: named tuples of sub-spaces, for dict and tuple observations and actions."""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lightning_rl.spaces.base import Space

__all__ = ["Composite", "to_field_names"]

_RESERVED = ("get", "items")


def to_field_names(keys: Iterable[Any], reserved: Iterable[str] = ()) -> list[str]:
    """Turn arbitrary keys into distinct, valid namedtuple field names.

    Characters other than letters, digits and ``_`` become ``_`` and leading underscores are
    dropped (``"ale.lives"`` -> ``"ale_lives"``); names that are empty or start with a digit get an
    ``f`` prefix (``0`` -> ``"f0"``); keywords and reserved names get a ``_`` suffix; clashes get
    ``_1``, ``_2``, ... in order of appearance.

    Args:
        keys: Dict keys, tuple indexes or any objects with a ``str``.
        reserved: Extra names to avoid (beyond namedarraytuple's ``get`` and ``items``).

    Returns:
        One field name per key, in order.
    """
    avoid = set(_RESERVED) | set(reserved)
    names: list[str] = []
    for key in keys:
        name = re.sub(r"\W", "_", str(key), flags=re.ASCII).lstrip("_")
        if not name or name[0].isdigit():
            name = "f" + name
        if keyword.iskeyword(name) or name in avoid:
            name = name + "_"
        base, i = name, 0
        while name in names or name in avoid:
            i += 1
            name = f"{base}_{i}"
        names.append(name)
    return names


class Composite(Space):
    """A space whose elements are named tuples of elements of its sub-spaces (rlpyt ``Composite``).

    Args:
        spaces: Sub-spaces, in field order.
        NamedTupleCls: The namedtuple class (or ``NamedTupleSchema``) that organizes elements,
            with one field per sub-space.
        keys: Original keys of the gymnasium ``Dict`` this space mirrors, in field order
            (``None`` for a ``Tuple`` or a hand-built composite: values are positional).

    Raises:
        ValueError: If a sub-space is not a :class:`Space` or the field count differs.
    """

    def __init__(self, spaces: Sequence[Space], NamedTupleCls: Any, keys: Sequence[Any] | None = None) -> None:
        super().__init__()
        spaces = tuple(spaces)
        for s in spaces:
            if not isinstance(s, Space):
                raise ValueError(f"Composite: spaces must be lightning_rl Space objects, got {s!r}")
        fields = tuple(getattr(NamedTupleCls, "_fields", ()))
        if len(fields) != len(spaces):
            raise ValueError(
                f"Composite: NamedTupleCls has {len(fields)} fields {fields} but {len(spaces)} spaces were given"
            )
        if keys is not None and len(keys) != len(spaces):
            raise ValueError(f"Composite: keys={list(keys)} must give one key per sub-space ({len(spaces)})")
        self._spaces = spaces
        self._NamedTupleCls = NamedTupleCls
        self.keys = None if keys is None else tuple(keys)

    @property
    def spaces(self) -> tuple[Space, ...]:
        """The bare sub-spaces, in field order."""
        return self._spaces

    @property
    def names(self) -> tuple[str, ...]:
        """Field names of the sub-spaces."""
        return tuple(self._NamedTupleCls._fields)

    @property
    def NamedTupleCls(self) -> Any:
        """The namedtuple class (or schema) of elements."""
        return self._NamedTupleCls

    @property
    def shape(self) -> Any:
        """Named tuple of the sub-spaces' shapes."""
        return self._NamedTupleCls(*(s.shape for s in self._spaces))

    @property
    def dtype(self) -> Any:
        """Named tuple of the sub-spaces' dtypes."""
        return self._NamedTupleCls(*(s.dtype for s in self._spaces))

    def sample(self) -> Any:
        """Named tuple of samples of every sub-space."""
        return self._NamedTupleCls(*(s.sample() for s in self._spaces))

    def null_value(self) -> Any:
        """Named tuple of null values of every sub-space."""
        return self._NamedTupleCls(*(s.null_value() for s in self._spaces))

    def contains(self, x: Any) -> bool:
        """True if ``x`` is a tuple with one element of each sub-space, in order."""
        if not isinstance(x, tuple) or len(x) != len(self._spaces):
            return False
        return all(s.contains(v) for s, v in zip(self._spaces, x, strict=True))

    def seed(self, seed: int | None = None) -> None:
        """Seed every sub-space with its own stream derived from ``seed``."""
        children = np.random.SeedSequence(seed).spawn(len(self._spaces))
        for s, child in zip(self._spaces, children, strict=True):
            s.seed(int(child.generate_state(1)[0]))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Composite)
            and self.names == other.names
            and self.keys == other.keys
            and self._spaces == other._spaces
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable: __eq__ compares contents

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={s!r}" for n, s in zip(self.names, self._spaces, strict=True))
        return f"Composite({body})"
