"""Running observation normalization (the ``normalize_observation`` option of the PG models)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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

    Examples:
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
    def update(self, x: torch.Tensor, all_gather: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        """Merge the moments of a batch ``[..., *shape]`` (any leading dims) into the running ones.

        Args:
            x: The batch.
            all_gather: Under DDP, a function that stacks a tensor from every rank (e.g.
                ``LightningModule.all_gather``). Every rank then merges all ranks' batch moments
                in rank order, so the statistics stay identical across ranks; every rank must
                call ``update`` at the same point (it is a collective).
        """
        if x.ndim < len(self.shape) or tuple(x.shape[x.ndim - len(self.shape) :]) != self.shape:
            raise ValueError(f"update: input shape {tuple(x.shape)} does not end in {self.shape}")
        x = x.reshape((-1,) + self.shape).to(self.mean.dtype)
        count = x.new_full((1,), x.shape[0])
        if x.shape[0] == 0:
            mean, var = torch.zeros_like(self.mean), torch.zeros_like(self.var)
        else:
            mean, var = x.mean(dim=0), x.var(dim=0, unbiased=False)
        if all_gather is None:
            self._merge(count[0], mean, var)
            return
        size = self.mean.numel()
        rows = all_gather(torch.cat([count, mean.flatten(), var.flatten()])).reshape(-1, 1 + 2 * size)
        for row in rows:
            self._merge(row[0], row[1 : 1 + size].view(self.shape), row[1 + size :].view(self.shape))

    def _merge(self, batch_count: torch.Tensor, batch_mean: torch.Tensor, batch_var: torch.Tensor) -> None:
        if batch_count == 0:
            return
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
