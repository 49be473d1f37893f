"""Policy-gradient agents (A2C, PPO): categorical and Gaussian, feed-forward or LSTM (rlpyt 2.2).

One class per action distribution covers every case; the model follows from the arguments and
the env's spaces:

============================  ==========================  ==========================
observation space             ``lstm_size=None``          ``lstm_size=H``
============================  ==========================  ==========================
vector (``FloatBox``, ...)    ``*PgMlpModel``             ``*PgLstmModel``
uint8 frames ``[C, H, W]``    ``AtariFfModel``            ``AtariLstmModel``
============================  ==========================  ==========================

(frames only with the categorical agent). An agent's ``model`` argument replaces this choice: any
model class with its own arguments, built with ``(observation_shape, action_size)`` (see
:data:`~lightning_rl.models.ModelFactory`). Feed-forward agents return ``AgentInfo(dist_info,
value)`` from :meth:`~PgAgentBase.step`; LSTM agents return ``AgentInfoRnn(dist_info, value,
prev_rnn_state)``, where ``prev_rnn_state`` is the state the step started from, ``[B, N, H]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from lightning_rl.agents.base import (
    AgentInputs,
    AgentStep,
    BaseAgent,
    check_continuous_action_space,
    check_discrete_action_space,
    check_model_factory,
    check_observation_space,
    image_or_vector_model_kwargs,
)
from lightning_rl.agents.recurrent import AlternatingRecurrentAgentMixin, RecurrentAgentMixin, rnn_state_to_samples
from lightning_rl.data.buffers import buffer_func, buffer_to
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.distributions import Bernoulli, Categorical, DistInfo, DistInfoStd, Gaussian, MultiCategorical
from lightning_rl.models import (
    AtariFfModel,
    AtariLstmModel,
    CategoricalPgLstmModel,
    CategoricalPgMlpModel,
    GaussianPgLstmModel,
    GaussianPgMlpModel,
    ModelFactory,
)

__all__ = [
    "AgentInfo",
    "AgentInfoRnn",
    "AlternatingCategoricalPgAgent",
    "AlternatingGaussianPgAgent",
    "CategoricalPgAgent",
    "GaussianPgAgent",
    "PgAgentBase",
]


class AgentInfo(NamedArrayTupleBase):
    """What a feed-forward PG agent records per step: ``dist_info`` and ``value`` ``[B]``."""

    dist_info: Any
    value: Any


class AgentInfoRnn(NamedArrayTupleBase):
    """:class:`AgentInfo` plus the RNN state the step started from, ``RnnState`` of ``[B, N, H]``."""

    dist_info: Any
    value: Any
    prev_rnn_state: Any


class PgAgentBase(RecurrentAgentMixin, BaseAgent):
    """Shared acting logic of the PG agents; the model returns ``(*dist_params, value[, rnn_state])``.

    The recurrent-state handling of :class:`RecurrentAgentMixin` is inert while ``lstm_size`` is
    None (the state stays ``None``).

    Args:
        lstm_size: LSTM hidden size for a recurrent agent; None for feed-forward.
        model: Builds the network from ``(observation_shape, action_size)`` instead of the
            subclass's automatic choice; None for that choice. Stored as :attr:`model_factory`
            (``model`` is the built network).

    Raises:
        ValueError: If ``lstm_size`` is not positive or ``model`` cannot build a network.
    """

    def __init__(self, lstm_size: int | None = None, model: ModelFactory | None = None) -> None:
        super().__init__()
        if lstm_size is not None and lstm_size < 1:
            raise ValueError(f"lstm_size={lstm_size} must be a positive int or None")
        self.lstm_size = lstm_size
        self.model_factory = check_model_factory(model, "model", type(self).__name__)

    def build_model_from_factory(self, env_spaces: Any) -> nn.Module | None:
        """The network of the ``model`` argument (checked to be recurrent exactly when the agent
        is, with the agent's ``lstm_size``; see :meth:`BaseAgent.build_given_model`), or None
        when no ``model`` was given."""
        if self.model_factory is None:
            return None
        return self.build_given_model(
            self.model_factory, env_spaces, "model", recurrent=self.recurrent, lstm_size=self.lstm_size
        )

    @property
    def recurrent(self) -> bool:
        """True for LSTM agents."""
        return self.lstm_size is not None

    def make_dist_info(self, *dist_params: Any, **kwargs: Any) -> Any:
        """Wrap the model's distribution outputs in a ``dist_info`` namedarraytuple.

        Subclasses name the parameters (``prob``; ``mean, log_std``), in the model's output order.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement make_dist_info")

    def mode_action(self, dist_info: Any) -> torch.Tensor:
        """The most likely action (used in eval mode when ``eval_deterministic`` is set)."""
        raise NotImplementedError(f"{type(self).__name__} must implement mode_action")

    def forward(
        self, observation: Any, prev_action: Any, prev_reward: Any, init_rnn_state: Any = None
    ) -> tuple[Any, ...]:
        """Training forward pass (with grad) over ``[T, B]`` or ``[B]`` inputs.

        Args:
            observation: ``[T, B, *obs_shape]``.
            prev_action: ``[T, B]`` (discrete) or ``[T, B, A]``.
            prev_reward: ``[T, B]``.
            init_rnn_state: LSTM agents: ``RnnState`` of ``[N, B, H]`` at the first step (see
                :func:`~lightning_rl.agents.recurrent.rnn_state_from_samples`); None for zeros.

        Returns:
            ``(dist_info, value)`` for feed-forward agents; ``(dist_info, value,
            next_rnn_state)`` for LSTM agents.

        Raises:
            ValueError: If a feed-forward agent gets an ``init_rnn_state``.
        """
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.model is not None
        if not self.recurrent:
            if init_rnn_state is not None:
                raise ValueError(
                    f"{type(self).__name__}: init_rnn_state given to a feed-forward agent (lstm_size=None)"
                )
            *dist_params, value = self.model(*inputs)
            return self.make_dist_info(*dist_params), value
        *dist_params, value, next_rnn_state = self.model(*inputs, buffer_to(init_rnn_state, self.device))
        return self.make_dist_info(*dist_params), value, next_rnn_state

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Sample actions for ``B`` envs (LSTM agents advance their state).

        Args:
            observation: ``[B, *obs_shape]``.
            prev_action: ``[B]`` long (discrete) or ``[B, A]``.
            prev_reward: ``[B]``.

        Returns:
            ``AgentStep(action, agent_info)`` of CPU tensors: actions ``[B]`` long (categorical)
            or ``[B, A]``; ``AgentInfo`` or ``AgentInfoRnn`` (see the module docstring).
        """
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.model is not None
        agent_info: AgentInfo | AgentInfoRnn
        if not self.recurrent:
            *dist_params, value = self.model(*inputs)
            dist_info = self.make_dist_info(*dist_params)
            agent_info = AgentInfo(dist_info, value)
        else:
            prev_rnn_state = self.device_rnn_state()
            *dist_params, value, rnn_state = self.model(*inputs, prev_rnn_state)
            dist_info = self.make_dist_info(*dist_params)
            if prev_rnn_state is None:
                prev_rnn_state = buffer_func(rnn_state, torch.zeros_like)
            agent_info = AgentInfoRnn(dist_info, value, rnn_state_to_samples(prev_rnn_state))
            self.advance_rnn_state(rnn_state)
        if self.mode == "eval" and self.eval_deterministic:
            action = self.mode_action(dist_info)
        else:
            action = self.distribution.sample(dist_info)
        return self.to_cpu(AgentStep(action, agent_info))

    @torch.no_grad()
    def value(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        """State values ``[B]`` (CPU) for bootstrapping ``V(s_{T})`` after a rollout.

        LSTM agents start from their current state and do not advance it.
        """
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.model is not None
        if not self.recurrent:
            value = self.model(*inputs)[-1]
        else:
            value = self.model(*inputs, self.device_rnn_state())[-2]
        return value.cpu()

    def update_obs_rms(self, observation: Any, all_gather: Any = None) -> None:
        """Update the model's running observation statistics (``normalize_observation``).

        The on-policy algorithms call this after the updates on each rollout, with its
        observations, so a rollout is sampled and trained on with the same statistics.

        Args:
            observation: ``[T, B, *obs_shape]`` (any leading dims) of new samples.
            all_gather: Under DDP, ``LightningModule.all_gather``: every rank merges all ranks'
                observations and the statistics stay identical (a collective).
        """
        update_obs_rms = getattr(self.model, "update_obs_rms", None) if self.model is not None else None
        if update_obs_rms is not None:
            update_obs_rms(buffer_to(observation, self.device), all_gather)


class CategoricalPgAgent(PgAgentBase):
    """Policy-gradient agent with a categorical policy over discrete actions.

    The action space picks the distribution: a scalar ``IntBox`` from 0
    (``Discrete``) a :class:`~lightning_rl.distributions.Categorical`; a 1-D ``IntBox`` with
    bounds 0 and 2 everywhere (``MultiBinary``) a :class:`~lightning_rl.distributions.Bernoulli`
    per bit; any other 1-D ``IntBox`` (``MultiDiscrete``, with ``start`` offsets) a
    :class:`~lightning_rl.distributions.MultiCategorical`, actions in the space's own values.
    For vector spaces the model's ``action_size`` is the tuple of choices per dim, and its
    output one softmax per dim side by side (see :class:`~lightning_rl.models.CategoricalPgHead`);
    the Bernoulli keeps each bit's probability of 1. LSTM models see the previous action as one
    one-hot per dim, or as bits for a binary space (see :class:`~lightning_rl.models.LstmCore`);
    the agent hands models previous actions with the ``start`` offsets removed.

    Args:
        hidden_sizes: MLP hidden sizes for vector observations (policy and value MLPs, or the
            MLP before the LSTM). Frames use the Atari conv model and ignore it.
        normalize_observation: Normalize vector observations with running statistics
            (updated through :meth:`update_obs_rms`).
        lstm_size: LSTM hidden size for a recurrent agent; None for feed-forward.
        model: The network, chosen in the config instead of automatically: a callable
            ``model(observation_shape, action_size)`` returning an ``nn.Module`` that outputs
            ``(pi, value[, next_rnn_state])`` (for frames ``model(image_shape, output_size)``),
            written in YAML as a model class with its other arguments::

                model:
                  class_path: lightning_rl.models.CategoricalPgMlpModel
                  init_args: {hidden_sizes: [128, 128], hidden_nonlinearity: torch.nn.ReLU}

            ``hidden_sizes`` and ``normalize_observation`` then do not apply (set them in the
            model's ``init_args``). The model must be recurrent (its ``forward`` takes
            ``init_rnn_state``, e.g. :class:`~lightning_rl.models.CategoricalPgLstmModel`) exactly
            when ``lstm_size`` is set, and ``lstm_size`` must equal its LSTM size. None: the
            automatic choice of the module docstring's table.

    Raises:
        ValueError: If ``model`` cannot build a network; at ``initialize`` if the action space is
            neither a scalar ``IntBox`` from 0 nor a 1-D ``IntBox``, or if the network ``model``
            builds is recurrent while the agent is not, the reverse, or of another LSTM size.

    Examples:
        >>> from lightning_rl.envs.base import EnvSpaces
        >>> from lightning_rl.spaces import FloatBox, IntBox
        >>> agent = CategoricalPgAgent(hidden_sizes=(32, 32))
        >>> agent.initialize(EnvSpaces(FloatBox(-1.0, 1.0, shape=(4,)), IntBox(0, 2)))
        >>> agent.step(torch.zeros(3, 4), torch.zeros(3, dtype=torch.long), torch.zeros(3)).action.shape
        torch.Size([3])
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (64, 64),
        normalize_observation: bool = False,
        lstm_size: int | None = None,
        model: ModelFactory | None = None,
    ) -> None:
        super().__init__(lstm_size=lstm_size, model=model)
        self.hidden_sizes = tuple(hidden_sizes)
        self.normalize_observation = normalize_observation
        # Whether the action space is binary (make_distribution); read on every step.
        self._bernoulli = False
        # A MultiDiscrete space's bounds [2, D] (low, high - 1) when any low is nonzero
        # (make_distribution), with copies per device; to_agent_inputs shifts previous actions.
        self._action_bounds: torch.Tensor | None = None
        self._action_bounds_on: dict[torch.device, torch.Tensor] = {}

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        name = type(self).__name__
        action_size = _discrete_action_sizes(env_spaces.action, name)
        return image_or_vector_model_kwargs(env_spaces.observation, action_size, name)

    def make_model(self, env_spaces: Any) -> nn.Module:
        given = self.build_model_from_factory(env_spaces)
        if given is not None:
            return given
        kwargs = self.make_env_to_model_kwargs(env_spaces)
        lstm_size = self.lstm_size  # not None exactly when the agent is recurrent
        if "image_shape" in kwargs:
            if lstm_size is not None:
                return AtariLstmModel(**kwargs, lstm_size=lstm_size)
            return AtariFfModel(**kwargs)
        common: dict[str, Any] = dict(hidden_sizes=self.hidden_sizes, normalize_observation=self.normalize_observation)
        if lstm_size is not None:
            return CategoricalPgLstmModel(**kwargs, lstm_size=lstm_size, **common)
        return CategoricalPgMlpModel(**kwargs, **common)

    def make_distribution(self, env_spaces: Any) -> Categorical | MultiCategorical | Bernoulli:
        space = env_spaces.action
        self._bernoulli = False
        self._action_bounds, self._action_bounds_on = None, {}
        if not space.shape:
            return Categorical(dim=int(space.n))
        low = np.broadcast_to(space.low, space.shape).reshape(-1)
        high = np.broadcast_to(space.high, space.shape).reshape(-1)
        if np.all(low == 0) and np.all(high == 2):
            self._bernoulli = True
            return Bernoulli(dim=low.size)
        if np.any(low != 0):
            self._action_bounds = torch.tensor([low.tolist(), (high - 1).tolist()], dtype=torch.long)
        return MultiCategorical(nvec=(high - low).tolist(), low=low.tolist())

    def to_agent_inputs(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentInputs:
        """As :meth:`BaseAgent.to_agent_inputs`, with a ``MultiDiscrete`` space's ``start``
        offsets removed from ``prev_action`` (``[..., D]``): models see zero-based indexes, as
        their one-hot encodings of the previous action (:class:`~lightning_rl.models.LstmCore`)
        and the policy's per-dim softmaxes count them.

        The collectors write 0 for "no previous action" at an episode's start, which may lie
        outside such a space; values are clipped into the space first, so that 0 becomes the
        space's null action (0 clipped into the bounds) and actions of the space stay as they are.
        """
        inputs = super().to_agent_inputs(observation, prev_action, prev_reward)
        if self._action_bounds is None:
            return inputs
        action = inputs.prev_action
        bounds = self._action_bounds_on.get(action.device)
        if bounds is None:
            bounds = self._action_bounds_on[action.device] = self._action_bounds.to(action.device)
        low, high = bounds
        return inputs._replace(prev_action=torch.clamp(action, low, high) - low)

    def make_dist_info(self, prob: torch.Tensor) -> DistInfo:
        if self._bernoulli:
            # The model gives each bit a softmax over (0, 1); Bernoulli keeps P(bit = 1).
            return DistInfo(prob=prob[..., 1::2])
        return DistInfo(prob=prob)

    def mode_action(self, dist_info: DistInfo) -> torch.Tensor:
        if isinstance(self.distribution, (MultiCategorical, Bernoulli)):
            return self.distribution.mode(dist_info)
        return dist_info.prob.argmax(dim=-1)


def _discrete_action_sizes(space: Any, owner: str) -> int | tuple[int, ...]:
    """What a categorical PG model's ``action_size`` is for ``space``.

    A scalar ``IntBox`` from 0 (``Discrete``) gives its number of actions; a 1-D ``IntBox``
    (``MultiDiscrete`` with any ``start``, ``MultiBinary``) gives the number of choices of each
    dim, ``high - low``.

    Raises:
        ValueError: Naming the space for anything else (a ``FloatBox``, a scalar ``IntBox`` not
            starting at 0, an ``IntBox`` of two or more dims).
    """
    from lightning_rl.spaces import IntBox

    if isinstance(space, IntBox) and len(space.shape) == 1:
        return tuple(int(n) for n in np.broadcast_to(space.n, space.shape))
    if isinstance(space, IntBox) and len(space.shape) > 1:
        raise ValueError(
            f"{owner} needs a scalar or 1-D IntBox action space (Discrete, MultiDiscrete, MultiBinary), got "
            f"action space {space!r}: flatten the action space of the env"
        )
    return check_discrete_action_space(space, owner)


class GaussianPgAgent(PgAgentBase):
    """Policy-gradient agent with a diagonal Gaussian policy (learned, state-independent std).

    Vector, dict and uint8 image observations all work: the default models encode an image with
    a conv stack that fits its size (:func:`~lightning_rl.models.make_encoder`).

    Actions are the raw Gaussian samples (not clipped to the action bounds, so their
    log-likelihoods stay exact); the env adapter clips what it applies.

    Args:
        hidden_sizes: Hidden sizes of the mean and value MLPs (or of the MLP before the LSTM).
        init_log_std: Initial log standard deviation of every action dim.
        normalize_observation: Normalize observations with running statistics (updated
            through :meth:`update_obs_rms`).
        lstm_size: LSTM hidden size for a recurrent agent; None for feed-forward.
        model: The network, chosen in the config instead of automatically: a callable
            ``model(observation_shape, action_size)`` returning an ``nn.Module`` that outputs
            ``(mean, log_std, value[, next_rnn_state])``, written in YAML as a model class with
            its other arguments::

                model:
                  class_path: lightning_rl.models.GaussianPgMlpModel
                  init_args: {hidden_sizes: [64, 64], normalize_observation: true}

            ``hidden_sizes``, ``init_log_std`` and ``normalize_observation`` then do not apply
            (set them in the model's ``init_args``). The model must be recurrent (its ``forward``
            takes ``init_rnn_state``, e.g. :class:`~lightning_rl.models.GaussianPgLstmModel`)
            exactly when ``lstm_size`` is set, and ``lstm_size`` must equal its LSTM size. None:
            :class:`~lightning_rl.models.GaussianPgMlpModel` or
            :class:`~lightning_rl.models.GaussianPgLstmModel` from the arguments above.

    Raises:
        ValueError: If ``model`` cannot build a network; at ``initialize`` if the action space is
            not a 1-D ``FloatBox``, or if the network
            ``model`` builds is recurrent while the agent is not, the reverse, or of another
            LSTM size.
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (64, 64),
        init_log_std: float = 0.0,
        normalize_observation: bool = False,
        lstm_size: int | None = None,
        model: ModelFactory | None = None,
    ) -> None:
        super().__init__(lstm_size=lstm_size, model=model)
        self.hidden_sizes = tuple(hidden_sizes)
        self.init_log_std = init_log_std
        self.normalize_observation = normalize_observation

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        name = type(self).__name__
        action_size = check_continuous_action_space(env_spaces.action, name)
        return {"observation_shape": check_observation_space(env_spaces.observation, name), "action_size": action_size}

    def make_model(self, env_spaces: Any) -> nn.Module:
        given = self.build_model_from_factory(env_spaces)
        if given is not None:
            return given
        kwargs = self.make_env_to_model_kwargs(env_spaces)
        common: dict[str, Any] = dict(
            hidden_sizes=self.hidden_sizes,
            init_log_std=self.init_log_std,
            normalize_observation=self.normalize_observation,
        )
        lstm_size = self.lstm_size  # not None exactly when the agent is recurrent
        if lstm_size is not None:
            return GaussianPgLstmModel(**kwargs, lstm_size=lstm_size, **common)
        return GaussianPgMlpModel(**kwargs, **common)

    def make_distribution(self, env_spaces: Any) -> Gaussian:
        return Gaussian(dim=int(env_spaces.action.shape[0]))

    def make_dist_info(self, mean: torch.Tensor, log_std: torch.Tensor) -> DistInfoStd:
        return DistInfoStd(mean=mean, log_std=log_std)

    def mode_action(self, dist_info: DistInfoStd) -> torch.Tensor:
        return dist_info.mean


class AlternatingCategoricalPgAgent(AlternatingRecurrentAgentMixin, CategoricalPgAgent):
    """:class:`CategoricalPgAgent` with two alternating RNN states, for alternating samplers."""


class AlternatingGaussianPgAgent(AlternatingRecurrentAgentMixin, GaussianPgAgent):
    """:class:`GaussianPgAgent` with two alternating RNN states, for alternating samplers."""
