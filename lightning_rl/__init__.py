"""lightning_rl: deep reinforcement learning on PyTorch Lightning.

``lightning_rl.from_config(path, overrides, **model_args)`` builds the module and trainer of a config in
one call (:func:`lightning_rl.lightning_cli.from_config`); ``lightning_rl.load_policy(path)`` loads a
trained agent from a run or a checkpoint without Lightning (:func:`lightning_rl.policy.load_policy`).
Both are imported on first use, so ``import lightning_rl`` (and ``lightning-rl --version``) import
neither torch nor Lightning.
"""

from __future__ import annotations

import importlib
from typing import Any

from lightning_rl import moved as _moved

__version__ = "0.3.0"

# Modules that moved stay importable under their old names (lightning_rl.moved).
_moved.install()

__all__ = ["__version__", "from_config", "load_policy"]

#: The names imported on first use, and the module of each.
_LAZY = {"from_config": "lightning_rl.lightning_cli", "load_policy": "lightning_rl.policy"}


def __getattr__(name: str) -> Any:
    # By name, not an import statement: the package's modules import ``lightning_rl`` (its version),
    # and the command-line layer sits above them.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
