"""A queue of trajectories in digideep's flat-dict format, kept in preallocated ring arrays.

Trajectory chunks arrive batch-major, as the Explorer returns them: ``{'/observations': [B, T,
...], '/masks': [B, T, 1], '/rewards': [B, T, 1], '/agents/<name>/actions': [B, T, ...], ...}``.
The queue keeps, per key, one ``[B, capacity, ...]`` array, allocated at the first chunk; each
chunk is written after the previous one along the time axis, wrapping around, so once the queue
is full the newest steps replace the oldest (digideep: "Memory is basically a queue").

Steps are addressed by their age order: logical time ``0`` is the oldest stored step, ``len - 1``
the newest. :meth:`MemoryQueue.physical` maps logical times to ring columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["MemoryQueue"]


def _to_numpy(key: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise ValueError(f"chunk[{key!r}] must be a numpy array or torch tensor, got {type(value).__name__}")


class MemoryQueue:
    """Ring storage of flat-dict trajectories ``{key: [B, T, ...]}`` along the time axis.

    Args:
        capacity: Time steps kept per env (the ring length); ``B * capacity`` transitions in all.

    Raises:
        ValueError: If ``capacity`` is below 1.

    Examples:
        >>> memory = MemoryQueue(capacity=4)
        >>> memory.store({"/rewards": np.ones((2, 3, 1), np.float32)})
        >>> memory.store({"/rewards": np.zeros((2, 3, 1), np.float32)})
        >>> len(memory), memory.size, memory.chronological("/rewards")[0, :, 0].tolist()
        (4, 8, [1.0, 0.0, 0.0, 0.0])
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.buffers: dict[str, np.ndarray] = {}
        self.batch_B = 0
        self.head = 0  # ring column the next step goes to
        self.length = 0  # stored steps per env, at most capacity
        self.total_steps = 0  # steps per env stored since the start (or clear)
        self.last_T = 0  # steps per env of the latest chunk

    def allocate(self, chunk: dict[str, Any]) -> None:
        """Allocate the ring arrays with the keys, batch size, dtypes and shapes of ``chunk``.

        Called by the first :meth:`store`; call it yourself to allocate before collecting.

        Raises:
            ValueError: If the queue is already allocated, or ``chunk`` is empty or has entries
                without ``[B, T]`` leading dims or with different ``B``.
        """
        if self.buffers:
            raise ValueError("allocate: the queue is already allocated; clear() it first")
        arrays = self._check_chunk(chunk, expect_keys=False)
        self.batch_B = next(iter(arrays.values())).shape[0]
        self.buffers = {
            key: np.zeros((self.batch_B, self.capacity) + array.shape[2:], dtype=array.dtype)
            for key, array in arrays.items()
        }

    def _check_chunk(self, chunk: dict[str, Any], expect_keys: bool) -> dict[str, np.ndarray]:
        if not isinstance(chunk, dict) or not chunk:
            raise ValueError(f"chunk must be a non-empty dict of [B, T, ...] arrays, got {chunk!r}")
        arrays = {key: _to_numpy(key, value) for key, value in chunk.items()}
        if expect_keys and set(arrays) != set(self.buffers):
            missing, extra = sorted(set(self.buffers) - set(arrays)), sorted(set(arrays) - set(self.buffers))
            raise ValueError(f"chunk keys differ from the stored ones: missing {missing}, unknown {extra}")
        lead = None
        for key, array in arrays.items():
            if array.ndim < 2:
                raise ValueError(f"chunk[{key!r}] has shape {array.shape}; needs leading dims [B, T]")
            if lead is None:
                lead = array.shape[:2]
            elif array.shape[:2] != lead:
                raise ValueError(f"chunk[{key!r}] has leading dims {array.shape[:2]}, other entries {lead}")
            if expect_keys:
                stored = self.buffers[key]
                if array.shape[0] != self.batch_B or array.shape[2:] != stored.shape[2:]:
                    raise ValueError(
                        f"chunk[{key!r}] has shape {array.shape}; the queue stores "
                        f"[B={self.batch_B}, T, {', '.join(map(str, stored.shape[2:]))}]"
                    )
        return arrays

    def store(self, chunk: dict[str, Any]) -> None:
        """Append a batch-major chunk ``{key: [B, T, ...]}``; the oldest steps go when it is full.

        Values are copied (cast to the stored dtypes), so the caller may reuse its buffers.

        Raises:
            ValueError: If the keys, ``B`` or trailing shapes differ from the first chunk's, or
                ``T`` exceeds ``capacity``.
        """
        if not self.buffers:
            self.allocate(chunk)
        arrays = self._check_chunk(chunk, expect_keys=True)
        T = next(iter(arrays.values())).shape[1]
        if T > self.capacity:
            raise ValueError(f"chunk has T={T} steps, more than capacity={self.capacity}")
        columns = (self.head + np.arange(T)) % self.capacity
        for key, array in arrays.items():
            self.buffers[key][:, columns] = array
        self.head = int((self.head + T) % self.capacity)
        self.length = min(self.length + T, self.capacity)
        self.total_steps += T
        self.last_T = T

    def clear(self) -> None:
        """Drop all data and the arrays (the next store allocates anew)."""
        self.buffers = {}
        self.batch_B = self.head = self.length = self.total_steps = self.last_T = 0

    def __len__(self) -> int:
        """Stored time steps per env."""
        return self.length

    @property
    def size(self) -> int:
        """Stored transitions: ``B * len(self)``."""
        return self.batch_B * self.length

    @property
    def full(self) -> bool:
        """Whether the next store overwrites the oldest steps."""
        return self.length == self.capacity

    def keys(self) -> list[str]:
        """The stored keys, in the order of the first chunk."""
        return list(self.buffers)

    def physical(self, t_idxs: np.ndarray | int) -> np.ndarray:
        """Ring columns of logical times (0 = oldest stored step).

        Raises:
            ValueError: If a time is outside ``[0, len)``.
        """
        t = np.asarray(t_idxs)
        if t.size and (t.min() < 0 or t.max() >= self.length):
            raise ValueError(f"t_idxs must be in [0, {self.length}) (stored steps), got {t.min()}..{t.max()}")
        oldest = (self.head - self.length) % self.capacity
        return (oldest + t) % self.capacity

    def gather(self, key: str, b_idxs: np.ndarray, t_idxs: np.ndarray) -> np.ndarray:
        """Entries of ``key`` at envs ``b_idxs`` and logical times ``t_idxs`` (broadcast together).

        Raises:
            ValueError: If ``key`` is not stored or an index is out of range.
        """
        if key not in self.buffers:
            raise ValueError(f"key {key!r} is not stored; keys: {self.keys()}")
        b = np.asarray(b_idxs)
        if b.size and (b.min() < 0 or b.max() >= self.batch_B):
            raise ValueError(f"b_idxs must be in [0, {self.batch_B}), got {b.min()}..{b.max()}")
        return self.buffers[key][b, self.physical(t_idxs)]

    def chronological(self, key: str) -> np.ndarray:
        """A copy of ``key`` as ``[B, len, ...]``, oldest step first."""
        return self.gather(key, np.arange(self.batch_B)[:, None], np.arange(self.length)[None, :])

    def state_dict(self) -> dict[str, Any]:
        """The arrays (in chronological order, trimmed to the stored steps) and counters."""
        return {
            "capacity": self.capacity,
            "total_steps": self.total_steps,
            "last_T": self.last_T,
            "data": {key: self.chronological(key) for key in self.buffers},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict` (a queue of another capacity keeps the newest steps).

        Raises:
            ValueError: If ``state`` lacks an entry.
        """
        missing = {"total_steps", "last_T", "data"} - set(state)
        if missing:
            raise ValueError(f"state is missing {sorted(missing)}")
        self.clear()
        data = {key: np.asarray(value) for key, value in state["data"].items()}
        if data:
            self.allocate(data)
            length = next(iter(data.values())).shape[1]
            keep = min(length, self.capacity)
            if keep:
                self.store({key: value[:, length - keep :] for key, value in data.items()})
        self.total_steps = int(state["total_steps"])
        self.last_T = min(int(state["last_T"]), self.length)
