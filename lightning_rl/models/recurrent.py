"""LSTM core shared by the recurrent models (PG LSTM models and R2D1)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_rl.data import NamedArrayTupleBase, to_onehot

__all__ = ["LstmCore", "RnnState"]


class RnnState(NamedArrayTupleBase):
    """LSTM hidden and cell state, each ``[num_layers, B, lstm_size]``.

    Models keep the ``B`` dim even for unbatched (``[]``) inputs, where ``B == 1``.
    """

    h: Any
    c: Any


class LstmCore(nn.Module):
    """An LSTM over ``[T, B]`` features with the previous action and reward appended.

    The input at each step is ``[features, prev_action, prev_reward]``: discrete actions enter
    one-hot, continuous ones as they are (Kapturowski et al. 2019 and rlpyt feed both to the
    LSTM so it can infer what the last step did).

    Args:
        input_size: Size of the features from the encoder.
        action_size: Number of discrete actions, or the size of a continuous action.
        lstm_size: Hidden size of the LSTM.
        discrete_action: Whether ``prev_action`` holds integer indexes (one-hot inside).
        num_layers: Stacked LSTM layers.
    """

    def __init__(
        self, input_size: int, action_size: int, lstm_size: int, discrete_action: bool = True, num_layers: int = 1
    ) -> None:
        super().__init__()
        if lstm_size < 1:
            raise ValueError(f"lstm_size must be a positive int, got {lstm_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, got {num_layers}")
        self.action_size = int(action_size)
        self.discrete_action = discrete_action
        self.lstm_size = int(lstm_size)
        self.num_layers = int(num_layers)
        self.lstm = nn.LSTM(input_size + self.action_size + 1, self.lstm_size, self.num_layers)

    @property
    def output_size(self) -> int:
        """Size of the LSTM output features."""
        return self.lstm_size

    def _initial_state(self, init_rnn_state: Any, B: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        if init_rnn_state is None:
            return None
        h, c = init_rnn_state
        if h.ndim == 2:  # [num_layers, H] from an unbatched caller.
            h, c = h.unsqueeze(1), c.unsqueeze(1)
        expected = (self.num_layers, B, self.lstm_size)
        if tuple(h.shape) != expected or tuple(c.shape) != expected:
            raise ValueError(
                f"init_rnn_state must hold [num_layers, B, lstm_size] = {list(expected)} tensors, got "
                f"h {list(h.shape)} and c {list(c.shape)}"
            )
        # Agents often gather states from [B, num_layers, H] buffers: nn.LSTM wants contiguous.
        return h.contiguous(), c.contiguous()

    def forward(
        self,
        features: torch.Tensor,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
        init_rnn_state: Any,
        T: int,
        B: int,
    ) -> tuple[torch.Tensor, RnnState]:
        """Run the LSTM over ``T`` steps.

        Args:
            features: ``[T*B, input_size]``, time-major.
            prev_action: ``T*B`` elements (long indexes) if discrete, else ``T*B*action_size``.
            prev_reward: ``T*B`` elements.
            init_rnn_state: ``RnnState`` (or ``(h, c)``) of ``[num_layers, B, lstm_size]``
                tensors, or None for zeros.
            T: Time steps.
            B: Batch size.

        Returns:
            ``(output [T*B, lstm_size], next RnnState [num_layers, B, lstm_size])``.
        """
        N = T * B
        if self.discrete_action:
            action = to_onehot(prev_action.reshape(N), self.action_size, dtype=features.dtype)
        else:
            action = prev_action.reshape(N, self.action_size).to(features.dtype)
        reward = prev_reward.reshape(N, 1).to(features.dtype)
        x = torch.cat([features, action, reward], dim=-1).view(T, B, -1)
        output, (h, c) = self.lstm(x, self._initial_state(init_rnn_state, B))
        return output.reshape(N, self.lstm_size), RnnState(h, c)
