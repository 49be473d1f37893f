"""Q-value policy-gradient agents for continuous actions: DDPG, TD3 and SAC (rlpyt 4).

Actions are scaled between the networks and the env. The networks work in ``[-1, 1]`` per
action dim; at the agent's interface (``step`` outputs, ``q(..., action)`` inputs, ``pi``
outputs) actions are in the env's bounds, ``action = bias + scale * a`` with
``scale = (high - low) / 2`` and ``bias = (high + low) / 2``. Noise scales (``action_std``,
``target_noise_std``, ``pretrain_std``) are therefore fractions of the half-range.

Trainable groups for :meth:`~lightning_rl.agents.base.BaseAgent.parameters_for`: ``"model"``
(the policy: mu or pi) and ``"q"`` (the critics). Target networks (``target_*``) are frozen
copies updated by ``update_target(tau)``.

The ``model`` (policy) and ``q_model`` (critic) arguments name the networks in the config: any
model class with its own arguments, built with ``(observation_shape, action_size)`` (see
:data:`~lightning_rl.models.ModelFactory`); a critic factory is called once per critic, so twin
critics start from independent initializations. They are kept as :attr:`QpgAgentBase.model_factory`
and :attr:`QpgAgentBase.q_model_factory` (``model``, ``q_model`` are the built networks).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from lightning_rl.agents.base import (
    AgentStep,
    BaseAgent,
    batch_size_of,
    check_continuous_action_space,
    check_model_factory,
    check_observation_space,
    make_target_model,
)
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.distributions import DistInfoStd, Gaussian
from lightning_rl.models import ModelFactory, MuMlpModel, PiMlpModel, QofMuMlpModel

__all__ = ["DdpgAgent", "DdpgAgentInfo", "QpgAgentBase", "SacAgent", "SacAgentInfo", "Td3Agent", "UniformActions"]


class DdpgAgentInfo(NamedArrayTupleBase):
    """The deterministic action ``mu`` ``[B, A]`` (env scale) before exploration noise."""

    mu: Any


class SacAgentInfo(NamedArrayTupleBase):
    """The policy's pre-squash ``DistInfoStd(mean, log_std)``, each ``[B, A]``."""

    dist_info: Any


class UniformActions:
    """Network-scale actions uniform in ``[-1, 1]^A`` (env bounds after scaling), ignoring the policy."""

    def sample(self, dist_info: DistInfoStd) -> torch.Tensor:
        """Actions shaped, typed and placed like ``dist_info.mean`` ``[..., A]``."""
        return torch.rand_like(dist_info.mean).mul_(2.0).sub_(1.0)


_UNIFORM_ACTIONS = UniformActions()


class QpgAgentBase(BaseAgent):
    """Action scaling, pretraining noise and target updates shared by DDPG, TD3 and SAC.

    Before iteration ``min_itr_learn`` (set by the algorithm with :meth:`set_min_itr_learn`)
    sampling uses the fixed noise ``pretrain_std`` around the untrained policy, when given, or
    actions uniform in the env's bounds when the algorithm asks for them (``uniform=True``,
    Stable-Baselines3's ``learning_starts``).

    The networks of the agent's own choice (no ``model``/``q_model`` given) are
    :attr:`policy_model_cls` with ``hidden_sizes`` and :class:`~lightning_rl.models.QofMuMlpModel`
    critics with ``q_hidden_sizes``.

    Args:
        hidden_sizes: Hidden sizes of the policy MLP.
        q_hidden_sizes: Hidden sizes of each Q MLP.
        pretrain_std: Noise std before ``min_itr_learn``; None for none.
        model: Builds the policy network from ``(observation_shape, action_size)``; None: the
            subclass's own. Kept as :attr:`model_factory`.
        q_model: Builds each critic from ``(observation_shape, action_size)``; None: the
            subclass's own. Kept as :attr:`q_model_factory`.

    Raises:
        ValueError: If ``pretrain_std`` is not positive, or ``model``/``q_model`` cannot build a
            network.
    """

    action_scale: torch.Tensor
    action_bias: torch.Tensor
    #: The policy network of the agent's own choice, built with ``hidden_sizes``.
    policy_model_cls: type[nn.Module]

    def __init__(
        self,
        hidden_sizes: tuple[int, ...],
        q_hidden_sizes: tuple[int, ...],
        pretrain_std: float | None = None,
        model: ModelFactory | None = None,
        q_model: ModelFactory | None = None,
    ) -> None:
        super().__init__()
        if pretrain_std is not None and not pretrain_std > 0:
            raise ValueError(f"pretrain_std={pretrain_std} must be positive or None")
        name = type(self).__name__
        self.hidden_sizes = tuple(hidden_sizes)
        self.q_hidden_sizes = tuple(q_hidden_sizes)
        self.model_factory = check_model_factory(model, "model", name)
        self.q_model_factory = check_model_factory(q_model, "q_model", name)
        self.pretrain_std = pretrain_std
        self.min_itr_learn = 0
        self.pretrain_uniform = False
        self._pretraining = False
        self._pretrain_distribution: Gaussian | None = None

    def set_min_itr_learn(self, min_itr_learn: int, uniform: bool | None = None) -> None:
        """Iteration from which sampling uses the policy's own noise.

        Args:
            min_itr_learn: First sampler iteration acting with the policy's noise.
            uniform: Before it, act uniformly at random in the env's bounds (True) or with
                ``pretrain_std`` noise (False); None keeps the current choice.
        """
        self.min_itr_learn = int(min_itr_learn)
        if uniform is not None:
            self.pretrain_uniform = bool(uniform)

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        name = type(self).__name__
        action_size = check_continuous_action_space(env_spaces.action, name, bounded=True)
        return {"observation_shape": check_observation_space(env_spaces.observation, name), "action_size": action_size}

    def finish_initialize(self, env_spaces: Any) -> None:
        """The action scaling of ``env_spaces.action``, the critics and all target networks."""
        super().finish_initialize(env_spaces)
        low = torch.as_tensor(env_spaces.action.low, dtype=torch.float32)
        high = torch.as_tensor(env_spaces.action.high, dtype=torch.float32)
        # Derived from the env, so not saved; registered so they follow the agent's device.
        self.register_buffer("action_scale", ((high - low) / 2).to(self.device), persistent=False)
        self.register_buffer("action_bias", ((high + low) / 2).to(self.device), persistent=False)
        self.make_critics(env_spaces)

    def make_critics(self, env_spaces: Any) -> None:
        """Build the Q-networks and all target networks (called by :meth:`finish_initialize`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_critics")

    def make_model(self, env_spaces: Any) -> nn.Module:
        """The policy network: ``model``'s when given, else :attr:`policy_model_cls` with ``hidden_sizes``.

        Raises:
            ValueError: If ``model`` builds a recurrent network (not supported here).
        """
        if self.model_factory is not None:
            return self.build_given_model(self.model_factory, env_spaces, "model", recurrent=False)
        return self.policy_model_cls(**self.make_env_to_model_kwargs(env_spaces), hidden_sizes=self.hidden_sizes)

    def make_q_model(self, env_spaces: Any) -> nn.Module:
        """A fresh critic: ``q_model``'s when given, else the subclass's :meth:`make_default_q_model`.

        Raises:
            ValueError: If ``q_model`` builds a recurrent network (not supported here).
        """
        if self.q_model_factory is not None:
            return self.build_given_model(self.q_model_factory, env_spaces, "q_model", recurrent=False)
        return self.make_default_q_model(env_spaces)

    def make_default_q_model(self, env_spaces: Any) -> nn.Module:
        """A fresh critic of the agent's own choice: :class:`~lightning_rl.models.QofMuMlpModel`
        with ``q_hidden_sizes``."""
        return QofMuMlpModel(**self.make_env_to_model_kwargs(env_spaces), hidden_sizes=self.q_hidden_sizes)

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """``(target, online)`` network pairs for :meth:`update_target`."""
        raise NotImplementedError(f"{type(self).__name__} must implement target_pairs")

    def to_env_action(self, action: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` network actions ``[..., A]`` to the env's bounds."""
        return self.action_bias + self.action_scale * action

    def from_env_action(self, action: torch.Tensor) -> torch.Tensor:
        """Env actions ``[..., A]`` to the networks' ``[-1, 1]``."""
        return (action.to(self.action_scale.device) - self.action_bias) / self.action_scale

    def sample_mode(self, itr: int) -> None:
        """Sample with ``pretrain_std`` (or uniformly) before ``min_itr_learn``, the usual noise after."""
        super().sample_mode(itr)
        pretrain = self.pretrain_uniform or self.pretrain_std is not None
        self._pretraining = pretrain and itr < self.min_itr_learn

    def uniform_actions(self, observation: Any) -> torch.Tensor | None:
        """Network-scale uniform actions ``[B, A]`` while pretraining uniformly, else None.

        Uniform actions ignore the policy, so :meth:`step` skips its forward pass then (a third
        of a HalfCheetah step with 256x256 MLPs). The draw is the one
        :class:`UniformActions` makes, so the random stream is the same either way.
        """
        if self.mode == "eval" or not (self._pretraining and self.pretrain_uniform):
            return None
        shape = (batch_size_of(observation), self.action_scale.shape[0])
        return torch.rand(shape, device=self.device).mul_(2.0).sub_(1.0)

    def sampling_distribution(self) -> Gaussian | UniformActions:
        """The distribution :meth:`step` samples from (the pretraining one before ``min_itr_learn``)."""
        if self._pretraining:
            if self.pretrain_uniform:
                return _UNIFORM_ACTIONS
            if self._pretrain_distribution is None:
                self._pretrain_distribution = copy.copy(self.distribution)
                self._pretrain_distribution.set_std(self.pretrain_std)
            return self._pretrain_distribution
        return self.distribution


class DdpgAgent(QpgAgentBase):
    """DDPG agent (Lillicrap et al. 2016): deterministic policy ``mu`` with Gaussian exploration.

    Sampling adds ``N(0, action_std)`` noise (clipped to ``action_noise_clip`` if set) to the
    network action and clips the result to the env's bounds; evaluation acts with ``mu``.

    Args:
        hidden_sizes: Hidden sizes of the mu MLP.
        q_hidden_sizes: Hidden sizes of the Q MLP.
        action_std: Exploration noise std (fraction of the half-range).
        action_noise_clip: Clip of the exploration noise; None for none.
        pretrain_std: Noise std before ``min_itr_learn``; None to use ``action_std`` throughout.
        model: The mu network, chosen in the config: a callable ``model(observation_shape,
            action_size)`` returning a feed-forward ``nn.Module`` with outputs ``mu [..., A]``
            in ``[-1, 1]``, e.g. ``{class_path: lightning_rl.models.MuMlpModel, init_args:
            {hidden_sizes: [256, 256]}}``; ``hidden_sizes`` then does not apply. None:
            :class:`~lightning_rl.models.MuMlpModel` with ``hidden_sizes``.
        q_model: The Q network likewise, ``forward(observation, prev_action, prev_reward,
            action) -> q [...]``, e.g. ``{class_path: lightning_rl.models.QofMuMlpModel,
            init_args: {hidden_sizes: [256, 256]}}``; ``q_hidden_sizes`` then does not apply.
            None: :class:`~lightning_rl.models.QofMuMlpModel` with ``q_hidden_sizes``.

    Raises:
        ValueError: If ``action_std`` is not positive or ``model``/``q_model`` cannot build a
            network; at ``initialize`` if the action space is not a bounded 1-D ``FloatBox`` or
            a given network is recurrent.
    """

    policy_model_cls = MuMlpModel

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (400, 300),
        q_hidden_sizes: tuple[int, ...] = (400, 300),
        action_std: float = 0.1,
        action_noise_clip: float | None = None,
        pretrain_std: float | None = None,
        model: ModelFactory | None = None,
        q_model: ModelFactory | None = None,
    ) -> None:
        super().__init__(hidden_sizes, q_hidden_sizes, pretrain_std=pretrain_std, model=model, q_model=q_model)
        if not action_std > 0:
            raise ValueError(f"action_std={action_std} must be positive")
        self.action_std = action_std
        self.action_noise_clip = action_noise_clip
        self.q_model: nn.Module | None = None
        self.target_model: nn.Module | None = None
        self.target_q_model: nn.Module | None = None

    def make_distribution(self, env_spaces: Any) -> Gaussian:
        return Gaussian(
            dim=int(env_spaces.action.shape[0]), std=self.action_std, noise_clip=self.action_noise_clip, clip=1.0
        )

    def make_critics(self, env_spaces: Any) -> None:
        if self.q_model is None:
            self.q_model = self.make_q_model(env_spaces).to(self.device)
        if self.target_model is None:
            assert self.model is not None
            self.target_model = make_target_model(self.model)
            self.target_q_model = make_target_model(self.q_model)

    def trainable_modules(self) -> dict[str, list[nn.Module]]:
        assert self.model is not None and self.q_model is not None
        return {"model": [self.model], "q": [self.q_model]}

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        assert self.target_model is not None and self.model is not None
        assert self.target_q_model is not None and self.q_model is not None
        return [(self.target_model, self.model), (self.target_q_model, self.q_model)]

    def forward(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        """``mu`` ``[..., A]`` in env scale (with grad)."""
        assert self.model is not None
        return self.to_env_action(self.model(*self.to_agent_inputs(observation, prev_action, prev_reward)))

    def q(self, observation: Any, prev_action: Any, prev_reward: Any, action: Any) -> torch.Tensor:
        """``Q(s, a)`` ``[...]`` for env-scale actions ``[..., A]`` (with grad)."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.q_model is not None
        return self.q_model(*inputs, self.from_env_action(torch.as_tensor(action)))

    def q_at_mu(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        """``Q(s, mu(s))`` ``[...]`` (with grad through both networks): the policy objective."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.q_model is not None and self.model is not None
        return self.q_model(*inputs, self.model(*inputs))

    @torch.no_grad()
    def target_q_at_mu(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        """``Q'(s, mu'(s))`` ``[...]`` from the target networks (no grad)."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.target_q_model is not None and self.target_model is not None
        return self.target_q_model(*inputs, self.target_model(*inputs))

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Noisy actions ``[B, A]`` in the env's bounds (CPU) and ``DdpgAgentInfo(mu)``.

        While pretraining uniformly the policy is not run and ``mu`` is the middle of the bounds.
        """
        uniform = self.uniform_actions(observation)
        if uniform is not None:
            mu = self.to_env_action(torch.zeros_like(uniform))
            return self.to_cpu(AgentStep(self.to_env_action(uniform), DdpgAgentInfo(mu=mu)))
        assert self.model is not None
        mu = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))
        if self.mode == "eval":
            action = mu
        else:
            action = self.sampling_distribution().sample(DistInfoStd(mean=mu, log_std=None))
        return self.to_cpu(AgentStep(self.to_env_action(action), DdpgAgentInfo(mu=self.to_env_action(mu))))


class Td3Agent(DdpgAgent):
    """TD3 agent (Fujimoto et al. 2018): DDPG with twin Q-networks and target policy smoothing.

    :meth:`q` and :meth:`target_q_at_mu` return both critics' values; the target action is
    ``clip(mu'(s) + clip(N(0, target_noise_std), +-target_noise_clip), -1, 1)`` (in network
    scale). :meth:`q_at_mu` uses the first critic, as in the paper.

    Args:
        pretrain_std: Noise std before ``min_itr_learn`` (DDPG's default is None).
        target_noise_std: Target policy smoothing noise std.
        target_noise_clip: Clip of the target smoothing noise.
        **ddpg: :class:`DdpgAgent`'s other arguments (``hidden_sizes``, ``q_hidden_sizes``,
            ``action_std``, ``action_noise_clip``, ``model``, ``q_model``) with its defaults;
            ``q_model`` is called once for each of the two critics (independent initializations).
    """

    def __init__(
        self,
        pretrain_std: float | None = 0.5,
        target_noise_std: float = 0.2,
        target_noise_clip: float = 0.5,
        **ddpg: Any,
    ) -> None:
        super().__init__(pretrain_std=pretrain_std, **ddpg)
        if not target_noise_std > 0 or not target_noise_clip > 0:
            raise ValueError(
                f"target_noise_std={target_noise_std} and target_noise_clip={target_noise_clip} must be positive"
            )
        self.target_noise_std = target_noise_std
        self.target_noise_clip = target_noise_clip
        self.q2_model: nn.Module | None = None
        self.target_q2_model: nn.Module | None = None
        self.target_distribution: Gaussian | None = None

    def make_critics(self, env_spaces: Any) -> None:
        if self.q2_model is None:
            self.q2_model = self.make_q_model(env_spaces).to(self.device)
        if self.target_q2_model is None:
            self.target_q2_model = make_target_model(self.q2_model)
        super().make_critics(env_spaces)
        self.target_distribution = Gaussian(
            dim=int(env_spaces.action.shape[0]), std=self.target_noise_std, noise_clip=self.target_noise_clip, clip=1.0
        )

    def trainable_modules(self) -> dict[str, list[nn.Module]]:
        assert self.model is not None and self.q_model is not None and self.q2_model is not None
        return {"model": [self.model], "q": [self.q_model, self.q2_model]}

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        assert self.target_q2_model is not None and self.q2_model is not None
        return super().target_pairs() + [(self.target_q2_model, self.q2_model)]

    # TD3 returns both critics where DDPG returns one: the algorithms know which agent they drive.
    def q(  # type: ignore[override]
        self, observation: Any, prev_action: Any, prev_reward: Any, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1(s, a), Q2(s, a))``, each ``[...]``, for env-scale actions (with grad)."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        a = self.from_env_action(torch.as_tensor(action))
        assert self.q_model is not None and self.q2_model is not None
        return self.q_model(*inputs, a), self.q2_model(*inputs, a)

    @torch.no_grad()
    def target_q_at_mu(  # type: ignore[override]
        self, observation: Any, prev_action: Any, prev_reward: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1'(s, a'), Q2'(s, a'))`` at the smoothed target action ``a'`` (no grad)."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        assert self.target_model is not None and self.target_distribution is not None
        assert self.target_q_model is not None and self.target_q2_model is not None
        target_mu = self.target_model(*inputs)
        target_action = self.target_distribution.sample(DistInfoStd(mean=target_mu, log_std=None))
        return self.target_q_model(*inputs, target_action), self.target_q2_model(*inputs, target_action)


class SacAgent(QpgAgentBase):
    """SAC agent (Haarnoja et al. 2018): tanh-squashed Gaussian policy, twin Q, twin target Q.

    ``log_pi`` is the log-density of the squashed action in network scale ``[-1, 1]^A`` (the
    SB3 convention), so the usual target entropy ``-A`` applies whatever the env's bounds.
    Evaluation acts with the deterministic ``tanh(mean)``.

    Args:
        hidden_sizes: Hidden sizes of the pi MLP.
        q_hidden_sizes: Hidden sizes of each Q MLP.
        min_log_std: Lower clamp of the policy's log std.
        max_log_std: Upper clamp of the policy's log std.
        pretrain_std: Fixed std before ``min_itr_learn`` (rlpyt: 0.75); None for none.
        model: The pi network, chosen in the config: a callable ``model(observation_shape,
            action_size)`` returning a feed-forward ``nn.Module`` with outputs ``(mean [..., A],
            log_std [..., A])`` before the squash, e.g. ``{class_path:
            lightning_rl.models.PiMlpModel, init_args: {hidden_sizes: [64, 64]}}``;
            ``hidden_sizes`` then does not apply. None: :class:`~lightning_rl.models.PiMlpModel`
            with ``hidden_sizes``.
        q_model: Each of the two Q networks likewise (called once per critic, independent
            initializations), ``forward(observation, prev_action, prev_reward, action) -> q
            [...]``, e.g. ``{class_path: lightning_rl.models.QofMuMlpModel, init_args:
            {hidden_sizes: [64, 64]}}``; ``q_hidden_sizes`` then does not apply. None:
            :class:`~lightning_rl.models.QofMuMlpModel` with ``q_hidden_sizes``.

    Raises:
        ValueError: If ``min_log_std >= max_log_std`` or ``model``/``q_model`` cannot build a
            network; at ``initialize`` if the action space is not a bounded 1-D ``FloatBox`` or
            a given network is recurrent.
    """

    policy_model_cls = PiMlpModel

    def __init__(
        self,
        hidden_sizes: tuple[int, ...] = (256, 256),
        q_hidden_sizes: tuple[int, ...] = (256, 256),
        min_log_std: float = -20.0,
        max_log_std: float = 2.0,
        pretrain_std: float | None = 0.75,
        model: ModelFactory | None = None,
        q_model: ModelFactory | None = None,
    ) -> None:
        super().__init__(hidden_sizes, q_hidden_sizes, pretrain_std=pretrain_std, model=model, q_model=q_model)
        if not min_log_std < max_log_std:
            raise ValueError(f"min_log_std={min_log_std} must be below max_log_std={max_log_std}")
        self.min_log_std = min_log_std
        self.max_log_std = max_log_std
        self.q1_model: nn.Module | None = None
        self.q2_model: nn.Module | None = None
        self.target_q1_model: nn.Module | None = None
        self.target_q2_model: nn.Module | None = None

    def make_distribution(self, env_spaces: Any) -> Gaussian:
        return Gaussian(
            dim=int(env_spaces.action.shape[0]),
            squash=1.0,
            min_std=math.exp(self.min_log_std),
            max_std=math.exp(self.max_log_std),
        )

    def make_critics(self, env_spaces: Any) -> None:
        if self.q1_model is None:
            self.q1_model = self.make_q_model(env_spaces).to(self.device)
            self.q2_model = self.make_q_model(env_spaces).to(self.device)
        if self.target_q1_model is None:
            assert self.q2_model is not None
            self.target_q1_model = make_target_model(self.q1_model)
            self.target_q2_model = make_target_model(self.q2_model)

    def trainable_modules(self) -> dict[str, list[nn.Module]]:
        assert self.model is not None and self.q1_model is not None and self.q2_model is not None
        return {"model": [self.model], "q": [self.q1_model, self.q2_model]}

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        assert self.target_q1_model is not None and self.q1_model is not None
        assert self.target_q2_model is not None and self.q2_model is not None
        return [(self.target_q1_model, self.q1_model), (self.target_q2_model, self.q2_model)]

    def pi(
        self, observation: Any, prev_action: Any, prev_reward: Any
    ) -> tuple[torch.Tensor, torch.Tensor, DistInfoStd]:
        """Reparameterized policy sample (with grad).

        Returns:
            ``(action [..., A] in env scale, log_pi [...], dist_info)`` where ``dist_info`` holds
            the pre-squash mean and log std.
        """
        assert self.model is not None
        mean, log_std = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))
        dist_info = DistInfoStd(mean=mean, log_std=log_std)
        action, log_pi = self.distribution.sample_loglikelihood(dist_info)
        return self.to_env_action(action), log_pi, dist_info

    def forward(
        self, observation: Any, prev_action: Any, prev_reward: Any
    ) -> tuple[torch.Tensor, torch.Tensor, DistInfoStd]:
        """Same as :meth:`pi`."""
        return self.pi(observation, prev_action, prev_reward)

    def q(self, observation: Any, prev_action: Any, prev_reward: Any, action: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1(s, a), Q2(s, a))``, each ``[...]``, for env-scale actions (with grad)."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        a = self.from_env_action(torch.as_tensor(action))
        assert self.q1_model is not None and self.q2_model is not None
        return self.q1_model(*inputs, a), self.q2_model(*inputs, a)

    @torch.no_grad()
    def target_q(
        self, observation: Any, prev_action: Any, prev_reward: Any, action: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(Q1'(s, a), Q2'(s, a))`` from the target networks (no grad), env-scale actions."""
        inputs = self.to_agent_inputs(observation, prev_action, prev_reward)
        a = self.from_env_action(torch.as_tensor(action))
        assert self.target_q1_model is not None and self.target_q2_model is not None
        return self.target_q1_model(*inputs, a), self.target_q2_model(*inputs, a)

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Squashed-Gaussian actions ``[B, A]`` in the env's bounds (CPU) and ``SacAgentInfo``.

        While pretraining uniformly the policy is not run and ``dist_info`` holds zeros.
        """
        uniform = self.uniform_actions(observation)
        if uniform is not None:
            zeros = torch.zeros_like(uniform)
            agent_info = SacAgentInfo(dist_info=DistInfoStd(mean=zeros, log_std=zeros))
            return self.to_cpu(AgentStep(self.to_env_action(uniform), agent_info))
        assert self.model is not None
        mean, log_std = self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))
        dist_info = DistInfoStd(mean=mean, log_std=log_std)
        if self.mode == "eval":
            action = torch.tanh(mean)
        else:
            action = self.sampling_distribution().sample(dist_info)
        return self.to_cpu(AgentStep(self.to_env_action(action), SacAgentInfo(dist_info=dist_info)))
