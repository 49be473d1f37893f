"""One policy per agent of a multi-agent env, seen by samplers as a single agent.

A multi-agent env has a dict action space keyed by agent name (a :class:`~lightning_rl.spaces.Composite`
after conversion), and optionally a dict observation space with the same keys (each agent's own
view); otherwise every agent sees the whole observation. :class:`MultiAgent` holds one sub-agent
per name and answers ``step`` with namedarraytuples that have one field per agent, so the
sampler's ``[T, B]`` buffers hold ``action.<name>``, ``agent_info.<name>`` (with each
recurrent sub-agent's ``prev_rnn_state``) and ``bootstrap_value.<name>``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, ItemsView, ValuesView
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from lightning_rl.agents.base import AgentStep, BaseAgent
from lightning_rl.data.buffers import buffer_func
from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema, NamedArrayTupleSchema_like
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.spaces import Composite

__all__ = ["SHARED_AGENT_KEY", "MultiAgent"]

#: Key of the one sub-agent in ``MultiAgent.agents`` when parameters are shared.
SHARED_AGENT_KEY = "shared"

if TYPE_CHECKING:

    class _SubAgents(nn.ModuleDict):
        """What type checkers see of ``MultiAgent.agents``: a ``ModuleDict`` holding only agents."""

        def __getitem__(self, key: str) -> BaseAgent: ...

        def values(self) -> ValuesView[BaseAgent]: ...

        def items(self) -> ItemsView[str, BaseAgent]: ...


class MultiAgent(BaseAgent):
    """Independent (or parameter-sharing) sub-agents for the agents of a multi-agent env.

    Agent names are the field names of the env's action space: its dict keys, which must be
    valid Python identifiers to appear unchanged (``"agent_0"``; see
    :func:`~lightning_rl.spaces.to_field_names`). Sub-agent ``<name>`` is initialized with
    ``EnvSpaces(observation=<its observation space>, action=<its action subspace>)``: its own
    entry of a dict observation space with the same names, else the whole observation.

    With ``share_parameters=True`` one sub-agent acts for every agent: the agents' inputs are
    stacked into one ``[n_agents * B]`` batch per step (agent-major), so its forward pass runs
    once and a recurrent sub-agent keeps one state row per (agent, env). Sharing needs the
    agents' observations and actions to have the same spaces; a shared policy tells agents
    apart only through what they observe, so use per-agent observations with it.

    Args:
        agents: One template agent (copied for every agent name when parameters are not
            shared, used for all of them when they are), or a dict of sub-agents keyed by
            agent name (independent policies, possibly of different kinds).
        share_parameters: One set of parameters for all agents (needs a single template).

    Raises:
        ValueError: On bad arguments; at :meth:`initialize`, if the env's action space is not a
            dict, the given names differ from the env's agent names, or sub-agents mix
            recurrent and feed-forward policies.

    Examples:
        >>> from lightning_rl.agents import CategoricalPgAgent
        >>> from lightning_rl.envs import make_env
        >>> agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)))
        >>> agent.initialize(make_env("lightning_rl/CoopGrid-v0").spaces)
        >>> agent.agent_names
        ('agent_0', 'agent_1')
    """

    # Set with ``object.__setattr__``, so that they stay out of the module tree.
    _given: BaseAgent | dict[str, BaseAgent]
    _action_schema: NamedArrayTupleSchema | None
    _info_schema: NamedArrayTupleSchema | None
    _value_schema: NamedArrayTupleSchema | None

    def __init__(self, agents: BaseAgent | dict[str, BaseAgent], share_parameters: bool = False) -> None:
        super().__init__()
        if isinstance(agents, dict):
            if share_parameters:
                raise ValueError(
                    "MultiAgent: share_parameters=True takes one template agent, got a dict of agents "
                    f"{sorted(agents)}"
                )
            if not agents:
                raise ValueError("MultiAgent: agents must not be an empty dict")
            bad = {name: type(a).__name__ for name, a in agents.items() if not isinstance(a, BaseAgent)}
            if bad:
                raise ValueError(f"MultiAgent: agents must be BaseAgent instances, got {bad}")
            recurrent = sorted(name for name, a in agents.items() if getattr(a, "recurrent", False))
            if recurrent and len(recurrent) < len(agents):
                raise ValueError(
                    f"MultiAgent: agents {recurrent} are recurrent and the others are not; use one kind for all agents"
                )
        elif not isinstance(agents, BaseAgent):
            raise ValueError(f"MultiAgent: agents must be a BaseAgent or a dict of them, got {type(agents).__name__}")
        self.share_parameters = bool(share_parameters)
        self.agents = cast("_SubAgents", nn.ModuleDict())
        self.agent_names: tuple[str, ...] = ()
        self.per_agent_observation = False
        # The template stays out of the module tree: only its copies hold parameters.
        object.__setattr__(self, "_given", agents)
        object.__setattr__(self, "_action_schema", None)
        object.__setattr__(self, "_info_schema", None)
        object.__setattr__(self, "_value_schema", None)

    def initialize(
        self,
        env_spaces: Any,
        share_memory: bool = False,
        global_B: int = 1,
        env_ranks: list[int] | None = None,
    ) -> None:
        """Build (or re-initialize) the sub-agents for the env's spaces; see :meth:`BaseAgent.initialize`."""
        names = self._check_action_space(env_spaces.action)
        observation = env_spaces.observation
        self.per_agent_observation = isinstance(observation, Composite) and observation.names == names
        self.agent_names = names
        if not self.agents:
            self._build_sub_agents(names)
        spaces = self.agent_spaces(env_spaces)
        if self.share_parameters and any(s != spaces[names[0]] for s in spaces.values()):
            raise ValueError(
                f"MultiAgent: share_parameters=True needs the same observation and action spaces for every agent, "
                f"got {spaces}"
            )
        for name, sub_spaces in spaces.items():
            if not self.share_parameters or name == names[0]:
                self.sub_agent(name).initialize(sub_spaces, share_memory, global_B, env_ranks)
        self.env_spaces = env_spaces
        self.global_B = global_B
        self.env_ranks = env_ranks
        self.share_memory_enabled = share_memory
        object.__setattr__(self, "_action_schema", NamedArrayTupleSchema_like(env_spaces.action.NamedTupleCls))
        object.__setattr__(self, "_info_schema", NamedArrayTupleSchema("AgentInfos", names))
        object.__setattr__(self, "_value_schema", NamedArrayTupleSchema("AgentValues", names))

    def set_steps_per_itr(self, steps_per_itr: int) -> None:
        """Pass the env steps of one sampler iteration to every sub-agent (and the templates they
        are copied from at :meth:`initialize`); see :meth:`BaseAgent.set_steps_per_itr`."""
        super().set_steps_per_itr(steps_per_itr)
        given = list(self._given.values()) if isinstance(self._given, dict) else [self._given]
        for sub in {id(a): a for a in [*given, *self.agents.values()]}.values():
            sub.set_steps_per_itr(steps_per_itr)

    def _check_action_space(self, space: Any) -> tuple[str, ...]:
        if not isinstance(space, Composite) or space.keys is None:
            raise ValueError(
                f"MultiAgent needs a dict action space keyed by agent name (a Composite with keys), got {space!r}"
            )
        names = tuple(space.names)
        if isinstance(self._given, dict) and set(self._given) != set(names):
            raise ValueError(
                f"MultiAgent: agent names {sorted(self._given)} do not match the env's action dict "
                f"keys {sorted(names)} (field names; original keys {list(space.keys)})"
            )
        return names

    def _build_sub_agents(self, names: tuple[str, ...]) -> None:
        given = self._given
        if isinstance(given, dict):
            for name in names:
                self.agents[name] = given[name]
        elif self.share_parameters:
            self.agents[SHARED_AGENT_KEY] = given
        else:
            for name in names:
                self.agents[name] = copy.deepcopy(given)

    def agent_spaces(self, env_spaces: Any) -> dict[str, EnvSpaces]:
        """Each agent's ``EnvSpaces``: its observation (sub)space and its action subspace."""
        action = env_spaces.action
        observation = env_spaces.observation
        per_agent = isinstance(observation, Composite) and observation.names == tuple(action.names)
        return {
            name: EnvSpaces(observation.spaces[i] if per_agent else observation, action.spaces[i])
            for i, name in enumerate(action.names)
        }

    def sub_agent(self, name: str) -> BaseAgent:
        """The sub-agent acting for agent ``name`` (the shared one when parameters are shared).

        Raises:
            ValueError: If ``name`` is not an agent name.
        """
        if name not in self.agent_names:
            raise ValueError(f"MultiAgent: unknown agent name {name!r}; agents are {list(self.agent_names)}")
        return self.agents[SHARED_AGENT_KEY] if self.share_parameters else self.agents[name]

    def learners(self) -> dict[str, list[str]]:
        """Sub-agents (by key in :attr:`agents`) and the agent names each one acts for."""
        if self.share_parameters:
            return {SHARED_AGENT_KEY: list(self.agent_names)}
        return {name: [name] for name in self.agent_names}

    def agent_observation(self, observation: Any, name: str) -> Any:
        """Agent ``name``'s part of an observation: its field for per-agent observations, else all of it."""
        return getattr(observation, name) if self.per_agent_observation else observation

    @property
    def initialized(self) -> bool:
        return bool(self.agents) and bool(self.agent_names) and all(a.initialized for a in self.agents.values())

    @property
    def recurrent(self) -> bool:
        """True if the sub-agents are recurrent (all of them are, or none); known before :meth:`initialize`."""
        given = self._given.values() if isinstance(self._given, dict) else [self._given]
        return any(bool(getattr(a, "recurrent", False)) for a in [*self.agents.values(), *given])

    @property
    def device(self) -> torch.device:
        first = next(iter(self.agents.values()), None)
        return torch.device("cpu") if first is None else first.device

    def trainable_modules(self) -> dict[str, list[nn.Module]]:
        """``"model"``: every sub-agent's model (once each); ``"model/<key>"``: one sub-agent's."""
        groups: dict[str, list[nn.Module]] = {"model": []}
        for key, sub in self.agents.items():
            models = [m for ms in sub.trainable_modules().values() for m in ms]
            groups["model"].extend(models)
            groups[f"model/{key}"] = models
        return groups

    def sync_shared_memory(self) -> None:
        for sub in self.agents.values():
            sub.sync_shared_memory()

    def forward(self, observation: Any, prev_action: Any, prev_reward: Any) -> dict[str, Any]:
        """Each sub-agent's training forward pass on its agent's part of the inputs, by name."""
        return {
            name: self.sub_agent(name)(
                self.agent_observation(observation, name), getattr(prev_action, name), prev_reward
            )
            for name in self.agent_names
        }

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Actions for ``B`` envs: ``AgentStep(action, agent_info)`` with one field per agent.

        Args:
            observation: ``[B, ...]``, a namedarraytuple by agent name for per-agent observations.
            prev_action: namedarraytuple of ``[B, ...]`` previous actions by agent name.
            prev_reward: ``[B]``.

        Returns:
            ``action`` with the fields of the env's action space and ``agent_info``
            (``AgentInfos``) with each agent's ``agent_info``; CPU tensors.
        """
        for sub in self.agents.values():
            sub.eval_deterministic = self.eval_deterministic
        steps = self._per_agent(lambda sub, *inputs: sub.step(*inputs), observation, prev_action, prev_reward)
        assert self._action_schema is not None and self._info_schema is not None
        return AgentStep(
            self._action_schema(*(s.action for s in steps)), self._info_schema(*(s.agent_info for s in steps))
        )

    @torch.no_grad()
    def value(self, observation: Any, prev_action: Any, prev_reward: Any) -> Any:
        """Each agent's state values ``[B]`` (CPU), as a namedarraytuple ``AgentValues`` by name."""
        values = self._per_agent(lambda sub, *inputs: sub.value(*inputs), observation, prev_action, prev_reward)
        assert self._value_schema is not None
        return self._value_schema(*values)

    def _per_agent(self, call: Callable[..., Any], observation: Any, prev_action: Any, prev_reward: Any) -> list[Any]:
        """``call(sub_agent, obs, prev_action, prev_reward)`` for every agent, in name order."""
        names = self.agent_names
        if not self.share_parameters:
            return [
                call(self.agents[n], self.agent_observation(observation, n), getattr(prev_action, n), prev_reward)
                for n in names
            ]
        # One forward pass for all agents: inputs stacked agent-major, [n_agents * B, ...].
        observations = [torch.as_tensor(self.agent_observation(observation, n)) for n in names]
        B = observations[0].shape[0]
        stacked = call(
            self.agents[SHARED_AGENT_KEY],
            torch.cat(observations),
            torch.cat([torch.as_tensor(getattr(prev_action, n)) for n in names]),
            torch.cat([torch.as_tensor(prev_reward)] * len(names)),
        )
        return [buffer_func(stacked, lambda t, i=i: t[i * B : (i + 1) * B]) for i in range(len(names))]

    def reset(self) -> None:
        for sub in self.agents.values():
            sub.reset()

    def reset_one(self, idx: int) -> None:
        """Reset env ``idx`` for every agent (its rows of a shared sub-agent's stacked state)."""
        if not self.share_parameters:
            for sub in self.agents.values():
                sub.reset_one(idx)
            return
        shared = self.agents[SHARED_AGENT_KEY]
        state = getattr(shared, "prev_rnn_state", None)
        if state is None:
            return
        B = next(iter(state)).shape[1] // len(self.agent_names)
        for i in range(len(self.agent_names)):
            shared.reset_one(i * B + idx)

    def train_mode(self, itr: int) -> None:
        super().train_mode(itr)
        for sub in self.agents.values():
            sub.train_mode(itr)

    def sample_mode(self, itr: int) -> None:
        super().sample_mode(itr)
        for sub in self.agents.values():
            sub.sample_mode(itr)

    def eval_mode(self, itr: int) -> None:
        super().eval_mode(itr)
        for sub in self.agents.values():
            sub.eval_mode(itr)
