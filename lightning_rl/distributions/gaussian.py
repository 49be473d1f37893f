"""Diagonal Gaussian with optional clipping and tanh squashing (rlpyt section 9).

Used by the Gaussian policy-gradient agents (learned ``log_std``), DDPG and TD3 (fixed
exploration ``std``; TD3 also clips the target-smoothing noise with ``noise_clip``) and SAC
(``squash=1``: actions ``tanh(u)``, log-likelihoods from :meth:`Gaussian.sample_loglikelihood`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.distributions.base import Distribution

__all__ = ["DistInfoStd", "Gaussian"]

_LOG_2PI = math.log(2 * math.pi)
_LOG_2 = math.log(2.0)


class DistInfoStd(NamedArrayTupleBase):
    """Parameters of a :class:`Gaussian`: ``mean`` and ``log_std``, each ``[..., dim]``.

    ``log_std`` may be None when the distribution has a fixed ``std``.
    """

    mean: Any
    log_std: Any


def _positive_or_none(owner: str, name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not value > 0:
        raise ValueError(f"{owner}: {name} must be positive or None, got {value!r}")
    return float(value)


class Gaussian(Distribution):
    """Multivariate Gaussian with independent dims (diagonal covariance).

    The standard deviation is fixed (``std``, a scalar or a ``[dim]`` vector) or, when ``std``
    is None, read from ``dist_info.log_std`` (typically a learned output) and clamped to
    ``[min_std, max_std]``; the clamp enters every formula. ``min_std``/``max_std`` do not apply
    to a fixed ``std``.

    Sampling is reparameterized (``mean + std * noise``), so samples carry gradients to
    ``mean`` and ``log_std``. ``noise_clip`` clips the noise ``std * noise`` to
    ``[-noise_clip, noise_clip]`` before it is added (TD3 target policy smoothing); ``clip``
    clips the final action to ``[-clip, clip]``. Neither clip enters the likelihood, KL or
    entropy formulas: they treat the samples as unclipped.

    With ``squash=s`` the action is ``x = s * tanh(u)`` with ``u ~ N(mean, std)``. Then:

    * :meth:`log_likelihood` takes the *pre-squash* ``u``, not ``x`` (``atanh`` of an action
      near ``+-s`` is numerically unreliable), and returns ``log p(x)``:
      ``log N(u) - sum_i log(s * (1 - tanh(u_i)^2))``, with the stable form
      ``log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))``.
    * :meth:`sample_loglikelihood` returns a squashed action and its ``log p(x)`` (SAC).
    * :meth:`kl` is that of the underlying Gaussians, which is exact: KL is invariant under the
      same bijection applied to both distributions.
    * :meth:`entropy` has no closed form and raises ``ValueError``; use
      ``-sample_loglikelihood(dist_info)[1]`` as a one-sample estimate.

    Args:
        dim: Action size.
        std: Fixed standard deviation (positive scalar or ``[dim]``), or None to use
            ``dist_info.log_std``.
        clip: Clip sampled actions to ``[-clip, clip]``; None for no clipping.
        noise_clip: Clip the sampling noise to ``[-noise_clip, noise_clip]``; None for none.
        min_std: Lower bound on a learned std; None for none.
        max_std: Upper bound on a learned std; None for none.
        squash: Tanh squash scale ``s`` (actions ``s * tanh(u)``); None for no squashing.

    Raises:
        ValueError: On a non-positive ``dim``, ``std``, ``clip``, ``noise_clip``, ``min_std``,
            ``max_std`` or ``squash``, or ``min_std > max_std``.

    Examples:
        >>> dist = Gaussian(dim=2, squash=1.0)
        >>> info = DistInfoStd(mean=torch.zeros(5, 2), log_std=torch.zeros(5, 2))
        >>> action, logli = dist.sample_loglikelihood(info)
        >>> action.shape, logli.shape
        (torch.Size([5, 2]), torch.Size([5]))
    """

    def __init__(
        self,
        dim: int,
        std: float | np.ndarray | torch.Tensor | None = None,
        clip: float | None = None,
        noise_clip: float | None = None,
        min_std: float | None = None,
        max_std: float | None = None,
        squash: float | None = None,
    ) -> None:
        if int(dim) != dim or dim < 1:
            raise ValueError(f"Gaussian: dim must be a positive integer, got {dim!r}")
        self._dim = int(dim)
        self.min_std = _positive_or_none("Gaussian", "min_std", min_std)
        self.max_std = _positive_or_none("Gaussian", "max_std", max_std)
        if self.min_std is not None and self.max_std is not None and self.min_std > self.max_std:
            raise ValueError(f"Gaussian: min_std={min_std} must not exceed max_std={max_std}")
        self._min_log_std = None if self.min_std is None else math.log(self.min_std)
        self._max_log_std = None if self.max_std is None else math.log(self.max_std)
        self.std: torch.Tensor | None = None
        self.clip: float | None = None
        self.noise_clip: float | None = None
        self.squash: float | None = None
        self.set_std(std)
        self.set_clip(clip)
        self.set_noise_clip(noise_clip)
        self.set_squash(squash)

    @property
    def dim(self) -> int:
        """Action size."""
        return self._dim

    def set_std(self, std: float | np.ndarray | torch.Tensor | None) -> None:
        """Fix the standard deviation (positive scalar or ``[dim]``), or None to use ``log_std``."""
        if std is None:
            self.std = None
            return
        std = torch.as_tensor(std, dtype=torch.float32).detach().clone()
        if std.ndim > 1 or std.numel() not in (1, self._dim):
            raise ValueError(f"Gaussian: std must be a scalar or [dim={self._dim}], got shape {tuple(std.shape)}")
        if not bool((std > 0).all()):
            raise ValueError(f"Gaussian: std must be positive, got {std.tolist()}")
        self.std = std

    def set_clip(self, clip: float | None) -> None:
        """Set the action clip (positive) or None to turn clipping off."""
        self.clip = _positive_or_none("Gaussian", "clip", clip)

    def set_noise_clip(self, noise_clip: float | None) -> None:
        """Set the noise clip (positive) or None to turn it off."""
        self.noise_clip = _positive_or_none("Gaussian", "noise_clip", noise_clip)

    def set_squash(self, squash: float | None) -> None:
        """Set the tanh squash scale (positive) or None to turn squashing off."""
        self.squash = _positive_or_none("Gaussian", "squash", squash)

    def sample(self, dist_info: DistInfoStd) -> torch.Tensor:
        """Draw actions ``[..., dim]``: ``mean + noise``, then squash, then clip."""
        return self._draw(dist_info)[0]

    def sample_loglikelihood(self, dist_info: DistInfoStd) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw actions and their log-likelihoods in one pass, differentiably (SAC's policy loss).

        Args:
            dist_info: ``mean`` (and ``log_std`` unless ``std`` is fixed), each ``[..., dim]``.

        Returns:
            ``(action, logli)``: the action ``[..., dim]`` exactly as :meth:`sample` makes it,
            and ``log p(action)`` ``[...]`` including the squash correction (clips ignored).
        """
        action, u, std, log_std = self._draw(dist_info)
        return action, self._log_likelihood(u, dist_info.mean, std, log_std)

    def log_likelihood(self, x: torch.Tensor, dist_info: DistInfoStd) -> torch.Tensor:
        """Log-likelihood ``[...]`` of ``x`` ``[..., dim]`` (the pre-squash ``u`` when squashing)."""
        std, log_std = self._std_log_std(dist_info)
        return self._log_likelihood(x, dist_info.mean, std, log_std)

    def kl(self, old_dist_info: DistInfoStd, new_dist_info: DistInfoStd) -> torch.Tensor:
        """``KL(old || new)`` ``[...]``, summed over the action dim (also exact when squashing)."""
        old_std, old_log_std = self._std_log_std(old_dist_info)
        new_std, new_log_std = self._std_log_std(new_dist_info)
        mean_diff_sq = (old_dist_info.mean - new_dist_info.mean) ** 2
        terms = new_log_std - old_log_std + (old_std**2 + mean_diff_sq) / (2 * new_std**2) - 0.5
        return torch.sum(terms, dim=-1)

    def entropy(self, dist_info: DistInfoStd) -> torch.Tensor:
        """Differential entropy ``[...]``: ``sum_i (log_std_i + log(2 pi e) / 2)``.

        Raises:
            ValueError: When squashing: the entropy of a tanh-squashed Gaussian has no closed form.
        """
        if self.squash is not None:
            raise ValueError(
                f"Gaussian.entropy: no closed form with squash={self.squash}; "
                "use -sample_loglikelihood(dist_info)[1] as a one-sample estimate"
            )
        _, log_std = self._std_log_std(dist_info)
        return torch.sum(log_std + 0.5 * (_LOG_2PI + 1.0), dim=-1)

    def _std_log_std(self, dist_info: DistInfoStd) -> tuple[torch.Tensor, torch.Tensor]:
        """``(std, log_std)``, each broadcast to ``dist_info.mean``'s shape."""
        mean = dist_info.mean
        if mean.ndim == 0 or mean.shape[-1] != self._dim:
            raise ValueError(
                f"Gaussian: dist_info.mean must have a trailing dim of size dim={self._dim}, "
                f"got shape {tuple(mean.shape)}"
            )
        if self.std is not None:
            std = self.std.to(device=mean.device, dtype=mean.dtype).expand(mean.shape)
            return std, torch.log(std)
        log_std = dist_info.log_std
        if log_std is None:
            raise ValueError("Gaussian: dist_info.log_std is None and no fixed std is set (set_std)")
        if self._min_log_std is not None or self._max_log_std is not None:
            log_std = torch.clamp(log_std, min=self._min_log_std, max=self._max_log_std)
        log_std = log_std.expand(mean.shape)
        return torch.exp(log_std), log_std

    def _draw(self, dist_info: DistInfoStd) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample; returns ``(action, pre-squash u, std, log_std)``."""
        std, log_std = self._std_log_std(dist_info)
        noise = std * torch.randn_like(dist_info.mean)
        if self.noise_clip is not None:
            noise = torch.clamp(noise, -self.noise_clip, self.noise_clip)
        u = dist_info.mean + noise
        action = u if self.squash is None else self.squash * torch.tanh(u)
        if self.clip is not None:
            action = torch.clamp(action, -self.clip, self.clip)
        return action, u, std, log_std

    def _log_likelihood(
        self, x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, log_std: torch.Tensor
    ) -> torch.Tensor:
        z = (x - mean) / std
        logli = -0.5 * torch.sum(z**2, dim=-1) - torch.sum(log_std, dim=-1) - 0.5 * self._dim * _LOG_2PI
        if self.squash is not None:
            # Change of variables x = s * tanh(u): log|dx/du| = log s + log(1 - tanh(u)^2), the
            # latter as 2 * (log 2 - u - softplus(-2u)), which stays finite for large |u|.
            log_det = math.log(self.squash) + 2.0 * (_LOG_2 - x - F.softplus(-2.0 * x))
            logli = logli - torch.sum(log_det, dim=-1)
        return logli
