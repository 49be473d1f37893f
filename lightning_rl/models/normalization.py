"""Running observation normalization (the ``normalize_observation`` option of the PG models)."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

__all__ = ["RunningMeanStdModel"]


class RunningMeanStdModel(nn.Module):
    """Running mean and variance of inputs, and normalization by them.

    Statistics are buffers (saved in ``state_dict``, moved with the module, shared with forked
    sampler workers along with the weights). :meth:`update` merges each batch's moments into
    the running ones with the parallel formula of Chan et al. (1979), exact for any batch
    sizes. The forward pass is ``clip((x - mean) / sqrt(max(var, var_clip)), -clip, clip)``.

    Args:
        shape: Shape of one input (the trailing dims).
        clip: Normalized values are clipped to ``[-clip, clip]``; None for no clipping.
        var_clip: Lower bound on the variance in the forward pass (avoids dividing by ~0).

    Example:
        >>> rms = RunningMeanStdModel((3,))
        >>> rms.update(torch.randn(100, 3))
        >>> rms(torch.zeros(3)).shape
        torch.Size([3])
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: Sequence[int] | int, clip: float | None = 10.0, var_clip: float = 1e-6) -> None:
        super().__init__()
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if clip is not None and clip <= 0:
            raise ValueError(f"clip must be positive or None, got {clip}")
        if var_clip < 0:
            raise ValueError(f"var_clip must be non-negative, got {var_clip}")
        self.clip = clip
        self.var_clip = var_clip
        self.register_buffer("mean", torch.zeros(self.shape))
        self.register_buffer("var", torch.ones(self.shape))
        self.register_buffer("count", torch.zeros(()))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the moments of a batch ``[..., *shape]`` (any leading dims) into the running ones."""
        if x.ndim < len(self.shape) or tuple(x.shape[x.ndim - len(self.shape) :]) != self.shape:
            raise ValueError(f"update: input shape {tuple(x.shape)} does not end in {self.shape}")
        x = x.reshape((-1,) + self.shape).to(self.mean.dtype)
        batch_count = x.shape[0]
        if batch_count == 0:
            return
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * batch_count + delta.square() * (self.count * batch_count / total)
        self.mean.add_(delta * (batch_count / total))
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` ``[..., *shape]`` with the running statistics."""
        x = (x - self.mean) / self.var.clamp(min=self.var_clip).sqrt()
        if self.clip is not None:
            x = x.clamp(-self.clip, self.clip)
        return x
