"""Hyperparameter tuning with Optuna (``lightning-rl tune``, the ``tune`` extra).

:mod:`~lightning_rl.tuning.space` (search spaces over dotted config keys) and
:mod:`~lightning_rl.tuning.pruning` (the callback that reports evaluations to a trial) import
without Optuna; :mod:`~lightning_rl.tuning.cli` imports it when a study runs.

Each name is imported on first use (``from lightning_rl.tuning import X`` works as before), so importing one
submodule does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_rl.lazy import lazy_attributes

if TYPE_CHECKING:
    from lightning_rl.tuning.pruning import PruningCallback
    from lightning_rl.tuning.space import SearchSpace, apply_overrides, load_space, parse_space, set_dotted

#: Each public name and the module that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "PruningCallback": "lightning_rl.tuning.pruning",
    "SearchSpace": "lightning_rl.tuning.space",
    "apply_overrides": "lightning_rl.tuning.space",
    "load_space": "lightning_rl.tuning.space",
    "parse_space": "lightning_rl.tuning.space",
    "set_dotted": "lightning_rl.tuning.space",
}

__all__ = [
    "PruningCallback", "SearchSpace", "apply_overrides", "load_space", "parse_space", "set_dotted",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
