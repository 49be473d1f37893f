"""Modules that moved, importable under their old names: code written against an earlier lightning_rl
(``from lightning_rl.algos.base import RLModule``), configs that name a class by its old module
(``class_path: lightning_rl.algos.ppo.PPO``) and checkpoints that record one keep working.

:data:`MOVED` maps each old module name to the module that holds its contents now; importing the old
name gives the new module itself (the same classes, so ``isinstance`` and class identity hold). The
finder is installed when ``lightning_rl`` is imported and imports nothing until an old name is used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "current_name", "install"]

#: Old module name -> the module that holds its contents now (0.3.0: the trainer core, the algorithm
#: families and their data paths).
MOVED: dict[str, str] = {}


def current_name(qualified: str) -> str:
    """``module.Class`` with an old module name (:data:`MOVED`) in today's form, so an algorithm
    recorded by an earlier version compares equal to the class today (other names as they are)."""
    module, _, name = qualified.rpartition(".")
    while module in MOVED:
        module = MOVED[module]
    return f"{module}.{name}" if module else qualified


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran already, under its own name."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
