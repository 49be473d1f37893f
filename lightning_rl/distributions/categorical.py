"""Categorical distribution over ``range(dim)`` from per-datum probabilities (rlpyt section 9)."""

from __future__ import annotations

from typing import Any

import torch

from lightning_rl.data.arrays import select_at_indexes
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.distributions.base import EPS, DiscreteMixin, Distribution

__all__ = ["Categorical", "DistInfo"]


class DistInfo(NamedArrayTupleBase):
    """Parameters of a :class:`Categorical`: ``prob`` ``[..., dim]``, rows summing to one."""

    prob: Any


class Categorical(DiscreteMixin, Distribution):
    """Categorical distribution with probabilities ``dist_info.prob`` ``[..., dim]``.

    Probabilities are floored at :data:`~lightning_rl.distributions.base.EPS` inside logarithms
    and divisions, so a zero probability gives a large finite log-likelihood, not ``-inf``.

    Args:
        dim: Number of categories.
        dtype: dtype of sampled indexes.
        onehot_dtype: Default dtype of :meth:`to_onehot`.

    Examples:
        >>> dist = Categorical(dim=3)
        >>> info = DistInfo(prob=torch.tensor([[0.2, 0.3, 0.5]]))
        >>> dist.sample(info).shape
        torch.Size([1])
    """

    def sample(self, dist_info: DistInfo) -> torch.Tensor:
        """Draw indexes ``[...]`` (dtype ``self.dtype``) from ``prob`` ``[..., dim]``.

        Gumbel-max: ``argmax(log prob - log E)`` with ``E ~ Exponential(1)`` is distributed as
        the categorical (``-log E`` is Gumbel noise). Five elementwise ops instead of
        ``torch.multinomial``, which costs about three times as much for the few rows an
        acting step has. ``E`` is floored at the smallest normal float, so the noise stays
        finite and a zero-probability category is never drawn.
        """
        prob = dist_info.prob
        self._check_trailing(prob, "dist_info.prob")
        noise = torch.empty_like(prob).exponential_().clamp_min_(torch.finfo(prob.dtype).tiny).log_()
        return (prob.log() - noise).argmax(dim=-1).to(self.dtype)

    def log_likelihood(self, x: torch.Tensor, dist_info: DistInfo) -> torch.Tensor:
        """``log prob[..., x]``: ``x`` ``[...]`` integer indexes; output ``[...]``."""
        return torch.log(select_at_indexes(x, dist_info.prob).clamp_min(EPS))

    def likelihood_ratio(self, x: torch.Tensor, old_dist_info: DistInfo, new_dist_info: DistInfo) -> torch.Tensor:
        """``new.prob[x] / old.prob[x]`` ``[...]``, the PPO ratio, without a log/exp round trip."""
        new_p = select_at_indexes(x, new_dist_info.prob)
        old_p = select_at_indexes(x, old_dist_info.prob)
        return new_p / old_p.clamp_min(EPS)

    def kl(self, old_dist_info: DistInfo, new_dist_info: DistInfo) -> torch.Tensor:
        """``sum_a old[a] * (log old[a] - log new[a])`` over the last dim; output ``[...]``."""
        old_p, new_p = old_dist_info.prob, new_dist_info.prob
        return torch.sum(old_p * (torch.log(old_p.clamp_min(EPS)) - torch.log(new_p.clamp_min(EPS))), dim=-1)

    def entropy(self, dist_info: DistInfo) -> torch.Tensor:
        """``-sum_a p[a] log p[a]`` over the last dim (0 log 0 counts as 0); output ``[...]``."""
        p = dist_info.prob
        return -torch.sum(p * torch.log(p.clamp_min(EPS)), dim=-1)
