"""Base class of action distributions and the one-hot helpers of discrete ones (rlpyt section 9).

A distribution object holds no parameters of its own: the model outputs a ``dist_info``
namedarraytuple (``DistInfo(prob)`` or ``DistInfoStd(mean, log_std)``) and every method takes it
as an argument, so one object serves any batch shape. All methods keep the leading dims
(``[]``, ``[B]``, ``[T, B]``, ...) of their inputs and reduce only the trailing action dim.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch

from lightning_rl.data.arrays import from_onehot, to_onehot
from lightning_rl.returns import valid_mean

__all__ = ["EPS", "DiscreteMixin", "Distribution"]

# Floor on probabilities inside logarithms and divisions: keeps log(0) and 0/0 out of losses.
EPS = 1e-8


class Distribution(ABC):
    """Interface of all distributions; subclasses implement what is defined for them.

    Methods a subclass leaves out raise ``NotImplementedError`` naming the class and method.
    """

    @property
    @abstractmethod
    def dim(self) -> int:
        """Size of the trailing action (or category) dim."""

    @abstractmethod
    def sample(self, dist_info: Any) -> torch.Tensor:
        """Draw one sample per datum of ``dist_info``, keeping its leading dims."""

    def log_likelihood(self, x: torch.Tensor, dist_info: Any) -> torch.Tensor:
        """Log-likelihood of samples ``x`` under ``dist_info``; shape: the leading dims."""
        raise NotImplementedError(f"{type(self).__name__} does not define log_likelihood")

    def likelihood_ratio(self, x: torch.Tensor, old_dist_info: Any, new_dist_info: Any) -> torch.Tensor:
        """``p_new(x) / p_old(x)`` per datum (gradients flow through ``new_dist_info``)."""
        return torch.exp(self.log_likelihood(x, new_dist_info) - self.log_likelihood(x, old_dist_info))

    def kl(self, old_dist_info: Any, new_dist_info: Any) -> torch.Tensor:
        """``KL(old || new)`` per datum; shape: the leading dims."""
        raise NotImplementedError(f"{type(self).__name__} does not define kl")

    def mean_kl(self, old_dist_info: Any, new_dist_info: Any, valid: torch.Tensor | None = None) -> torch.Tensor:
        """Mean of :meth:`kl` over the entries where ``valid`` is nonzero (all if None)."""
        return valid_mean(self.kl(old_dist_info, new_dist_info), valid)

    def entropy(self, dist_info: Any) -> torch.Tensor:
        """Entropy per datum; shape: the leading dims."""
        raise NotImplementedError(f"{type(self).__name__} does not define entropy")

    def perplexity(self, dist_info: Any) -> torch.Tensor:
        """``exp(entropy)`` per datum: the effective number of equally likely actions."""
        return torch.exp(self.entropy(dist_info))

    def mean_entropy(self, dist_info: Any, valid: torch.Tensor | None = None) -> torch.Tensor:
        """Mean of :meth:`entropy` over the entries where ``valid`` is nonzero (all if None)."""
        return valid_mean(self.entropy(dist_info), valid)

    def mean_perplexity(self, dist_info: Any, valid: torch.Tensor | None = None) -> torch.Tensor:
        """Mean of :meth:`perplexity` over the entries where ``valid`` is nonzero (all if None)."""
        return valid_mean(self.perplexity(dist_info), valid)


class DiscreteMixin:
    """Size, sample dtype and one-hot conversions of a distribution over ``range(dim)``.

    Args:
        dim: Number of categories (at least 1).
        dtype: dtype of sampled indexes.
        onehot_dtype: Default dtype of :meth:`to_onehot` outputs.
    """

    def __init__(self, dim: int, dtype: torch.dtype = torch.long, onehot_dtype: torch.dtype = torch.float32) -> None:
        if int(dim) != dim or dim < 1:
            raise ValueError(f"{type(self).__name__}: dim must be a positive integer, got {dim!r}")
        self._dim = int(dim)
        self.dtype = dtype
        self.onehot_dtype = onehot_dtype

    @property
    def dim(self) -> int:
        """Number of categories."""
        return self._dim

    def to_onehot(self, indexes: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Integer ``indexes`` ``[...]`` to one-hot ``[..., dim]``."""
        return to_onehot(indexes, self._dim, dtype=dtype or self.onehot_dtype)

    def from_onehot(self, onehot: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """One-hot ``[..., dim]`` back to integer indexes ``[...]`` (argmax)."""
        return from_onehot(onehot, dtype=dtype or self.dtype)

    def _check_trailing(self, tensor: torch.Tensor, name: str) -> None:
        if tensor.ndim == 0 or tensor.shape[-1] != self._dim:
            raise ValueError(
                f"{type(self).__name__}: {name} must have a trailing dim of size dim={self._dim}, "
                f"got shape {tuple(tensor.shape)}"
            )
