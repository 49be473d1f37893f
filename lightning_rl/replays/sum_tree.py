"""A sum tree: draw leaf indices in proportion to their values, vectorized in numpy.

Prioritized replay (Schaul et al. 2016, https://arxiv.org/abs/1511.05952) samples transition
``i`` with probability ``p_i / sum_j p_j``. A sum tree finds the leaf whose prefix-sum interval
holds a uniform draw in ``O(depth)``. Here every internal node sums ``branching`` children
(16 by default, so a million leaves need 5 levels instead of a binary tree's 20); a whole batch
of draws descends together, so Python loops over the levels only, never over the draws. The
upper levels, up to 1024 nodes, are searched whole with one prefix sum and a binary search.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lightning_rl.replays.shared import allocate

__all__ = ["SumTree"]

_WHOLE_LEVEL = 1024  # levels this small are searched whole in find()


class SumTree:
    """``branching``-ary sum tree over ``capacity`` non-negative float64 leaves.

    Levels are stored bottom-up in one flat array (so it can live in shared memory and be saved
    whole); each level is padded to a multiple of ``branching`` and the children of node ``i``
    of a level are entries ``[i * branching, (i + 1) * branching)`` of the level below. Parents
    are recomputed from their children on every update, never patched with differences, so sums
    do not drift. Values are float64: with float32 sums a draw near the end of an interval can
    fall on a zero leaf.

    Args:
        capacity: Number of leaves.
        branching: Children per internal node (at least 2).
        shared: Allocate the tree in OS shared memory.

    Raises:
        ValueError: If ``capacity`` < 1 or ``branching`` < 2.
    """

    def __init__(self, capacity: int, branching: int = 16, shared: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"SumTree: capacity must be >= 1, got {capacity}")
        if branching < 2:
            raise ValueError(f"SumTree: branching must be >= 2, got {branching}")
        self.capacity = int(capacity)
        self.branching = int(branching)
        k = self.branching
        sizes = []
        n = self.capacity
        while True:
            padded = -(-n // k) * k
            sizes.append(padded)
            n = padded // k
            if n == 1:
                sizes.append(1)
                break
        self._tree = allocate(sum(sizes), np.float64, shared)
        views, start = [], 0
        for size in sizes:
            views.append(self._tree[start : start + size])
            start += size
        # Top-down: levels[0] is the root (size 1), levels[-1] the leaves.
        self.levels = views[::-1]
        self._children = [lvl.reshape(-1, k) for lvl in self.levels[1:]]
        self._ones = np.ones(k)  # sums children with one matrix-vector product
        # The deepest level that find() searches whole.
        self._top = max(d for d, lvl in enumerate(self.levels) if lvl.shape[0] <= _WHOLE_LEVEL)

    @property
    def depth(self) -> int:
        """Number of levels below the root."""
        return len(self.levels) - 1

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self.levels[0][0])

    @property
    def leaves(self) -> np.ndarray:
        """The ``[capacity]`` leaf values (a read-only view; write with :meth:`set`)."""
        view = self.levels[-1][: self.capacity].view()
        view.flags.writeable = False
        return view

    @property
    def nbytes(self) -> int:
        """Bytes held by the tree."""
        return int(self._tree.nbytes)

    def _check_idxs(self, idxs: np.ndarray) -> None:
        if idxs.size and (idxs.min() < 0 or idxs.max() >= self.capacity):
            raise ValueError(
                f"SumTree: idxs must be in [0, {self.capacity}), got min {idxs.min()} max {idxs.max()}"
            )

    def set(self, idxs: Any, values: Any) -> None:
        """Write leaf values and recompute their ancestors.

        Args:
            idxs: Leaf indices, integer ``[N]`` (repeats allowed: the last value wins).
            values: Non-negative values, ``[N]`` or a scalar.

        Raises:
            ValueError: On an index out of range or a negative or non-finite value.
        """
        idxs = np.asarray(idxs, dtype=np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), idxs.shape)
        self._check_idxs(idxs)
        if values.size and not (np.isfinite(values).all() and values.min() >= 0):
            raise ValueError("SumTree.set: values must be finite and >= 0")
        self.write(idxs, values)

    def write(self, idxs: np.ndarray, values: np.ndarray) -> None:
        """:meth:`set` without its checks, for callers that validated ``idxs`` and ``values``
        (int64 ``[N]`` in range, float64 ``[N]`` finite and >= 0)."""
        self.levels[-1][idxs] = values
        k = self.branching
        for d in range(self.depth, 0, -1):
            idxs = idxs // k
            # Repeated parents are written with the same recomputed sum, so repeats are harmless.
            self.levels[d - 1][idxs] = self._children[d - 1].take(idxs, axis=0) @ self._ones

    def get(self, idxs: Any) -> np.ndarray:
        """Leaf values at ``idxs`` (``[N]`` float64)."""
        idxs = np.asarray(idxs, dtype=np.int64)
        self._check_idxs(idxs.reshape(-1))
        return self.levels[-1][idxs]

    def find(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """Leaves whose prefix-sum interval ``[S_{i-1}, S_i)`` holds each value.

        Values at or past the total (rounding) land on the last non-zero leaf; a leaf of value
        zero is never returned while the total is positive.

        Args:
            values: ``[N]`` float values in ``[0, total)``.

        Returns:
            ``(idxs, leaf_values)``, both ``[N]``.
        """
        v = np.array(values, dtype=np.float64).reshape(-1)
        n = v.shape[0]
        # The small upper levels are searched whole: one prefix sum and a binary search replace
        # several levels of descent.
        top = self.levels[self._top]
        before = np.zeros(top.shape[0] + 1)
        before[1:] = _cumsum(top)
        node = np.searchsorted(before[1:], v, side="right")
        over = node >= top.shape[0]  # at or past the total, from rounding: last non-zero node
        if over.any():
            node[over] = np.flatnonzero(top)[-1]
        v -= before[node]
        k = self.branching
        rows_k = np.arange(n) * k
        for children in self._children[self._top :]:
            ch = children.take(node, axis=0)  # [N, k]
            ends = _cumsum(ch)
            j = (ends > v[:, None]).argmax(axis=1)  # first child whose interval ends past v
            over = ends[:, -1] <= v
            if over.any():
                j[over] = k - 1 - np.argmax(ch[over][:, ::-1] > 0, axis=1)
            flat = rows_k + j
            v -= ends.reshape(-1).take(flat) - ch.reshape(-1).take(flat)
            # Rounding may leave v a hair below 0, which would pick a leading zero child.
            np.maximum(v, 0.0, out=v)
            node = node * k + j
        return node, self.levels[-1][node]

    def sample(self, n: int, rng: np.random.Generator, stratified: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n`` leaves with probability proportional to their values, with replacement.

        Args:
            n: Number of draws.
            rng: Random generator.
            stratified: Split ``[0, total)`` into ``n`` equal segments and draw one value in
                each (lower variance, the batch covers the whole distribution); otherwise draws
                are independent.

        Returns:
            ``(idxs, leaf_values)``, both ``[n]``.

        Raises:
            RuntimeError: If every leaf is zero.
        """
        total = self.levels[0][0]
        if not total > 0:
            raise RuntimeError("SumTree.sample: all leaves are zero, nothing to sample")
        u = rng.random(n)
        if stratified:
            u = (np.arange(n) + u) / n
        return self.find(u * total)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The tree's array (a view, not a copy)."""
        return {"tree": self._tree}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Copy a saved tree into this one (same capacity and branching)."""
        src = np.asarray(state["tree"])
        if src.shape != self._tree.shape:
            raise ValueError(f"SumTree.load_state_dict: tree shape {src.shape} != {self._tree.shape}")
        np.copyto(self._tree, src)



def _cumsum(x: np.ndarray) -> np.ndarray:
    # Prefix sums along the last axis: sequential, so non-decreasing for non-negative values.
    # torch's kernel is faster than numpy's for the [N, branching] blocks of a descent
    # (benchmarks/replay_throughput.py measures the sampling it serves).
    return torch.from_numpy(x).cumsum(-1).numpy()
