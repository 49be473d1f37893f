"""Factorized distributions over vector actions: ``MultiDiscrete`` and ``MultiBinary``.

Each action dim is drawn independently, so the log-likelihood, entropy and KL of an action
vector are the sums of the per-dim values (the policy factorizes as ``pi(a|s) = prod_d
pi_d(a_d|s)``, as in SB3's ``MultiCategoricalDistribution`` and ``BernoulliDistribution``).
Both take the :class:`~lightning_rl.distributions.categorical.DistInfo` of the categorical
distribution, with a trailing dim of their own meaning (see each class).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lightning_rl.distributions.base import EPS, Distribution
from lightning_rl.distributions.categorical import DistInfo

__all__ = ["Bernoulli", "MultiCategorical"]


def _positive_ints(name: str, owner: str, values: Sequence[int] | np.ndarray) -> tuple[int, ...]:
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer) or np.any(a < 1):
        raise ValueError(f"{owner}: {name} must be a non-empty 1-D sequence of positive ints, got {values!r}")
    return tuple(int(v) for v in a)


class MultiCategorical(Distribution):
    """Independent categoricals over ``D`` action dims, dim ``d`` over ``low[d] + range(nvec[d])``.

    ``dist_info.prob`` is ``[..., sum(nvec)]``: the ``D`` probability vectors side by side (the
    first ``nvec[0]`` entries are dim 0's, and so on), each summing to one, as
    :class:`~lightning_rl.models.CategoricalPgHead` outputs them when given a sequence of sizes.
    Actions ``x`` are ``[..., D]`` integers in the space's own values (``low[d] <= x[d] <
    low[d] + nvec[d]``); the offset ``low`` is removed before indexing. Probabilities are floored
    at :data:`~lightning_rl.distributions.base.EPS` inside logarithms, as in
    :class:`~lightning_rl.distributions.Categorical`.

    Args:
        nvec: Number of choices of each dim, ``[D]``.
        low: Smallest value of each dim (gymnasium's ``MultiDiscrete.start``): an int for all
            dims or a ``[D]`` sequence.
        dtype: dtype of sampled actions.

    Raises:
        ValueError: If ``nvec`` is not a non-empty 1-D sequence of positive ints, or ``low`` is
            not an int or ``D`` ints.

    Examples:
        >>> dist = MultiCategorical(nvec=[2, 3])
        >>> info = DistInfo(prob=torch.tensor([[0.5, 0.5, 0.2, 0.3, 0.5]]))
        >>> dist.sample(info).shape
        torch.Size([1, 2])
    """

    def __init__(
        self,
        nvec: Sequence[int] | np.ndarray,
        low: int | Sequence[int] | np.ndarray = 0,
        dtype: torch.dtype = torch.long,
    ) -> None:
        name = type(self).__name__
        self.nvec = _positive_ints("nvec", name, nvec)
        low_a = np.broadcast_to(np.asarray(low), (len(self.nvec),)) if np.ndim(low) == 0 else np.asarray(low)
        if low_a.shape != (len(self.nvec),) or not np.issubdtype(low_a.dtype, np.integer):
            raise ValueError(f"{name}: low must be an int or {len(self.nvec)} ints (one per dim of nvec), got {low!r}")
        self.low = tuple(int(v) for v in low_a)
        self.dtype = dtype
        self._dim = sum(self.nvec)
        n_max = max(self.nvec)
        starts = np.cumsum((0,) + self.nvec[:-1])
        # Sampling and the mode read the flat [..., sum(nvec)] vector as a padded [..., D, max(nvec)]
        # grid (a gather); padding cells point at entry 0 and are masked out, so ragged nvec costs
        # the same few ops as equal ones.
        grid = starts[:, None] + np.arange(n_max)[None, :]
        pad = np.arange(n_max)[None, :] >= np.asarray(self.nvec)[:, None]
        self._starts = torch.as_tensor(starts, dtype=torch.long)
        self._low = torch.as_tensor(self.low, dtype=torch.long)
        self._grid = torch.as_tensor(np.where(pad, 0, grid), dtype=torch.long)
        self._pad = torch.as_tensor(pad) if pad.any() else None
        self._on: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]] = {}

    @property
    def dim(self) -> int:
        """Size of ``dist_info.prob``'s trailing dim, ``sum(nvec)``."""
        return self._dim

    @property
    def action_dims(self) -> int:
        """Number of action dims ``D``."""
        return len(self.nvec)

    def _tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(starts, low, grid, pad)`` on ``device``, copied there once."""
        tables = self._on.get(device)
        if tables is None:
            pad = None if self._pad is None else self._pad.to(device)
            tables = (self._starts.to(device), self._low.to(device), self._grid.to(device), pad)
            self._on[device] = tables
        return tables

    def _check(self, prob: torch.Tensor) -> None:
        if prob.ndim == 0 or prob.shape[-1] != self._dim:
            raise ValueError(
                f"{type(self).__name__}: dist_info.prob must have a trailing dim of size sum(nvec)={self._dim}, "
                f"got shape {tuple(prob.shape)}"
            )

    def _grid_argmax(self, scores: torch.Tensor) -> torch.Tensor:
        """Per-dim argmax of flat ``scores`` ``[..., sum(nvec)]``, shifted by ``low``: ``[..., D]``."""
        _, low, grid, pad = self._tables(scores.device)
        grid_scores = scores[..., grid]  # [..., D, max(nvec)]
        if pad is not None:
            grid_scores = grid_scores.masked_fill(pad, -torch.inf)
        return (grid_scores.argmax(dim=-1) + low).to(self.dtype)

    def sample(self, dist_info: DistInfo) -> torch.Tensor:
        """Draw actions ``[..., D]`` (dtype ``self.dtype``), one Gumbel-max draw per dim.

        As :meth:`Categorical.sample <lightning_rl.distributions.Categorical.sample>`: the
        argmax of ``log prob - log E``, ``E ~ Exponential(1)``, within each dim's entries.
        """
        prob = dist_info.prob
        self._check(prob)
        noise = torch.empty_like(prob).exponential_().clamp_min_(torch.finfo(prob.dtype).tiny).log_()
        return self._grid_argmax(prob.log() - noise)

    def mode(self, dist_info: DistInfo) -> torch.Tensor:
        """The most likely action ``[..., D]``: the argmax of each dim, shifted by ``low``."""
        self._check(dist_info.prob)
        return self._grid_argmax(dist_info.prob)

    def _selected(self, x: torch.Tensor, prob: torch.Tensor) -> torch.Tensor:
        """``prob`` of each dim's chosen entry, ``[..., D]``, for actions ``x`` ``[..., D]``."""
        starts, low, _, _ = self._tables(prob.device)
        return prob.gather(-1, x.long() - low + starts)

    def log_likelihood(self, x: torch.Tensor, dist_info: DistInfo) -> torch.Tensor:
        """``sum_d log prob_d[x_d]``: ``x`` ``[..., D]`` integers; output ``[...]``."""
        return torch.log(self._selected(x, dist_info.prob).clamp_min(EPS)).sum(dim=-1)

    def kl(self, old_dist_info: DistInfo, new_dist_info: DistInfo) -> torch.Tensor:
        """``sum_d KL(old_d || new_d)``; output ``[...]``.

        Summing ``old * (log old - log new)`` over all ``sum(nvec)`` entries is that sum of
        per-dim KLs, so the flat vector needs no splitting.
        """
        old_p, new_p = old_dist_info.prob, new_dist_info.prob
        return torch.sum(old_p * (torch.log(old_p.clamp_min(EPS)) - torch.log(new_p.clamp_min(EPS))), dim=-1)

    def entropy(self, dist_info: DistInfo) -> torch.Tensor:
        """``sum_d H(prob_d)`` (0 log 0 counts as 0); output ``[...]`` (one sum over all entries)."""
        p = dist_info.prob
        return -torch.sum(p * torch.log(p.clamp_min(EPS)), dim=-1)


class Bernoulli(Distribution):
    """Independent Bernoullis over ``D`` binary action dims (gymnasium's ``MultiBinary``).

    ``dist_info.prob`` is ``[..., D]``, the probability that each bit is 1; actions ``x`` are
    ``[..., D]`` integers (or bools) in ``{0, 1}``. Probabilities (and their complements) are
    floored at :data:`~lightning_rl.distributions.base.EPS` inside logarithms.

    Args:
        dim: Number of bits ``D``.
        dtype: dtype of sampled actions.

    Raises:
        ValueError: If ``dim`` is not a positive int.

    Examples:
        >>> dist = Bernoulli(dim=3)
        >>> dist.mode(DistInfo(prob=torch.tensor([0.9, 0.2, 0.6])))
        tensor([1, 0, 1])
    """

    def __init__(self, dim: int, dtype: torch.dtype = torch.long) -> None:
        if isinstance(dim, bool) or int(dim) != dim or dim < 1:
            raise ValueError(f"{type(self).__name__}: dim must be a positive integer, got {dim!r}")
        self._dim = int(dim)
        self.dtype = dtype

    @property
    def dim(self) -> int:
        """Number of bits ``D``."""
        return self._dim

    def _check(self, prob: torch.Tensor) -> None:
        if prob.ndim == 0 or prob.shape[-1] != self._dim:
            raise ValueError(
                f"{type(self).__name__}: dist_info.prob must have a trailing dim of size dim={self._dim}, "
                f"got shape {tuple(prob.shape)}"
            )

    def sample(self, dist_info: DistInfo) -> torch.Tensor:
        """Draw bits ``[..., D]`` (dtype ``self.dtype``): 1 where a uniform draw falls below ``prob``."""
        prob = dist_info.prob
        self._check(prob)
        # Uniforms lie in [0, 1): a bit of probability 0 is never set, one of probability 1 always is.
        return (torch.rand_like(prob) < prob).to(self.dtype)

    def mode(self, dist_info: DistInfo) -> torch.Tensor:
        """The most likely bits ``[..., D]``: 1 where ``prob > 0.5`` (ties give 0)."""
        self._check(dist_info.prob)
        return (dist_info.prob > 0.5).to(self.dtype)

    @staticmethod
    def _log_pq(prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.log(prob.clamp_min(EPS)), torch.log((1.0 - prob).clamp_min(EPS))

    def log_likelihood(self, x: torch.Tensor, dist_info: DistInfo) -> torch.Tensor:
        """``sum_d x_d log p_d + (1 - x_d) log(1 - p_d)``: ``x`` ``[..., D]``; output ``[...]``."""
        log_p, log_q = self._log_pq(dist_info.prob)
        return torch.where(x.bool(), log_p, log_q).sum(dim=-1)

    def kl(self, old_dist_info: DistInfo, new_dist_info: DistInfo) -> torch.Tensor:
        """``sum_d p log(p / p') + (1 - p) log((1 - p) / (1 - p'))``, ``p`` old, ``p'`` new; ``[...]``."""
        old_p = old_dist_info.prob
        old_log_p, old_log_q = self._log_pq(old_p)
        new_log_p, new_log_q = self._log_pq(new_dist_info.prob)
        return torch.sum(old_p * (old_log_p - new_log_p) + (1.0 - old_p) * (old_log_q - new_log_q), dim=-1)

    def entropy(self, dist_info: DistInfo) -> torch.Tensor:
        """``-sum_d p log p + (1 - p) log(1 - p)`` (0 log 0 counts as 0); output ``[...]``."""
        p = dist_info.prob
        log_p, log_q = self._log_pq(p)
        return -torch.sum(p * log_p + (1.0 - p) * log_q, dim=-1)
