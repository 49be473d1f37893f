"""Samplers over a :class:`MemoryQueue`, made of small units run one after another.

digideep splits a memory sampler into units that each do one thing, so a method picks its
sampler as a list instead of writing it again. Every unit takes a :class:`Sample` and returns it
(changed or not); :class:`MemorySampler` runs a list of them on a memory::

    sampler = MemorySampler([
        RandomBatch(batch_size=64, span=2),   # 64 random (env, time) starts, room for 2 steps
        Gather(["/observations", "/agents/a/actions", "/rewards", "/masks"]),
        NextObservations(),                   # '/next_observations' at time + 1
        CheckNaN(),                           # debug units: raise on NaN/inf ...
        PrintStats(),                         # ... print mean/std/min/max per key
        ToTensor(),
    ])
    batch = sampler(memory).data              # {'/observations': [64, ...], ...}

Index units set ``b_idxs`` (envs, ``[N]``) and ``t_idxs`` (logical times, 0 = oldest stored
step: ``[N]`` for single steps, ``[N, L]`` for sequences); :class:`Gather` reads the stored
entries at those indices into ``data``; the other units post-process or check ``data``. Any
function ``Sample -> Sample`` can be a unit as well.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import torch

from lightning_rl.memory.storage import MemoryQueue

__all__ = [
    "CheckNaN",
    "CheckShapes",
    "FlattenTime",
    "Gather",
    "LastChunk",
    "MemorySampler",
    "NextObservations",
    "PrintStats",
    "RandomBatch",
    "Sample",
    "Sequences",
    "ToTensor",
    "Unit",
]


@dataclass
class Sample:
    """What flows through the units.

    Attributes:
        memory: The queue being sampled.
        b_idxs: Env indices ``[N]`` (int64), set by an index unit.
        t_idxs: Logical times ``[N]`` or ``[N, L]`` (0 = oldest stored step).
        data: The gathered entries, flat keys as in the memory (``[N, ...]`` or ``[N, L, ...]``).
        info: Anything units want to pass on (e.g. :class:`PrintStats` puts its numbers here).
    """

    memory: MemoryQueue
    b_idxs: np.ndarray | None = None
    t_idxs: np.ndarray | None = None
    data: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def indices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(b_idxs, t_idxs)`` with ``b_idxs`` shaped to broadcast against ``t_idxs``.

        Raises:
            ValueError: If no index unit ran before.
        """
        if self.b_idxs is None or self.t_idxs is None:
            raise ValueError("no indices yet: put an index unit (RandomBatch, LastChunk) first")
        return self.b_idxs.reshape((-1,) + (1,) * (self.t_idxs.ndim - 1)), self.t_idxs


Unit = Callable[[Sample], Sample]


class MemorySampler:
    """Runs its units, in order, on a fresh :class:`Sample` of a memory.

    Args:
        units: The pipeline; each a callable ``Sample -> Sample``.

    Raises:
        ValueError: If a unit is not callable.
    """

    def __init__(self, units: Sequence[Unit]) -> None:
        for i, unit in enumerate(units):
            if not callable(unit):
                raise ValueError(f"units[{i}] must be callable (Sample -> Sample), got {type(unit).__name__}")
        self.units = list(units)

    def __call__(self, memory: MemoryQueue) -> Sample:
        sample = Sample(memory)
        for unit in self.units:
            sample = unit(sample)
        return sample

    def __repr__(self) -> str:
        return f"{type(self).__name__}([{', '.join(repr(u) for u in self.units)}])"




class RandomBatch:
    """``batch_size`` (env, start time) pairs, uniform with replacement.

    Args:
        batch_size: Number of samples N.
        span: Steps each sample needs from its start (``L`` for sequences of length L, one more
            for next observations): starts lie in ``[0, len - span]``.
        generator: Random source (default: a fresh ``np.random.default_rng()``).

    Raises:
        ValueError: On ``batch_size`` or ``span`` below 1; when called, if the memory holds fewer
            than ``span`` steps.
    """

    def __init__(self, batch_size: int, span: int = 1, generator: np.random.Generator | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if span < 1:
            raise ValueError(f"span must be >= 1, got {span}")
        self.batch_size = batch_size
        self.span = span
        self.generator = generator if generator is not None else np.random.default_rng()

    def __call__(self, sample: Sample) -> Sample:
        memory = sample.memory
        starts = len(memory) - self.span + 1
        if starts < 1:
            raise ValueError(f"RandomBatch: span={self.span} needs that many stored steps, memory has {len(memory)}")
        sample.b_idxs = self.generator.integers(0, memory.batch_B, size=self.batch_size)
        sample.t_idxs = self.generator.integers(0, starts, size=self.batch_size)
        return sample

    def __repr__(self) -> str:
        return f"RandomBatch(batch_size={self.batch_size}, span={self.span})"


class LastChunk:
    """All envs over the steps of the latest stored chunk: ``b_idxs [B]``, ``t_idxs [B, T]``.

    Gathering then gives the chunk back as ``[B, T, ...]`` (on-policy use).

    Raises:
        ValueError: When called on an empty memory.
    """

    def __call__(self, sample: Sample) -> Sample:
        memory = sample.memory
        if memory.last_T < 1:
            raise ValueError("LastChunk: the memory holds no chunk yet")
        sample.b_idxs = np.arange(memory.batch_B)
        times = np.arange(len(memory) - memory.last_T, len(memory))
        sample.t_idxs = np.broadcast_to(times, (memory.batch_B, memory.last_T)).copy()
        return sample

    def __repr__(self) -> str:
        return "LastChunk()"


class Sequences:
    """Turn start times ``[N]`` into sequences ``[N, length]`` of consecutive times.

    Args:
        length: Steps per sequence L (the index unit's ``span`` must be at least this).

    Raises:
        ValueError: On ``length`` below 1; when called, if indices are missing or not ``[N]``.
    """

    def __init__(self, length: int) -> None:
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        self.length = length

    def __call__(self, sample: Sample) -> Sample:
        if sample.t_idxs is None or sample.t_idxs.ndim != 1:
            shape = None if sample.t_idxs is None else sample.t_idxs.shape
            raise ValueError(f"Sequences: needs start times t_idxs of shape [N], got {shape}")
        sample.t_idxs = sample.t_idxs[:, None] + np.arange(self.length)[None, :]
        return sample

    def __repr__(self) -> str:
        return f"Sequences(length={self.length})"




class Gather:
    """Read the stored entries at the sample's indices into ``data``.

    Args:
        keys: Keys, or prefixes ending in ``/`` (``"/agents/a/"`` takes all of agent ``a``'s
            entries); None: every stored key.

    Raises:
        ValueError: When called, if a key matches nothing stored.
    """

    def __init__(self, keys: Sequence[str] | None = None) -> None:
        self.keys = None if keys is None else list(keys)

    def _selected(self, memory: MemoryQueue) -> list[str]:
        if self.keys is None:
            return memory.keys()
        selected: list[str] = []
        for key in self.keys:
            matches = [k for k in memory.keys() if k == key or (key.endswith("/") and k.startswith(key))]
            if not matches:
                raise ValueError(f"Gather: {key!r} matches no stored key; keys: {memory.keys()}")
            selected.extend(m for m in matches if m not in selected)
        return selected

    def __call__(self, sample: Sample) -> Sample:
        b_idxs, t_idxs = sample.indices()
        for key in self._selected(sample.memory):
            sample.data[key] = sample.memory.gather(key, b_idxs, t_idxs)
        return sample

    def __repr__(self) -> str:
        return f"Gather(keys={self.keys})"


class NextObservations:
    """Add the entry of ``key`` one step later as ``out_key`` (give the index unit ``span + 1``).

    Args:
        key: Stored key to shift.
        out_key: Where to put it.

    Raises:
        ValueError: When called, if a next step is not stored yet.
    """

    def __init__(self, key: str = "/observations", out_key: str = "/next_observations") -> None:
        self.key = key
        self.out_key = out_key

    def __call__(self, sample: Sample) -> Sample:
        b_idxs, t_idxs = sample.indices()
        if t_idxs.size and t_idxs.max() + 1 >= len(sample.memory):
            raise ValueError(
                f"NextObservations: time {int(t_idxs.max())} is the newest stored step and has no next one; "
                "give the index unit one more step of span"
            )
        sample.data[self.out_key] = sample.memory.gather(self.key, b_idxs, t_idxs + 1)
        return sample

    def __repr__(self) -> str:
        return f"NextObservations(key={self.key!r}, out_key={self.out_key!r})"


class FlattenTime:
    """Merge the sample and time dims of sequences: ``[N, L, ...]`` to ``[N * L, ...]``.

    Indices are flattened alike (``b_idxs`` repeated per step), so they still match ``data``.
    """

    def __call__(self, sample: Sample) -> Sample:
        b_idxs, t_idxs = sample.indices()
        if t_idxs.ndim != 2:
            return sample
        n, length = t_idxs.shape
        sample.data = {key: value.reshape((n * length,) + tuple(value.shape[2:])) for key, value in sample.data.items()}
        sample.b_idxs = np.broadcast_to(b_idxs, (n, length)).reshape(-1)
        sample.t_idxs = t_idxs.reshape(-1)
        return sample

    def __repr__(self) -> str:
        return "FlattenTime()"


class ToTensor:
    """Turn ``data`` into torch tensors (without a copy where numpy allows) on ``device``."""

    def __init__(self, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)

    def __call__(self, sample: Sample) -> Sample:
        sample.data = {key: torch.as_tensor(value, device=self.device) for key, value in sample.data.items()}
        return sample

    def __repr__(self) -> str:
        return f"ToTensor(device={str(self.device)!r})"




def _selected_data(sample: Sample, keys: Sequence[str] | None) -> dict[str, Any]:
    if keys is None:
        return sample.data
    missing = [k for k in keys if k not in sample.data]
    if missing:
        raise ValueError(f"keys {missing} are not in the sample; it has {sorted(sample.data)}")
    return {k: sample.data[k] for k in keys}


def _numpy(value: Any) -> np.ndarray:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


class CheckShapes:
    """Check that all entries share their leading dims and, optionally, their trailing shapes.

    Args:
        expected: ``{key: trailing shape}`` after the leading dims, ``None`` for any size in a
            dim, e.g. ``{"/rewards": [1], "/observations": [None]}``.
        verbose: Print every entry's shape.
        stream: Where to print (default: stdout).

    Raises:
        ValueError: When called, on a mismatch or an expected key that is missing.
    """

    def __init__(
        self,
        expected: dict[str, Sequence[int | None]] | None = None,
        verbose: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.expected = {k: list(v) for k, v in (expected or {}).items()}
        self.verbose = verbose
        self.stream = stream

    def __call__(self, sample: Sample) -> Sample:
        lead = sample.t_idxs.shape if sample.t_idxs is not None else None
        for key, value in sample.data.items():
            shape = tuple(_numpy(value).shape)
            if lead is None:
                lead = shape[:1]
            if shape[: len(lead)] != tuple(lead):
                raise ValueError(f"CheckShapes: {key!r} has shape {shape}, leading dims should be {tuple(lead)}")
            if self.verbose:
                print(f"[CheckShapes] {key}: {shape} {_numpy(value).dtype}", file=self.stream or sys.stdout)
        for key, trailing in self.expected.items():
            if key not in sample.data:
                raise ValueError(
                    f"CheckShapes: expected key {key!r} is not in the sample; it has {sorted(sample.data)}"
                )
            shape = tuple(_numpy(sample.data[key]).shape)[len(lead or ()) :]
            if len(shape) != len(trailing) or any(
                e is not None and e != s for e, s in zip(trailing, shape, strict=True)
            ):
                raise ValueError(f"CheckShapes: {key!r} has trailing shape {shape}, expected {tuple(trailing)}")
        return sample

    def __repr__(self) -> str:
        return f"CheckShapes(expected={self.expected})"


class CheckNaN:
    """Raise if an entry holds NaN or infinity (integer and bool entries cannot).

    Args:
        keys: Entries to check; None: all.

    Raises:
        ValueError: When called, naming the key and the first bad index.
    """

    def __init__(self, keys: Sequence[str] | None = None) -> None:
        self.keys = None if keys is None else list(keys)

    def __call__(self, sample: Sample) -> Sample:
        for key, value in _selected_data(sample, self.keys).items():
            array = _numpy(value)
            if not np.issubdtype(array.dtype, np.inexact):
                continue
            bad = ~np.isfinite(array)
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(
                    f"CheckNaN: {key!r} has {int(bad.sum())} non-finite value(s), first at {index}: {array[index]}"
                )
        return sample

    def __repr__(self) -> str:
        return f"CheckNaN(keys={self.keys})"


class PrintStats:
    """Print shape, mean, std, min and max of entries; also put them in ``info["stats"]``.

    Args:
        keys: Entries to describe; None: all numeric ones.
        stream: Where to print (default: stdout); the numbers go to ``info`` either way.
        quiet: Only fill ``info["stats"]``.
    """

    def __init__(self, keys: Sequence[str] | None = None, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.keys = None if keys is None else list(keys)
        self.stream = stream
        self.quiet = quiet

    def __call__(self, sample: Sample) -> Sample:
        stats: dict[str, dict[str, float]] = {}
        for key, value in _selected_data(sample, self.keys).items():
            array = _numpy(value)
            if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool) or array.size == 0:
                continue
            array = array.astype(np.float64)
            stats[key] = {
                "mean": float(array.mean()),
                "std": float(array.std()),
                "min": float(array.min()),
                "max": float(array.max()),
            }
            if not self.quiet:
                s = stats[key]
                print(
                    f"[PrintStats] {key}: shape {tuple(array.shape)} mean {s['mean']:.4g} std {s['std']:.4g} "
                    f"min {s['min']:.4g} max {s['max']:.4g}",
                    file=self.stream or sys.stdout,
                )
        sample.info["stats"] = stats
        return sample

    def __repr__(self) -> str:
        return f"PrintStats(keys={self.keys})"
