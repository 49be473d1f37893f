"""Value-based agents with epsilon-greedy exploration: DQN, categorical DQN and R2D1 (rlpyt 3).

Each agent holds the online network ``model`` and a frozen copy ``target_model`` (built in
:meth:`DqnAgent.finish_initialize`, moved to the online network by :meth:`DqnAgent.update_target`).
Only ``model`` is trainable: ``agent.parameters_for("model")`` is what an optimizer takes.
Vector observations get MLP models, uint8 frames ``[C, H, W]`` the Atari conv models, unless the
agent's ``model`` argument names the network (any model class with its own arguments, built with
``(observation_shape, action_size)``; see :data:`~lightning_rl.models.ModelFactory`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_rl.agents.base import (
    AgentStep,
    BaseAgent,
    check_discrete_action_space,
    check_model_factory,
    image_or_vector_model_kwargs,
    make_target_model,
)
from lightning_rl.agents.epsilon import EpsilonGreedyAgentMixin
from lightning_rl.agents.recurrent import AlternatingRecurrentAgentMixin, RecurrentAgentMixin, rnn_state_to_samples
from lightning_rl.data.buffers import buffer_func, buffer_to
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.distributions import CategoricalEpsilonGreedy, EpsilonGreedy
from lightning_rl.models import (
    AtariCatDqnModel,
    AtariDqnModel,
    AtariR2d1Model,
    CatDqnMlpModel,
    DqnMlpModel,
    ModelFactory,
    R2d1MlpModel,
)

__all__ = [
    "AlternatingR2d1Agent",
    "CatDqnAgent",
    "CatDqnAgentInfo",
    "DqnAgent",
    "DqnAgentInfo",
    "R2d1Agent",
    "R2d1AgentInfo",
]


class DqnAgentInfo(NamedArrayTupleBase):
    """Q-values ``[B, A]`` of the step."""

    q: Any


class CatDqnAgentInfo(NamedArrayTupleBase):
    """Return-distribution probabilities ``[B, A, n_atoms]`` of the step."""

    p: Any


class R2d1AgentInfo(NamedArrayTupleBase):
    """Q-values ``[B, A]`` and the RNN state the step started from, ``RnnState`` of ``[B, N, H]``."""

    q: Any
    prev_rnn_state: Any


class DqnAgent(EpsilonGreedyAgentMixin, BaseAgent):
    """DQN agent (Mnih et al. 2015): Q-network, target network, epsilon-greedy actions.

    Args:
        hidden_sizes: MLP hidden sizes for vector observations (of each stream if dueling);
            frames use :class:`~lightning_rl.models.AtariDqnModel` and ignore it.
        dueling: Dueling value/advantage head (Wang et al. 2016).
        **epsilon: The epsilon schedule (``eps_init``, ``eps_final``, ``eps_final_min``,
            ``eps_steps_min``, ``eps_steps_max``, ``eps_eval``), as in
            :class:`~lightning_rl.agents.epsilon.EpsilonGreedyAgentMixin`.
        model: The Q-network, chosen in the config instead of automatically: a callable
            ``model(observation_shape, action_size)`` (frames: ``model(image_shape,
            output_size)``) returning a feed-forward ``nn.Module`` that outputs ``q [..., A]``,
            written in YAML as a model class with its other arguments::

                model:
                  class_path: lightning_rl.models.DqnMlpModel
                  init_args: {hidden_sizes: [128, 128], dueling: true}

            ``hidden_sizes`` and ``dueling`` then do not apply. None:
            :class:`~lightning_rl.models.DqnMlpModel` or
            :class:`~lightning_rl.models.AtariDqnModel` from the arguments above.

    Raises:
        ValueError: If ``model`` cannot build a network or an epsilon setting is bad; at
            ``initialize`` if the action space is not a scalar ``IntBox`` or ``model`` builds a
            recurrent network (its ``forward`` takes ``init_rnn_state``).
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (64, 64),
        dueling: bool = False,
        model: ModelFactory | None = None,
        **epsilon: Any,
    ) -> None:
        super().__init__(**epsilon)
        self.hidden_sizes = tuple(hidden_sizes)
        self.dueling = dueling
        #: The ``model`` argument (``model`` is the built network).
        self.model_factory = check_model_factory(model, "model", type(self).__name__)
        self.target_model: nn.Module | None = None

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        name = type(self).__name__
        action_size = check_discrete_action_space(env_spaces.action, name)
        return image_or_vector_model_kwargs(env_spaces.observation, action_size, name)

    def make_model(self, env_spaces: Any) -> nn.Module:
        if self.model_factory is not None:
            return self.build_given_model(self.model_factory, env_spaces, "model", recurrent=False)
        kwargs = self.make_env_to_model_kwargs(env_spaces)
        if "image_shape" in kwargs:
            return AtariDqnModel(**kwargs, dueling=self.dueling)
        return DqnMlpModel(**kwargs, hidden_sizes=self.hidden_sizes, dueling=self.dueling)

    def make_distribution(self, env_spaces: Any) -> EpsilonGreedy:
        return EpsilonGreedy(dim=int(env_spaces.action.n))

    def finish_initialize(self, env_spaces: Any) -> None:
        """This rank's epsilons, then the frozen ``target_model`` copy of ``model``."""
        super().finish_initialize(env_spaces)
        if self.target_model is None:
            assert self.model is not None
            self.target_model = make_target_model(self.model)

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Epsilon-greedy actions ``[B]`` (long, CPU) and ``DqnAgentInfo(q [B, A])``."""
        assert self.model is not None
        q = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))
        action = self.distribution.sample(q)
        return self.to_cpu(AgentStep(action, DqnAgentInfo(q=q)))

    @torch.no_grad()
    def target(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        """Target-network Q-values ``[..., A]`` (no grad), on the agent's device."""
        assert self.target_model is not None
        return self.target_model(*self.to_agent_inputs(observation, prev_action, prev_reward))

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """``(target, online)`` network pairs, for the algorithms' target update."""
        assert self.target_model is not None and self.model is not None
        return [(self.target_model, self.model)]


class CatDqnAgent(DqnAgent):
    """Categorical DQN agent (C51, Bellemare et al. 2017): return distributions over fixed atoms.

    The atoms are ``z = linspace(V_min, V_max, n_atoms)`` (buffer ``agent.z``, on the agent's
    device); ``model`` outputs probabilities ``p [..., A, n_atoms]`` and actions are
    epsilon-greedy in ``Q(a) = sum_i p[a, i] z[i]``.

    Args:
        hidden_sizes: MLP hidden sizes for vector observations.
        dueling: Distributional dueling head.
        n_atoms: Number of atoms.
        V_min: Smallest atom value.
        V_max: Largest atom value.
        **epsilon: The epsilon schedule (``eps_init``, ``eps_final``, ``eps_final_min``,
            ``eps_steps_min``, ``eps_steps_max``, ``eps_eval``), as in
            :class:`~lightning_rl.agents.epsilon.EpsilonGreedyAgentMixin`.
        model: The network, chosen in the config instead of automatically: a callable
            ``model(observation_shape, action_size)`` (frames: ``model(image_shape,
            output_size)``) returning a feed-forward ``nn.Module`` that outputs probabilities
            ``p [..., A, n_atoms]``, e.g. ``{class_path: lightning_rl.models.CatDqnMlpModel,
            init_args: {hidden_sizes: [128], n_atoms: 51}}``. ``hidden_sizes`` and ``dueling``
            then do not apply; a network with an ``n_atoms`` attribute (as the library's) must
            have the agent's ``n_atoms``. None: :class:`~lightning_rl.models.CatDqnMlpModel` or
            :class:`~lightning_rl.models.AtariCatDqnModel` from the arguments above.

    Raises:
        ValueError: If ``n_atoms < 2`` or ``V_max <= V_min``; at ``initialize`` if ``model``
            builds a recurrent network or one with another ``n_atoms``.
    """

    z: torch.Tensor

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (64, 64),
        dueling: bool = False,
        n_atoms: int = 51,
        V_min: float = -10.0,
        V_max: float = 10.0,
        model: ModelFactory | None = None,
        **epsilon: Any,
    ) -> None:
        super().__init__(hidden_sizes=hidden_sizes, dueling=dueling, model=model, **epsilon)
        if n_atoms < 2:
            raise ValueError(f"n_atoms={n_atoms} must be at least 2")
        if not V_max > V_min:
            raise ValueError(f"V_max={V_max} must exceed V_min={V_min}")
        self.n_atoms = int(n_atoms)
        self.V_min = float(V_min)
        self.V_max = float(V_max)
        # Derived from the arguments, so not saved; registered so it follows the agent's device.
        self.register_buffer("z", torch.linspace(V_min, V_max, n_atoms), persistent=False)

    def make_model(self, env_spaces: Any) -> nn.Module:
        if self.model_factory is not None:
            model = self.build_given_model(self.model_factory, env_spaces, "model", recurrent=False)
            n_atoms = getattr(model, "n_atoms", None)
            if n_atoms is not None and int(n_atoms) != self.n_atoms:
                raise ValueError(
                    f"{type(self).__name__}: model built {type(model).__name__} with n_atoms={n_atoms}, but the "
                    f"agent has n_atoms={self.n_atoms}: set both to the same number"
                )
            return model
        kwargs = self.make_env_to_model_kwargs(env_spaces)
        if "image_shape" in kwargs:
            return AtariCatDqnModel(**kwargs, n_atoms=self.n_atoms, dueling=self.dueling)
        return CatDqnMlpModel(**kwargs, hidden_sizes=self.hidden_sizes, n_atoms=self.n_atoms, dueling=self.dueling)

    def make_distribution(self, env_spaces: Any) -> CategoricalEpsilonGreedy:
        return CategoricalEpsilonGreedy(dim=int(env_spaces.action.n), z=self.z.cpu())

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Epsilon-greedy actions ``[B]`` (long, CPU) and ``CatDqnAgentInfo(p [B, A, n_atoms])``."""
        assert self.model is not None
        p = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))
        action = self.distribution.sample(p)
        return self.to_cpu(AgentStep(action, CatDqnAgentInfo(p=p)))


class R2d1Agent(RecurrentAgentMixin, DqnAgent):
    """Recurrent DQN agent (R2D1, Kapturowski et al. 2019): LSTM Q-network, per-env RNN state.

    ``step`` returns ``R2d1AgentInfo(q, prev_rnn_state)``; the training passes
    (``agent(...)`` and :meth:`target`) take the state at the start of each sequence.

    Args:
        hidden_sizes: MLP hidden sizes before the LSTM for vector observations (frames use
            :class:`~lightning_rl.models.AtariR2d1Model`).
        lstm_size: LSTM hidden size.
        head_size: Hidden size of the Q head (of each stream if dueling).
        dueling: Dueling head.
        **epsilon: The epsilon schedule (``eps_init``, ``eps_final``, ``eps_final_min``,
            ``eps_steps_min``, ``eps_steps_max``, ``eps_eval``), as in
            :class:`~lightning_rl.agents.epsilon.EpsilonGreedyAgentMixin`.
        model: The network, chosen in the config instead of automatically: a callable
            ``model(observation_shape, action_size)`` (frames: ``model(image_shape,
            output_size)``) returning a recurrent ``nn.Module`` (its ``forward`` takes
            ``init_rnn_state``) that outputs ``(q [..., A], next_rnn_state)``, e.g.
            ``{class_path: lightning_rl.models.R2d1MlpModel, init_args: {hidden_sizes: [64],
            lstm_size: 64, head_size: 64}}``. ``lstm_size`` must equal the network's LSTM size;
            ``hidden_sizes``, ``head_size`` and ``dueling`` then do not apply. None:
            :class:`~lightning_rl.models.R2d1MlpModel` or
            :class:`~lightning_rl.models.AtariR2d1Model` from the arguments above.

    Raises:
        ValueError: On bad arguments; at ``initialize`` if ``model`` builds a feed-forward
            network or one of another LSTM size.
    """

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (128,),
        lstm_size: int = 128,
        head_size: int = 128,
        dueling: bool = False,
        model: ModelFactory | None = None,
        **epsilon: Any,
    ) -> None:
        super().__init__(hidden_sizes=hidden_sizes, dueling=dueling, model=model, **epsilon)
        self.lstm_size = int(lstm_size)
        self.head_size = int(head_size)

    def make_model(self, env_spaces: Any) -> nn.Module:
        if self.model_factory is not None:
            return self.build_given_model(
                self.model_factory, env_spaces, "model", recurrent=True, lstm_size=self.lstm_size
            )
        kwargs = self.make_env_to_model_kwargs(env_spaces)
        sizes: dict[str, Any] = dict(lstm_size=self.lstm_size, head_size=self.head_size, dueling=self.dueling)
        if "image_shape" in kwargs:
            return AtariR2d1Model(**kwargs, **sizes)
        return R2d1MlpModel(**kwargs, hidden_sizes=self.hidden_sizes, **sizes)

    def forward(
        self, observation: Any, prev_action: Any, prev_reward: Any, init_rnn_state: Any = None
    ) -> tuple[torch.Tensor, Any]:
        """Q-values over a sequence (with grad).

        Args:
            observation: ``[T, B, *obs_shape]``.
            prev_action: ``[T, B]`` long.
            prev_reward: ``[T, B]``.
            init_rnn_state: ``RnnState`` of ``[N, B, H]`` at the first step (see
                :func:`~lightning_rl.agents.recurrent.rnn_state_from_samples`); None for zeros.

        Returns:
            ``(q [T, B, A], next_rnn_state)``.
        """
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.model is not None
        return self.model(*inputs, buffer_to(init_rnn_state, self.device))

    # Recurrent: takes the initial state and returns the next one too, where DqnAgent.target does not.
    @torch.no_grad()
    def target(  # type: ignore[override]
        self, observation: Any, prev_action: Any, prev_reward: Any, init_rnn_state: Any = None
    ) -> tuple[torch.Tensor, Any]:
        """Target-network ``(q [T, B, A], next_rnn_state)`` (no grad); arguments as :meth:`forward`."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.target_model is not None
        return self.target_model(*inputs, buffer_to(init_rnn_state, self.device))

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Epsilon-greedy actions ``[B]`` and ``R2d1AgentInfo``; advances the RNN state."""
        prev_rnn_state = self.device_rnn_state()
        assert self.model is not None
        q, rnn_state = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward), prev_rnn_state)
        action = self.distribution.sample(q)
        if prev_rnn_state is None:
            prev_rnn_state = buffer_func(rnn_state, torch.zeros_like)
        agent_info = R2d1AgentInfo(q=q, prev_rnn_state=rnn_state_to_samples(prev_rnn_state))
        self.advance_rnn_state(rnn_state)
        return self.to_cpu(AgentStep(action, agent_info))


class AlternatingR2d1Agent(AlternatingRecurrentAgentMixin, R2d1Agent):
    """:class:`R2d1Agent` with two alternating RNN states (and epsilons per half), for alternating samplers."""
