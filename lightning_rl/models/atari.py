"""Models for Atari frames: policy gradient (ff, LSTM), DQN, categorical DQN and R2D1.

Observations are uint8 ``[..., C, 84, 84]`` frame stacks, scaled by 1/255 inside the model.
Two conv stacks, as in rlpyt:

* ``"nature"`` (DQN family default; Mnih et al. 2015 with rlpyt's paddings ``(0, 1, 1)``;
  pass ``paddings=[0, 0, 0]`` for the paper's 7x7 output);
* ``"small"`` (policy-gradient default; Mnih et al. 2016, A3C).

Any of ``channels``, ``kernel_sizes``, ``strides``, ``paddings`` overrides the preset's entry.
Images under 36 pixels a side, which neither preset fits, get
:data:`~lightning_rl.models.base.SMALL_IMAGE_CONVS` instead. With ``channels_last``
the observations are ``[..., H, W, C]`` images (``image_shape`` in that order), permuted to
channels-first inside the encoder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from lightning_rl.models.base import (
    MIN_NATURE_SIDE,
    SMALL_IMAGE_CONVS,
    FeedForwardModel,
    ImageEncoder,
    RecurrentModel,
    image_side,
)
from lightning_rl.models.blocks import init_orthogonal_, make_q_head
from lightning_rl.models.pg import CategoricalPgHead
from lightning_rl.models.recurrent import LstmCore

__all__ = [
    "ATARI_CONVS",
    "AtariCatDqnModel",
    "AtariDqnModel",
    "AtariFfModel",
    "AtariLstmModel",
    "AtariR2d1Model",
    "atari_encoder",
]

ATARI_CONVS: dict[str, dict[str, tuple[int, ...]]] = {
    "nature": {"channels": (32, 64, 64), "kernel_sizes": (8, 4, 3), "strides": (4, 2, 1), "paddings": (0, 1, 1)},
    "small": {"channels": (16, 32), "kernel_sizes": (8, 4), "strides": (4, 2), "paddings": (0, 1)},
}


def atari_encoder(
    image_shape: Sequence[int],
    conv: str,
    fc_sizes: int | Sequence[int] | None = None,
    use_maxpool: bool = False,
    channels: Sequence[int] | None = None,
    kernel_sizes: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    paddings: Sequence[int] | None = None,
    channels_last: bool = False,
) -> ImageEncoder:
    """An :class:`ImageEncoder` from a conv preset name with optional per-field overrides.

    Images under ``MIN_NATURE_SIDE`` pixels a side start from ``SMALL_IMAGE_CONVS`` instead of
    the preset (its 8x8 stride-4 first conv leaves nothing for the next).

    Raises:
        ValueError: If ``conv`` is not a key of :data:`ATARI_CONVS`.
    """
    if conv not in ATARI_CONVS:
        raise ValueError(f"conv must be one of {sorted(ATARI_CONVS)}, got {conv!r}")
    small = image_side(image_shape, "HWC" if channels_last else "CHW") < MIN_NATURE_SIDE
    preset = SMALL_IMAGE_CONVS if small else ATARI_CONVS[conv]
    return ImageEncoder(
        image_shape,
        channels=preset["channels"] if channels is None else channels,
        kernel_sizes=preset["kernel_sizes"] if kernel_sizes is None else kernel_sizes,
        strides=preset["strides"] if strides is None else strides,
        paddings=preset["paddings"] if paddings is None else paddings,
        fc_sizes=fc_sizes,
        use_maxpool=use_maxpool,
        channels_last=channels_last,
    )


class AtariFfModel(FeedForwardModel):
    """Conv stack and fully connected layer, then linear policy and value outputs (A2C/PPO).

    Args:
        image_shape: ``(C, H, W)`` of one observation (``(H, W, C)`` if ``channels_last``).
        output_size: Number of actions.
        fc_sizes: Fully connected layer size(s) after the convs.
        use_maxpool: Downsample with max-pooling instead of strides.
        channels: Conv channels (None: the preset's).
        kernel_sizes: Conv kernel sizes (None: the preset's).
        strides: Conv strides (None: the preset's).
        paddings: Conv paddings (None: the preset's).
        conv: Conv preset, ``"small"`` or ``"nature"``.
        channels_last: Observations are ``[..., H, W, C]`` (permuted inside the encoder).
        orthogonal_init: Orthogonal initialization (gain sqrt(2), 0.01 policy, 1 value).

    ``forward(observation, prev_action, prev_reward) -> (pi [..., A], value [...])``.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        output_size: int,
        fc_sizes: int | Sequence[int] = 512,
        use_maxpool: bool = False,
        channels: Sequence[int] | None = None,
        kernel_sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        paddings: Sequence[int] | None = None,
        conv: str = "small",
        orthogonal_init: bool = True,
        channels_last: bool = False,
    ) -> None:
        encoder = atari_encoder(
            image_shape, conv, fc_sizes, use_maxpool, channels, kernel_sizes, strides, paddings, channels_last
        )
        if orthogonal_init:
            init_orthogonal_(encoder, math.sqrt(2))
        head = CategoricalPgHead(encoder.output_size, output_size, None, orthogonal_init=orthogonal_init)
        super().__init__(encoder, head)


class AtariLstmModel(RecurrentModel):
    """Conv stack and fully connected layer into an LSTM (with one-hot previous action and
    previous reward), then linear policy and value outputs.

    Args:
        image_shape: ``(C, H, W)`` of one observation (``(H, W, C)`` if ``channels_last``).
        output_size: Number of actions.
        fc_sizes: Fully connected layer size(s) before the LSTM.
        lstm_size: LSTM hidden size.
        use_maxpool: Downsample with max-pooling instead of strides.
        channels: Conv channels (None: the preset's).
        kernel_sizes: Conv kernel sizes (None: the preset's).
        strides: Conv strides (None: the preset's).
        paddings: Conv paddings (None: the preset's).
        conv: Conv preset, ``"small"`` or ``"nature"``.
        channels_last: Observations are ``[..., H, W, C]`` (permuted inside the encoder).
        orthogonal_init: Orthogonal initialization (LSTM gain 1).

    ``forward(observation, prev_action, prev_reward, init_rnn_state) -> (pi [..., A],
    value [...], next_rnn_state)``.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        output_size: int,
        fc_sizes: int | Sequence[int] = 512,
        lstm_size: int = 512,
        use_maxpool: bool = False,
        channels: Sequence[int] | None = None,
        kernel_sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        paddings: Sequence[int] | None = None,
        conv: str = "small",
        orthogonal_init: bool = True,
        channels_last: bool = False,
    ) -> None:
        encoder = atari_encoder(
            image_shape, conv, fc_sizes, use_maxpool, channels, kernel_sizes, strides, paddings, channels_last
        )
        lstm = LstmCore(encoder.output_size, output_size, lstm_size, discrete_action=True)
        if orthogonal_init:
            init_orthogonal_(encoder, math.sqrt(2))
            init_orthogonal_(lstm)
        head = CategoricalPgHead(lstm.output_size, output_size, None, orthogonal_init=orthogonal_init)
        super().__init__(encoder, lstm, head)


class AtariDqnModel(FeedForwardModel):
    """Conv stack into an MLP (or dueling) head with one Q-value per action (Mnih et al. 2015).

    Args:
        image_shape: ``(C, H, W)`` of one observation (``(H, W, C)`` if ``channels_last``).
        output_size: Number of actions.
        fc_sizes: Hidden size(s) of the head (of each stream if dueling).
        dueling: Dueling head (Wang et al. 2016).
        use_maxpool: Downsample with max-pooling instead of strides.
        channels: Conv channels (None: the preset's).
        kernel_sizes: Conv kernel sizes (None: the preset's).
        strides: Conv strides (None: the preset's).
        paddings: Conv paddings (None: the preset's).
        conv: Conv preset, ``"nature"`` or ``"small"``.
        channels_last: Observations are ``[..., H, W, C]`` (permuted inside the encoder).

    ``forward(observation, prev_action, prev_reward) -> q [..., A]``.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        output_size: int,
        fc_sizes: int | Sequence[int] = 512,
        dueling: bool = False,
        use_maxpool: bool = False,
        channels: Sequence[int] | None = None,
        kernel_sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        paddings: Sequence[int] | None = None,
        conv: str = "nature",
        channels_last: bool = False,
    ) -> None:
        encoder = atari_encoder(
            image_shape, conv, None, use_maxpool, channels, kernel_sizes, strides, paddings, channels_last
        )
        super().__init__(encoder, make_q_head(encoder.output_size, fc_sizes, output_size, dueling))


class AtariCatDqnModel(FeedForwardModel):
    """Conv stack into a distributional (or distributional dueling) head (Bellemare et al. 2017).

    Arguments as :class:`AtariDqnModel` plus ``n_atoms``.

    ``forward(observation, prev_action, prev_reward) -> p [..., A, n_atoms]`` (softmax over atoms).
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        output_size: int,
        n_atoms: int = 51,
        fc_sizes: int | Sequence[int] = 512,
        dueling: bool = False,
        use_maxpool: bool = False,
        channels: Sequence[int] | None = None,
        kernel_sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        paddings: Sequence[int] | None = None,
        conv: str = "nature",
        channels_last: bool = False,
    ) -> None:
        encoder = atari_encoder(
            image_shape, conv, None, use_maxpool, channels, kernel_sizes, strides, paddings, channels_last
        )
        super().__init__(encoder, make_q_head(encoder.output_size, fc_sizes, output_size, dueling, n_atoms))
        #: Atoms of each return distribution (agents check it against their own support).
        self.n_atoms = int(n_atoms)

    def outputs(self, head_output: torch.Tensor) -> torch.Tensor:
        """Softmax over atoms of the ``[N, A, n_atoms]`` logits."""
        return torch.softmax(head_output, dim=-1)


class AtariR2d1Model(RecurrentModel):
    """Conv stack and fully connected layer into an LSTM (with one-hot previous action and
    previous reward), then an MLP or dueling Q head (Kapturowski et al. 2019).

    Args:
        image_shape: ``(C, H, W)`` of one observation (``(H, W, C)`` if ``channels_last``).
        output_size: Number of actions.
        fc_size: Fully connected layer size before the LSTM.
        lstm_size: LSTM hidden size.
        head_size: Hidden size of the Q head (of each stream if dueling).
        dueling: Dueling head.
        use_maxpool: Downsample with max-pooling instead of strides.
        channels: Conv channels (None: the preset's).
        kernel_sizes: Conv kernel sizes (None: the preset's).
        strides: Conv strides (None: the preset's).
        paddings: Conv paddings (None: the preset's).
        conv: Conv preset, ``"nature"`` or ``"small"``.
        channels_last: Observations are ``[..., H, W, C]`` (permuted inside the encoder).

    ``forward(observation, prev_action, prev_reward, init_rnn_state) -> (q [..., A], next_rnn_state)``.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        output_size: int,
        fc_size: int = 512,
        lstm_size: int = 512,
        head_size: int = 512,
        dueling: bool = False,
        use_maxpool: bool = False,
        channels: Sequence[int] | None = None,
        kernel_sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        paddings: Sequence[int] | None = None,
        conv: str = "nature",
        channels_last: bool = False,
    ) -> None:
        encoder = atari_encoder(
            image_shape, conv, fc_size, use_maxpool, channels, kernel_sizes, strides, paddings, channels_last
        )
        lstm = LstmCore(encoder.output_size, output_size, lstm_size, discrete_action=True)
        super().__init__(encoder, lstm, make_q_head(lstm.output_size, head_size, output_size, dueling))
