"""Observation encoders and the two model skeletons every task model is built from.

A task model is ``encoder -> [LSTM core ->] head``:

* the encoder turns one observation into a feature vector (:class:`VectorEncoder` flattens,
  optionally normalizes and runs an MLP; :class:`ImageEncoder` scales uint8 frames and runs a
  conv stack);
* :class:`FeedForwardModel` and :class:`RecurrentModel` handle the ``[]``, ``[B]`` or
  ``[T, B]`` leading dims once, so concrete models only choose their parts.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from lightning_rl.data import infer_leading_dims, restore_leading_dims
from lightning_rl.models.blocks import Conv2dHeadModel, MlpModel
from lightning_rl.models.normalization import RunningMeanStdModel
from lightning_rl.models.recurrent import LstmCore, RnnState

__all__ = ["FeedForwardModel", "ImageEncoder", "ModelFactory", "RecurrentModel", "VectorEncoder", "is_recurrent_model"]


# Stacks a tensor from every DDP rank (``LightningModule.all_gather``).
AllGather = Callable[[torch.Tensor], torch.Tensor]

#: What an agent's ``model`` (or ``q_model``) argument is: a callable that builds a network from
#: the env-dependent leading positional arguments every model class takes, ``(observation_shape,
#: action_size)`` (``(image_shape, output_size)`` for the Atari models). In a config it is a model
#: class with its other arguments, which jsonargparse turns into such a callable::
#:
#:     model:
#:       class_path: lightning_rl.models.CategoricalPgMlpModel
#:       init_args: {hidden_sizes: [128, 128], hidden_nonlinearity: torch.nn.ReLU}
ModelFactory = Callable[[Sequence[int], int], nn.Module]


def is_recurrent_model(model: nn.Module) -> bool:
    """Whether ``model`` is recurrent: its ``forward`` takes an ``init_rnn_state`` argument.

    That is the calling convention of every recurrent model (:class:`RecurrentModel`: the state
    comes after ``(observation, prev_action, prev_reward)`` and the next state is returned last);
    feed-forward models take no state. The check reads the signature only, so it runs no forward
    pass and works for models that do not derive from the skeletons here.
    """
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # builtins without a signature: no state argument known
        return False
    return "init_rnn_state" in parameters


class Encoder(Protocol):
    """What the model skeletons need of an encoder (:class:`VectorEncoder`, :class:`ImageEncoder`)."""

    obs_ndim: int

    def __call__(self, observation: torch.Tensor) -> torch.Tensor: ...

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None: ...


class VectorEncoder(nn.Module):
    """Flatten a vector observation, optionally normalize it, optionally run an MLP.

    Args:
        observation_shape: Shape of one observation.
        hidden_sizes: MLP hidden sizes; empty or None for no MLP (features = observation).
        nonlinearity: Module class after every hidden layer.
        normalize_observation: Normalize with running mean/std (:class:`RunningMeanStdModel`),
            updated by :meth:`update_obs_rms`.
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
    """

    def __init__(
        self,
        observation_shape: Sequence[int],
        hidden_sizes: int | Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.ReLU,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
    ) -> None:
        super().__init__()
        self.observation_shape = tuple(int(s) for s in observation_shape)
        self.obs_ndim = len(self.observation_shape)
        self.obs_size = math.prod(self.observation_shape)
        self.obs_rms = (
            RunningMeanStdModel((self.obs_size,), norm_obs_clip, norm_obs_var_clip) if normalize_observation else None
        )
        self.mlp = MlpModel(self.obs_size, hidden_sizes, nonlinearity=nonlinearity)

    @property
    def output_size(self) -> int:
        """Size of the features."""
        return self.mlp.output_size

    def flatten(self, observation: torch.Tensor) -> torch.Tensor:
        """``[N, *observation_shape]`` to normalized float ``[N, obs_size]`` (no MLP)."""
        x = observation.reshape(observation.shape[0], self.obs_size).float()
        return x if self.obs_rms is None else self.obs_rms(x)

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        """Update the running statistics with observations ``[..., *observation_shape]``.

        ``all_gather`` merges every DDP rank's batch (see :meth:`RunningMeanStdModel.update`).
        """
        if self.obs_rms is not None:
            self.obs_rms.update(observation.reshape(-1, self.obs_size).float(), all_gather)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Features ``[N, output_size]`` of observations ``[N, *observation_shape]``."""
        return self.mlp(self.flatten(observation))


class ImageEncoder(nn.Module):
    """Scale uint8 frames to ``[0, 1]``, then a conv stack and optional fully connected layers.

    Frames stay uint8 until here (4x less memory and transfer than float32); inputs of any
    dtype are divided by 255, so a float frame with values in ``[0, 255]`` gives the same
    features as its uint8 version.

    Args:
        image_shape: ``(C, H, W)`` of one observation (stacked frames as channels).
        channels: Output channels of each conv layer.
        kernel_sizes: Kernel size of each conv layer.
        strides: Stride of each conv layer.
        paddings: Zero padding of each conv layer.
        fc_sizes: Fully connected layers after the convs (an int for one layer, None for none).
        use_maxpool: Downsample with max-pooling instead of strides.
        nonlinearity: Module class after every layer.
    """

    obs_rms = None

    def __init__(
        self,
        image_shape: Sequence[int],
        channels: Sequence[int],
        kernel_sizes: Sequence[int],
        strides: Sequence[int],
        paddings: Sequence[int] | None = None,
        fc_sizes: int | Sequence[int] | None = None,
        use_maxpool: bool = False,
        nonlinearity: type[nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        self.observation_shape = tuple(int(s) for s in image_shape)
        self.obs_ndim = 3
        self.conv = Conv2dHeadModel(
            self.observation_shape,
            channels,
            kernel_sizes,
            strides,
            fc_sizes,
            paddings=paddings,
            nonlinearity=nonlinearity,
            use_maxpool=use_maxpool,
        )

    @property
    def output_size(self) -> int:
        """Size of the features."""
        return self.conv.output_size

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        """No running statistics for images (kept for a uniform encoder interface)."""

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Features ``[N, output_size]`` of frames ``[N, C, H, W]`` (uint8 or float in [0, 255])."""
        x = observation.to(torch.float32)
        # In place only on our own copy: a float input must not be modified for the caller.
        x = x.div_(255.0) if x is not observation else x / 255.0
        return self.conv(x)


class FeedForwardModel(nn.Module):
    """``encoder -> head -> outputs``, over inputs with leading dims ``[]``, ``[B]`` or ``[T, B]``.

    Subclasses build ``encoder`` (:class:`VectorEncoder` or :class:`ImageEncoder`) and ``head``
    and may override :meth:`outputs` to post-process the head's result (softmax, tanh, split).

    Args:
        encoder: Maps ``[N, *observation_shape]`` to ``[N, F]``; has ``obs_ndim``.
        head: Maps ``[N, F]`` to a tensor or a tuple of tensors with leading dim ``N``.
    """

    def __init__(self, encoder: Encoder, head: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head

    def outputs(self, head_output: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Post-process the head's ``[N, ...]`` output (identity by default)."""
        return head_output

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        """Update running observation statistics (no-op unless ``normalize_observation``)."""
        self.encoder.update_obs_rms(observation, all_gather)

    def forward(
        self,
        observation: torch.Tensor,
        prev_action: torch.Tensor | None = None,
        prev_reward: torch.Tensor | None = None,
    ) -> Any:
        """Outputs with the leading dims of ``observation`` (``[]``, ``[B]`` or ``[T, B]``).

        Args:
            observation: ``[..., *observation_shape]``.
            prev_action: Unused by feed-forward models (kept for the common signature).
            prev_reward: Unused by feed-forward models.
        """
        lead_dim, T, B, shape = infer_leading_dims(observation, self.encoder.obs_ndim)
        out = self.outputs(self.head(self.encoder(observation.reshape((T * B,) + shape))))
        return restore_leading_dims(out, lead_dim, T, B)


class RecurrentModel(nn.Module):
    """``encoder -> LSTM (with prev action and reward) -> head``, over ``[]``, ``[B]`` or ``[T, B]``.

    For ``[T, B]`` inputs the LSTM runs over the ``T`` steps starting from ``init_rnn_state``;
    the returned state is the one after the last step, ``[num_layers, B, lstm_size]`` (``B = 1``
    for unbatched inputs).

    Args:
        encoder: Maps ``[N, *observation_shape]`` to ``[N, F]``; has ``obs_ndim``.
        lstm: :class:`LstmCore` taking ``F`` features.
        head: Maps ``[N, lstm_size]`` to a tensor or a tuple of tensors.
    """

    def __init__(self, encoder: Encoder, lstm: LstmCore, head: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.lstm = lstm
        self.head = head

    def outputs(self, head_output: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Post-process the head's ``[N, ...]`` output (identity by default)."""
        return head_output

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        """Update running observation statistics (no-op unless ``normalize_observation``)."""
        self.encoder.update_obs_rms(observation, all_gather)

    @property
    def rnn_state_shape(self) -> tuple[int, int]:
        """``(num_layers, lstm_size)``: each state tensor is ``[num_layers, B, lstm_size]``."""
        return self.lstm.num_layers, self.lstm.lstm_size

    def zero_rnn_state(self, batch_size: int, device: torch.device | str | None = None) -> RnnState:
        """An all-zero ``RnnState`` for ``batch_size`` envs (what ``init_rnn_state=None`` means)."""
        shape = (self.lstm.num_layers, batch_size, self.lstm.lstm_size)
        return RnnState(torch.zeros(shape, device=device), torch.zeros(shape, device=device))

    def forward(
        self,
        observation: torch.Tensor,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
        init_rnn_state: RnnState | None = None,
    ) -> tuple[Any, ...]:
        """Outputs with the leading dims of ``observation``, then the next ``RnnState``.

        Args:
            observation: ``[..., *observation_shape]``.
            prev_action: ``[...]`` long indexes (discrete) or ``[..., action_size]``.
            prev_reward: ``[...]``.
            init_rnn_state: ``RnnState`` of ``[num_layers, B, lstm_size]`` tensors; None for zeros.

        Returns:
            The head's outputs (each ``[..., ...]``) followed by the next ``RnnState``.
        """
        lead_dim, T, B, shape = infer_leading_dims(observation, self.encoder.obs_ndim)
        features = self.encoder(observation.reshape((T * B,) + shape))
        lstm_out, next_rnn_state = self.lstm(features, prev_action, prev_reward, init_rnn_state, T, B)
        out = restore_leading_dims(self.outputs(self.head(lstm_out)), lead_dim, T, B)
        return (*out, next_rnn_state) if isinstance(out, tuple) else (out, next_rnn_state)
