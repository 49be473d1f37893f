"""What every replay index holds: the storage it draws start slots from and which slots are valid.

:class:`~lightning_rl.replays.uniform.UniformIndex` and
:class:`~lightning_rl.replays.prioritized.PrioritizedIndex` draw differently from the same slots
(see :mod:`lightning_rl.replays.uniform` for what a slot is).
"""

from __future__ import annotations

import numpy as np

from lightning_rl.replays.storage import ReplayStorage

__all__ = ["ReplayIndex"]


class ReplayIndex:
    """The slots an index draws from.

    Args:
        storage: The storage sampled from.
        min_age: Minimum age of a start row (``span - 1 + n_step_return``).
        interval: Start rows are multiples of this (1 for transitions; sequence replays: the
            RNN-state interval).
        exclude_truncated: Never draw a row whose own step was truncated (``truncated``), which has
            no stored next state (used by transition replays).
        rng: Random generator (shared with the replay that owns this index).
    """

    def __init__(
        self,
        storage: ReplayStorage,
        min_age: int,
        interval: int = 1,
        exclude_truncated: bool = False,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.storage = storage
        self.min_age = int(min_age)
        self.interval = int(interval)
        self.exclude_truncated = exclude_truncated and storage.truncated is not None
        self.rng = rng if rng is not None else np.random.default_rng()
