"""Brute-force reference for replay tests: a recorded stream of samples and plain-loop targets.

``Stream`` plays ``B`` envs with random episode ends and timeouts and hands out ``[T_in, B]``
sample batches while keeping the whole history by absolute step ``a`` (row ``a % T`` of the
ring). Every observation encodes its step, so a replayed sample can be traced back to ``a``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lightning_rl.data import namedarraytuple

Samples = namedarraytuple("Samples", ["observation", "action", "reward", "done", "truncated"])
SamplesPrev = namedarraytuple(
    "SamplesPrev", ["observation", "action", "reward", "done", "truncated", "prev_action", "prev_reward"]
)
SamplesRnn = namedarraytuple("SamplesRnn", ["observation", "action", "reward", "done", "truncated", "prev_rnn_state"])
RnnState = namedarraytuple("RnnState", ["h", "c"])


def frame_of(a: int, b: int) -> np.ndarray:
    """The unique, never-zero 2x2 uint8 frame of step ``a >= -8`` of env ``b``."""
    return np.array([[(a + 8) % 256, (a + 8) // 256], [b + 1, 255]], dtype=np.uint8)


class Stream:
    """``B`` envs stepping together; ``batch(T_in)`` returns the next ``[T_in, B]`` samples.

    Args:
        B: Envs.
        frame_stack: Observations are stacks of this many 2x2 frames (else float32 ``[a, b, 0]``).
        p_done: Chance that a step ends its episode.
        p_timeout: Chance that an ending is a timeout (truncation).
        prehistory: Steps each env took before the first recorded one (older frames of the
            first observation are then non-zero).
        kind: "plain", "prev" (adds prev_action/prev_reward) or "rnn" (adds prev_rnn_state).
        seed: Random seed.
    """

    def __init__(
        self,
        B: int,
        frame_stack: int | None = None,
        p_done: float = 0.1,
        p_timeout: float = 0.4,
        prehistory: int = 2,
        kind: str = "plain",
        seed: int = 0,
    ) -> None:
        self.B, self.C = B, frame_stack
        self.p_done, self.p_timeout = p_done, p_timeout
        self.kind = kind
        self.rng = np.random.default_rng(seed)
        self.obs, self.action, self.reward, self.done, self.truncated = [], [], [], [], []
        self.prev_action, self.prev_reward, self.rnn_h = [], [], []
        # Step index at which each env's current episode started (may be negative: prehistory).
        self.episode_start = np.full(B, -prehistory)

    @property
    def rows(self) -> int:
        """Steps recorded so far."""
        return len(self.done)

    def _observation(self, a: int, b: int) -> np.ndarray:
        if self.C is None:
            return np.array([a, b, 0], dtype=np.float32)
        stack = np.zeros((self.C, 2, 2), dtype=np.uint8)
        for k in range(self.C):
            src = a - (self.C - 1 - k)
            if src >= self.episode_start[b]:
                stack[k] = frame_of(src, b)
        return stack

    def _step(self) -> None:
        a = self.rows
        self.obs.append(np.stack([self._observation(a, b) for b in range(self.B)]))
        self.action.append(np.array([10 * a + b for b in range(self.B)], dtype=np.int64))
        self.reward.append(self.rng.normal(size=self.B).astype(np.float32))
        done = self.rng.random(self.B) < self.p_done
        truncated = done & (self.rng.random(self.B) < self.p_timeout)
        self.done.append(done)
        self.truncated.append(truncated)
        self.prev_action.append(self.rng.integers(0, 100, self.B))
        self.prev_reward.append(self.rng.normal(size=self.B).astype(np.float32))
        self.rnn_h.append(np.stack([np.full((1, 3), 1000 * a + b, dtype=np.float32) for b in range(self.B)]))
        self.episode_start[done] = a + 1

    def example(self) -> Any:
        """One step of the sample structure."""
        obs = np.zeros((3,), np.float32) if self.C is None else np.zeros((self.C, 2, 2), np.uint8)
        base = (obs, np.int64(0), np.float32(0), False, False)
        if self.kind == "prev":
            return SamplesPrev(*base, np.int64(0), np.float32(0))
        if self.kind == "rnn":
            h = np.zeros((1, 3), np.float32)
            return SamplesRnn(*base, RnnState(h, h))
        return Samples(*base)

    def batch(self, T_in: int) -> Any:
        """Play ``T_in`` more steps and return them as ``[T_in, B]`` samples."""
        a0 = self.rows
        for _ in range(T_in):
            self._step()
        sl = slice(a0, a0 + T_in)
        base = (
            np.stack(self.obs[sl]),
            np.stack(self.action[sl]),
            np.stack(self.reward[sl]),
            np.stack(self.done[sl]),
            np.stack(self.truncated[sl]),
        )
        if self.kind == "prev":
            return SamplesPrev(*base, np.stack(self.prev_action[sl]), np.stack(self.prev_reward[sl]))
        if self.kind == "rnn":
            h = np.stack(self.rnn_h[sl])
            return SamplesRnn(*base, RnnState(h, -h))
        return Samples(*base)

    # ----- brute-force references -----

    def absolute(self, t: int, T: int) -> int:
        """Absolute step now held in ring row ``t`` of a ``T``-row ring."""
        R = self.rows
        return R - 1 - ((R - 1 - t) % T)

    def n_step(self, a: int, b: int, n: int, discount: float) -> tuple[float, bool, bool, int]:
        """``(return_, done_n, truncated_n, n_steps)`` of step ``a`` by the definition in n_step.py."""
        ret = 0.0
        for j in range(n):
            if self.truncated[a + j][b]:
                return ret, False, True, j
            ret += discount**j * float(self.reward[a + j][b])
            if self.done[a + j][b]:
                return ret, True, False, n
        return ret, False, False, n

    def prev(self, a: int, b: int) -> tuple[int, float]:
        """The replay's prev_action and prev_reward of step ``a`` (zeros before step 0)."""
        if self.kind == "prev":
            return int(self.prev_action[a][b]), float(self.prev_reward[a][b])
        if a == 0:
            return 0, 0.0
        return int(self.action[a - 1][b]), float(self.reward[a - 1][b])

    def valid(self, a: int, b: int, T: int, n: int, off_forward: int, span: int = 1, interval: int = 1,
              exclude_truncated: bool = True) -> bool:
        """Whether step ``a`` of env ``b`` may start a replayed window in a ``T``-row ring."""
        R = self.rows
        full = R >= T
        oldest = R - T + off_forward if full else 0
        if a < oldest or a + span - 1 + n > R - 1 or a % interval:
            return False
        return not (exclude_truncated and self.truncated[a][b])

    def decode_frame(self, frame: np.ndarray) -> tuple[int, int]:
        """``(a, b)`` of a frame made by :func:`frame_of`."""
        return int(frame[0, 0]) + 256 * int(frame[0, 1]) - 8, int(frame[1, 0]) - 1


def chi_square(counts: np.ndarray, probs: np.ndarray) -> tuple[float, float]:
    """Pearson's statistic of ``counts`` against ``probs`` and a rejection threshold.

    The threshold ``df + 4 * sqrt(2 * df)`` lies past the 99.9th percentile of the chi-square
    distribution for the degrees of freedom used here (normal approximation, no scipy needed).
    """
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(probs, dtype=np.float64)
    stat = float(((counts - expected) ** 2 / expected).sum())
    df = len(counts) - 1
    return stat, df + 4 * np.sqrt(2 * df)
