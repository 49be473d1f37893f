"""Q-value policy-gradient models (DDPG, TD3, SAC): mu, Q(s, a) and Gaussian pi MLPs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from lightning_rl.data import restore_leading_dims
from lightning_rl.models.base import (
    FeedForwardModel,
    FieldEncoder,
    ObservationShape,
    flatten_observation,
    make_encoder,
)
from lightning_rl.models.blocks import MlpModel

__all__ = ["MuMlpModel", "PiMlpModel", "QofMuMlpModel"]


class MuMlpModel(FeedForwardModel):
    """Deterministic policy ``mu(s) = output_max * tanh(MLP(s))`` (DDPG, TD3).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Size of the action vector.
        hidden_sizes: MLP hidden sizes (ReLU); rlpyt's DDPG default ``(400, 300)``.
        output_max: Bound of the action (actions in ``[-output_max, output_max]``).
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> mu [..., A]``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (400, 300),
        output_max: float = 1.0,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        if output_max <= 0:
            raise ValueError(f"output_max must be positive, got {output_max}")
        encoder = make_encoder(observation_shape, field_encoders=field_encoders)
        super().__init__(encoder, MlpModel(encoder.output_size, hidden_sizes, action_size))
        self.output_max = float(output_max)

    def outputs(self, head_output: torch.Tensor) -> torch.Tensor:
        """Squash ``[N, A]`` to ``[-output_max, output_max]``."""
        return self.output_max * torch.tanh(head_output)


class PiMlpModel(FeedForwardModel):
    """Gaussian policy MLP with state-dependent mean and log std (SAC, before the tanh squash).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Size of the action vector.
        hidden_sizes: MLP hidden sizes (ReLU); rlpyt's SAC default ``(256, 256)``.
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> (mu [..., A], log_std [..., A])``
    (``log_std`` unclipped: the agent bounds it).
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (256, 256),
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(observation_shape, field_encoders=field_encoders)
        super().__init__(encoder, MlpModel(encoder.output_size, hidden_sizes, 2 * int(action_size)))
        self.action_size = int(action_size)

    def outputs(self, head_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Split ``[N, 2A]`` into ``(mu [N, A], log_std [N, A])``."""
        mu, log_std = head_output.split(self.action_size, dim=-1)
        return mu, log_std


class QofMuMlpModel(nn.Module):
    """Action-value MLP ``Q(s, a)`` on the concatenated observation and action (DDPG, TD3, SAC).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Size of the action vector.
        hidden_sizes: MLP hidden sizes (ReLU); rlpyt's DDPG default ``(400, 300)``.
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (400, 300),
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        super().__init__()
        if int(action_size) < 1:
            raise ValueError(f"action_size must be a positive int, got {action_size}")
        self.encoder = make_encoder(observation_shape, field_encoders=field_encoders)
        self.action_size = int(action_size)
        self.mlp = MlpModel(self.encoder.output_size + self.action_size, hidden_sizes, 1)

    def forward(
        self,
        observation: Any,
        prev_action: torch.Tensor | None,
        prev_reward: torch.Tensor | None,
        action: torch.Tensor,
    ) -> torch.Tensor:
        """Q-values ``[...]`` with the leading dims of ``observation``.

        Args:
            observation: ``[..., *observation_shape]``, or a tuple of such fields.
            prev_action: Unused (kept for the common signature).
            prev_reward: Unused.
            action: ``[..., action_size]``, same leading dims as ``observation``.
        """
        # A dict or tuple observation's action joins the concatenated field features.
        observation, lead_dim, T, B = flatten_observation(self.encoder, observation)
        obs = self.encoder(observation)
        act = action.reshape(T * B, self.action_size).to(obs.dtype)
        q = self.mlp(torch.cat([obs, act], dim=-1)).squeeze(-1)
        return restore_leading_dims(q, lead_dim, T, B)
