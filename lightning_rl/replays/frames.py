"""Frame-deduplicated storage: each stacked observation ``[C, H, W]`` costs one frame.

Consecutive observations of a frame-stacking env (Atari: ``C = 4`` frames of 84x84 uint8,
oldest first, newest last) share ``C - 1`` frames, so storing whole stacks wastes ``C``-fold
memory. A :class:`FrameRing` keeps only the newest frame of each step, ``frames[t + C - 1, b] =
observation[t, b, -1]``, in a ``[T + C - 1, B, H, W]`` array whose first ``C - 1`` rows hold the
frames before the first stored step: on the first append the older frames of the first observation, after every
wrap a copy of the last ``C - 1`` rows. The stack of row ``t`` is then ``frames[t : t + C, b]``
without wrapping. Frames from before an episode start (a ``done`` in rows ``t - j .. t - 1``
for the frame ``j`` steps old) are zeroed, as the env does when it resets its stack, and the
``C - 1`` oldest rows of a full ring, whose older frames were overwritten, are never replayed.

:class:`FrameReplayStorage` holds an array observation in one ring (Atari);
:class:`CompositeFrameReplayStorage` holds a dict/tuple observation (a namedtuple of arrays)
with one ring per frame-stacked field and every other field stored as it is.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from lightning_rl.replays.shared import allocate, take
from lightning_rl.replays.storage import ReplayStorage

__all__ = ["CompositeFrameReplayStorage", "FrameReplayStorage", "FrameRing"]


class FrameRing:
    """The newest frame of each stacked observation of a ``[T, B]`` ring, and the stacks rebuilt.

    The reusable piece of frame storage: a storage owns one per frame-stacked observation (or
    observation field) and calls :meth:`write` from its append and :meth:`stacks` from its reads.

    Args:
        frame_stack: ``C``, frames per observation.
        frame_shape: Shape of one frame (``[H, W]``).
        dtype: Frame dtype.
        T: Rows of the storage's ring.
        B: Envs per row.
        shared: Allocate in OS shared memory.
    """

    def __init__(
        self, frame_stack: int, frame_shape: tuple[int, ...], dtype: Any, T: int, B: int, shared: bool = False
    ) -> None:
        self.frame_stack = int(frame_stack)
        self.T = int(T)
        self.B = int(B)
        #: ``[T + C - 1, B, *frame_shape]``: row ``t + C - 1`` holds the newest frame of ring row ``t``.
        self.frames = allocate((T + frame_stack - 1, B) + tuple(frame_shape), dtype, shared)

    def check(self, stacks: Any, name: str) -> None:
        """Raise ValueError unless ``stacks`` is ``[T_in, B, C, *frame_shape]`` (``name``: for the message)."""
        shape = tuple(np.shape(stacks))
        if shape[2:] != (self.frame_stack,) + self.frames.shape[2:]:
            raise ValueError(
                f"append_samples: {name} must be [T_in, B, {self.frame_stack}, "
                f"{', '.join(map(str, self.frames.shape[2:]))}], got shape {shape}"
            )

    def write(self, stacks: np.ndarray, c0: int, T_in: int, parts: list, before: int) -> None:
        """Store the newest frames of stacks ``[T_in, B, C, ...]`` written at ring rows ``c0 ..``.

        Args:
            stacks: The appended stacks.
            c0: First ring row written.
            T_in: Rows written.
            parts: ``(ring slice, samples slice)`` pairs, two when the write wraps.
            before: Rows written before this append (0: the first append, whose first stack
                brings the older frames of the first stored step).
        """
        fm1 = self.frame_stack - 1
        if before == 0 and fm1 > 0:
            self.frames[:fm1] = np.swapaxes(stacks[0, :, :fm1], 0, 1)
        for dst, src in parts:
            self.frames[dst.start + fm1 : dst.stop + fm1] = stacks[src, :, -1]
        if fm1 > 0 and c0 + T_in >= self.T:
            # The write reached the ring's end: rows 0 .. C-2 now follow the last C-1 rows.
            self.frames[:fm1] = self.frames[self.T : self.T + fm1]

    def stacks(self, idx: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Stacks at flat indices ``idx = t * B + b`` (any shape ``[*S]``) -> ``[*S, C, ...]``.

        Args:
            idx: Flat ring indices.
            done: The storage's ``done`` ring, bool ``[T, B]`` (zeroes frames of earlier episodes).
        """
        shape = np.shape(idx)
        idx = np.asarray(idx).reshape(-1, 1)
        C, B = self.frame_stack, self.B
        # Ring row t's frame k (0 oldest) is frames row t + k: flat index idx + k * B.
        obs = take(self.frames, idx + np.arange(C) * B)  # [N, C, ...]
        if C > 1:
            # Column j-1 is done at row t-j; a done there or later ends the episode of frame j.
            d = take(done, (idx - np.arange(1, C) * B) % (self.T * B))
            stale = np.logical_or.accumulate(d, axis=1)[:, ::-1]  # [N, C-1], oldest frame first
            if stale.any():
                obs[:, : C - 1][stale] = 0
        return obs.reshape(shape + obs.shape[1:])


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
        self.ring = FrameRing(frame_stack, obs.shape[1:], obs.dtype, T, B, shared)
        self.frames = self.ring.frames

    @staticmethod
    def _separate_fields() -> tuple[str, ...]:
        return ("prev_rnn_state", "observation")

    @property
    def off_forward(self) -> int:
        """Oldest rows of a full ring whose older frames (or previous row) are overwritten."""
        return max(1, self.frame_stack - 1)

    def _check_samples(self, samples: Any) -> None:
        super()._check_samples(samples)
        self.ring.check(samples.observation, "observation")

    def _write_separate(self, samples: Any, c0: int, T_in: int, parts: list, before: int) -> None:
        super()._write_separate(samples, c0, T_in, parts, before)
        self.ring.write(np.asarray(samples.observation), c0, T_in, parts, before)

    def observation(self, idx: np.ndarray) -> np.ndarray:
        """Stacks at flat indices ``idx = t * B + b`` (any shape ``[*S]``) -> ``[*S, C, ...]``."""
        return self.ring.stacks(idx, self.buffers["done"])

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array the storage owns, frames included."""
        out = super().arrays()
        out["frames"] = self.frames
        return out


class CompositeFrameReplayStorage(ReplayStorage):
    """:class:`ReplayStorage` of dict/tuple observations whose frame-stacked fields cost one frame.

    Each field named in ``frame_stacks`` (a ``[C, ...]`` stack, e.g. uint8 ``[4, 64, 64]``) is
    kept in its own :class:`FrameRing` with exactly :class:`FrameReplayStorage`'s semantics; every
    other field (vectors, single images, nested fields) is stored as it is. Replayed observations
    have the stored observations' structure, the stacks rebuilt in their fields.

    Which fields are stacks is read off their shape (uint8 ``[C, H, W]``), which a channels-first
    RGB image ``[3, H, W]`` shares, and the env's stack must start an episode with zero frames.
    So the first :attr:`CHECKED_APPENDS` appends rebuild the rows they wrote and warn, once per
    field, when a rebuilt stack differs from the appended one: replayed observations would then
    differ from the env's.

    Args:
        example: One step of samples; ``observation`` is a namedtuple/namedarraytuple (nested
            ones allowed).
        T: Rows in the ring.
        B: Envs per row.
        frame_stacks: ``C`` per frame-stacked field, keyed by its dotted path in the observation
            (``"pixels"``, or ``"camera.left"`` for a nested field).
        discount: ``γ`` for n-step returns.
        n_step_return: n-step window length.
        rnn_state_interval: Keep ``prev_rnn_state`` every this many rows (0: never).
        shared: Allocate in OS shared memory.

    Raises:
        ValueError: If the observation is no namedtuple, ``frame_stacks`` is empty, names no
            array field, or a ``C`` < 1 or other than the field's first dim.
    """

    #: Appends whose rows are rebuilt and compared with the appended stacks.
    CHECKED_APPENDS = 4

    def __init__(
        self,
        example: Any,
        T: int,
        B: int,
        frame_stacks: Mapping[str, int],
        discount: float = 0.99,
        n_step_return: int = 1,
        rnn_state_interval: int = 0,
        shared: bool = False,
    ) -> None:
        obs = getattr(example, "observation", None)
        if not isinstance(obs, tuple) or not hasattr(obs, "_fields"):
            raise ValueError("frame_stacks: per-field frame replay needs a namedtuple observation in the example")
        if not frame_stacks:
            raise ValueError("frame_stacks: name at least one frame-stacked field")
        fields = {}
        for path, C in frame_stacks.items():
            try:
                field = _leaf(obs, path)
            except AttributeError:
                field = None
            if field is None or isinstance(field, tuple) or np.ndim(field) < 1:
                raise ValueError(f"frame_stacks: {path!r} is no array field of the observation")
            if C < 1 or np.shape(field)[0] != C:
                raise ValueError(
                    f"frame_stacks: {path!r}={C} must be >= 1 and equal the field's first dim "
                    f"(shape {np.shape(field)})"
                )
            fields[path] = np.asarray(field)
        self.frame_stacks = {path: int(C) for path, C in frame_stacks.items()}
        # The observation buffer holds every other field; the stacked fields are None there.
        rest = obs
        for path in fields:
            rest = _replace_leaf(rest, path, None)
        super().__init__(example._replace(observation=rest), T, B, discount, n_step_return, rnn_state_interval, shared)
        self.rings = {
            path: FrameRing(self.frame_stacks[path], f.shape[1:], f.dtype, T, B, shared) for path, f in fields.items()
        }
        self._appends_checked = 0
        self._warned: set[str] = set()

    @property
    def off_forward(self) -> int:
        """Oldest rows of a full ring whose older frames (or previous row) are overwritten."""
        return max(1, max(self.frame_stacks.values()) - 1)

    def _check_samples(self, samples: Any) -> None:
        super()._check_samples(samples)
        for path, ring in self.rings.items():
            try:
                stacks = _leaf(samples.observation, path)
            except AttributeError:
                raise ValueError(f"append_samples: observation has no field {path!r}") from None
            ring.check(stacks, f"observation.{path}")

    def _write_separate(self, samples: Any, c0: int, T_in: int, parts: list, before: int) -> None:
        super()._write_separate(samples, c0, T_in, parts, before)
        for path, ring in self.rings.items():
            ring.write(np.asarray(_leaf(samples.observation, path)), c0, T_in, parts, before)

    def append(self, samples: Any) -> np.ndarray:
        rows = super().append(samples)
        if self._appends_checked < self.CHECKED_APPENDS:
            self._appends_checked += 1
            self._check_rebuilt(samples, rows)
        return rows

    def _check_rebuilt(self, samples: Any, rows: np.ndarray) -> None:
        """Warn for each field whose just-written rows do not rebuild to the appended stacks."""
        # Rows whose older frames this append has not overwritten again (it wrote past them).
        keep = min(len(rows), self.T - self.off_forward)
        idx = rows[-keep:, None] * self.B + np.arange(self.B)
        for path, ring in self.rings.items():
            appended = np.asarray(_leaf(samples.observation, path))[-keep:]
            if path not in self._warned and not np.array_equal(ring.stacks(idx, self.buffers["done"]), appended):
                self._warned.add(path)
                warnings.warn(
                    f"observation field {path!r} {appended.shape[2:]} is stored as a stack of "
                    f"{ring.frame_stack} frames, but its steps do not shift in one new frame each (or its "
                    "older frames are not zero after a reset): replayed observations differ from the env's",
                    stacklevel=2,
                )

    def observation(self, idx: np.ndarray) -> Any:
        """Observations at flat indices ``idx = t * B + b`` (any shape ``[*S]``), the stacked
        fields ``[*S, C, ...]``."""
        obs = take(self.buffers["observation"], idx)
        done = self.buffers["done"]
        for path, ring in self.rings.items():
            obs = _replace_leaf(obs, path, ring.stacks(idx, done))
        return obs

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array the storage owns, each field's frames as ``frames.<path>``."""
        out = super().arrays()
        for path, ring in self.rings.items():
            out[f"frames.{path}"] = ring.frames
        return out


def _leaf(obs: Any, path: str) -> Any:
    """Field ``path`` (dotted) of a nested namedtuple; AttributeError if absent."""
    for name in path.split("."):
        obs = getattr(obs, name)
    return obs


def _replace_leaf(obs: Any, path: str, value: Any) -> Any:
    """A copy of nested namedtuple ``obs`` with field ``path`` (dotted) set to ``value``."""
    head, _, rest = path.partition(".")
    return obs._replace(**{head: _replace_leaf(getattr(obs, head), rest, value) if rest else value})
