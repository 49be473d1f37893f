"""Replay storage: a preallocated ``[T, B]`` ring of samples with n-step targets.

Samples arrive one sampler batch ``[T_in, B]`` at a time and are written at the cursor, which
wraps (rlpyt section 13). A row's age is how many rows ago it was written (the newest row has
age 0). A row ``t`` can start a replayed window of ``span`` rows (1 for transitions, ``T + n``
for sequences) plus the n-step targets of its rows only if all of them are written, so its age
must be at least ``span - 1 + n_step_return``; and its history (previous action and reward,
older frames) must not have been overwritten, so it must not be among the ``off_forward``
oldest rows of a full ring.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np

from lightning_rl.data.buffers import buffer_from_example
from lightning_rl.data.namedarraytuple import is_namedarraytuple, is_namedtuple
from lightning_rl.replays.n_step import compute_n_step_targets
from lightning_rl.replays.shared import allocate, take

__all__ = ["ReplayStorage"]

REQUIRED_FIELDS = ("observation", "action", "reward", "done")
OPTIONAL_FIELDS = ("truncated", "prev_action", "prev_reward", "prev_rnn_state", "priority")


class ReplayStorage:
    """``[T, B]`` ring of the example's fields, its cursor and the n-step targets of its rows.

    Fields of ``example`` (a namedtuple or namedarraytuple of one step, no leading dims):
    ``observation``, ``action``, ``reward`` (scalar), ``done`` (bool scalar); optionally
    ``truncated`` (bool: truncated by a time limit; a timeout implies ``done``), ``prev_action``
    and ``prev_reward`` (replayed as stored; otherwise taken from the previous row),
    ``prev_rnn_state`` (stored only at rows that are multiples of ``rnn_state_interval``) and
    ``priority`` (float scalar: the initial priority of a window starting at the row, used by
    prioritized replays instead of ``default_priority``; rlpyt's input priorities).
    Nested namedtuple observations and actions are stored field by field.

    Args:
        example: One step of samples.
        T: Rows in the ring.
        B: Envs per row (the sampler's batch_B).
        discount: ``γ`` for the n-step returns.
        n_step_return: n-step window length.
        rnn_state_interval: Keep ``prev_rnn_state`` every this many rows (0: do not keep it).
        shared: Allocate everything in OS shared memory (for a forked writer process).

    Raises:
        ValueError: On an example with missing, unknown or wrongly shaped fields.
    """

    def __init__(
        self,
        example: Any,
        T: int,
        B: int,
        discount: float = 0.99,
        n_step_return: int = 1,
        rnn_state_interval: int = 0,
        shared: bool = False,
    ) -> None:
        _check_example(example)
        if "prev_rnn_state" in example._fields and rnn_state_interval < 1:
            raise ValueError("example: field 'prev_rnn_state' is only kept by sequence replays (set sequence_T)")
        self.T = int(T)
        self.B = int(B)
        self.discount = float(discount)
        self.n_step_return = int(n_step_return)
        self.rnn_state_interval = int(rnn_state_interval)
        self.shared = shared
        self._example_fields = tuple(example._fields)
        self.fields = [f for f in example._fields if f not in self._separate_fields()]
        self.buffers = {f: buffer_from_example(getattr(example, f), (T, B), share_memory=shared) for f in self.fields}
        self.truncated = self.buffers.get("truncated")
        self.return_ = allocate((T, B), np.float32, shared)
        self.done_n = allocate((T, B), bool, shared)
        self.truncated_n = allocate((T, B), bool, shared)
        self.n_steps = allocate((T, B), np.uint8 if n_step_return < 256 else np.int32, shared)
        self.rnn_states = None
        if "prev_rnn_state" in example._fields:
            self.rnn_states = buffer_from_example(
                example.prev_rnn_state, (T // self.rnn_state_interval, B), share_memory=shared
            )
        # [cursor, rows written in total]; an array so that it can live in shared memory.
        self._counters = allocate(2, np.int64, shared)

    @staticmethod
    def _separate_fields() -> tuple[str, ...]:
        """Example fields kept outside the ``[T, B]`` buffers (written by :meth:`_write_separate`)."""
        return ("prev_rnn_state",)

    @property
    def off_forward(self) -> int:
        """Oldest rows of a full ring that cannot be replayed (their previous row is overwritten)."""
        return 1

    @property
    def cursor(self) -> int:
        """Next row to write."""
        return int(self._counters[0])

    @property
    def rows_written(self) -> int:
        """Rows appended since creation (not capped at ``T``)."""
        return int(self._counters[1])

    @property
    def filled(self) -> int:
        """Rows holding data (at most ``T``)."""
        return min(self.rows_written, self.T)

    def ages(self, rows: np.ndarray) -> np.ndarray:
        """How many rows ago each ring row was written (0: the newest)."""
        return (self.cursor - 1 - rows) % self.T

    def absolute_rows(self, rows: np.ndarray) -> np.ndarray:
        """Position in the stream of appended rows (0: the first ever) of the data in ring ``rows``."""
        return self.rows_written - 1 - self.ages(rows)

    def age_bounds(self, min_age: int) -> tuple[int, int]:
        """Inclusive ``(lo, hi)`` ages of rows that may start a replayed window (``hi < lo``: none)."""
        hi = self.filled - 1 - (self.off_forward if self.rows_written >= self.T else 0)
        return min_age, hi

    def append(self, samples: Any) -> np.ndarray:
        """Write ``[T_in, B]`` samples at the cursor and update n-step targets.

        Args:
            samples: namedtuple/namedarraytuple with (at least) the example's fields, each with
                leading dims ``[T_in, B]``.

        Returns:
            The ring rows written, int64 ``[T_in]``.

        Raises:
            ValueError: On a missing field, or leading dims other than ``[T_in, B]`` with
                ``1 <= T_in <= T``.
        """
        self._check_samples(samples)
        T_in = samples.done.shape[0]
        c0, before = self.cursor, self.rows_written
        if c0 + T_in <= self.T:
            parts = [(slice(c0, c0 + T_in), slice(0, T_in))]
        else:
            split = self.T - c0
            parts = [(slice(c0, self.T), slice(0, split)), (slice(0, T_in - split), slice(split, T_in))]
        for name in self.fields:
            value = _field(samples, name)
            for dst, src in parts:
                self.buffers[name][dst] = value[src]
        self._write_separate(samples, c0, T_in, parts, before)
        self._counters[0] = (c0 + T_in) % self.T
        self._counters[1] = before + T_in
        # Rows whose n-step window ends inside the new rows, excluding rows never written and
        # rows this append overwrote.
        n = self.n_step_return
        start = max(c0 - n + 1, c0 - before, c0 + T_in - self.T)
        stop = c0 + T_in - n
        if stop >= start:
            compute_n_step_targets(
                self.buffers["reward"],
                self.buffers["done"],
                self.truncated,
                np.arange(start, stop + 1) % self.T,
                n,
                self.discount,
                self.return_,
                self.done_n,
                self.truncated_n,
                self.n_steps,
            )
        return (c0 + np.arange(T_in)) % self.T

    def mark_boundary(self) -> None:
        """Set ``done`` (and ``truncated``, when stored) on the newest row of every env, and cut the
        n-step targets that reach past it.

        The target of row ``t`` is computed once its window's rows ``t .. t + n - 1`` are stored,
        and bootstraps from row ``t + n``. So the one computed target whose window ends at the
        newest row would bootstrap from the first row appended after the boundary (another
        episode): it is computed again, and stops at the boundary as at a time limit. The targets
        of the rows after it are computed once later rows arrive, and stop there too.
        """
        if self.rows_written == 0:
            return
        newest = (self.cursor - 1) % self.T
        self.buffers["done"][newest] = True
        if self.truncated is not None:
            self.truncated[newest] = True
        n = self.n_step_return
        if self.rows_written >= n:
            compute_n_step_targets(
                self.buffers["reward"], self.buffers["done"], self.truncated, np.array([(newest - n + 1) % self.T]), n,
                self.discount, self.return_, self.done_n, self.truncated_n, self.n_steps,
            )

    def _check_samples(self, samples: Any) -> None:
        """Raise ValueError before anything is written if ``samples`` cannot be appended."""
        for name in self.fields + list(self._separate_fields()):
            if name in self._example_fields:
                _field(samples, name)
        shape = tuple(np.shape(samples.done))
        if len(shape) != 2 or shape[1] != self.B or not 1 <= shape[0] <= self.T:
            raise ValueError(
                f"append_samples: samples.done must have leading dims [T_in, B={self.B}] with "
                f"1 <= T_in <= {self.T}, got shape {shape}"
            )

    def _write_separate(self, samples: Any, c0: int, T_in: int, parts: list, before: int) -> None:
        """Write the separate fields of rows ``c0 .. c0 + T_in - 1`` (``parts``: ring and sample
        slices; ``before``: rows written before this append)."""
        if self.rnn_states is None:
            return
        rows = c0 + np.arange(T_in)
        keep = rows % self.rnn_state_interval == 0
        if keep.any():
            slots = (rows[keep] % self.T) // self.rnn_state_interval
            self.rnn_states[slots] = _field(samples, "prev_rnn_state")[np.flatnonzero(keep)]

    def get(self, name: str, idx: np.ndarray) -> Any:
        """Field ``name`` of the samples at ``idx`` -> ``[*S, ...]`` (a copy)."""
        return take(self.buffers[name], idx)

    def observation(self, idx: np.ndarray) -> Any:
        """Observations at ``idx`` -> ``[*S, ...]``."""
        return take(self.buffers["observation"], idx)

    def prev_action_reward(self, idx: np.ndarray) -> tuple[Any, np.ndarray]:
        """The action and reward before ``idx``: stored fields if present, else the previous row's."""
        prev = (idx - self.B) % (self.T * self.B)  # row t - 1, wrapping
        buffers = self.buffers
        prev_action = take(buffers["prev_action"], idx) if "prev_action" in buffers else take(buffers["action"], prev)
        prev_reward = take(buffers["prev_reward"], idx) if "prev_reward" in buffers else take(buffers["reward"], prev)
        return prev_action, prev_reward

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array the storage owns, by a flat dotted name (views, not copies)."""
        out: dict[str, np.ndarray] = {}
        for name, buf in self.buffers.items():
            out.update(_leaves(buf, f"samples.{name}"))
        out.update(return_=self.return_, done_n=self.done_n, truncated_n=self.truncated_n, n_steps=self.n_steps)
        if self.rnn_states is not None:
            out.update(_leaves(self.rnn_states, "rnn_states"))
        out["counters"] = self._counters
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by all arrays."""
        return int(sum(a.nbytes for a in self.arrays().values()))

    def state_dict(self) -> dict[str, np.ndarray]:
        """The filled part of every array, and the cursor, as views of the live storage.

        Before the ring wraps only its first rows hold data, so a checkpoint of a replay that is
        mostly empty stays small: each array keeps its rows up to :attr:`filled` (the frames of a
        frame storage a few more, the RNN states one per ``rnn_state_interval`` rows).
        """
        rows = self.filled
        out = {}
        for key, array in self.arrays().items():
            if key == "counters" or rows >= self.T:
                out[key] = array
            elif key.startswith("rnn_states"):
                out[key] = array[: -(-rows // self.rnn_state_interval)]
            else:
                out[key] = array[: array.shape[0] - self.T + rows]
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy saved arrays (their filled rows; the rest is zeroed) and cursor in place (shared
        memory stays shared).

        Raises:
            ValueError: If an array is missing or its shape is not the filled part of this
                storage's array for the saved row count (another ``B``, field shape or size).
        """
        rows = min(int(np.asarray(state["counters"])[1]), self.T)
        for key, dst in self.arrays().items():
            if key not in state and _legacy_key(key) in state:
                key_in_state = _legacy_key(key)  # saved before ``timeout`` was renamed ``truncated``
            elif key not in state:
                raise ValueError(f"load_state_dict: missing storage array {key!r}")
            else:
                key_in_state = key
            src = np.asarray(state[key_in_state])
            if key == "counters" or rows >= self.T:
                n = len(dst)
            elif key.startswith("rnn_states"):
                n = -(-rows // self.rnn_state_interval)
            else:
                n = dst.shape[0] - self.T + rows
            if src.shape == dst.shape:
                n = len(dst)  # saved whole (lightning_rl 0.1 did)
            elif src.shape != (n, *dst.shape[1:]):
                raise ValueError(
                    f"load_state_dict: storage array {key!r} has shape {src.shape}, expected "
                    f"{(n, *dst.shape[1:])} ({rows} filled rows of {dst.shape})"
                )
            np.copyto(dst[:n], src)
            dst[n:] = 0


def _legacy_key(key: str) -> str:
    """A storage array's name as versions before the ``truncated`` rename wrote it."""
    legacy = {"truncated": "timeout", "truncated_n": "timeout_n"}
    return ".".join(legacy.get(part, part) for part in key.split("."))


def _leaves(buf: Any, prefix: str) -> Iterator[tuple[str, np.ndarray]]:
    if buf is None:
        return
    if isinstance(buf, tuple):
        for name, value in zip(cast(Any, buf)._fields, buf, strict=True):
            yield from _leaves(value, f"{prefix}.{name}")
    else:
        yield prefix, buf


def _field(samples: Any, name: str) -> Any:
    try:
        return getattr(samples, name)
    except AttributeError:
        raise ValueError(f"append_samples: samples have no field {name!r} (the example has it)") from None


def _check_example(example: Any) -> None:
    if not (is_namedtuple(example) or is_namedarraytuple(example)):
        raise ValueError(f"example must be a namedtuple or namedarraytuple of one step, got {type(example).__name__}")
    fields = tuple(example._fields)
    missing = [f for f in REQUIRED_FIELDS if f not in fields]
    if missing:
        raise ValueError(f"example: missing field(s) {missing}; required {list(REQUIRED_FIELDS)}")
    unknown = [f for f in fields if f not in REQUIRED_FIELDS + OPTIONAL_FIELDS]
    if unknown:
        raise ValueError(
            f"example: unknown field(s) {unknown}; a replay stores {list(REQUIRED_FIELDS + OPTIONAL_FIELDS)}"
        )
    for name in ("reward", "done", "truncated", "prev_reward", "priority"):
        if name in fields and np.ndim(getattr(example, name)) != 0:
            shape = np.shape(getattr(example, name))
            raise ValueError(f"example: field {name!r} must be a scalar per step, got shape {shape}")
