"""Names a package imports on first use (PEP 562), so that importing one submodule does not import
the others: ``from lightning_rl.envs import make_env`` works as ever, and ``lightning-rl --help``
answers without importing torch.

A package lists where each public name lives and takes its module ``__getattr__`` and ``__dir__``
from :func:`lazy_attributes`::

    _LAZY = {"make_env": "lightning_rl.envs.make", ...}
    __getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` for the names of ``where``.

    Args:
        package: The package's ``__name__`` (it is being imported, so ``sys.modules`` has it).
        where: Each public name and the module that defines it (a full import path).

    Returns:
        ``__getattr__`` imports a name's module on first use and keeps the value in the package's
        namespace (later look-ups skip it); an unknown name raises ``AttributeError`` as Python's
        own would. ``__dir__`` lists the package's namespace and every lazy name.
    """
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
