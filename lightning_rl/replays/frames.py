"""Frame-deduplicated storage: each stacked observation ``[C, H, W]`` costs one frame.

Consecutive observations of a frame-stacking env (Atari: ``C = 4`` frames of 84x84 uint8,
oldest first, newest last) share ``C - 1`` frames, so storing whole stacks wastes ``C``-fold
memory. This storage keeps only the newest frame of each step, ``frames[t + C - 1, b] =
observation[t, b, -1]``, in a ``[T + C - 1, B, H, W]`` array whose first ``C - 1`` rows hold the
frames before row 0: on the first append the older frames of the first observation, after every
wrap a copy of the last ``C - 1`` rows. The stack of row ``t`` is then ``frames[t : t + C, b]``
without wrapping. Frames from before an episode start (a ``done`` in rows ``t - j .. t - 1``
for the frame ``j`` steps old) are zeroed, as the env does when it resets its stack, and the
``C - 1`` oldest rows of a full ring, whose older frames were overwritten, are never replayed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lightning_rl.replays.shared import allocate, take
from lightning_rl.replays.storage import ReplayStorage

__all__ = ["FrameReplayStorage"]


class FrameReplayStorage(ReplayStorage):
    """:class:`ReplayStorage` holding stacked-frame observations one frame per step.

    Assumes the env's stack after a reset is ``C - 1`` zero frames and the first frame, and that
    each step shifts in one new frame.

    Args:
        example: One step of samples; ``observation`` is ``[C, ...]`` (e.g. uint8 ``[4, 84, 84]``).
        T: Rows in the ring.
        B: Envs per row.
        frame_stack: ``C``, the number of frames per observation.
        discount: ``γ`` for n-step returns.
        n_step_return: n-step window length.
        rnn_state_interval: Keep ``prev_rnn_state`` every this many rows (0: never).
        shared: Allocate in OS shared memory.

    Raises:
        ValueError: If ``frame_stack`` < 1 or does not match the observation's first dim.
    """

    def __init__(
        self,
        example: Any,
        T: int,
        B: int,
        frame_stack: int,
        discount: float = 0.99,
        n_step_return: int = 1,
        rnn_state_interval: int = 0,
        shared: bool = False,
    ) -> None:
        obs = getattr(example, "observation", None)
        if obs is None or isinstance(obs, tuple) or np.ndim(obs) < 1:
            raise ValueError("frame_stack: frame replay needs an array observation [C, ...] in the example")
        obs = np.asarray(obs)
        if frame_stack < 1 or obs.shape[0] != frame_stack:
            raise ValueError(
                f"frame_stack={frame_stack} must be >= 1 and equal the observation's first dim "
                f"(observation shape {obs.shape})"
            )
        self.frame_stack = int(frame_stack)
        super().__init__(example, T, B, discount, n_step_return, rnn_state_interval, shared)
        self.frames = allocate((T + frame_stack - 1, B) + obs.shape[1:], obs.dtype, shared)

    @staticmethod
    def _separate_fields() -> tuple[str, ...]:
        return ("prev_rnn_state", "observation")

    @property
    def off_forward(self) -> int:
        """Oldest rows of a full ring whose older frames (or previous row) are overwritten."""
        return max(1, self.frame_stack - 1)

    def _check_samples(self, samples: Any) -> None:
        super()._check_samples(samples)
        shape = tuple(np.shape(samples.observation))
        if shape[2:] != (self.frame_stack,) + self.frames.shape[2:]:
            raise ValueError(
                f"append_samples: observation must be [T_in, B, {self.frame_stack}, "
                f"{', '.join(map(str, self.frames.shape[2:]))}], got shape {shape}"
            )

    def _write_separate(self, samples: Any, c0: int, T_in: int, parts: list, before: int) -> None:
        super()._write_separate(samples, c0, T_in, parts, before)
        obs = np.asarray(samples.observation)
        fm1 = self.frame_stack - 1
        if before == 0 and fm1 > 0:
            self.frames[:fm1] = np.swapaxes(obs[0, :, :fm1], 0, 1)
        for dst, src in parts:
            self.frames[dst.start + fm1 : dst.stop + fm1] = obs[src, :, -1]
        if fm1 > 0 and c0 + T_in >= self.T:
            # The write reached the ring's end: rows 0 .. C-2 now follow the last C-1 rows.
            self.frames[:fm1] = self.frames[self.T : self.T + fm1]

    def observation(self, idx: np.ndarray) -> np.ndarray:
        """Stacks at flat indices ``idx = t * B + b`` (any shape ``[*S]``) -> ``[*S, C, ...]``."""
        shape = np.shape(idx)
        idx = np.asarray(idx).reshape(-1, 1)
        C, B = self.frame_stack, self.B
        # Ring row t's frame k (0 oldest) is frames row t + k: flat index idx + k * B.
        obs = take(self.frames, idx + np.arange(C) * B)  # [N, C, ...]
        if C > 1:
            # Column j-1 is done at row t-j; a done there or later ends the episode of frame j.
            d = take(self.buffers["done"], (idx - np.arange(1, C) * B) % (self.T * B))
            stale = np.logical_or.accumulate(d, axis=1)[:, ::-1]  # [N, C-1], oldest frame first
            if stale.any():
                obs[:, : C - 1][stale] = 0
        return obs.reshape(shape + obs.shape[1:])

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array the storage owns, frames included."""
        out = super().arrays()
        out["frames"] = self.frames
        return out
