"""Epsilon-greedy action selection from Q-values or return distributions (rlpyt section 9)."""

from __future__ import annotations

import numpy as np
import torch

from lightning_rl.distributions.base import DiscreteMixin, Distribution

__all__ = ["CategoricalEpsilonGreedy", "EpsilonGreedy"]


class EpsilonGreedy(DiscreteMixin, Distribution):
    """Greedy action with probability ``1 - epsilon``, else an action uniform over ``range(dim)``.

    The uniform draw includes the greedy action, so the greedy action's probability is
    ``1 - epsilon + epsilon / dim``. ``epsilon`` is a scalar, or a vector ``[B]`` giving each
    env its own value (Ape-X style); a vector applies along the batch dim ``B``, the dim just
    before the action dim, and is the same for every time step of ``[T, B, dim]`` inputs.

    Args:
        dim: Number of actions.
        epsilon: Exploration probability in ``[0, 1]``: a float or a ``[B]`` vector.
        dtype: dtype of sampled actions.
        onehot_dtype: Default dtype of :meth:`to_onehot`.

    Examples:
        >>> dist = EpsilonGreedy(dim=4, epsilon=0.0)
        >>> dist.sample(torch.tensor([[0.0, 2.0, 1.0, 0.0]]))
        tensor([1])
    """

    def __init__(
        self,
        dim: int,
        epsilon: float | np.ndarray | torch.Tensor = 1.0,
        dtype: torch.dtype = torch.long,
        onehot_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(dim, dtype=dtype, onehot_dtype=onehot_dtype)
        self._epsilon: float | torch.Tensor = 1.0
        self.set_epsilon(epsilon)

    @property
    def epsilon(self) -> float | torch.Tensor:
        """The current epsilon: a float, or a ``[B]`` float tensor."""
        return self._epsilon

    def set_epsilon(self, epsilon: float | np.ndarray | torch.Tensor) -> None:
        """Assign epsilon: a scalar in ``[0, 1]`` or a ``[B]`` vector of them.

        Raises:
            ValueError: If a value lies outside ``[0, 1]`` or the array has more than one dim.
        """
        eps = torch.as_tensor(epsilon, dtype=torch.float32)
        if eps.ndim > 1:
            raise ValueError(f"EpsilonGreedy: epsilon must be a scalar or a [B] vector, got shape {tuple(eps.shape)}")
        if eps.numel() == 0 or bool(((eps < 0) | (eps > 1) | torch.isnan(eps)).any()):
            raise ValueError(f"EpsilonGreedy: epsilon values must lie in [0, 1], got {epsilon!r}")
        self._epsilon = float(eps) if eps.ndim == 0 else eps.clone()

    def sample(self, q: torch.Tensor) -> torch.Tensor:
        """Epsilon-greedy actions from Q-values.

        Args:
            q: Q-values ``[..., dim]``; with a vector epsilon, ``[B, dim]`` or ``[T, B, dim]``.

        Returns:
            Actions ``[...]`` (dtype ``self.dtype``).

        Raises:
            ValueError: If the trailing dim is not ``dim`` or a vector epsilon does not match ``B``.
        """
        self._check_trailing(q, "q")
        return self._epsilon_select(torch.argmax(q, dim=-1))

    def _epsilon_select(self, greedy: torch.Tensor) -> torch.Tensor:
        """Replace each entry of ``greedy`` ``[...]`` by a uniform action with probability epsilon."""
        eps = self._epsilon
        if isinstance(eps, torch.Tensor):
            if greedy.ndim == 0 or greedy.shape[-1] != eps.numel():
                raise ValueError(
                    f"{type(self).__name__}: vector epsilon of length {eps.numel()} needs a batch dim B of the "
                    f"same size just before the action dim; got action leading dims {tuple(greedy.shape)}"
                )
            eps = eps.to(greedy.device)
        elif eps == 0.0:
            return greedy.to(self.dtype)
        explore = torch.rand(greedy.shape, device=greedy.device) < eps
        random_actions = torch.randint(self.dim, greedy.shape, device=greedy.device)
        return torch.where(explore, random_actions, greedy).to(self.dtype)


class CategoricalEpsilonGreedy(EpsilonGreedy):
    """Epsilon-greedy over the means of categorical return distributions (C51, rlpyt section 3.2).

    The greedy action maximizes ``Q(a) = sum_i p[a, i] * z[i]`` for atom values ``z`` ``[n_atoms]``.

    Args:
        dim: Number of actions.
        z: Atom values ``[n_atoms]``, or None to set later with :meth:`set_z`.
        epsilon: As in :class:`EpsilonGreedy`.
        dtype: dtype of sampled actions.
        onehot_dtype: Default dtype of :meth:`to_onehot`.
    """

    def __init__(
        self,
        dim: int,
        z: torch.Tensor | np.ndarray | None = None,
        epsilon: float | np.ndarray | torch.Tensor = 1.0,
        dtype: torch.dtype = torch.long,
        onehot_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(dim, epsilon=epsilon, dtype=dtype, onehot_dtype=onehot_dtype)
        self.z: torch.Tensor | None = None
        if z is not None:
            self.set_z(z)

    def set_z(self, z: torch.Tensor | np.ndarray) -> None:
        """Assign the atom values ``z`` ``[n_atoms]``.

        Raises:
            ValueError: If ``z`` is not a non-empty vector.
        """
        z = torch.as_tensor(z, dtype=torch.float32)
        if z.ndim != 1 or z.numel() == 0:
            raise ValueError(
                f"CategoricalEpsilonGreedy: z must be a non-empty [n_atoms] vector, got shape {tuple(z.shape)}"
            )
        self.z = z

    def sample(self, p: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """Epsilon-greedy actions from return distributions.

        Args:
            p: Atom probabilities ``[..., dim, n_atoms]``.
            z: Atom values ``[n_atoms]`` for this call; default ``self.z``.

        Returns:
            Actions ``[...]`` (dtype ``self.dtype``).

        Raises:
            ValueError: If no ``z`` is known, or the shapes of ``p`` and ``z`` disagree.
        """
        z = self.z if z is None else torch.as_tensor(z)
        if z is None:
            raise ValueError("CategoricalEpsilonGreedy: z is None; pass z or call set_z first")
        if p.ndim < 2 or p.shape[-2] != self.dim or p.shape[-1] != z.shape[-1]:
            raise ValueError(
                f"CategoricalEpsilonGreedy: p must be [..., dim={self.dim}, n_atoms={z.shape[-1]}], "
                f"got shape {tuple(p.shape)}"
            )
        q = torch.sum(p * z.to(device=p.device, dtype=p.dtype), dim=-1)
        return self._epsilon_select(torch.argmax(q, dim=-1))
