"""LSTM core shared by the recurrent models (PG LSTM models and R2D1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from lightning_rl.data import NamedArrayTupleBase, to_onehot
from lightning_rl.models.blocks import concat_onehot

__all__ = ["LstmCore", "RnnState"]


class RnnState(NamedArrayTupleBase):
    """LSTM hidden and cell state, each ``[num_layers, B, lstm_size]``.

    Models keep the ``B`` dim even for unbatched (``[]``) inputs, where ``B == 1``.
    """

    h: Any
    c: Any


class LstmCore(nn.Module):
    """An LSTM over ``[T, B]`` features with the previous action and reward appended.

    The input at each step is ``[features, prev_action, prev_reward]`` (Kapturowski et al. 2019
    and rlpyt feed both to the LSTM so it can infer what the last step did). How the previous
    action enters depends on ``action_size`` and ``discrete_action``:

    * an int, discrete (``Discrete``): the one-hot of the index, ``[action_size]``;
    * an int, continuous: the action vector as it is, ``[action_size]``;
    * a sequence ``nvec`` (``MultiDiscrete``): one one-hot per action dim, dim ``d``
      over ``nvec[d]`` classes, side by side, ``[sum(nvec)]`` (the layout of
      :class:`~lightning_rl.distributions.MultiCategorical`'s probabilities);
    * a sequence of 2s (``MultiBinary``): the bits as floats, ``[len(nvec)]``. A two-class
      one-hot ``[1 - b, b]`` carries nothing more than ``b``; this is the same all-2s test by
      which :class:`~lightning_rl.agents.CategoricalPgAgent` picks its Bernoulli policy.

    Vector actions must be zero-based indexes (``0 <= a[d] < nvec[d]``): agents remove a space's
    ``start`` offsets before the model (see ``CategoricalPgAgent.to_agent_inputs``).

    Args:
        input_size: Size of the features from the encoder.
        action_size: Number of discrete actions, the size of a continuous action, or the number
            of choices of each dim of a vector of discrete actions (``nvec``).
        lstm_size: Hidden size of the LSTM.
        discrete_action: Whether ``prev_action`` holds integer indexes (one-hot inside); must be
            True for a sequence ``action_size``.
        num_layers: Stacked LSTM layers.

    Raises:
        ValueError: If ``action_size`` is not a positive int or a non-empty sequence of them (a
            sequence with ``discrete_action=False``), or ``lstm_size`` or ``num_layers`` is not
            positive.
    """

    _onehot_starts: torch.Tensor  # a buffer, registered for vector actions only

    def __init__(
        self,
        input_size: int,
        action_size: int | Sequence[int],
        lstm_size: int,
        discrete_action: bool = True,
        num_layers: int = 1,
    ) -> None:
        super().__init__()
        if lstm_size < 1:
            raise ValueError(f"lstm_size must be a positive int, got {lstm_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, got {num_layers}")
        #: Choices of each action dim for a vector of discrete actions, else None.
        self.nvec: tuple[int, ...] | None = None
        #: Whether a vector action enters as bits (all dims binary) rather than one-hots.
        self.binary_action = False
        if isinstance(action_size, Sequence):
            nvec = tuple(int(n) for n in action_size)
            if not nvec or any(n < 1 for n in nvec):
                raise ValueError(f"action_size must be a non-empty sequence of positive ints, got {action_size!r}")
            if not discrete_action:
                raise ValueError(
                    f"action_size={action_size!r} is a sequence (a vector of discrete actions), which needs "
                    "discrete_action=True; give a continuous action's size as an int"
                )
            self.nvec = nvec
            self.binary_action = all(n == 2 for n in nvec)
            #: Width of the encoded previous action.
            self.action_size = len(nvec) if self.binary_action else sum(nvec)
            # Column of each dim's first class in the concatenated one-hots (not saved: it
            # follows from action_size, so state_dicts keep the keys of the scalar case).
            starts = torch.tensor((0,) + nvec[:-1]).cumsum(0)
            self.register_buffer("_onehot_starts", starts, persistent=False)
        else:
            if int(action_size) < 1:
                raise ValueError(f"action_size must be a positive int, got {action_size!r}")
            self.action_size = int(action_size)
        self.discrete_action = discrete_action
        self.lstm_size = int(lstm_size)
        self.num_layers = int(num_layers)
        self.lstm = nn.LSTM(input_size + self.action_size + 1, self.lstm_size, self.num_layers)

    @property
    def output_size(self) -> int:
        """Size of the LSTM output features."""
        return self.lstm_size

    def encode_action(self, prev_action: torch.Tensor, N: int, dtype: torch.dtype) -> torch.Tensor:
        """The previous action as the LSTM sees it, ``[N, action_size]`` (see the class docstring).

        Args:
            prev_action: ``N`` long indexes (scalar discrete), or ``N * D`` zero-based indexes
                (vector discrete) or ``N * action_size`` values (continuous), any leading shape.
            N: Number of steps ``T * B``.
            dtype: dtype of the result (the features').
        """
        if self.nvec is None:
            if self.discrete_action:
                return to_onehot(prev_action.reshape(N), self.action_size, dtype=dtype)
            return prev_action.reshape(N, self.action_size).to(dtype)
        index = prev_action.reshape(N, len(self.nvec))
        if self.binary_action:
            return index.to(dtype)
        return concat_onehot(index, self._onehot_starts, self.action_size, dtype)

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
            prev_action: ``T*B`` elements (long indexes) if scalar discrete, ``T*B*D`` zero-based
                indexes for ``D`` action dims (``nvec``), else ``T*B*action_size``.
            prev_reward: ``T*B`` elements.
            init_rnn_state: ``RnnState`` (or ``(h, c)``) of ``[num_layers, B, lstm_size]``
                tensors, or None for zeros.
            T: Time steps.
            B: Batch size.

        Returns:
            ``(output [T*B, lstm_size], next RnnState [num_layers, B, lstm_size])``.
        """
        N = T * B
        action = self.encode_action(prev_action, N, features.dtype)
        reward = prev_reward.reshape(N, 1).to(features.dtype)
        x = torch.cat([features, action, reward], dim=-1).view(T, B, -1)
        output, (h, c) = self.lstm(x, self._initial_state(init_rnn_state, B))
        return output.reshape(N, self.lstm_size), RnnState(h, c)
