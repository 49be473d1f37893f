"""DQN-family models for vector observations: DQN, categorical DQN and R2D1.

The Atari versions are in :mod:`lightning_rl.models.atari`; both share the Q heads of
:func:`lightning_rl.models.blocks.make_q_head`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lightning_rl.models.base import FeedForwardModel, FieldEncoder, ObservationShape, RecurrentModel, make_encoder
from lightning_rl.models.blocks import make_q_head
from lightning_rl.models.recurrent import LstmCore

__all__ = ["CatDqnMlpModel", "DqnMlpModel", "R2d1MlpModel"]


class DqnMlpModel(FeedForwardModel):
    """MLP (or dueling MLP) with one Q-value per action.

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Number of actions.
        hidden_sizes: Hidden sizes (of each stream if dueling).
        dueling: Dueling head (Wang et al. 2016): separate value and advantage MLPs.
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> q [..., A]``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (64, 64),
        dueling: bool = False,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(observation_shape, field_encoders=field_encoders)
        super().__init__(encoder, make_q_head(encoder.output_size, hidden_sizes, action_size, dueling))


class CatDqnMlpModel(FeedForwardModel):
    """MLP (or dueling MLP) with ``n_atoms`` return probabilities per action (Bellemare et al. 2017).

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Number of actions.
        hidden_sizes: Hidden sizes (of each stream if dueling).
        n_atoms: Atoms of each return distribution.
        dueling: Dueling head.
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward) -> p [..., A, n_atoms]`` (softmax over atoms).
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (64, 64),
        n_atoms: int = 51,
        dueling: bool = False,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(observation_shape, field_encoders=field_encoders)
        super().__init__(encoder, make_q_head(encoder.output_size, hidden_sizes, action_size, dueling, n_atoms))
        #: Atoms of each return distribution (agents check it against their own support).
        self.n_atoms = int(n_atoms)

    def outputs(self, head_output: torch.Tensor) -> torch.Tensor:
        """Softmax over atoms of the ``[N, A, n_atoms]`` logits."""
        return torch.softmax(head_output, dim=-1)


class R2d1MlpModel(RecurrentModel):
    """MLP into an LSTM (with one-hot previous action and previous reward), then an MLP or
    dueling Q head: R2D1 (Kapturowski et al. 2019) for vector observations.

    Args:
        observation_shape: One observation's shape or space (:data:`~lightning_rl.models.ObservationShape`).
        action_size: Number of actions.
        hidden_sizes: Hidden sizes of the MLP before the LSTM (ReLU).
        lstm_size: LSTM hidden size.
        head_size: Hidden size of the Q head (of each stream if dueling).
        dueling: Dueling head.
        field_encoders: Settings per field of a dict or tuple observation (:class:`~lightning_rl.models.FieldEncoder`).

    ``forward(observation, prev_action, prev_reward, init_rnn_state) -> (q [..., A], next_rnn_state)``.
    """

    def __init__(
        self,
        observation_shape: ObservationShape,
        action_size: int,
        hidden_sizes: Sequence[int] = (128,),
        lstm_size: int = 128,
        head_size: int = 128,
        dueling: bool = False,
        field_encoders: dict[str, FieldEncoder] | None = None,
    ) -> None:
        encoder = make_encoder(observation_shape, hidden_sizes, field_encoders=field_encoders)
        lstm = LstmCore(encoder.output_size, action_size, lstm_size, discrete_action=True)
        super().__init__(encoder, lstm, make_q_head(lstm.output_size, head_size, action_size, dueling))
