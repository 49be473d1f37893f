"""Observation encoders and the two model skeletons every task model is built from.

A task model is ``encoder -> [LSTM core ->] head``:

* the encoder turns one observation into a feature vector (:class:`VectorEncoder` flattens,
  optionally normalizes and runs an MLP; :class:`ImageEncoder` scales uint8 frames and runs a
  conv stack; :class:`CompositeEncoder` runs one of those per field of a dict or tuple
  observation and concatenates the features; :func:`make_encoder` picks from the space);
* :class:`FeedForwardModel` and :class:`RecurrentModel` handle the ``[]``, ``[B]`` or
  ``[T, B]`` leading dims once, so concrete models only choose their parts.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, cast

import numpy as np
import torch
from torch import nn

from lightning_rl.data import infer_leading_dims, restore_leading_dims
from lightning_rl.models.blocks import Conv2dHeadModel, MlpModel, concat_onehot
from lightning_rl.models.normalization import RunningMeanStdModel
from lightning_rl.models.recurrent import LstmCore, RnnState
from lightning_rl.spaces import Composite, FloatBox, IntBox

__all__ = [
    "CompositeEncoder",
    "EncoderHeadModel",
    "FeedForwardModel",
    "FieldEncoder",
    "ImageEncoder",
    "ModelFactory",
    "ObservationShape",
    "OneHotEncoder",
    "RecurrentModel",
    "VectorEncoder",
    "array_image_layout",
    "image_layout",
    "image_side",
    "is_recurrent_model",
    "make_encoder",
]


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

#: What the ``observation_shape`` argument of the vector models takes: the shape of one array
#: observation, or the :class:`~lightning_rl.spaces.Composite` space of a dict or tuple
#: observation (encoded by a :class:`CompositeEncoder`), or a uint8 image space (the agents pass
#: the space itself; see :func:`make_encoder`).
ObservationShape = Sequence[int] | Composite | IntBox


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
    """What the model skeletons need of an encoder (:class:`VectorEncoder`, :class:`ImageEncoder`,
    :class:`CompositeEncoder`, whose observations are tuples and whose ``obs_ndim`` is that of
    its first leaf).
    """

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


class OneHotEncoder(nn.Module):
    """One-hot encode a discrete field: one one-hot per element, side by side.

    A ``Discrete(n)`` field becomes ``[n]`` features, a ``MultiDiscrete(nvec)`` one
    ``[sum(nvec)]``; an index feeds the network as a category, not as a magnitude (position 3 is
    not "3 times" position 1).

    Args:
        space: The field's ``IntBox`` (scalar or 1-D; ``low``/``high`` give each element's range).

    Raises:
        ValueError: If ``space`` is no scalar or 1-D ``IntBox``.
    """

    obs_rms = None
    _low: torch.Tensor
    _starts: torch.Tensor

    def __init__(self, space: IntBox) -> None:
        super().__init__()
        if not isinstance(space, IntBox) or len(space.shape) > 1:
            raise ValueError(f"OneHotEncoder: space must be a scalar or 1-D IntBox, got {space!r}")
        self.observation_shape = tuple(int(s) for s in space.shape)
        self.obs_ndim = len(self.observation_shape)
        dims = max(1, math.prod(self.observation_shape))
        low = np.broadcast_to(np.asarray(space.low, dtype=np.int64), (dims,))
        nvec = np.broadcast_to(np.asarray(space.high, dtype=np.int64), (dims,)) - low
        #: Classes of each element.
        self.nvec = tuple(int(n) for n in nvec)
        # Derived from the space, so not saved (state_dict keys stay those of a parameterless field).
        self.register_buffer("_low", torch.as_tensor(low.copy()), persistent=False)
        self.register_buffer("_starts", torch.as_tensor(np.concatenate([[0], np.cumsum(nvec)[:-1]])), persistent=False)

    @property
    def output_size(self) -> int:
        """``sum(nvec)``."""
        return sum(self.nvec)

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        """No running statistics for categories (kept for a uniform encoder interface)."""

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[N, sum(nvec)]`` one-hots of integer observations ``[N, *shape]``."""
        index = observation.reshape(observation.shape[0], len(self.nvec)).long() - self._low
        return concat_onehot(index, self._starts, self.output_size, torch.float32)


#: The largest ``sum(nvec)`` a discrete field is one-hot encoded with by default; a larger one
#: (a position index over a big grid, say) enters as numbers unless its :class:`FieldEncoder`
#: says ``one_hot: true``.
MAX_AUTO_ONE_HOT = 1024


@dataclass(frozen=True)
class FieldEncoder:
    """How :class:`CompositeEncoder` encodes one field of a dict or tuple observation.

    Given in a model's ``field_encoders`` by the field's dotted path (``camera``, nested
    ``robot.joints``); a field without one gets the defaults below. In YAML::

        model:
          class_path: lightning_rl.models.CategoricalPgMlpModel
          init_args:
            field_encoders:
              camera: {channels: [16, 32], kernel_sizes: [3, 3], strides: [2, 2], fc_size: 64}
              goal: {one_hot: false, normalize: true}
              joints: {hidden_sizes: [32]}

    Args:
        hidden_sizes: An MLP (ReLU) on this field's features alone, before they join the others.
        normalize: Running mean/std normalization of a numeric field; None: the model's
            ``normalize_observation``. Never applies to images or one-hot fields.
        one_hot: Encode a discrete (``Discrete``/``MultiDiscrete``) field as one-hots; None: yes
            when the one-hots are at most :data:`MAX_AUTO_ONE_HOT` wide and the field is not
            binary (0/1 fields enter as they are).
        channels: Image fields: output channels of each conv layer (with ``kernel_sizes`` and
            ``strides``; None: the convs that fit the image's size).
        kernel_sizes: Image fields: kernel size of each conv layer.
        strides: Image fields: stride of each conv layer.
        paddings: Image fields: zero padding of each conv layer (None: none).
        fc_size: Image fields: the fully connected layer after the convs (None: 256).
    """

    hidden_sizes: tuple[int, ...] = ()
    normalize: bool | None = None
    one_hot: bool | None = None
    channels: tuple[int, ...] | None = None
    kernel_sizes: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None
    paddings: tuple[int, ...] | None = None
    fc_size: int | None = None

    def image_options(self) -> dict[str, Any]:
        """The options given that only an image field takes."""
        names = ("channels", "kernel_sizes", "strides", "paddings", "fc_size")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


def _is_discrete_field(space: Any) -> TypeGuard[IntBox]:
    return isinstance(space, IntBox) and len(space.shape) <= 1 and image_layout(space) is None


def _wants_one_hot(space: IntBox, setting: FieldEncoder) -> bool:
    nvec = np.asarray(space.high, dtype=np.int64) - np.asarray(space.low, dtype=np.int64)
    if setting.one_hot is not None:
        return setting.one_hot
    width = int(np.broadcast_to(nvec, space.shape or (1,)).sum())
    return bool(np.any(nvec > 2)) and width <= MAX_AUTO_ONE_HOT


class ImageEncoder(nn.Module):
    """Scale uint8 frames to ``[0, 1]``, then a conv stack and optional fully connected layers.

    Frames stay uint8 until here (4x less memory and transfer than float32); inputs of any
    dtype are divided by 255, so a float frame with values in ``[0, 255]`` gives the same
    features as its uint8 version.

    Args:
        image_shape: Shape of one observation: ``(C, H, W)`` (stacked frames as channels), or
            ``(H, W, C)`` if ``channels_last``.
        channels: Output channels of each conv layer.
        kernel_sizes: Kernel size of each conv layer.
        strides: Stride of each conv layer.
        paddings: Zero padding of each conv layer.
        fc_sizes: Fully connected layers after the convs (an int for one layer, None for none).
        use_maxpool: Downsample with max-pooling instead of strides.
        nonlinearity: Module class after every layer.
        channels_last: Observations are ``[N, H, W, C]`` (see :func:`image_layout`), permuted to
            ``[N, C, H, W]`` for the convs; no parameter changes, so the ``state_dict`` is the same.
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
        channels_last: bool = False,
    ) -> None:
        super().__init__()
        self.observation_shape = tuple(int(s) for s in image_shape)
        self.obs_ndim = 3
        self.channels_last = channels_last
        shape = self.observation_shape
        self.conv = Conv2dHeadModel(
            (shape[2], shape[0], shape[1]) if channels_last else shape,
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
        """Features ``[N, output_size]`` of frames ``[N, C, H, W]`` (``[N, H, W, C]`` if
        ``channels_last``; uint8 or float in [0, 255])."""
        if self.channels_last:
            observation = observation.permute(0, 3, 1, 2)
        x = observation.to(torch.float32)
        # In place only on our own copy: a float input must not be modified for the caller.
        x = x.div_(255.0) if x is not observation else x / 255.0
        return self.conv(x)


def image_layout(space: Any) -> str | None:
    """``"CHW"`` or ``"HWC"`` for a uint8 image space, None for any other space.

    An image is a 3-D ``uint8`` box. Its channels are last when the last dim has at most 4
    entries (grey, RGB, RGBA) and the first has more; otherwise first (Atari frame stacks
    ``[4, 84, 84]``, and tiny images where both ends are <= 4). Decided from the space alone,
    never from an env id.
    """
    if not isinstance(space, (IntBox, FloatBox)):
        return None
    return array_image_layout(space.shape, space.dtype)


def array_image_layout(shape: Sequence[int], dtype: Any) -> str | None:
    """:func:`image_layout` of one observation of ``shape`` and ``dtype`` (no leading dims)."""
    if np.dtype(dtype) != np.uint8 or len(shape) != 3:
        return None
    return "HWC" if shape[-1] <= 4 < shape[0] else "CHW"


def _field(observation: Any, index: int) -> Any:
    # tuple.__getitem__: a namedarraytuple's own [] indexes every field's array instead.
    return tuple.__getitem__(observation, index)


class CompositeEncoder(nn.Module):
    """One encoder per field of a dict or tuple observation; their features concatenated.

    Each field's encoder is chosen from its sub-space, and can be set per field with
    ``field_encoders`` (:class:`FieldEncoder`):

    * uint8 images ([C, H, W] or [H, W, C], see :func:`image_layout`): an :class:`ImageEncoder`
      (channels-last images are permuted first), never normalized;
    * discrete fields (``Discrete``, ``MultiDiscrete``): a :class:`OneHotEncoder` unless binary or
      wider than :data:`MAX_AUTO_ONE_HOT`;
    * other boxes: a :class:`VectorEncoder` without MLP (flattened, normalized with their own
      running statistics if ``normalize_observation``);
    * nested :class:`~lightning_rl.spaces.Composite` spaces: a nested ``CompositeEncoder``.

    A field's ``hidden_sizes`` add an MLP on that field alone; an optional MLP runs on the
    concatenation (the MLP before an LSTM core).

    Observations are namedtuples, namedarraytuples or plain tuples in the space's field order,
    every leaf with the same leading dims. The sub-encoders are a ``ModuleList``
    (``encoders.<i>...`` in ``state_dict``): a dict key such as ``"values"`` or ``"train"``
    would clash with ``ModuleDict``'s own attributes.

    Args:
        space: The observation space.
        hidden_sizes: MLP on the concatenated features; empty or None for none.
        nonlinearity: Module class after every hidden layer of the MLPs and of the image encoders.
        normalize_observation: Normalize numeric fields with running mean/std, updated by
            :meth:`update_obs_rms` (a field's :class:`FieldEncoder` may say otherwise).
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        image_fc_size: Size of the fully connected layer after each image field's convs.
        field_encoders: :class:`FieldEncoder` settings by dotted field path (``"camera"``,
            nested ``"robot.joints"``).

    Raises:
        ValueError: If ``space`` is no ``Composite``, has no field, or has a field that is no
            ``IntBox``, ``FloatBox`` or ``Composite``; if ``field_encoders`` names a path that is
            no field, or gives a field options of another kind of field (convs for a vector,
            ``one_hot`` for floats, anything but per-leaf settings for a nested dict).
    """

    def __init__(
        self,
        space: Composite,
        hidden_sizes: int | Sequence[int] | None = None,
        nonlinearity: type[nn.Module] = nn.ReLU,
        normalize_observation: bool = False,
        norm_obs_clip: float = 10.0,
        norm_obs_var_clip: float = 1e-6,
        image_fc_size: int = 256,
        field_encoders: Mapping[str, FieldEncoder] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(space, Composite) or not space.spaces:
            raise ValueError(f"space must be a Composite with at least one field, got {space!r}")
        settings = dict(field_encoders or {})
        unknown = sorted(set(settings) - set(_field_paths(space, "")))
        if unknown:
            raise ValueError(
                f"field_encoders: {unknown} name no field of the observation; its fields are {_field_paths(space, '')}"
            )
        self.names = space.names
        normalize = (normalize_observation, norm_obs_clip, norm_obs_var_clip)
        encoders = [
            _field_encoder(sub, name, settings, nonlinearity, normalize, image_fc_size)
            for name, sub in zip(space.names, space.spaces, strict=True)
        ]
        self.encoders = nn.ModuleList(encoders)
        self.channels_last = tuple(image_layout(sub) == "HWC" for sub in space.spaces)
        features = sum(int(cast(Any, e).output_size) for e in encoders)
        self.mlp = MlpModel(features, hidden_sizes, nonlinearity=nonlinearity)
        # Leading dims are read off the first leaf: its field path and number of data dims.
        first: nn.Module = self
        self._first_path: list[int] = []
        while isinstance(first, CompositeEncoder):
            self._first_path.append(0)
            first = first.encoders[0]
        #: Data dims of the first leaf, from which the leading dims are read.
        self.obs_ndim = len(sub_shape(space, self._first_path))

    @property
    def output_size(self) -> int:
        """Size of the features: the sum of the fields' sizes, or the MLP's output size."""
        return self.mlp.output_size

    def infer_leading_dims(self, observation: Any) -> tuple[int, int, int]:
        """``(lead_dim, T, B)`` of ``observation`` (as :func:`~lightning_rl.data.infer_leading_dims`).

        Raises:
            ValueError: If the first leaf has too few or too many dims.
        """
        leaf = observation
        for i in self._first_path:
            leaf = _field(leaf, i)
        lead_dim, T, B, _ = infer_leading_dims(leaf, self.obs_ndim)
        return lead_dim, T, B

    def flatten_leading_dims(self, observation: Any, lead_dim: int, N: int) -> tuple[Any, ...]:
        """The fields of ``observation`` (nested tuples, in field order) with leading dims ``[N]``."""
        out = []
        for i, encoder in enumerate(self.encoders):
            x = _field(observation, i)
            if isinstance(encoder, CompositeEncoder):
                out.append(encoder.flatten_leading_dims(x, lead_dim, N))
            else:
                out.append(x.reshape((N,) + tuple(x.shape[lead_dim:])))
        return tuple(out)

    def update_obs_rms(self, observation: Any, all_gather: AllGather | None = None) -> None:
        """Update every vector field's running statistics with observations of any leading dims."""
        for i, encoder in enumerate(self.encoders):
            cast(Encoder, encoder).update_obs_rms(_field(observation, i), all_gather)

    def forward(self, observation: Any) -> torch.Tensor:
        """Features ``[N, output_size]`` of observations whose leaves are ``[N, *field_shape]``."""
        features = []
        for i, encoder in enumerate(self.encoders):
            x = _field(observation, i)
            if self.channels_last[i]:
                x = x.permute(0, 3, 1, 2)
            features.append(encoder(x))
        return self.mlp(torch.cat(features, dim=-1))


def sub_shape(space: Composite, path: Sequence[int]) -> tuple[int, ...]:
    """Shape of the sub-space of ``space`` at field indexes ``path`` (nested Composites)."""
    sub: Any = space
    for i in path:
        sub = sub.spaces[i]
    return tuple(int(s) for s in sub.shape)


def _field_paths(space: Composite, prefix: str) -> list[str]:
    """Dotted paths of every field of ``space``, nested dicts and their leaves alike."""
    paths = []
    for name, sub in zip(space.names, space.spaces, strict=True):
        paths.append(prefix + name)
        if isinstance(sub, Composite):
            paths += _field_paths(sub, f"{prefix}{name}.")
    return paths


class _FieldMlp(nn.Module):
    """A field's encoder followed by an MLP on its features alone (``FieldEncoder.hidden_sizes``)."""

    def __init__(self, encoder: nn.Module, hidden_sizes: Sequence[int], nonlinearity: type[nn.Module]) -> None:
        super().__init__()
        self.encoder = encoder
        self.mlp = MlpModel(cast(Any, encoder).output_size, hidden_sizes, nonlinearity=nonlinearity)
        self.obs_ndim = cast(Any, encoder).obs_ndim

    @property
    def output_size(self) -> int:
        return self.mlp.output_size

    def update_obs_rms(self, observation: torch.Tensor, all_gather: AllGather | None = None) -> None:
        cast(Encoder, self.encoder).update_obs_rms(observation, all_gather)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.encoder(observation))


def _field_encoder(
    sub: Any,
    path: str,
    settings: dict[str, FieldEncoder],
    nonlinearity: type[nn.Module],
    normalize: tuple[bool, float, float],
    image_fc_size: int,
) -> nn.Module:
    """The encoder of the field at dotted ``path`` with sub-space ``sub`` (see :class:`CompositeEncoder`)."""
    setting = settings.get(path, FieldEncoder())
    if not isinstance(setting, FieldEncoder):
        raise ValueError(f"field_encoders[{path!r}] must be a FieldEncoder, got {setting!r}")
    image_options = setting.image_options()
    layout = image_layout(sub)

    def refuse(options: Any, kind: str) -> None:
        if options:
            raise ValueError(f"field_encoders[{path!r}]: {options} do not apply to {kind} field {sub!r}")

    encoder: nn.Module
    if isinstance(sub, Composite):
        refuse({k: v for k, v in vars(setting).items() if v not in (None, ())}, "a nested dict")
        prefix = path + "."
        nested = {k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix)}
        return CompositeEncoder(sub, None, nonlinearity, *normalize, image_fc_size, nested)
    if layout is not None:
        refuse({k: v for k, v in (("normalize", setting.normalize), ("one_hot", setting.one_hot)) if v}, "an image")
        encoder = _image_field_encoder(sub.shape, layout, image_options, image_fc_size, nonlinearity)
    elif isinstance(sub, (IntBox, FloatBox)):
        refuse(image_options, "a non-image")
        if _is_discrete_field(sub) and _wants_one_hot(sub, setting):
            refuse({"normalize": True} if setting.normalize else {}, "a one-hot")
            encoder = OneHotEncoder(sub)
        else:
            if setting.one_hot:
                refuse({"one_hot": True}, "a non-discrete")
            on = normalize[0] if setting.normalize is None else setting.normalize
            encoder = VectorEncoder(sub.shape, normalize_observation=on, norm_obs_clip=normalize[1],
                                    norm_obs_var_clip=normalize[2])
    else:
        raise ValueError(f"space: field {path!r} has {sub!r}; fields must be IntBox, FloatBox or Composite")
    return _FieldMlp(encoder, setting.hidden_sizes, nonlinearity) if setting.hidden_sizes else encoder


def _image_field_encoder(
    shape: Sequence[int], layout: str, options: dict[str, Any], fc_size: int, nonlinearity: type[nn.Module]
) -> ImageEncoder:
    """An image field's encoder on ``[N, C, H, W]``: the convs in ``options``, else those that fit."""
    convs = {k: options[k] for k in ("channels", "kernel_sizes", "strides", "paddings") if k in options}
    fc = options.get("fc_size", fc_size)
    if not convs:
        return _small_image_encoder(shape, layout, fc, nonlinearity)
    if not {"channels", "kernel_sizes", "strides"} <= set(convs):
        raise ValueError(f"field_encoders: give channels, kernel_sizes and strides together, got {sorted(convs)}")
    c, h, w = (shape[2], shape[0], shape[1]) if layout == "HWC" else tuple(shape)
    return ImageEncoder((c, h, w), fc_sizes=fc, nonlinearity=nonlinearity, **convs)


#: Two 3x3 convs (stride 2, 1) for images under :data:`MIN_NATURE_SIDE` pixels a side, where the
#: Nature DQN convs do not fit; padding 1 keeps them valid down to 1x1 images.
SMALL_IMAGE_CONVS: dict[str, tuple[int, ...]] = {
    "channels": (16, 32),
    "kernel_sizes": (3, 3),
    "strides": (2, 1),
    "paddings": (1, 1),
}
#: The smallest image side the Nature DQN convs (and the A3C ones) fit.
MIN_NATURE_SIDE = 36


def image_side(shape: Sequence[int], layout: str) -> int:
    """The shorter side ``min(H, W)`` of an image of ``shape`` in ``layout`` (``"CHW"``/``"HWC"``)."""
    return int(min(shape[:2]) if layout == "HWC" else min(shape[1:]))


def _small_image_encoder(
    shape: Sequence[int],
    layout: str,
    fc_size: int | Sequence[int],
    nonlinearity: type[nn.Module],
    channels_last: bool = False,
) -> ImageEncoder:
    """Nature DQN convs for images of 36 pixels or more a side, else :data:`SMALL_IMAGE_CONVS`.

    The encoder takes ``[N, C, H, W]`` frames, or ``[N, *shape]`` as they come if
    ``channels_last`` (an ``"HWC"`` layout is then permuted inside the encoder).
    """
    c, h, w = (shape[2], shape[0], shape[1]) if layout == "HWC" else tuple(shape)
    if image_side(shape, layout) >= MIN_NATURE_SIDE:
        convs: dict[str, Any] = dict(channels=(32, 64, 64), kernel_sizes=(8, 4, 3), strides=(4, 2, 1))
    else:
        convs = dict(SMALL_IMAGE_CONVS)
    if channels_last and layout == "HWC":
        return ImageEncoder(tuple(shape), fc_sizes=fc_size, nonlinearity=nonlinearity, channels_last=True, **convs)
    return ImageEncoder((c, h, w), fc_sizes=fc_size, nonlinearity=nonlinearity, **convs)


#: Size of the fully connected layer after an image's convs in the vector models' encoders.
IMAGE_FC_SIZE = 256


def make_encoder(
    observation_shape: ObservationShape,
    hidden_sizes: int | Sequence[int] | None = None,
    nonlinearity: type[nn.Module] = nn.ReLU,
    normalize_observation: bool = False,
    norm_obs_clip: float = 10.0,
    norm_obs_var_clip: float = 1e-6,
    field_encoders: Mapping[str, FieldEncoder] | None = None,
) -> VectorEncoder | CompositeEncoder | ImageEncoder:
    """The encoder of the vector models: a :class:`VectorEncoder` for an array shape, a
    :class:`CompositeEncoder` for a ``Composite`` space (dict and tuple observations), an
    :class:`ImageEncoder` for a uint8 image space (see :func:`image_layout`).

    An image gets the conv stack that fits its size (the Nature DQN convs from 36 pixels a side,
    two 3x3 convs below), a :data:`IMAGE_FC_SIZE` layer, then ``hidden_sizes``; it is scaled
    by 1/255 and never normalized with running statistics.

    Args:
        observation_shape: Shape of one observation, or its ``Composite`` or image space.
        hidden_sizes: MLP hidden sizes (on the concatenated fields for a ``Composite``).
        nonlinearity: Module class after every hidden layer.
        normalize_observation: Running mean/std normalization (per vector field for a ``Composite``).
        norm_obs_clip: Clip normalized observations to ``[-norm_obs_clip, norm_obs_clip]``.
        norm_obs_var_clip: Lower bound on the running variance.
        field_encoders: Per-field settings of a ``Composite`` (see :class:`FieldEncoder`).

    Raises:
        ValueError: If ``observation_shape`` is a space that is neither a ``Composite`` nor an
            image, or ``field_encoders`` are given for an observation without fields.
    """
    if isinstance(observation_shape, Composite):
        return CompositeEncoder(
            observation_shape,
            hidden_sizes,
            nonlinearity,
            normalize_observation,
            norm_obs_clip,
            norm_obs_var_clip,
            field_encoders=field_encoders,
        )
    if field_encoders:
        raise ValueError(
            f"field_encoders: {sorted(field_encoders)} are settings for the fields of a dict or tuple "
            f"observation; this observation is {observation_shape!r}"
        )
    if isinstance(observation_shape, (IntBox, FloatBox)):
        layout = image_layout(observation_shape)
        if layout is None:
            raise ValueError(
                f"observation_shape: a space must be a Composite or a uint8 image, got {observation_shape!r}; "
                "pass the shape of an array observation"
            )
        extra = [] if hidden_sizes is None else [hidden_sizes] if isinstance(hidden_sizes, int) else list(hidden_sizes)
        return _small_image_encoder(
            observation_shape.shape, layout, [IMAGE_FC_SIZE, *extra], nonlinearity, channels_last=True
        )
    return VectorEncoder(
        observation_shape, hidden_sizes, nonlinearity, normalize_observation, norm_obs_clip, norm_obs_var_clip
    )


def flatten_observation(encoder: Any, observation: Any) -> tuple[Any, int, int, int]:
    """``(observation with leading dims [T * B], lead_dim, T, B)`` for ``encoder``.

    Arrays go through :func:`~lightning_rl.data.infer_leading_dims` with the encoder's
    ``obs_ndim``; tuple observations through the :class:`CompositeEncoder`'s own methods.
    """
    if isinstance(observation, torch.Tensor):
        lead_dim, T, B, shape = infer_leading_dims(observation, encoder.obs_ndim)
        return observation.reshape((T * B,) + shape), lead_dim, T, B
    lead_dim, T, B = encoder.infer_leading_dims(observation)
    return encoder.flatten_leading_dims(observation, lead_dim, T * B), lead_dim, T, B


class EncoderHeadModel(nn.Module):
    """What :class:`FeedForwardModel` and :class:`RecurrentModel` share: an ``encoder`` of the
    observations, a ``head``, :meth:`outputs` on the head's result and the encoder's running
    observation statistics. The subclasses register their modules themselves (their order is the
    ``state_dict``'s and the optimizers' parameter order).
    """

    encoder: Encoder
    head: nn.Module

    def outputs(self, head_output: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Post-process the head's ``[N, ...]`` output (identity by default)."""
        return head_output

    def update_obs_rms(self, observation: Any, all_gather: AllGather | None = None) -> None:
        """Update running observation statistics (no-op unless ``normalize_observation``)."""
        self.encoder.update_obs_rms(observation, all_gather)


class FeedForwardModel(EncoderHeadModel):
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

    def forward(
        self,
        observation: Any,
        prev_action: torch.Tensor | None = None,
        prev_reward: torch.Tensor | None = None,
    ) -> Any:
        """Outputs with the leading dims of ``observation`` (``[]``, ``[B]`` or ``[T, B]``).

        Args:
            observation: ``[..., *observation_shape]``, or a tuple of such fields (dict and tuple
                observations, :class:`CompositeEncoder`).
            prev_action: Unused by feed-forward models (kept for the common signature).
            prev_reward: Unused by feed-forward models.
        """
        observation, lead_dim, T, B = flatten_observation(self.encoder, observation)
        out = self.outputs(self.head(self.encoder(observation)))
        return restore_leading_dims(out, lead_dim, T, B)


class RecurrentModel(EncoderHeadModel):
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
        observation: Any,
        prev_action: torch.Tensor,
        prev_reward: torch.Tensor,
        init_rnn_state: RnnState | None = None,
    ) -> tuple[Any, ...]:
        """Outputs with the leading dims of ``observation``, then the next ``RnnState``.

        Args:
            observation: ``[..., *observation_shape]``, or a tuple of such fields (dict and tuple
                observations, :class:`CompositeEncoder`).
            prev_action: ``[...]`` long indexes (discrete) or ``[..., action_size]``.
            prev_reward: ``[...]``.
            init_rnn_state: ``RnnState`` of ``[num_layers, B, lstm_size]`` tensors; None for zeros.

        Returns:
            The head's outputs (each ``[..., ...]``) followed by the next ``RnnState``.
        """
        observation, lead_dim, T, B = flatten_observation(self.encoder, observation)
        features = self.encoder(observation)
        lstm_out, next_rnn_state = self.lstm(features, prev_action, prev_reward, init_rnn_state, T, B)
        out = restore_leading_dims(self.outputs(self.head(lstm_out)), lead_dim, T, B)
        return (*out, next_rnn_state) if isinstance(out, tuple) else (out, next_rnn_state)
