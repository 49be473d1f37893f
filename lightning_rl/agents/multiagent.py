"""Policies for the agents of a multi-agent env, seen by samplers as a single agent.

A multi-agent env has a dict action space keyed by agent name (a :class:`~lightning_rl.spaces.Composite`
after conversion), and optionally a dict observation space holding each agent's own view under its
name (plus, from :class:`~lightning_rl.envs.pettingzoo.PettingZooEnv`, the fields ``agent_mask``
and ``state``); otherwise every agent sees the whole observation. :class:`MultiAgent` maps every
agent to a policy (one per agent, one shared by all, or any grouping) and answers ``step`` with
namedarraytuples that have one field per agent, so the sampler's ``[T, B]`` buffers hold
``action.<name>``, ``agent_info.<name>`` (with each recurrent sub-agent's ``prev_rnn_state``) and
``bootstrap_value.<name>``.

Critics: each policy's own value head sees what its agent sees (``critic="local"``: IPPO), or
a centralised critic per policy sees the global state (``critic="centralized"``: MAPPO).
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Callable, ItemsView, Sequence, ValuesView
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import torch
from torch import nn

from lightning_rl.agents.base import AgentStep, BaseAgent
from lightning_rl.data.buffers import buffer_func, buffer_to
from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema, NamedArrayTupleSchema_like
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.envs.multiagent import AGENT_MASK_KEY, STATE_KEY
from lightning_rl.models.blocks import MlpModel
from lightning_rl.spaces import Composite, FloatBox, IntBox

__all__ = ["SHARED_AGENT_KEY", "AgentView", "MultiAgent"]

#: Key of the one sub-agent in ``MultiAgent.agents`` when parameters are shared.
SHARED_AGENT_KEY = "shared"

#: Per-agent training inputs with a centralised critic: the agent's own observation and the critic's input.
AgentView = NamedArrayTupleSchema("AgentView", ("observation", "critic"))

if TYPE_CHECKING:

    class _SubAgents(nn.ModuleDict):
        """What type checkers see of ``MultiAgent.agents``: a ``ModuleDict`` holding only agents."""

        def __getitem__(self, key: str) -> BaseAgent: ...

        def values(self) -> ValuesView[BaseAgent]: ...

        def items(self) -> ItemsView[str, BaseAgent]: ...


def _flat_size(space: Any) -> int | None:
    """Number of values of a vector (or scalar) box space, None for anything else."""
    if isinstance(space, (FloatBox, IntBox)) and len(space.shape) <= 1:
        return int(np.prod(space.shape, dtype=np.int64))
    return None


def _cat(parts: list[Any]) -> Any:
    """``torch.cat`` of equally structured inputs (arrays, tensors or namedarraytuples of them) along dim 0."""
    first = parts[0]
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(_cat([getattr(p, f) for p in parts]) for f in first._fields))
    return torch.cat([torch.as_tensor(p) for p in parts])


def _flat(x: Any, lead: int) -> torch.Tensor:
    """``x`` as float32 with its trailing dims flattened after ``lead`` leading dims."""
    t = torch.as_tensor(x)
    return t.reshape(*t.shape[:lead], -1).to(torch.float32)


class MultiAgent(BaseAgent):
    """Policies for the agents of a multi-agent env: independent, shared, or mapped by pattern.

    Agent names are the field names of the env's action space: its dict keys, which must be
    valid Python identifiers to appear unchanged (``"agent_0"``; see
    :func:`~lightning_rl.spaces.to_field_names`). Every agent acts with one *policy* (a sub-agent,
    key of :attr:`agents`):

    * ``agents`` a template, no mapping: one copy per agent (independent policies, keyed by
      agent name); ``share_parameters=True``: one policy for all (key ``"shared"``);
    * ``policy_mapping``: ``{pattern: policy}`` (RLlib's ``policy_mapping_fn`` as data): an
      agent acts with the policy of the first pattern (``fnmatch``: ``"adversary_*"``, or an
      exact name) it matches; ``agents`` is then a template copied once per policy, or a dict of
      sub-agents keyed by policy;
    * ``agents`` a dict keyed by agent name, no mapping: those sub-agents (possibly of different kinds).

    A policy acting for several agents stacks their inputs into one ``[n_agents * B]`` batch per
    step (agent-major), so its forward pass runs once and a recurrent policy keeps one state
    row per (agent, env); its agents need the same observation and action spaces. Such a policy
    tells its agents apart by what they observe, plus an agent-id one-hot appended to vector
    observations (``agent_id``).

    Sub-agent of agent ``<name>`` is initialized with ``EnvSpaces(observation=<its observation
    space>, action=<its action subspace>)``: its own entry of a dict observation space that
    holds every agent name (other fields, ``agent_mask`` and ``state``, are not the policy's),
    else the whole observation; with the one-hot, a vector space wider by the policy's agent count.

    Args:
        agents: One template agent, or a dict of sub-agents keyed by agent name (or by policy
            name with ``policy_mapping``).
        share_parameters: One policy for all agents (needs a single template and no mapping).
        policy_mapping: ``{agent name pattern: policy name}``; None: see above.
        agent_id: Append a one-hot of the agent's index among its policy's agents to the
            observation of policies acting for several agents (and to their centralised
            critic's input). None: where the observations are vectors; True: required (an error
            for other observations); False: never.
        critic: ``"local"``: each policy's own value head on its agent's observation (IPPO);
            ``"centralized"``: one critic MLP per policy on the global state (MAPPO): the
            observation's ``state`` field when the env has one, else all agents' observations
            concatenated (vector observations); the policies' own value heads are then unused.
        critic_hidden_sizes: Hidden sizes of a centralised critic's MLP (Tanh).

    Raises:
        ValueError: On bad arguments; at :meth:`initialize`, if the env's action space is not a
            dict, the given names differ from the env's agent names, an agent matches no
            pattern, sub-agents mix recurrent and feed-forward policies, a policy's agents have
            different spaces, or a centralised critic has no vector input.

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

    def __init__(
        self,
        agents: BaseAgent | dict[str, BaseAgent],
        share_parameters: bool = False,
        policy_mapping: dict[str, str] | None = None,
        agent_id: bool | None = None,
        critic: Literal["local", "centralized"] = "local",
        critic_hidden_sizes: Sequence[int] = (64, 64),
    ) -> None:
        super().__init__()
        if policy_mapping is not None:
            if share_parameters:
                raise ValueError("MultiAgent: give share_parameters=True or a policy_mapping, not both")
            if not isinstance(policy_mapping, dict) or not policy_mapping or not all(
                    isinstance(k, str) and isinstance(v, str) and v.isidentifier() for k, v in policy_mapping.items()):
                raise ValueError(
                    "MultiAgent: policy_mapping must be a non-empty dict {agent name pattern: policy name}, policy "
                    f"names being identifiers; got {policy_mapping!r}"
                )
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
            if policy_mapping is not None and set(agents) != set(policy_mapping.values()):
                raise ValueError(
                    f"MultiAgent: with a policy_mapping, agents is keyed by policy name: got {sorted(agents)}, the "
                    f"mapping names policies {sorted(set(policy_mapping.values()))}"
                )
        elif not isinstance(agents, BaseAgent):
            raise ValueError(f"MultiAgent: agents must be a BaseAgent or a dict of them, got {type(agents).__name__}")
        if agent_id not in (None, True, False):
            raise ValueError(f"MultiAgent: agent_id must be true, false or null, got {agent_id!r}")
        if critic not in ("local", "centralized"):
            raise ValueError(f"MultiAgent: critic must be 'local' or 'centralized', got {critic!r}")
        self.share_parameters = bool(share_parameters)
        self.policy_mapping = None if policy_mapping is None else dict(policy_mapping)
        self.agent_id = agent_id
        self.critic = critic
        self.critic_hidden_sizes = tuple(int(h) for h in critic_hidden_sizes)
        self.agents = cast("_SubAgents", nn.ModuleDict())
        #: Centralised critics by policy key (empty with ``critic="local"``).
        self.critics = nn.ModuleDict()
        self.agent_names: tuple[str, ...] = ()
        self.per_agent_observation = False
        #: Policy key of every agent name.
        self.policy_of: dict[str, str] = {}
        #: Agents whose policy gets the agent-id one-hot, with their index among the policy's agents.
        self.onehot_index: dict[str, int] = {}
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
        self.per_agent_observation = isinstance(observation, Composite) and set(names) <= set(observation.names)
        self.agent_names = names
        self.policy_of = self._map_policies(names)
        spaces = self.agent_spaces(env_spaces)
        for key, members in self.learners().items():
            first = spaces[members[0]]
            if len(members) > 1 and any(spaces[m] != first for m in members):
                raise ValueError(
                    f"MultiAgent: policy {key!r} acts for agents {members}, which needs the same observation and "
                    f"action spaces for each of them; got {({m: spaces[m] for m in members})}"
                )
        self.onehot_index = self._onehot_index(spaces)
        if not self.agents:
            self._build_sub_agents()
        for key, members in self.learners().items():
            self.agents[key].initialize(self.policy_spaces(spaces[members[0]], key), share_memory, global_B, env_ranks)
        if self.critic == "centralized" and not len(self.critics):
            for key, members in self.learners().items():
                size = self._critic_input_size(env_spaces) + (len(members) if members[0] in self.onehot_index else 0)
                self.critics[key] = MlpModel(size, self.critic_hidden_sizes, 1, nn.Tanh)
            if share_memory:
                self.critics.share_memory()
        self.env_spaces = env_spaces
        self.global_B = global_B
        self.env_ranks = env_ranks
        self.share_memory_enabled = share_memory
        object.__setattr__(self, "_action_schema", NamedArrayTupleSchema_like(env_spaces.action.NamedTupleCls))
        object.__setattr__(self, "_info_schema", NamedArrayTupleSchema("AgentInfos", names))
        object.__setattr__(self, "_value_schema", NamedArrayTupleSchema("AgentValues", names))

    def _map_policies(self, names: tuple[str, ...]) -> dict[str, str]:
        if self.policy_mapping is not None:
            mapping: dict[str, str] = {}
            for name in names:
                policy = next((p for pattern, p in self.policy_mapping.items() if fnmatch.fnmatchcase(name, pattern)),
                              None)
                if policy is None:
                    raise ValueError(
                        f"MultiAgent: agent {name!r} matches no pattern of policy_mapping {self.policy_mapping}"
                    )
                mapping[name] = policy
            return mapping
        if self.share_parameters:
            return dict.fromkeys(names, SHARED_AGENT_KEY)
        return {name: name for name in names}

    def _onehot_index(self, spaces: dict[str, EnvSpaces]) -> dict[str, int]:
        index: dict[str, int] = {}
        for key, members in self.learners().items():
            if len(members) < 2 or self.agent_id is False:
                continue
            space = spaces[members[0]].observation
            if not isinstance(space, FloatBox) or len(space.shape) != 1:
                if self.agent_id:
                    raise ValueError(
                        f"MultiAgent: agent_id=True appends a one-hot to vector observations; policy {key!r} observes "
                        f"{space!r}"
                    )
                continue
            index.update({m: i for i, m in enumerate(members)})
        return index

    def policy_spaces(self, agent_spaces: EnvSpaces, key: str) -> EnvSpaces:
        """The spaces policy ``key`` is built for: its agents' spaces, the observation wider by the
        one-hot of the agent id where it gets one."""
        members = self.learners()[key]
        if members[0] not in self.onehot_index:
            return agent_spaces
        space = agent_spaces.observation
        n = len(members)
        wider = FloatBox(np.concatenate([np.broadcast_to(space.low, space.shape), np.zeros(n)]),
                         np.concatenate([np.broadcast_to(space.high, space.shape), np.ones(n)]), dtype=space.dtype)
        return EnvSpaces(wider, agent_spaces.action)

    def _critic_input_size(self, env_spaces: Any) -> int:
        observation = env_spaces.observation
        if self.per_agent_observation and STATE_KEY in observation.names:
            size = _flat_size(observation.spaces[observation.names.index(STATE_KEY)])
            if size is None:
                raise ValueError(f"MultiAgent: critic='centralized' needs a vector state, got {observation!r}")
            return size
        parts = ([observation.spaces[observation.names.index(n)] for n in self.agent_names]
                 if self.per_agent_observation else [observation])
        sizes = [_flat_size(p) for p in parts]
        if any(s is None for s in sizes):
            raise ValueError(
                "MultiAgent: critic='centralized' without an env state concatenates the agents' observations, which "
                f"must be vectors; got {parts!r}"
            )
        return int(sum(cast("list[int]", sizes)))

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
        if isinstance(self._given, dict) and self.policy_mapping is None and set(self._given) != set(names):
            raise ValueError(
                f"MultiAgent: agent names {sorted(self._given)} do not match the env's action dict "
                f"keys {sorted(names)} (field names; original keys {list(space.keys)})"
            )
        return names

    def _build_sub_agents(self) -> None:
        given = self._given
        for key in self.learners():
            if isinstance(given, dict):
                self.agents[key] = given[key]
            elif self.share_parameters:
                self.agents[key] = given
            else:
                self.agents[key] = copy.deepcopy(given)

    def agent_spaces(self, env_spaces: Any) -> dict[str, EnvSpaces]:
        """Each agent's ``EnvSpaces``: its observation (sub)space and its action subspace."""
        action = env_spaces.action
        observation = env_spaces.observation
        per_agent = isinstance(observation, Composite) and set(action.names) <= set(observation.names)
        return {
            name: EnvSpaces(observation.spaces[observation.names.index(name)] if per_agent else observation,
                            action.spaces[i])
            for i, name in enumerate(action.names)
        }

    def sub_agent(self, name: str) -> BaseAgent:
        """The sub-agent (policy) acting for agent ``name``.

        Raises:
            ValueError: If ``name`` is not an agent name.
        """
        if name not in self.agent_names:
            raise ValueError(f"MultiAgent: unknown agent name {name!r}; agents are {list(self.agent_names)}")
        return self.agents[self.policy_of[name]]

    def learners(self) -> dict[str, list[str]]:
        """Policies (by key in :attr:`agents`) and the agent names each one acts for, in agent order."""
        groups: dict[str, list[str]] = {}
        for name in self.agent_names:
            groups.setdefault(self.policy_of[name], []).append(name)
        return groups

    def agent_observation(self, observation: Any, name: str) -> Any:
        """Agent ``name``'s part of an observation: its field for per-agent observations, else all of it."""
        return getattr(observation, name) if self.per_agent_observation else observation

    def agent_view(self, observation: Any, name: str, lead: int = 2) -> Any:
        """What agent ``name``'s training batch keeps of an observation with ``lead`` leading dims
        (``[T, B]`` rollouts: 2): its own observation, or with a centralised critic
        ``AgentView(observation, critic)``."""
        own = self.agent_observation(observation, name)
        if self.critic != "centralized":
            return own
        return AgentView(own, self.critic_input(observation, lead=lead, as_numpy=isinstance(own, np.ndarray)))

    def critic_input(self, observation: Any, lead: int = 1, as_numpy: bool = False) -> Any:
        """The centralised critic's input without the one-hot: the ``state`` field, else every
        agent's observation flattened and concatenated (``[*lead dims, size]``)."""
        if self.per_agent_observation and STATE_KEY in observation._fields:
            parts = [getattr(observation, STATE_KEY)]
        elif self.per_agent_observation:
            parts = [getattr(observation, n) for n in self.agent_names]
        else:
            parts = [observation]
        if as_numpy:
            arrays = [np.asarray(p, dtype=np.float32) for p in parts]
            return np.concatenate([a.reshape(*a.shape[:lead], -1) for a in arrays], axis=-1)
        return torch.cat([_flat(p, lead) for p in parts], dim=-1)

    def agent_mask(self, observation: Any) -> Any:
        """The observation's ``agent_mask`` field (1 for agents acting on it), or None without one."""
        if self.per_agent_observation and AGENT_MASK_KEY in observation._fields:
            return getattr(observation, AGENT_MASK_KEY)
        return None

    def _with_onehot(self, name: str, observation: Any) -> Any:
        """``observation`` (``[..., size]``) with agent ``name``'s one-hot appended, where its policy has one."""
        index = self.onehot_index.get(name)
        if index is None:
            return observation
        obs = torch.as_tensor(observation)
        onehot = torch.zeros(*obs.shape[:-1], len(self.learners()[self.policy_of[name]]), dtype=obs.dtype,
                             device=obs.device)
        onehot[..., index] = 1
        return torch.cat([obs, onehot], dim=-1)

    def _critic_value(self, name: str, critic_input: Any) -> torch.Tensor:
        critic = self.critics[self.policy_of[name]]
        x = torch.as_tensor(critic_input, dtype=torch.float32)
        x = self._with_onehot(name, x.to(next(critic.parameters()).device))
        return critic(x).squeeze(-1)

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
        """``"model"``: every policy's model and critic (once each); ``"model/<key>"``: one policy's."""
        groups: dict[str, list[nn.Module]] = {"model": []}
        for key, sub in self.agents.items():
            models = [m for ms in sub.trainable_modules().values() for m in ms]
            if key in self.critics:
                models.append(self.critics[key])
            groups["model"].extend(models)
            groups[f"model/{key}"] = models
        return groups

    def sync_shared_memory(self) -> None:
        for sub in self.agents.values():
            sub.sync_shared_memory()

    def evaluate(self, name: str, agent_inputs: Any, init_rnn_state: Any = None) -> tuple[Any, torch.Tensor]:
        """Agent ``name``'s training forward pass (with grad): ``(dist_info, value)`` over its
        ``[T, B]`` or ``[N]`` inputs, as its training batch holds them (:meth:`agent_view`).

        Args:
            name: The agent.
            agent_inputs: ``AgentInputs(observation, prev_action, prev_reward)`` of its batch.
            init_rnn_state: Recurrent policies: the state at the first step; None otherwise.
        """
        observation, prev_action, prev_reward = agent_inputs
        critic_input = None
        if self.critic == "centralized":
            observation, critic_input = observation.observation, observation.critic
        sub = self.sub_agent(name)
        observation = self._with_onehot(name, observation)
        if self.recurrent:
            dist_info, value, _ = sub(observation, prev_action, prev_reward, init_rnn_state)
        else:
            dist_info, value = sub(observation, prev_action, prev_reward)
        if critic_input is not None:
            value = self._critic_value(name, buffer_to(critic_input, self.device))
        return dist_info, value

    def policy(self, name: str) -> _AgentPolicy:
        """Agent ``name``'s policy as a single agent for a loss: ``distribution`` and a training
        forward pass on its batch's inputs (:meth:`evaluate`: the one-hot, the centralised critic)."""
        return _AgentPolicy(self, name)

    def update_obs_rms(self, name: str, observation: Any, all_gather: Any = None) -> None:
        """Fold agent ``name``'s observations of a rollout (its :meth:`agent_view`) into its
        policy's running observation statistics, where it keeps any."""
        update = getattr(self.sub_agent(name), "update_obs_rms", None)
        if update is None:
            return
        if self.critic == "centralized":
            observation = observation.observation
        update(self._with_onehot(name, observation), all_gather)

    def forward(self, observation: Any, prev_action: Any, prev_reward: Any) -> dict[str, Any]:
        """Each agent's training forward pass ``(dist_info, value)`` on the whole observation, by name."""
        lead = np.ndim(prev_reward)
        return {
            n: self.evaluate(n, (self.agent_view(observation, n, lead), getattr(prev_action, n), prev_reward))
            for n in self.agent_names
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
            (``AgentInfos``) with each agent's ``agent_info`` (its ``value`` the centralised
            critic's with ``critic="centralized"``); CPU tensors.
        """
        for sub in self.agents.values():
            sub.eval_deterministic = self.eval_deterministic
        steps = self._per_agent(lambda sub, *inputs: sub.step(*inputs), observation, prev_action, prev_reward)
        if self.critic == "centralized":
            values = self._critic_values(observation)
            steps = [s._replace(agent_info=s.agent_info._replace(value=v)) for s, v in zip(steps, values, strict=True)]
        assert self._action_schema is not None and self._info_schema is not None
        return AgentStep(
            self._action_schema(*(s.action for s in steps)), self._info_schema(*(s.agent_info for s in steps))
        )

    @torch.no_grad()
    def value(self, observation: Any, prev_action: Any, prev_reward: Any) -> Any:
        """Each agent's state values ``[B]`` (CPU), as a namedarraytuple ``AgentValues`` by name."""
        if self.critic == "centralized":
            values = self._critic_values(observation)
        else:
            values = self._per_agent(lambda sub, *inputs: sub.value(*inputs), observation, prev_action, prev_reward)
        assert self._value_schema is not None
        return self._value_schema(*values)

    def _critic_values(self, observation: Any) -> list[torch.Tensor]:
        critic_input = self.critic_input(observation, lead=1)
        return [self._critic_value(name, critic_input).cpu() for name in self.agent_names]

    def _per_agent(self, call: Callable[..., Any], observation: Any, prev_action: Any, prev_reward: Any) -> list[Any]:
        """``call(policy, obs, prev_action, prev_reward)`` for every agent, in name order; a
        policy acting for several agents is called once on their inputs stacked agent-major."""
        results: dict[str, Any] = {}
        for key, members in self.learners().items():
            sub = self.agents[key]
            observations = [self._with_onehot(n, self.agent_observation(observation, n)) for n in members]
            if len(members) == 1:
                n = members[0]
                results[n] = call(sub, observations[0], getattr(prev_action, n), prev_reward)
                continue
            B = len(np.asarray(prev_reward))
            stacked = call(
                sub,
                _cat(observations),
                _cat([getattr(prev_action, n) for n in members]),
                _cat([prev_reward] * len(members)),
            )
            for i, n in enumerate(members):
                results[n] = buffer_func(stacked, lambda t, i=i, B=B: t[i * B : (i + 1) * B])
        return [results[n] for n in self.agent_names]

    def reset(self) -> None:
        for sub in self.agents.values():
            sub.reset()

    def reset_one(self, idx: int) -> None:
        """Reset env ``idx`` for every agent (its rows of a policy's stacked state)."""
        for key, members in self.learners().items():
            sub = self.agents[key]
            if len(members) == 1:
                sub.reset_one(idx)
                continue
            state = getattr(sub, "prev_rnn_state", None)
            if state is None:
                continue
            B = next(iter(state)).shape[1] // len(members)
            for i in range(len(members)):
                sub.reset_one(i * B + idx)

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


class _AgentPolicy:
    """One agent of a :class:`MultiAgent`, called as a single-agent policy is in a loss."""

    def __init__(self, multi_agent: MultiAgent, name: str) -> None:
        self.multi_agent, self.name = multi_agent, name
        self.distribution = multi_agent.sub_agent(name).distribution

    def __call__(self, observation: Any, prev_action: Any, prev_reward: Any, init_rnn_state: Any = None) -> tuple:
        dist_info, value = self.multi_agent.evaluate(self.name, (observation, prev_action, prev_reward), init_rnn_state)
        return (dist_info, value, None) if self.multi_agent.recurrent else (dist_info, value)
