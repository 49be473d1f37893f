"""Uniform replay index: every valid start slot equally likely.

A *slot* is a ring row ``t`` that may start a replayed window (a multiple of ``interval``: 1
for transitions, the RNN-state interval for sequences) and an env ``b``. A sampled slot is
named by its sample id ``absolute_row * B + b``, where ``absolute_row`` counts appended rows
from 0, so an id never names newer data written over the same slot. Valid start rows form
one contiguous range of ages (see :mod:`lightning_rl.replays.storage`), so a draw is one
integer per sample, not a search.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from lightning_rl.replays.index import ReplayIndex

__all__ = ["UniformIndex"]

_MAX_REDRAWS = 64


class UniformIndex(ReplayIndex):
    """Draws start slots uniformly at random among the valid ones (the arguments are
    :class:`~lightning_rl.replays.index.ReplayIndex`'s)."""

    prioritized: Literal[False] = False

    def _aligned_range(self) -> tuple[int, int]:
        # First start row (unwrapped) and number of interval-aligned rows in the valid age range.
        lo, hi = self.storage.age_bounds(self.min_age)
        m = hi - lo + 1
        if m <= 0:
            return 0, 0
        oldest = (self.storage.cursor - 1 - hi) % self.storage.T
        first = -(-oldest // self.interval) * self.interval
        count = -(-(oldest + m - first) // self.interval)
        return first, max(count, 0)

    def _draw(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        first, count = self._aligned_range()
        if count <= 0:
            raise RuntimeError(
                f"sample_batch: no valid samples yet ({self.storage.filled} rows stored; a start row "
                f"needs {self.min_age} newer rows)"
            )
        rows, b = np.divmod(self.rng.integers(0, count * self.storage.B, n), self.storage.B)
        return (first + rows * self.interval) % self.storage.T, b

    def sample(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``n`` start slots with replacement.

        Returns:
            ``(t, b, idxs, is_weights)``: rows, envs, sample ids (``absolute_row * B + b``,
            int64 ``[n]``) and weights (float32 ones ``[n]``).

        Raises:
            RuntimeError: If no slot is valid yet.
        """
        t, b = self._draw(n)
        if self.exclude_truncated:
            truncated = self.storage.truncated
            assert truncated is not None  # exclude_truncated is set only when the storage has a truncated field
            for _ in range(_MAX_REDRAWS):
                bad = np.flatnonzero(truncated[t, b])
                if bad.size == 0:
                    break
                t[bad], b[bad] = self._draw(bad.size)
            else:
                raise RuntimeError("sample_batch: nearly every stored step is a timeout; nothing valid to sample")
        return t, b, self.storage.absolute_rows(t) * self.storage.B + b, np.ones(n, dtype=np.float32)

    def on_append(self, rows: np.ndarray) -> None:
        """Nothing to update: validity follows from the cursor."""

    @property
    def nbytes(self) -> int:
        """Bytes held by the sampler (none)."""
        return 0

    def state_dict(self) -> dict[str, Any]:
        """Nothing to save (the replay saves the random generator)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to load."""
