"""Array helpers of the replay modules: allocation (optionally in OS shared memory), flat
gathers, and a reader-writer lock for replays written by another process.

A replay built with ``shared=True`` keeps every array it mutates (samples, n-step targets,
cursor, sum tree) in OS shared memory, so a *forked* sampler process can call
``append_samples`` while the training process calls ``sample_batch``. The lock (rlpyt section
15.7) lets any number of readers in at once and a writer alone.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

from lightning_rl.data.buffers import np_mp_array

__all__ = ["RWLock", "allocate", "take"]

#: Seconds between calls of :attr:`RWLock.on_wait` while a caller waits for the lock.
LOCK_POLL_S = 0.2


def allocate(shape: Sequence[int] | int, dtype: Any, shared: bool = False) -> np.ndarray:
    """Zeroed array, in OS shared memory (seen by forked children) when ``shared``."""
    return np_mp_array(shape, dtype) if shared else np.zeros(shape, dtype=dtype)


def take(buf: Any, idx: np.ndarray) -> Any:
    """Entries ``idx`` (flat ``t * B + b``, any shape ``[*S]``) of a ``[T, B, ...]`` buffer -> ``[*S, ...]``.

    ``np.take`` on the ``[T * B, ...]`` view is several times faster than indexing with ``t``
    and ``b`` when rows are vectors or images.
    """
    if buf is None:
        return None
    if isinstance(buf, tuple):  # a namedarraytuple buffer
        return cast(Any, buf)._new(take(x, idx) for x in buf)
    return buf.reshape((-1,) + buf.shape[2:]).take(idx, axis=0)


class RWLock:
    """Many readers or one writer, across processes (built from ``multiprocessing`` primitives).

    The first reader in takes the writer lock for the whole group of readers and the last reader
    out gives it back, so a writer waits until no one reads and readers wait while one writes.
    A ``multiprocessing.Lock`` may be released by another process than the one that took it,
    which the reader group needs. Readers are preferred: with one trainer reading and one
    sampler writing, reads do not overlap enough to starve the writer.

    Attributes:
        on_wait: Called every ``LOCK_POLL_S`` seconds while this process waits for the lock; it
            raises to give up waiting (e.g. when the process on the other side died holding the
            lock). Set per process; None (the default) waits without limit.

    Examples:
        >>> lock = RWLock()
        >>> with lock.read():
        ...     pass
        >>> with lock.write():
        ...     pass
    """

    def __init__(self) -> None:
        self._write_lock = mp.Lock()
        self._count_lock = mp.Lock()
        self._readers = mp.RawValue("i", 0)
        self.on_wait: Callable[[], None] | None = None

    def _acquire(self, lock: Any) -> None:
        on_wait = self.on_wait
        if on_wait is None:
            lock.acquire()
            return
        while not lock.acquire(timeout=LOCK_POLL_S):
            on_wait()

    def acquire_read(self) -> None:
        """Enter as a reader (blocks while a writer holds the lock)."""
        self._acquire(self._count_lock)
        try:
            self._readers.value += 1
            if self._readers.value == 1:
                try:
                    self._acquire(self._write_lock)
                except BaseException:
                    self._readers.value -= 1
                    raise
        finally:
            self._count_lock.release()

    def release_read(self) -> None:
        """Leave as a reader; the last reader out lets writers in."""
        with self._count_lock:
            self._readers.value -= 1
            if self._readers.value == 0:
                self._write_lock.release()

    def acquire_write(self) -> None:
        """Enter as the only writer (blocks while anyone reads or writes)."""
        self._acquire(self._write_lock)

    def release_write(self) -> None:
        """Leave as the writer."""
        self._write_lock.release()

    @property
    def readers(self) -> int:
        """Number of readers inside now."""
        return self._readers.value

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        """Context manager holding the lock as a reader."""
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """Context manager holding the lock as the writer."""
        self.acquire_write()
        try:
            yield
        finally:
            self.release_write()
