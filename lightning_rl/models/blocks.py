"""Network building blocks shared by the task models (rlpyt section 11).

Blocks work on flat batches (``[N, ...]``); the task models in ``pg.py``, ``dqn.py``, ``qpg.py``
and ``atari.py`` handle the ``[]``, ``[B]`` and ``[T, B]`` leading dims around them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

__all__ = [
    "Conv2dHeadModel",
    "Conv2dModel",
    "DistributionalDuelingHeadModel",
    "DistributionalHeadModel",
    "DuelingHeadModel",
    "MlpModel",
    "ScaleGrad",
    "conv2d_output_shape",
    "init_orthogonal_",
    "make_q_head",
    "scale_grad",
    "strip_ddp_state_dict",
    "update_state_dict",
]


def _as_sizes(sizes: int | Sequence[int] | None, name: str) -> list[int]:
    """Normalize an int, a sequence of ints or None to a list of positive ints."""
    if sizes is None:
        return []
    if isinstance(sizes, int):
        sizes = [sizes]
    sizes = [int(s) for s in sizes]
    if any(s < 1 for s in sizes):
        raise ValueError(f"{name} must hold positive sizes, got {sizes}")
    return sizes


def _check_positive(value: int, name: str) -> int:
    if int(value) < 1:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


class MlpModel(nn.Module):
    """Multilayer perceptron; the output layer (if any) is linear.

    Args:
        input_size: Number of inputs.
        hidden_sizes: Hidden layer sizes; an int for one layer, empty or None for none.
        output_size: Size of a final linear layer. If None, the last hidden layer (with its
            nonlinearity) is the output, or the input itself when there are no hidden layers.
        nonlinearity: Module class applied after every hidden layer.

    Examples:
        >>> MlpModel(4, [64, 64], 2)(torch.zeros(8, 4)).shape
        torch.Size([8, 2])
    """

    def __init__(
        self,
        input_size: int,
        hidden_sizes: int | Sequence[int] | None,
        output_size: int | None = None,
        nonlinearity: type[nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        input_size = _check_positive(input_size, "input_size")
        hidden_sizes = _as_sizes(hidden_sizes, "hidden_sizes")
        layers: list[nn.Module] = []
        last = input_size
        for size in hidden_sizes:
            layers += [nn.Linear(last, size), nonlinearity()]
            last = size
        if output_size is not None:
            layers.append(nn.Linear(last, _check_positive(output_size, "output_size")))
            last = output_size
        self.model = nn.Sequential(*layers)
        self._output_size = last

    @property
    def output_size(self) -> int:
        """Size of the last dim of the output."""
        return self._output_size

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Map ``[N, input_size]`` to ``[N, output_size]``."""
        return self.model(input)


def conv2d_output_shape(
    h: int,
    w: int,
    kernel_size: int | tuple[int, int] = 1,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
) -> tuple[int, int]:
    """Output ``(H, W)`` of a convolution or pooling layer on an ``(h, w)`` input.

    Uses the formula of ``torch.nn.Conv2d``:
    ``floor((h + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1)``.
    """

    def pair(x: int | tuple[int, int]) -> tuple[int, int]:
        return (x, x) if isinstance(x, int) else (int(x[0]), int(x[1]))

    k, s, p, d = pair(kernel_size), pair(stride), pair(padding), pair(dilation)
    out = tuple((size + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i, size in enumerate((h, w)))
    return out[0], out[1]


class Conv2dModel(nn.Module):
    """A stack of 2-D convolutions, each followed by a nonlinearity.

    With ``use_maxpool`` every convolution has stride 1 and a max-pool of the requested stride
    follows it (downsampling by pooling instead of by strided convolution).

    Args:
        in_channels: Channels of the input image.
        channels: Output channels of each layer.
        kernel_sizes: Kernel size of each layer.
        strides: Stride of each layer.
        paddings: Zero padding of each layer (default 0 everywhere).
        nonlinearity: Module class applied after every convolution.
        use_maxpool: Downsample with max-pooling instead of strides.
    """

    def __init__(
        self,
        in_channels: int,
        channels: Sequence[int],
        kernel_sizes: Sequence[int],
        strides: Sequence[int],
        paddings: Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.ReLU,
        use_maxpool: bool = False,
    ) -> None:
        super().__init__()
        paddings = [0] * len(channels) if paddings is None else list(paddings)
        lengths = {len(channels), len(kernel_sizes), len(strides), len(paddings)}
        if len(lengths) != 1:
            raise ValueError(
                f"channels, kernel_sizes, strides and paddings must have equal lengths, got "
                f"{list(channels)}, {list(kernel_sizes)}, {list(strides)}, {paddings}"
            )
        self.in_channels = _check_positive(in_channels, "in_channels")
        self.channels = _as_sizes(channels, "channels")
        self.kernel_sizes = list(kernel_sizes)
        self.strides = list(strides)
        self.paddings = paddings
        self.use_maxpool = use_maxpool
        layers: list[nn.Module] = []
        last = self.in_channels
        for c, k, s, p in zip(self.channels, self.kernel_sizes, self.strides, self.paddings, strict=True):
            layers += [nn.Conv2d(last, c, k, stride=1 if use_maxpool else s, padding=p), nonlinearity()]
            if use_maxpool and s > 1:
                layers.append(nn.MaxPool2d(s))
            last = c
        self.conv = nn.Sequential(*layers)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Map ``[N, C, H, W]`` to ``[N, channels[-1], H', W']``."""
        return self.conv(input)

    def conv_out_shape(self, h: int, w: int) -> tuple[int, int, int]:
        """Output ``(C, H, W)`` for an ``(h, w)`` input, computed without a forward pass."""
        for k, s, p in zip(self.kernel_sizes, self.strides, self.paddings, strict=True):
            if self.use_maxpool:
                h, w = conv2d_output_shape(h, w, k, 1, p)
                if s > 1:
                    h, w = conv2d_output_shape(h, w, s, s)
            else:
                h, w = conv2d_output_shape(h, w, k, s, p)
        return self.channels[-1], h, w

    def conv_out_size(self, h: int, w: int) -> int:
        """Number of output features (``C * H * W``) for an ``(h, w)`` input."""
        return math.prod(self.conv_out_shape(h, w))


class Conv2dHeadModel(nn.Module):
    """A :class:`Conv2dModel` whose flattened output feeds an :class:`MlpModel`.

    Args:
        image_shape: Input ``(C, H, W)``.
        channels: Output channels of each conv layer.
        kernel_sizes: Kernel size of each conv layer.
        strides: Stride of each conv layer.
        hidden_sizes: Hidden sizes of the MLP head (an int for one layer).
        output_size: Size of a final linear layer, or None to end on the last hidden layer.
        paddings: Zero padding of each conv layer.
        nonlinearity: Module class used in the conv stack and the MLP.
        use_maxpool: Downsample with max-pooling instead of strides.
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        channels: Sequence[int],
        kernel_sizes: Sequence[int],
        strides: Sequence[int],
        hidden_sizes: int | Sequence[int] | None,
        output_size: int | None = None,
        paddings: Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.ReLU,
        use_maxpool: bool = False,
    ) -> None:
        super().__init__()
        if len(image_shape) != 3:
            raise ValueError(f"image_shape must be (C, H, W), got {tuple(image_shape)}")
        c, h, w = (int(x) for x in image_shape)
        self.conv = Conv2dModel(c, channels, kernel_sizes, strides, paddings, nonlinearity, use_maxpool)
        self.head = MlpModel(self.conv.conv_out_size(h, w), hidden_sizes, output_size, nonlinearity)

    @property
    def output_size(self) -> int:
        """Size of the last dim of the output."""
        return self.head.output_size

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Map ``[N, C, H, W]`` to ``[N, output_size]``."""
        return self.head(self.conv(input).flatten(1))


def concat_onehot(index: torch.Tensor, starts: torch.Tensor, width: int, dtype: torch.dtype) -> torch.Tensor:
    """One one-hot per column of ``index``, side by side: ``[N, width]``.

    Args:
        index: ``[N, D]`` zero-based integer indexes, column ``d`` below ``nvec[d]``.
        starts: ``[D]`` first column of each block (``cumsum((0,) + nvec[:-1])``).
        width: ``sum(nvec)``.
        dtype: dtype of the result.
    """
    onehot = torch.zeros(index.shape[0], width, dtype=dtype, device=index.device)
    # One scatter sets every block: column d's index shifted to its block.
    return onehot.scatter_(-1, index.long() + starts, 1.0)


class ScaleGrad(torch.autograd.Function):
    """Identity in the forward pass; multiplies the gradient by ``scale`` in the backward pass.

    Dueling heads use it to scale the gradient that two streams send into a shared torso
    (Wang et al. 2016, section 4.2: scale by ``1/sqrt(2)``).
    """

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad_output * ctx.scale, None


def scale_grad(tensor: torch.Tensor, scale: float) -> torch.Tensor:
    """Apply :class:`ScaleGrad` (a no-op when ``scale == 1``)."""
    return tensor if scale == 1 else ScaleGrad.apply(tensor, scale)


class _DuelingStreams(nn.Module):
    """Value and advantage streams over ``atoms`` outputs per action (1 for plain Q-values)."""

    def __init__(
        self,
        input_size: int,
        hidden_sizes: int | Sequence[int] | None,
        output_size: int,
        atoms: int,
        grad_scale: float,
    ) -> None:
        super().__init__()
        self.output_size = _check_positive(output_size, "output_size")
        self._atoms = atoms
        self.advantage_hidden = MlpModel(input_size, hidden_sizes)
        self.advantage_out = nn.Linear(self.advantage_hidden.output_size, output_size * atoms, bias=False)
        # One bias shared by all actions: a per-action bias would cancel in A - mean A.
        self.advantage_bias = nn.Parameter(torch.zeros(atoms))
        self.value = MlpModel(input_size, hidden_sizes, atoms)
        self.grad_scale = grad_scale

    def _advantage(self, input: torch.Tensor) -> torch.Tensor:
        x = self.advantage_out(self.advantage_hidden(input))
        return x.view(-1, self.output_size, self._atoms) + self.advantage_bias

    def _dueling(self, input: torch.Tensor) -> torch.Tensor:
        x = scale_grad(input, self.grad_scale)
        advantage = self._advantage(x)
        value = self.value(x).view(-1, 1, self._atoms)
        return value + (advantage - advantage.mean(dim=1, keepdim=True))


class DuelingHeadModel(_DuelingStreams):
    """Dueling Q head (Wang et al. 2016, eq. 9): ``Q = V + (A - mean_a A)``.

    The value and advantage streams are separate MLPs on the same input; the advantage output
    layer has one bias shared by all actions.

    Args:
        input_size: Size of the input features.
        hidden_sizes: Hidden sizes of each stream (an int for one layer).
        output_size: Number of actions.
        grad_scale: Gradient scale applied to the input in the backward pass.
    """

    def __init__(
        self,
        input_size: int,
        hidden_sizes: int | Sequence[int] | None,
        output_size: int,
        grad_scale: float = 2**-0.5,
    ) -> None:
        super().__init__(input_size, hidden_sizes, output_size, 1, grad_scale)

    def advantage(self, input: torch.Tensor) -> torch.Tensor:
        """Advantages ``[N, output_size]`` (with the shared bias) from ``[N, input_size]``."""
        return self._advantage(input).squeeze(-1)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Q-values ``[N, output_size]`` from input ``[N, input_size]``."""
        return self._dueling(input).squeeze(-1)


class DistributionalDuelingHeadModel(_DuelingStreams):
    """Dueling head over return distributions: logits ``[N, output_size, n_atoms]``.

    ``logits[a, z] = V[z] + A[a, z] - mean_a A[a, z]``; a softmax over atoms gives
    probabilities. Arguments as :class:`DuelingHeadModel` plus ``n_atoms``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_sizes: int | Sequence[int] | None,
        output_size: int,
        n_atoms: int,
        grad_scale: float = 2**-0.5,
    ) -> None:
        super().__init__(input_size, hidden_sizes, output_size, _check_positive(n_atoms, "n_atoms"), grad_scale)
        self.n_atoms = self._atoms

    def advantage(self, input: torch.Tensor) -> torch.Tensor:
        """Advantage logits ``[N, output_size, n_atoms]`` with the shared per-atom bias."""
        return self._advantage(input)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, output_size, n_atoms]`` from input ``[N, input_size]``."""
        return self._dueling(input)


class DistributionalHeadModel(nn.Module):
    """MLP head with ``n_atoms`` logits per action: output ``[N, output_size, n_atoms]``.

    Args:
        input_size: Size of the input features.
        layer_sizes: Hidden layer sizes (an int for one layer).
        output_size: Number of actions.
        n_atoms: Atoms of each return distribution.
    """

    def __init__(
        self, input_size: int, layer_sizes: int | Sequence[int] | None, output_size: int, n_atoms: int
    ) -> None:
        super().__init__()
        self.output_size = _check_positive(output_size, "output_size")
        self.n_atoms = _check_positive(n_atoms, "n_atoms")
        self.mlp = MlpModel(input_size, layer_sizes, self.output_size * self.n_atoms)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, output_size, n_atoms]`` from input ``[N, input_size]``."""
        return self.mlp(input).view(-1, self.output_size, self.n_atoms)


def make_q_head(
    input_size: int,
    hidden_sizes: int | Sequence[int] | None,
    output_size: int,
    dueling: bool = False,
    n_atoms: int | None = None,
) -> nn.Module:
    """The Q head of a DQN-family model: plain, dueling, distributional or both.

    Returns:
        A module mapping ``[N, input_size]`` to Q-values ``[N, output_size]`` or, with
        ``n_atoms``, to logits ``[N, output_size, n_atoms]``.
    """
    if n_atoms is None:
        if dueling:
            return DuelingHeadModel(input_size, hidden_sizes, output_size)
        return MlpModel(input_size, hidden_sizes, output_size)
    if dueling:
        return DistributionalDuelingHeadModel(input_size, hidden_sizes, output_size, n_atoms)
    return DistributionalHeadModel(input_size, hidden_sizes, output_size, n_atoms)


def init_orthogonal_(module: nn.Module, gain: float = math.sqrt(2), output_gain: float | None = None) -> nn.Module:
    """Orthogonal weights and zero biases for every Linear, Conv2d and LSTM layer in ``module``.

    The usual policy-gradient initialization (Engstrom et al. 2020; the CleanRL and SB3
    defaults): ``gain`` for hidden layers, a small ``output_gain`` (0.01) for policy outputs
    so the initial policy is near uniform, 1 for value outputs. LSTM weights use gain 1.

    Args:
        module: Module to initialize in place.
        gain: Gain of every Linear/Conv2d layer but the last Linear one.
        output_gain: Gain of the last Linear layer (``gain`` if None).

    Returns:
        ``module``.
    """
    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    for i, layer in enumerate(layers):
        is_output = i == len(layers) - 1 and isinstance(layer, nn.Linear)
        nn.init.orthogonal_(layer.weight, output_gain if is_output and output_gain is not None else gain)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)
    for lstm in (m for m in module.modules() if isinstance(m, nn.LSTM)):
        for name, param in lstm.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)
    return module


_COMPILE_PREFIX = "_orig_mod."
_DDP_PREFIX = "module."


def _strip_key(key: str) -> str:
    return key.replace(_COMPILE_PREFIX, "")


def strip_ddp_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Remove the ``module.`` prefix of DistributedDataParallel and ``_orig_mod.`` of torch.compile.

    ``module.`` is removed only when every key starts with it (so a submodule that happens to
    be named ``module`` survives); ``_orig_mod.`` is removed wherever it appears.
    """
    keys = list(state_dict)
    ddp = len(keys) > 0 and all(_strip_key(k).startswith(_DDP_PREFIX) for k in keys)
    out = {}
    for key, value in state_dict.items():
        new_key = _strip_key(key)
        if ddp:
            new_key = new_key[len(_DDP_PREFIX) :]
        out[new_key] = value
    return out


@torch.no_grad()
def update_state_dict(
    model: nn.Module, state_dict: Mapping[str, torch.Tensor], tau: float = 1.0, strip_ddp: bool = True
) -> None:
    """Move ``model``'s parameters and buffers toward ``state_dict`` in place.

    ``p <- tau * new + (1 - tau) * p`` for floating-point entries (Polyak averaging of target
    networks, Lillicrap et al. 2016); ``tau == 1`` is a hard copy. Integer buffers are always
    copied.

    Args:
        model: Module to update (e.g. a target network).
        state_dict: Source values, keyed as ``model.state_dict()`` (up to DDP/compile prefixes).
        tau: Step size in ``[0, 1]``.
        strip_ddp: Strip ``module.``/``_orig_mod.`` prefixes from both key sets before matching.

    Raises:
        ValueError: If ``tau`` is outside ``[0, 1]`` or the keys do not match.
    """
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    target = model.state_dict()
    if strip_ddp:
        target = strip_ddp_state_dict(target)
        state_dict = strip_ddp_state_dict(state_dict)
    missing = sorted(set(target) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(target))
    if missing or unexpected:
        raise ValueError(
            f"update_state_dict: state_dict keys do not match model: missing {missing}, unexpected {unexpected}"
        )
    soft_dst, soft_src, hard_dst, hard_src = [], [], [], []
    for key, dst in target.items():
        src = state_dict[key]
        if src.shape != dst.shape:
            raise ValueError(f"update_state_dict: {key!r} has shape {tuple(src.shape)}, model has {tuple(dst.shape)}")
        src = src.to(device=dst.device, dtype=dst.dtype)
        if tau < 1.0 and dst.is_floating_point():
            soft_dst.append(dst)
            soft_src.append(src)
        else:
            hard_dst.append(dst)
            hard_src.append(src)
    for dst, src in zip(soft_dst, soft_src, strict=True):
        dst.lerp_(src, tau)  # p + tau * (new - p) == tau * new + (1 - tau) * p
    for dst, src in zip(hard_dst, hard_src, strict=True):
        dst.copy_(src)
