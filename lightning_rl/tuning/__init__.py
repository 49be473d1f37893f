"""Hyperparameter tuning with Optuna (``lightning-rl tune``, the ``tune`` extra).

:mod:`~lightning_rl.tuning.space` (search spaces over dotted config keys) and
:mod:`~lightning_rl.tuning.pruning` (the callback that reports evaluations to a trial) import
without Optuna; :mod:`~lightning_rl.tuning.cli` imports it when a study runs.
"""

from lightning_rl.tuning.pruning import PruningCallback
from lightning_rl.tuning.space import SearchSpace, apply_overrides, load_space, parse_space, set_dotted

__all__ = ["PruningCallback", "SearchSpace", "apply_overrides", "load_space", "parse_space", "set_dotted"]
