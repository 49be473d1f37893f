"""Policy-gradient models for vector observations: categorical and Gaussian, feed-forward and LSTM.

The feed-forward models follow rlpyt's ``MujocoFfModel``: separate MLPs for the policy and
the state value, both on the (optionally normalized) observation, ``Tanh`` hidden layers.
The LSTM models follow ``MujocoLstmModel``: an MLP (``ReLU``) into an LSTM that also sees the
previous action and reward, with linear policy and value outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import overload

import torch
from torch import nn

from lightning_rl.models.base import (
    CompositeEncoder,
    FeedForwardModel,
    FieldEncoder,
    ImageEncoder,
    ObservationShape,
    RecurrentModel,
    VectorEncoder,
    make_encoder,
)
from lightning_rl.models.blocks import MlpModel, init_orthogonal_
from lightning_rl.models.recurrent import LstmCore

__all__ = [
    "CategoricalPgHead",
    "CategoricalPgLstmModel",
    "CategoricalPgMlpModel",
    "GaussianPgHead",
    "GaussianPgLstmModel",
    "GaussianPgMlpModel",
]

_HIDDEN_GAIN = math.sqrt(2)
_POLICY_GAIN = 0.01
_VALUE_GAIN = 1.0


class CategoricalPgHead(nn.Module):
    """Action probabilities and state value from features.

    Args:
        input_size: Size of the features.
        action_size: Number of actions; or, for a vector of independent discrete actions
            (``MultiDiscrete``, ``MultiBinary``), the number of choices of each action dim
            (``nvec``): the output then holds one softmax per dim, side by side (see
            :class:`~lightning_rl.distributions.MultiCategorical`).
        hidden_sizes: Hidden sizes of each of the two MLPs (policy, value); None for linear.
        nonlinearity: Module class after every hidden layer.
        orthogonal_init: Orthogonal init, gain 0.01 on the policy output and 1 on the value
            output (see :func:`init_orthogonal_`); PyTorch's default init otherwise.
    """

    def __init__(
        self,
        input_size: int,
        action_size: int | Sequence[int],
        hidden_sizes: int | Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.Tanh,
        orthogonal_init: bool = True,
    ) -> None:
        super().__init__()
        sizes = _check_action_size(action_size)
        #: Choices of each action dim (None for one categorical); equal ones reshape, others split.
        self.nvec = sizes if isinstance(sizes, tuple) else None
        self._equal_nvec = self.nvec is not None and len(set(self.nvec)) == 1
        out_size = sum(sizes) if isinstance(sizes, tuple) else sizes
        self.pi = MlpModel(input_size, hidden_sizes, out_size, nonlinearity)
        self.value = MlpModel(input_size, hidden_sizes, 1, nonlinearity)
        if orthogonal_init:
            init_orthogonal_(self.pi, _HIDDEN_GAIN, _POLICY_GAIN)
            init_orthogonal_(self.value, _HIDDEN_GAIN, _VALUE_GAIN)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pi [N, A] probabilities, value [N])`` from features ``[N, input_size]``;
        ``A = sum(nvec)`` for a sequence ``action_size``, each dim's block summing to one."""
        logits = self.pi(features)
        value = self.value(features).squeeze(-1)
        if self.nvec is None:
            return torch.softmax(logits, dim=-1), value
        if self._equal_nvec:
            n = self.nvec[0]
            return torch.softmax(logits.view(-1, len(self.nvec), n), dim=-1).view(logits.shape), value
        return torch.cat([torch.softmax(z, dim=-1) for z in logits.split(self.nvec, dim=-1)], dim=-1), value


class GaussianPgHead(nn.Module):
    """Gaussian action mean, state-independent learned log std, and state value.

    Args:
        input_size: Size of the features.
        action_size: Size of the action vector.
        hidden_sizes: Hidden sizes of each of the two MLPs (mean, value); None for linear.
        nonlinearity: Module class after every hidden layer.
        mu_nonlinearity: Module class applied to the mean output (e.g. ``nn.Tanh``), or None.
        init_log_std: Initial value of every ``log_std`` entry.
        orthogonal_init: Orthogonal init, gain 0.01 on the mean output and 1 on the value output.
    """

    def __init__(
        self,
        input_size: int,
        action_size: int,
        hidden_sizes: int | Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.Tanh,
        mu_nonlinearity: type[nn.Module] | None = None,
        init_log_std: float = 0.0,
        orthogonal_init: bool = True,
    ) -> None:
        super().__init__()
        mu = MlpModel(input_size, hidden_sizes, action_size, nonlinearity)
        value = MlpModel(input_size, hidden_sizes, 1, nonlinearity)
        if orthogonal_init:
            init_orthogonal_(mu, _HIDDEN_GAIN, _POLICY_GAIN)
            init_orthogonal_(value, _HIDDEN_GAIN, _VALUE_GAIN)
        self.mu = mu if mu_nonlinearity is None else nn.Sequential(mu, mu_nonlinearity())
        self.value = value
        self.log_std = nn.Parameter(torch.full((action_size,), float(init_log_std)))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mu [N, A], log_std [N, A], value [N])`` from features ``[N, input_size]``."""
        mu = self.mu(features)
        return mu, self.log_std.expand_as(mu), self.value(features).squeeze(-1)


@overload
def _check_action_size(action_size: int) -> int: ...


@overload
def _check_action_size(action_size: int | Sequence[int]) -> int | tuple[int, ...]: ...


def _check_action_size(action_size: int | Sequence[int]) -> int | tuple[int, ...]:
    """``action_size`` as an int, or as a tuple of ints for a sequence (the categorical heads' ``nvec``)."""
    if isinstance(action_size, Sequence):
        sizes = tuple(int(a) for a in action_size)
        if not sizes or any(a < 1 for a in sizes):
            raise ValueError(f"action_size must be a positive int or a non-empty sequence of them, got {action_size}")
        return sizes
    if int(action_size) < 1:
        raise ValueError(f"action_size must be a positive int, got {action_size}")
    return int(action_size)


class CategoricalPgMlpModel(FeedForwardModel):
    """Policy and value MLPs for discrete actions (A2C/PPO on vector observations).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Number of actions.
        hidden_sizes: Hidden sizes of the policy MLP and of the value MLP.
        hidden_nonlinearity: Module class after every hidden layer.
        normalize_observation: Normalize observations with running statistics (the agent
            calls :meth:`update_obs_rms` while sampling).
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        orthogonal_init: Orthogonal initialization (see :class:`CategoricalPgHead`).
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> (pi [..., A], value [...])``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (64, 64),
        hidden_nonlinearity: type[nn.Module] = nn.Tanh,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
        orthogonal_init: bool = True,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(
            observation_shape,
            normalize_observation=normalize_observation,
            norm_obs_clip=norm_obs_clip,
            norm_obs_var_clip=norm_obs_var_clip,
            field_encoders=field_encoders,
        )
        head = CategoricalPgHead(
            encoder.output_size, _check_action_size(action_size), hidden_sizes, hidden_nonlinearity, orthogonal_init
        )
        super().__init__(encoder, head)


class GaussianPgMlpModel(FeedForwardModel):
    """Mean and value MLPs plus a learned log std for continuous actions (rlpyt ``MujocoFfModel``).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Size of the action vector.
        hidden_sizes: Hidden sizes of the mean MLP and of the value MLP.
        hidden_nonlinearity: Module class after every hidden layer.
        mu_nonlinearity: Module class applied to the mean output (rlpyt: ``Tanh``), or None.
        init_log_std: Initial ``log_std``.
        normalize_observation: Normalize observations with running statistics.
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        orthogonal_init: Orthogonal initialization (see :class:`GaussianPgHead`).
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> (mu [..., A], log_std [..., A], value [...])``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (64, 64),
        hidden_nonlinearity: type[nn.Module] = nn.Tanh,
        mu_nonlinearity: type[nn.Module] | None = nn.Tanh,
        init_log_std: float = 0.0,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
        orthogonal_init: bool = True,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(
            observation_shape,
            normalize_observation=normalize_observation,
            norm_obs_clip=norm_obs_clip,
            norm_obs_var_clip=norm_obs_var_clip,
            field_encoders=field_encoders,
        )
        head = GaussianPgHead(
            encoder.output_size,
            _check_action_size(action_size),
            hidden_sizes,
            hidden_nonlinearity,
            mu_nonlinearity,
            init_log_std,
            orthogonal_init,
        )
        super().__init__(encoder, head)


def _pg_lstm_parts(
    observation_shape: ObservationShape,
    action_size: int | Sequence[int],
    hidden_sizes: Sequence[int],
    lstm_size: int,
    nonlinearity: type[nn.Module],
    discrete_action: bool,
    normalize_observation: bool,
    norm_obs_clip: float,
    norm_obs_var_clip: float,
    orthogonal_init: bool,
    field_encoders: dict[str, FieldEncoder] | None,
) -> tuple[VectorEncoder | CompositeEncoder | ImageEncoder, LstmCore]:
    encoder = make_encoder(
        observation_shape,
        hidden_sizes,
        nonlinearity,
        normalize_observation=normalize_observation,
        norm_obs_clip=norm_obs_clip,
        norm_obs_var_clip=norm_obs_var_clip,
        field_encoders=field_encoders,
    )
    lstm = LstmCore(encoder.output_size, _check_action_size(action_size), lstm_size, discrete_action)
    if orthogonal_init:
        init_orthogonal_(encoder, _HIDDEN_GAIN)
        init_orthogonal_(lstm)
    return encoder, lstm


class CategoricalPgLstmModel(RecurrentModel):
    """MLP into an LSTM (with one-hot previous action and previous reward) for discrete actions.

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Number of actions; or, for a vector of discrete actions (``MultiDiscrete``,
            ``MultiBinary``), the number of choices of each dim (``nvec``): the policy then
            outputs one softmax per dim side by side, and the LSTM sees the previous action as
            one one-hot per dim, or as bits when every dim has two choices (see
            :class:`~lightning_rl.models.LstmCore`).
        hidden_sizes: Hidden sizes of the MLP before the LSTM.
        lstm_size: LSTM hidden size.
        hidden_nonlinearity: Module class after every hidden layer.
        normalize_observation: Normalize observations with running statistics.
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        orthogonal_init: Orthogonal initialization of every layer (LSTM gain 1).
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward, init_rnn_state) -> (pi [..., A],
    value [...], next_rnn_state)``; ``prev_action`` is ``[...]`` long, or ``[..., D]`` zero-based
    indexes for ``D`` action dims; ``A = sum(nvec)`` for vector actions.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int | Sequence[int],
        hidden_sizes: Sequence[int] = (256,),
        lstm_size: int = 256,
        hidden_nonlinearity: type[nn.Module] = nn.ReLU,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
        orthogonal_init: bool = True,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder, lstm = _pg_lstm_parts(
            observation_shape,
            action_size,
            hidden_sizes,
            lstm_size,
            hidden_nonlinearity,
            True,
            normalize_observation,
            norm_obs_clip,
            norm_obs_var_clip,
            orthogonal_init,
            field_encoders,
        )
        head = CategoricalPgHead(lstm.output_size, action_size, None, orthogonal_init=orthogonal_init)
        super().__init__(encoder, lstm, head)


class GaussianPgLstmModel(RecurrentModel):
    """MLP into an LSTM (with previous action and reward) for continuous actions.

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Size of the action vector.
        hidden_sizes: Hidden sizes of the MLP before the LSTM.
        lstm_size: LSTM hidden size.
        hidden_nonlinearity: Module class after every hidden layer.
        mu_nonlinearity: Module class applied to the mean output, or None (rlpyt: none).
        init_log_std: Initial ``log_std`` (a learned, state-independent parameter).
        normalize_observation: Normalize observations with running statistics.
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        orthogonal_init: Orthogonal initialization of every layer (LSTM gain 1).
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward, init_rnn_state) -> (mu [..., A],
    log_std [..., A], value [...], next_rnn_state)``; ``prev_action`` is ``[..., A]``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (256,),
        lstm_size: int = 256,
        hidden_nonlinearity: type[nn.Module] = nn.ReLU,
        mu_nonlinearity: type[nn.Module] | None = None,
        init_log_std: float = 0.0,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
        orthogonal_init: bool = True,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder, lstm = _pg_lstm_parts(
            observation_shape,
            action_size,
            hidden_sizes,
            lstm_size,
            hidden_nonlinearity,
            False,
            normalize_observation,
            norm_obs_clip,
            norm_obs_var_clip,
            orthogonal_init,
            field_encoders,
        )
        head = GaussianPgHead(
            lstm.output_size,
            action_size,
            None,
            mu_nonlinearity=mu_nonlinearity,
            init_log_std=init_log_std,
            orthogonal_init=orthogonal_init,
        )
        super().__init__(encoder, lstm, head)
