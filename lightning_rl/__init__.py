"""lightning_rl: deep reinforcement learning on PyTorch Lightning.

``lightning_rl.from_config(path, overrides, **model_args)`` builds the module and trainer of a config in
one call (:func:`lightning_rl.lightning_cli.from_config`); it is imported on first use, so ``import
lightning_rl`` (and ``lightning-rl --version``) import neither torch nor Lightning.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

__all__ = ["__version__", "from_config"]


def __getattr__(name: str) -> Any:
    # By name, not an import statement: the package's modules import ``lightning_rl`` (its version),
    # and the command-line layer sits above them.
    if name == "from_config":
        return importlib.import_module("lightning_rl.lightning_cli").from_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
