"""Prioritized replay index (Schaul et al. 2016, https://arxiv.org/abs/1511.05952).

Slot ``i`` (see :mod:`lightning_rl.replays.uniform`) is drawn with probability
``P(i) = p_i^α / Σ_k p_k^α`` from a :class:`~lightning_rl.replays.sum_tree.SumTree` whose
leaves hold ``p_i^α`` for valid slots and 0 for the rest, so invalid slots are never drawn.
New samples get ``default_priority^α`` once they become valid (or, when the storage keeps a
``priority`` field, the input priority stored with the start row). The importance-sampling
weights correct the bias of non-uniform draws (paper eq. in section 3.4):
``w_i = (N · P(i))^{-β} / max_j w_j``, normalised by the largest weight *in the batch*, so
``N`` and the total cancel and ``w_i = (p_min / p_i)^{αβ}`` over the batch's priorities.
``β`` anneals linearly from ``beta`` to ``beta_final`` over ``beta_anneal_steps`` calls of
:meth:`PrioritizedIndex.sample`. For sequences (R2D2, Kapturowski et al. 2019) a priority is
``η · max_t |δ_t| + (1 - η) · mean_t |δ_t|`` over the sequence's TD errors.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch

from lightning_rl.replays.index import ReplayIndex
from lightning_rl.replays.sum_tree import SumTree

__all__ = ["PrioritizedIndex"]


class PrioritizedIndex(ReplayIndex):
    """Draws start slots in proportion to ``priority^alpha`` from a sum tree.

    ``storage``, ``min_age``, ``interval``, ``exclude_truncated`` (truncated steps get priority 0)
    and ``rng`` are :class:`~lightning_rl.replays.index.ReplayIndex`'s, by keyword.

    Args:
        alpha: Priority exponent (0: uniform).
        beta: Initial importance-sampling exponent.
        beta_final: ``β`` after annealing.
        beta_anneal_steps: Number of ``sample`` calls over which ``β`` goes from ``beta`` to
            ``beta_final``; None keeps ``beta`` (until :meth:`set_beta`).
        default_priority: Priority of new samples (before ``alpha``).
        stratified: Stratified draws (one per equal segment of the total).
        eta: Sequence priority mix of max and mean TD error.
        branching: Children per sum-tree node.
    """

    prioritized: Literal[True] = True

    def __init__(
        self,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_anneal_steps: int | None = None,
        default_priority: float = 1.0,
        stratified: bool = False,
        eta: float = 0.9,
        branching: int = 16,
        **index_kwargs: Any,
    ) -> None:
        super().__init__(**index_kwargs)
        self.alpha = float(alpha)
        self.beta_init = float(beta)
        self.beta_final = float(beta_final)
        self.beta_anneal_steps = beta_anneal_steps
        self.default_priority = float(default_priority)
        self.stratified = stratified
        self.eta = float(eta)
        self.tree = SumTree((self.storage.T // self.interval) * self.storage.B, branching, shared=self.storage.shared)
        self.sample_calls = 0
        self._beta_set: float | None = None

    @property
    def beta(self) -> float:
        """Current importance-sampling exponent."""
        if self._beta_set is not None:
            return self._beta_set
        if not self.beta_anneal_steps:
            return self.beta_init
        frac = min(1.0, self.sample_calls / self.beta_anneal_steps)
        return self.beta_init + frac * (self.beta_final - self.beta_init)

    def set_beta(self, beta: float) -> None:
        """Fix ``β`` from now on (stops the built-in annealing)."""
        if not 0 <= beta:
            raise ValueError(f"set_beta: beta must be >= 0, got {beta}")
        self._beta_set = float(beta)

    def _valid(self, t: np.ndarray, b: np.ndarray) -> np.ndarray:
        # Rows t and envs b broadcast together.
        lo, hi = self.storage.age_bounds(self.min_age)
        age = self.storage.ages(t)
        ok = (age >= lo) & (age <= hi)
        if self.exclude_truncated:
            assert self.storage.truncated is not None  # exclude_truncated needs a truncated field
            ok = ok & ~self.storage.truncated[t, b]
        return ok

    def on_append(self, rows: np.ndarray) -> None:
        """Give slots that just became valid ``default_priority`` (or their stored ``priority``);
        zero those that stopped being valid.

        Only rows near the cursor change: the ``min_age`` rows before the new ones became old
        enough, the new rows were overwritten and the ``off_forward`` rows after them lost
        their history.
        """
        T, B = self.storage.T, self.storage.B
        c0, T_in = int(rows[0]), len(rows)
        cand = np.arange(c0 - self.min_age, c0 + T_in + self.storage.off_forward)
        cand = cand % T if cand.size <= T else np.arange(T)
        cand = cand[cand % self.interval == 0]
        if cand.size == 0:
            return
        t, b = cand[:, None], np.arange(B)[None, :]
        slots = (t // self.interval) * B + b
        initial: Any = self.default_priority
        if "priority" in self.storage.buffers:
            initial = self.storage.get("priority", t * B + b).astype(np.float64)
        p = np.where(self._valid(t, b), initial**self.alpha, 0.0)
        self.tree.write(slots.reshape(-1), np.broadcast_to(p, slots.shape).reshape(-1))

    def sample(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``n`` slots in proportion to priority, with replacement.

        Returns:
            ``(t, b, idxs, is_weights)``: rows, envs, sample ids (``absolute_row * B + b``,
            int64 ``[n]``) and importance weights (float32 ``[n]``, largest 1).

        Raises:
            RuntimeError: If no slot is valid yet.
        """
        if not self.tree.total > 0:
            raise RuntimeError(
                f"sample_batch: no valid samples yet ({self.storage.filled} rows stored; a start row "
                f"needs {self.min_age} newer rows)"
            )
        slots, p = self.tree.sample(n, self.rng, self.stratified)
        beta = self.beta
        self.sample_calls += 1
        w = (p.min() / p) ** beta
        B = self.storage.B
        t, b = (slots // B) * self.interval, slots % B
        return t, b, self.storage.absolute_rows(t) * B + b, w.astype(np.float32)

    def update_priorities(self, idxs: Any, priorities: Any) -> None:
        """Set new priorities for a batch's samples.

        Samples overwritten since they were drawn are skipped, and slots that became invalid
        stay at 0, so late updates (prefetched batches, another process) cannot misplace
        priorities.

        Args:
            idxs: The batch's ``idxs`` (sample ids ``absolute_row * B + b``), int ``[N]``.
            priorities: Non-negative ``[N]`` (e.g. ``|TD error|``, plus a small constant so no
                sample starves), or ``[T, N]`` per-step TD errors of sequences, reduced to
                ``eta * max + (1 - eta) * mean`` over ``T``.

        Raises:
            ValueError: On mismatched shapes, out-of-range slots or negative/non-finite values.
        """
        idxs = _to_numpy(idxs).astype(np.int64).reshape(-1)
        p = _to_numpy(priorities).astype(np.float64)
        if p.ndim == 2:
            p = self.eta * p.max(axis=0) + (1 - self.eta) * p.mean(axis=0)
        if p.shape != idxs.shape:
            raise ValueError(
                f"update_batch_priorities: priorities shape {p.shape} does not match idxs {idxs.shape} "
                "(give [N] or [T, N])"
            )
        if p.size and not (np.isfinite(p).all() and p.min() >= 0):
            raise ValueError("update_batch_priorities: priorities must be finite and >= 0")
        B, T = self.storage.B, self.storage.T
        written = self.storage.rows_written
        if idxs.size and (idxs.min() < 0 or idxs.max() >= written * B):
            raise ValueError(f"update_batch_priorities: idxs must be ids of written samples, in [0, {written * B})")
        a, b = np.divmod(idxs, B)
        t = a % T
        # Samples overwritten since they were drawn keep the priority of the data now there.
        keep = a >= written - T
        if self.interval > 1:
            keep &= t % self.interval == 0
        if not keep.all():
            t, b, p = t[keep], b[keep], p[keep]
        slots = (t // self.interval) * B + b if self.interval > 1 else t * B + b
        self.tree.write(slots, np.where(self._valid(t, b), p**self.alpha, 0.0))

    @property
    def nbytes(self) -> int:
        """Bytes held by the sum tree."""
        return self.tree.nbytes

    def state_dict(self) -> dict[str, Any]:
        """Sum tree (a view), ``β`` counter and any ``set_beta`` value (NaN if none)."""
        return {
            "tree": self.tree.state_dict()["tree"],
            "sample_calls": self.sample_calls,
            "beta_set": math.nan if self._beta_set is None else self._beta_set,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.tree.load_state_dict({"tree": state["tree"]})
        self.sample_calls = int(state["sample_calls"])
        beta_set = float(state["beta_set"])
        self._beta_set = None if math.isnan(beta_set) else beta_set


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
