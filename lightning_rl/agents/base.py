"""The acting side of an algorithm: an ``nn.Module`` that turns observations into actions.

An agent (rlpyt section 1.3) owns the model(s), selects actions for the sampler under
``no_grad`` (:meth:`BaseAgent.step`) and runs training forward passes for the algorithm
(``agent(observation, prev_action, prev_reward)``). The LightningModule owns the agent, so
Lightning moves it between devices and saves it; the agent keeps a CPU copy of its model in OS
shared memory when sampler worker processes act with it.

Life cycle:

1. ``agent = SomeAgent(hidden_sizes=...)`` or ``SomeAgent(model=<ModelFactory>)``: saves
   arguments only.
2. ``agent.set_steps_per_itr(n)`` (the sampler's ``initialize``, before any worker starts): env
   steps one sampler iteration collects over all ranks, for schedules counted in env steps.
3. ``agent.initialize(env_spaces, share_memory=..., global_B=..., env_ranks=...)``: builds the
   model from the env's spaces (:meth:`make_env_to_model_kwargs` + :meth:`make_model`; with a
   given ``model`` factory, :meth:`build_given_model` instead of the agent's automatic choice),
   then what needs it (:meth:`finish_initialize`: target networks, critics, epsilons).
4. ``agent.to_device(device)``: the training copy goes to ``device``; the shared CPU copy stays.
5. Every iteration: ``sample_mode(itr)`` then ``step(...)`` in the sampler,
   ``train_mode(itr)`` in the algorithm, ``sync_shared_memory()`` after the update.

Optimizers take :meth:`BaseAgent.parameters_for` (named groups such as ``"model"`` or ``"q"``),
never ``agent.parameters()``: target networks are registered submodules (so they move between
devices and are checkpointed) but must not be trained. Schedules and recurrent state travel in
the agent's ``state_dict`` through ``get_extra_state``/``set_extra_state``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from lightning_rl.data.buffers import buffer_func, buffer_to
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.models.base import ModelFactory, image_layout, is_recurrent_model
from lightning_rl.models.blocks import update_state_dict


class AgentInputs(NamedArrayTupleBase):
    """What an agent acts on: ``[B, ...]`` (or ``[T, B, ...]`` in training) observations and so on."""

    observation: Any
    prev_action: Any
    prev_reward: Any


class AgentStep(NamedArrayTupleBase):
    """An agent's output for one step: ``action`` and an ``agent_info`` namedarraytuple."""

    action: Any
    agent_info: Any


class BaseAgent(nn.Module):
    """Base class of agents. Subclasses implement :meth:`make_model` and :meth:`step`.

    The registered submodule ``model`` is the one the algorithm trains; ``shared_model`` is the
    CPU model sampler workers read (the same object unless the training copy lives on a GPU). It
    is kept out of ``state_dict`` so checkpoints hold each weight once. Any device or dtype move
    of the agent (``agent.to("cuda")``, as Lightning does, or :meth:`to_device`) first gives the
    training side its own copy, so the shared CPU model stays where forked workers read it.

    Agents with more networks (targets, critics) list their trainable ones in
    :meth:`trainable_modules`; :meth:`parameters_for` gives an optimizer their parameters.
    """

    # Set with ``object.__setattr__`` so that it is no registered submodule (see the class docstring).
    shared_model: nn.Module | None

    def __init__(self) -> None:
        super().__init__()
        self.model: nn.Module | None = None
        self.env_spaces: Any = None
        self.share_memory_enabled = False
        self.global_B = 1
        self.env_ranks: list[int] | None = None
        self.distribution: Any = None
        self._mode = "train"
        # Act with the policy's mode instead of sampling while in eval mode (evaluation, play).
        self.eval_deterministic = False
        #: Env steps of one sampler iteration over all ranks (:meth:`set_steps_per_itr`); None: not told.
        self.steps_per_itr: int | None = None
        object.__setattr__(self, "shared_model", None)

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        """Model keyword arguments that depend on the env (observation shape, action count).

        They are the models' leading parameters, in their order: ``{"observation_shape": ...,
        "action_size": ...}`` (``{"image_shape": ..., "output_size": ...}`` for Atari models).
        """
        return {}

    def make_env_to_model_args(self, env_spaces: Any) -> tuple[Any, ...]:
        """:meth:`make_env_to_model_kwargs` as positional arguments, what a ``model`` factory gets."""
        return tuple(self.make_env_to_model_kwargs(env_spaces).values())

    def make_model(self, env_spaces: Any) -> nn.Module:
        """Build the model for ``env_spaces``; subclasses combine their own arguments with
        :meth:`make_env_to_model_kwargs`."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_model(env_spaces)")

    def build_given_model(
        self,
        factory: ModelFactory,
        env_spaces: Any,
        argument: str = "model",
        recurrent: bool = False,
        lstm_size: int | None = None,
    ) -> nn.Module:
        """Build a network with a ``model`` (or ``q_model``) factory from the config, and check it.

        The factory gets the env-dependent leading arguments of :meth:`make_env_to_model_args`,
        e.g. ``factory((4,), 2)`` for CartPole; everything else comes from the config.

        Args:
            factory: Builds the network from ``(observation or image shape, action size)``.
            env_spaces: The env's spaces.
            argument: The agent argument the factory came from (for error messages).
            recurrent: Whether the agent is recurrent, i.e. the network must be.
            lstm_size: The agent's LSTM size; a recurrent network that tells its state size
                (``rnn_state_shape``, as :class:`~lightning_rl.models.RecurrentModel`) must match.

        Raises:
            ValueError: If the factory builds no ``nn.Module``; if the network is recurrent (its
                ``forward`` takes ``init_rnn_state``; see
                :func:`~lightning_rl.models.is_recurrent_model`) while the agent is not, or the
                reverse; or if its LSTM size is not ``lstm_size``.
        """
        name = type(self).__name__
        model = factory(*self.make_env_to_model_args(env_spaces))
        if not isinstance(model, nn.Module):
            raise ValueError(f"{name}: {argument} must build an nn.Module, got {type(model).__name__}")
        built = type(model).__name__
        if is_recurrent_model(model) != recurrent:
            if recurrent:
                raise ValueError(
                    f"{name}: {argument} built the feed-forward {built}, but the agent is recurrent "
                    f"(lstm_size={lstm_size}): give a recurrent model (its forward takes init_rnn_state)"
                )
            raise ValueError(
                f"{name}: {argument} built the recurrent {built} (its forward takes init_rnn_state), but the agent "
                "is feed-forward: give a feed-forward model, or make the agent recurrent (the PG agents: "
                "lstm_size set to the model's LSTM size; DQN: R2d1Agent)"
            )
        state_shape = getattr(model, "rnn_state_shape", None)
        if recurrent and lstm_size is not None and state_shape is not None and int(state_shape[-1]) != lstm_size:
            raise ValueError(
                f"{name}: {argument} built {built} with LSTM size {int(state_shape[-1])}, but the agent has "
                f"lstm_size={lstm_size}: set both to the same size"
            )
        return model

    def make_distribution(self, env_spaces: Any) -> Any:
        """The action distribution built in :meth:`initialize` (``None`` for none)."""
        return None

    def initialize(
        self,
        env_spaces: Any,
        share_memory: bool = False,
        global_B: int = 1,
        env_ranks: list[int] | None = None,
    ) -> None:
        """Build the model(s) for the env's spaces.

        Args:
            env_spaces: ``EnvSpaces(observation, action)``.
            share_memory: Put the model in OS shared memory so forked sampler workers act with
                the newest weights without copies.
            global_B: Total number of envs across all ranks (for per-env schedules).
            env_ranks: Global index of each of this rank's envs.
        """
        self.env_spaces = env_spaces
        self.global_B = global_B
        self.env_ranks = env_ranks
        if self.model is None:
            self.model = self.make_model(env_spaces)
        self.distribution = self.make_distribution(env_spaces)
        self.share_memory_enabled = share_memory
        if share_memory:
            self.model.share_memory()
            object.__setattr__(self, "shared_model", self.model)
        self.finish_initialize(env_spaces)

    def finish_initialize(self, env_spaces: Any) -> None:
        """Build what needs the model: target networks, critics, action scaling, per-env schedules.

        :meth:`initialize` calls it last, on every call, with ``model``, ``distribution``,
        ``global_B`` and ``env_ranks`` set; networks an earlier call built are kept. Overrides
        call ``super().finish_initialize(env_spaces)`` first. The base agent has nothing to add.
        """

    def set_steps_per_itr(self, steps_per_itr: int) -> None:
        """Tell the agent how many env steps one sampler iteration collects, summed over all ranks.

        The sampler calls it in ``initialize`` (``batch_T * global_B``, before it starts any
        worker), so agent copies in forked sampler workers have it too. Schedules counted in env steps (the epsilon of
        :class:`~lightning_rl.agents.epsilon.EpsilonGreedyAgentMixin`) turn iterations into env
        steps with it: iteration ``itr`` starts after ``itr * steps_per_itr`` env steps. Agents
        without such schedules only keep the value.

        Raises:
            ValueError: If ``steps_per_itr`` is not an int >= 1.
        """
        if isinstance(steps_per_itr, bool) or int(steps_per_itr) != steps_per_itr or steps_per_itr < 1:
            raise ValueError(f"steps_per_itr must be an int >= 1, got {steps_per_itr!r}")
        self.steps_per_itr = int(steps_per_itr)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """``(target, online)`` network pairs; none for agents without target networks."""
        return []

    def update_target(self, tau: float = 1.0) -> None:
        """``target <- tau * online + (1 - tau) * target`` for every pair of :meth:`target_pairs`
        (``tau=1``: a copy). Algorithms use the fused
        :class:`~lightning_rl.algos.off_policy.SoftTargetUpdate` over the same pairs.

        Raises:
            ValueError: If ``tau`` is outside ``[0, 1]``.
        """
        for target, online in self.target_pairs():
            update_state_dict(target, online.state_dict(), tau)

    def trainable_modules(self) -> dict[str, list[nn.Module]]:
        """Trainable networks by group name (never target networks).

        The base agent has one group, ``"model"``; agents with critics add groups such as
        ``"q"``. Algorithms build one optimizer (or parameter group) per name.
        """
        assert self.model is not None
        return {"model": [self.model]}

    def parameters_for(self, *groups: str) -> list[nn.Parameter]:
        """Parameters of the named groups of :meth:`trainable_modules`, for an optimizer.

        Args:
            *groups: Group names, e.g. ``"model"`` or ``"q"``; none means every group.

        Returns:
            The parameters in group order, each once; target networks are never included.

        Raises:
            ValueError: If a group name is unknown.
        """
        modules = self.trainable_modules()
        if not groups:
            groups = tuple(modules)
        params: list[nn.Parameter] = []
        seen: set[int] = set()
        for g in groups:
            if g not in modules:
                raise ValueError(f"parameters_for: unknown group {g!r}; {type(self).__name__} has {sorted(modules)}")
            for m in modules[g]:
                for p in m.parameters():
                    if id(p) not in seen:
                        seen.add(id(p))
                        params.append(p)
        return params

    @property
    def initialized(self) -> bool:
        return self.model is not None

    @property
    def device(self) -> torch.device:
        """Where the training model's parameters live (CPU before ``initialize``)."""
        model = self.model
        if model is None:
            return torch.device("cpu")
        # Looking the first parameter up walks the module tree (tens of microseconds, on every
        # acting step); the parameter object itself keeps its device current through moves.
        cache = self.__dict__.get("_device_probe")
        if cache is None or cache[0] is not model:
            cache = (model, next(model.parameters(), None))
            self.__dict__["_device_probe"] = cache
        return cache[1].device if cache[1] is not None else torch.device("cpu")

    def to_cpu(self, step: Any) -> Any:
        """``step`` (an ``AgentStep`` or any buffer) with CPU tensors; as it is when the model is on CPU."""
        return step if self.device.type == "cpu" else buffer_to(step, "cpu")

    def to_device(self, device: torch.device | str | None) -> None:
        """Move the training model to ``device``; a shared CPU model stays where it is."""
        self.to(torch.device(device or "cpu"))

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        # nn.Module.to/cuda/half all end here. If the move would change where or how the
        # shared model's tensors live, training continues on a private copy and workers keep
        # reading the shared CPU one (rlpyt's to_device, applied to Lightning's own moves too).
        if self.share_memory_enabled and self.model is not None and self.shared_model is self.model:
            probe = fn(torch.zeros((), dtype=torch.float32))
            if isinstance(probe, torch.Tensor) and (probe.device.type != "cpu" or probe.dtype != torch.float32):
                self.model = copy.deepcopy(self.shared_model)
        self.__dict__.pop("_device_probe", None)
        return super()._apply(fn, recurse)

    def sync_shared_memory(self) -> None:
        """Copy trained weights into the shared CPU model (no-op when they are the same object)."""
        if self.shared_model is not None and self.shared_model is not self.model:
            assert self.model is not None
            self.shared_model.load_state_dict(_strip_prefix(self.model.state_dict()))

    def forward(self, observation: Any, prev_action: Any, prev_reward: Any) -> Any:
        """Training forward pass over ``[T, B]`` or ``[B]`` inputs; returns what the loss needs."""
        assert self.model is not None
        return self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Select actions for ``B`` envs. Inputs are ``[B, ...]`` numpy arrays or tensors.

        Returns:
            ``AgentStep(action, agent_info)`` with CPU tensors of leading dim ``[B]``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def to_agent_inputs(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentInputs:
        """Turn numpy or tensor inputs into tensors on the model's device (zero-copy on CPU).

        float64 leaves (numpy's default) become float32, the models' dtype; integer leaves
        (uint8 frames, long actions) keep their dtype.
        """
        device = self.device
        return AgentInputs(
            _input_to(observation, device), _input_to(prev_action, device), _input_to(prev_reward, device)
        )

    def reset(self) -> None:
        """Called before sampling starts and when all envs reset (recurrent state, noise)."""

    def reset_one(self, idx: int) -> None:
        """Called when env ``idx`` finishes an episode (recurrent agents zero its state)."""

    def train_mode(self, itr: int) -> None:
        """Training forward passes (``nn.Module.train``)."""
        self._mode = "train"
        self.train(True)

    def sample_mode(self, itr: int) -> None:
        """Acting for training data (exploration on)."""
        self._mode = "sample"
        self.train(False)

    def eval_mode(self, itr: int) -> None:
        """Acting for evaluation (exploration off or at its eval setting)."""
        self._mode = "eval"
        self.train(False)

    @property
    def mode(self) -> str:
        return self._mode

    def get_extra_state(self) -> dict[str, Any]:
        """Schedules and sampler-side state kept in ``state_dict`` (mixins add their keys)."""
        return {}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_extra_state` returned (mixins read their keys)."""


def check_model_factory(factory: Any, argument: str, owner: str) -> ModelFactory | None:
    """``factory`` if it can be an agent's ``model`` (or ``q_model``) argument: None or a callable
    that builds a network (a model class, a ``functools.partial`` of one), not a built network.

    Raises:
        ValueError: Naming ``argument`` otherwise.
    """
    if factory is None:
        return None
    if isinstance(factory, nn.Module) or not callable(factory):
        raise ValueError(
            f"{owner}: {argument} must build the network from (observation shape, action size), e.g. a model "
            f"class or a functools.partial of one, got {type(factory).__name__}"
        )
    return factory


def _strip_prefix(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Drop DDP's ``module.`` and torch.compile's ``_orig_mod.`` prefixes from parameter names."""
    out = {}
    for k, v in state_dict.items():
        while k.startswith(("module.", "_orig_mod.")):
            k = k.split(".", 1)[1]
        out[k] = v
    return out


def make_target_model(model: nn.Module) -> nn.Module:
    """A frozen copy of ``model`` (``requires_grad=False``) to serve as its target network.

    Registered as a submodule of the agent it moves between devices and is checkpointed with
    it; frozen, it gets no gradients and DDP leaves it alone.
    """
    target = copy.deepcopy(model)
    target.requires_grad_(False)
    return target


def is_image_space(space: Any) -> bool:
    """True for uint8 images ``[C, H, W]`` (Atari frame stacks) or ``[H, W, C]``, which get conv
    models; :func:`~lightning_rl.models.image_layout` tells which, from the space alone.

    A ``Composite`` space is never one: its image fields are the
    :class:`~lightning_rl.models.CompositeEncoder`'s to handle.
    """
    return image_layout(space) is not None


def image_or_vector_model_kwargs(space: Any, action_size: Any, owner: str) -> dict[str, Any]:
    """The env-dependent model arguments of an agent whose image observations get the Atari conv
    models (the DQN family, the categorical PG agent), for the observation space ``space``.

    A uint8 image (:func:`is_image_space`) gives ``image_shape`` and ``output_size``, plus
    ``channels_last=True`` for ``[H, W, C]`` images (only then, so ``[C, H, W]`` frame stacks get
    exactly the arguments they always had); any other space ``observation_shape`` (see
    :func:`check_observation_space`) and ``action_size``.

    Raises:
        ValueError: As :func:`check_observation_space`, naming ``owner``.
    """
    observation_shape = check_observation_space(space, owner)
    if not is_image_space(space):
        return {"observation_shape": observation_shape, "action_size": action_size}
    kwargs: dict[str, Any] = {"image_shape": tuple(int(s) for s in space.shape), "output_size": action_size}
    if image_layout(space) == "HWC":
        kwargs["channels_last"] = True
    return kwargs


def check_observation_space(space: Any, owner: str) -> Any:
    """What the vector models take as ``observation_shape``: the shape of a box space, or the
    space itself for a ``Composite`` (dict and tuple observations, for
    :class:`~lightning_rl.models.CompositeEncoder`) and for a uint8 image (see
    :func:`~lightning_rl.models.make_encoder`).

    Returns:
        ``tuple[int, ...]`` for an ``IntBox``/``FloatBox``; the space for a ``Composite`` or an image.

    Raises:
        ValueError: Naming the space (and the field, inside a ``Composite``) for anything the
            models cannot encode: spaces other than ``IntBox``, ``FloatBox`` and ``Composite``
            of them, or a ``Composite`` without fields.
    """
    from lightning_rl.spaces import Composite, FloatBox, IntBox

    if isinstance(space, (IntBox, FloatBox)):
        return space if image_layout(space) is not None else tuple(int(s) for s in space.shape)
    if not isinstance(space, Composite):
        raise ValueError(
            f"{owner}: observation space must be an IntBox, a FloatBox or a Composite of them, got {space!r}"
        )
    _check_composite(space, owner, "observation")
    return space


def _check_composite(space: Any, owner: str, path: str) -> None:
    from lightning_rl.spaces import Composite, FloatBox, IntBox

    if not space.spaces:
        raise ValueError(f"{owner}: {path} space {space!r} has no fields; the models need at least one")
    for name, sub in zip(space.names, space.spaces, strict=True):
        if isinstance(sub, Composite):
            _check_composite(sub, owner, f"{path}.{name}")
        elif not isinstance(sub, (IntBox, FloatBox)):
            raise ValueError(
                f"{owner}: observation field {path}.{name} must be an IntBox, a FloatBox or a Composite, got {sub!r}"
            )


def batch_size_of(observation: Any) -> int:
    """``B`` of an observation batch ``[B, ...]``: of its first field for dict and tuple ones."""
    while isinstance(observation, tuple):
        # tuple.__getitem__: a namedarraytuple's own [] indexes every field's array instead.
        observation = tuple.__getitem__(observation, 0)
    return int(observation.shape[0])


def check_discrete_action_space(space: Any, owner: str) -> int:
    """Number of actions of a scalar ``IntBox`` starting at 0.

    Raises:
        ValueError: Naming the space if it is not such an ``IntBox``.
    """
    from lightning_rl.spaces import IntBox

    if not isinstance(space, IntBox) or space.shape != () or int(space.low) != 0:
        raise ValueError(
            f"{owner} needs a discrete action space (a scalar IntBox with low=0), got action space {space!r}"
        )
    return int(space.n)


def check_continuous_action_space(space: Any, owner: str, bounded: bool = False) -> int:
    """Size of a 1-D ``FloatBox`` action space (with finite bounds if ``bounded``).

    Raises:
        ValueError: Naming the space if it is not such a ``FloatBox``.
    """
    from lightning_rl.spaces import FloatBox

    if not isinstance(space, FloatBox) or len(space.shape) != 1:
        raise ValueError(f"{owner} needs a continuous action space (a 1-D FloatBox), got action space {space!r}")
    if bounded and not space.bounded:
        raise ValueError(f"{owner} needs finite action bounds to scale its actions, got action space {space!r}")
    return int(space.shape[0])


def _float32(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype == torch.float64 else t


def _input_to(x: Any, device: torch.device) -> Any:
    """One agent input (an array, a tensor, None or a nested structure of them) as tensors on ``device``."""
    if isinstance(x, np.ndarray):
        t = torch.from_numpy(x)
    elif isinstance(x, torch.Tensor):
        t = x
    elif x is None:
        return None
    else:  # dict / tuple observations, python scalars
        return buffer_func(buffer_to(x, device), _float32)
    if t.device != device:
        t = t.to(device)
    return t.float() if t.dtype == torch.float64 else t


def as_numpy_action(action: Any) -> np.ndarray:
    """A CPU numpy view of an action tensor, for envs."""
    return action.numpy() if isinstance(action, torch.Tensor) else np.asarray(action)
