"""Dotted keys in a config tree (a parsed YAML config), as the command line writes them.

On the command line ``--model.learning_rate`` is short for ``--model.init_args.learning_rate``:
under a value given by ``class_path`` the ``init_args`` level is left out. Grids
(``lightning-rl launch``) and tune spaces (``lightning-rl tune``) take keys in either form;
:func:`long_key` writes a key in the long form the tree has, :func:`set_dotted` sets it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

__all__ = ["dotted_keys", "long_key", "set_dotted"]

#: Keys a node given by ``class_path`` has itself; any other key lives under its ``init_args``.
_CLASS_NODE_KEYS = ("class_path", "init_args", "dict_kwargs", "__path__")


def long_key(tree: Any, key: str) -> str:
    """``key`` with ``init_args`` inserted below every node of ``tree`` that has a ``class_path``
    (``model.sampler.env_id`` -> ``model.init_args.sampler.init_args.env_id``); a key in the long form
    comes back as it is. A part that indexes a list stays a position (``trainer.callbacks.0``).

    Args:
        tree: The config (mappings and lists, as ``yaml.safe_load`` returns them).
        key: A dotted key.
    """
    node: Any = tree
    parts: list[str] = []
    for part in key.split("."):
        if isinstance(node, dict) and "class_path" in node and part not in _CLASS_NODE_KEYS and part not in node:
            parts.append("init_args")
            node = node.get("init_args")
        parts.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            node = None
    return ".".join(parts)


def set_dotted(tree: dict[str, Any], key: str, value: Any, create: bool = True) -> None:
    """Set ``tree[a][b][...] = value`` for ``key = "a.b..."`` in place, the key in either form
    (:func:`long_key`); a number part indexes a list (``trainer.callbacks.0.init_args.patience``).

    Args:
        tree: The config to change.
        key: A dotted key, short or long.
        value: What to set (copied).
        create: Make missing mappings on the way (False: every part must exist already).

    Raises:
        KeyError: If ``create`` is False and a part of ``key`` is not in ``tree``.
        ValueError: If a part of ``key`` lies under a value that is neither a mapping nor a list, or
            indexes a list out of range or by a name.
    """
    parts = long_key(tree, key).split(".")
    node: Any = tree
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the config"
        if isinstance(node, dict):
            if part not in node and not create:
                raise KeyError(key)
            if last:
                node[part] = copy.deepcopy(value)
            else:
                if node.get(part) is None:  # absent, or an empty YAML section (``init_args:``)
                    node[part] = {}
                node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ValueError(f"{key}: {where} is a list of {len(node)}; {part!r} is not a position in it")
            if last:
                node[int(part)] = copy.deepcopy(value)
            else:
                node = node[int(part)]
        else:
            raise ValueError(f"{key}: {where} is {node!r}, not a mapping, so it has no key {part!r}")


def dotted_keys(tree: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key of a config tree in the long form, inner nodes included (list items by index:
    ``trainer.callbacks.0``)."""
    items: Any = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        dotted = f"{prefix}{key}"
        yield dotted
        yield from dotted_keys(value, f"{dotted}.")
