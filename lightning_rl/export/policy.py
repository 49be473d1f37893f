"""The deterministic policy that ``lightning-rl export`` writes, built from one agent's network.

:func:`policy_of` picks the agent family's evaluation-mode action (argmax, C51's argmax of the atoms'
means, each dim's argmax for MultiDiscrete, the bits above one half for MultiBinary, the Gaussian
mean, DDPG/TD3 ``mu`` or SAC ``tanh(mean)`` scaled to the action bounds) and wraps a copy of the
agent's network in a :class:`DeterministicPolicy`. The graph's inputs follow the agent:

* one ``observation`` for an array observation, or one input per leaf of a dict or tuple
  observation, named by its dotted key (``camera``, ``robot.joints``; a tuple's fields by
  position, ``0``, ``1``), each in the env's dtype (float64 as float32, as the agents take it);
* for a recurrent agent also ``prev_action``, ``prev_reward`` and the LSTM state ``rnn_state_h``,
  ``rnn_state_c`` ``[layers, batch, hidden]``; it returns ``action``, ``next_rnn_state_h`` and
  ``next_rnn_state_c``. An episode starts from zeros (state, previous action and reward), as the
  samplers start one.

:func:`reference_rollout` is the agent's own deterministic actions over a few steps (its state
carried between :meth:`step` calls), which every written file is checked against.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "STATE_INPUTS",
    "STATE_OUTPUTS",
    "DeterministicPolicy",
    "ObservationLeaf",
    "input_dtype",
    "observation_leaves",
    "policy_of",
    "reference_actions",
    "reference_rollout",
    "sample_observations",
]

#: Inputs a recurrent policy takes after the observation(s), in order.
STATE_INPUTS = ("prev_action", "prev_reward", "rnn_state_h", "rnn_state_c")
#: Outputs of a recurrent policy, in order.
STATE_OUTPUTS = ("action", "next_rnn_state_h", "next_rnn_state_c")


@dataclass(frozen=True)
class ObservationLeaf:
    """One array of a (possibly nested) dict or tuple observation, an input of the exported graph.

    Attributes:
        name: The input's name: the dotted key (``robot.joints``).
        path: Field indexes from the observation's top to this leaf.
        space: The leaf's space (an ``IntBox`` or ``FloatBox``).
    """

    name: str
    path: tuple[int, ...]
    space: Any


def observation_leaves(space: Any) -> list[ObservationLeaf]:
    """The inputs an observation ``space`` becomes: one ``observation`` for an array space, one per
    leaf of a ``Composite`` in field order, named by dotted original keys (a tuple's by position),
    or by dotted field names where keys would give two leaves one name."""
    from lightning_rl.spaces import Composite

    if not isinstance(space, Composite):
        return [ObservationLeaf("observation", (), space)]

    def walk(sub: Any, path: tuple[int, ...], keys: tuple[str, ...], fields: tuple[str, ...]) -> list[Any]:
        if not isinstance(sub, Composite):
            return [(path, keys, fields, sub)]
        out = []
        for i, (field, child) in enumerate(zip(sub.names, sub.spaces, strict=True)):
            key = str(sub.keys[i]) if sub.keys is not None else str(i)
            out += walk(child, (*path, i), (*keys, key), (*fields, field))
        return out

    found = walk(space, (), (), ())
    names = [".".join(keys) for _, keys, _, _ in found]
    if len(set(names)) < len(names):
        names = [".".join(fields) for _, _, fields, _ in found]
    if set(names) & {*STATE_INPUTS, *STATE_OUTPUTS}:
        names = [f"observation.{n}" for n in names]
    return [ObservationLeaf(name, path, sub) for name, (path, _, _, sub) in zip(names, found, strict=True)]


def _leaf_tree(space: Any, leaves: list[ObservationLeaf]) -> Any:
    """Nested tuples of leaf indexes in the observation's field structure; None for an array."""
    from lightning_rl.spaces import Composite

    if not isinstance(space, Composite):
        return None
    index = {leaf.path: i for i, leaf in enumerate(leaves)}

    def build(sub: Any, path: tuple[int, ...]) -> Any:
        if not isinstance(sub, Composite):
            return index[path]
        return tuple(build(child, (*path, i)) for i, child in enumerate(sub.spaces))

    return build(space, ())


def _nest(tree: Any, inputs: Sequence[torch.Tensor]) -> Any:
    return inputs[tree] if isinstance(tree, int) else tuple(_nest(t, inputs) for t in tree)


class DeterministicPolicy(nn.Module):
    """The deterministic action of an agent's network, as a plain module.

    ``forward(*observations[, prev_action, prev_reward, rnn_state_h, rnn_state_c])``: the
    observation leaves ``[B, ...]`` (one for an array observation), and for a recurrent network
    the previous action ``[B(, A)]``, the previous reward ``[B]`` and the LSTM state ``[N, B, H]``
    twice. Returns the action, ``[B]`` int64 (``kind`` ``argmax``, ``c51``), ``[B, D]`` int64
    (``multi_argmax``, ``bits``) or ``[B, A]`` float32 (``mean``, ``scaled``, ``tanh_scaled``);
    a recurrent one also the next state ``(h, c)``.

    Args:
        model: The agent's network (a copy: the export never shares weights with training).
        kind: ``argmax`` (argmax of the first output: PG probabilities or DQN Q-values), ``c51``
            (argmax of ``sum_i p[a, i] z[i]``), ``multi_argmax`` (each dim's argmax among its
            ``nvec[d]`` probabilities, plus ``action_start[d]``: MultiDiscrete), ``bits`` (1 where
            a bit's probability of 1 exceeds one half: MultiBinary), ``mean`` (the first output:
            the Gaussian mean), ``scaled`` (``bias + scale * out``: DDPG/TD3 ``mu``),
            ``tanh_scaled`` (``bias + scale * tanh(mean)``: SAC).
        atoms: C51's atom values ``z`` ``[n_atoms]``.
        action_low: Lower action bounds ``[A]`` (``scaled``, ``tanh_scaled``).
        action_high: Upper action bounds ``[A]``.
        nvec: Choices of each action dim (``multi_argmax``).
        action_start: Smallest value of each action dim ``[D]`` (``multi_argmax``; None: zeros).
        observation_tree: Nested tuples of input indexes giving a dict or tuple observation's
            structure (see :func:`observation_leaves`); None for one array observation.
        recurrent: Whether the network takes and returns an LSTM state (see the module docstring).
        prev_action_low: For a recurrent MultiDiscrete network whose dims do not start at 0: the
            previous action is clipped to ``[prev_action_low, prev_action_high]`` and shifted by
            ``-prev_action_low``, as the agent hands it to its network.
        prev_action_high: See ``prev_action_low``.

    Raises:
        ValueError: If ``kind`` is unknown or lacks the atoms, bounds or ``nvec`` it needs.
    """

    KINDS = ("argmax", "c51", "multi_argmax", "bits", "mean", "scaled", "tanh_scaled")
    action_start: torch.Tensor
    prev_action_low: torch.Tensor
    prev_action_high: torch.Tensor

    def __init__(
        self,
        model: nn.Module,
        kind: str,
        atoms: torch.Tensor | None = None,
        action_low: torch.Tensor | None = None,
        action_high: torch.Tensor | None = None,
        *,
        nvec: Sequence[int] | None = None,
        action_start: Sequence[int] | None = None,
        observation_tree: Any = None,
        recurrent: bool = False,
        prev_action_low: Sequence[int] | None = None,
        prev_action_high: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"kind={kind!r} is not one of {self.KINDS}")
        if kind == "c51" and atoms is None:
            raise ValueError("kind='c51' needs the atoms z")
        if kind == "multi_argmax" and not nvec:
            raise ValueError("kind='multi_argmax' needs nvec, the choices of each action dim")
        scaled = kind in ("scaled", "tanh_scaled")
        if scaled and (action_low is None or action_high is None):
            raise ValueError(f"kind={kind!r} needs action_low and action_high")
        self.model = model
        self.kind = kind
        self.recurrent = bool(recurrent)
        self.observation_tree = observation_tree
        self.n_observations = 1 if observation_tree is None else len(_flat_indexes(observation_tree))
        # A FeedForwardModel's own forward reads the batch size as a Python int (to accept [], [B] and
        # [T, B]), which tracing would freeze; its parts take [B, ...] and keep the batch dim dynamic.
        parts = ("encoder", "lstm", "head", "outputs") if self.recurrent else ("encoder", "head", "outputs")
        self.from_parts = all(hasattr(model, name) for name in parts)
        if atoms is not None:
            self.register_buffer("atoms", atoms.detach().clone().float())
        if scaled:
            assert action_low is not None and action_high is not None
            low, high = action_low.detach().float(), action_high.detach().float()
            self.register_buffer("action_scale", (high - low) / 2)
            self.register_buffer("action_bias", (high + low) / 2)
        self.nvec = tuple(int(n) for n in nvec) if kind == "multi_argmax" and nvec else None
        if self.nvec is not None:
            start = [0] * len(self.nvec) if action_start is None else list(action_start)
            self.register_buffer("action_start", torch.tensor(start, dtype=torch.long))
        self.shift_prev_action = prev_action_low is not None
        if prev_action_low is not None:
            assert prev_action_high is not None
            self.register_buffer("prev_action_low", torch.tensor(list(prev_action_low), dtype=torch.long))
            self.register_buffer("prev_action_high", torch.tensor(list(prev_action_high), dtype=torch.long))

    def forward(self, *inputs: torch.Tensor) -> Any:
        """The action (and a recurrent network's next state) for the inputs of the class docstring."""
        n = self.n_observations
        observation = inputs[0] if self.observation_tree is None else _nest(self.observation_tree, inputs)
        if not self.recurrent:
            return self.action(self.network(observation))
        prev_action, prev_reward, h, c = inputs[n : n + 4]
        if self.shift_prev_action:
            prev_action = torch.clamp(prev_action, self.prev_action_low, self.prev_action_high) - self.prev_action_low
        out, next_h, next_c = self.recurrent_network(observation, prev_action, prev_reward, h, c)
        return self.action(out), next_h, next_c

    def network(self, observation: Any) -> Any:
        """The feed-forward network's outputs for ``[B, ...]`` observations."""
        model: Any = self.model
        if self.from_parts:
            return model.outputs(model.head(model.encoder(observation)))
        return model(observation)

    def recurrent_network(
        self, observation: Any, prev_action: torch.Tensor, prev_reward: torch.Tensor, h: torch.Tensor,
        c: torch.Tensor,
    ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """One step of the recurrent network: ``(outputs, next h, next c)``."""
        from lightning_rl.models import RnnState

        model: Any = self.model
        if self.from_parts:
            features = model.encoder(observation)
            # One time step of B = features.shape[0] rows; tracing keeps a shape read dynamic.
            lstm_out, (next_h, next_c) = model.lstm(
                features, prev_action, prev_reward, RnnState(h, c), 1, features.shape[0]
            )
            return model.outputs(model.head(lstm_out)), next_h, next_c
        *out, (next_h, next_c) = model(observation, prev_action, prev_reward, RnnState(h, c))
        return tuple(out), next_h, next_c

    def action(self, out: Any) -> torch.Tensor:
        """The deterministic action from the network's outputs (see ``kind``)."""
        first = out[0] if isinstance(out, (tuple, list)) else out
        if self.kind == "argmax":
            return first.argmax(dim=-1)
        if self.kind == "c51":
            return (first * self.atoms).sum(dim=-1).argmax(dim=-1)
        if self.kind == "multi_argmax":
            assert self.nvec is not None
            dims = [p.argmax(dim=-1) for p in first.split(self.nvec, dim=-1)]
            return torch.stack(dims, dim=-1) + self.action_start
        if self.kind == "bits":
            # The network gives each bit a softmax over (0, 1); a bit is 1 where P(1) > 1/2.
            return (first[..., 1::2] > 0.5).long()
        if self.kind == "mean":
            return first
        if self.kind == "tanh_scaled":
            first = torch.tanh(first)
        return self.action_bias + self.action_scale * first


def _flat_indexes(tree: Any) -> list[int]:
    return [tree] if isinstance(tree, int) else [i for t in tree for i in _flat_indexes(t)]


def policy_of(agent: Any) -> tuple[DeterministicPolicy, str]:
    """The :class:`DeterministicPolicy` of an initialized single agent (a sub-agent of a
    ``MultiAgent`` included), and a sentence saying what it computes.

    Raises:
        ValueError: Naming the agent and why, for a ``MultiAgent`` (export it with
            :func:`~lightning_rl.export.export_agent`, one policy per sub-agent), an uninitialized
            agent, dict/tuple actions, or an agent family this exporter does not know.
    """
    from lightning_rl.agents import (
        CatDqnAgent,
        CategoricalPgAgent,
        DdpgAgent,
        DqnAgent,
        GaussianPgAgent,
        SacAgent,
    )
    from lightning_rl.distributions import Bernoulli, MultiCategorical
    from lightning_rl.models.base import is_recurrent_model
    from lightning_rl.spaces import Composite

    name = type(agent).__name__
    if hasattr(agent, "agent_names"):
        raise ValueError(
            f"{name} is a multi-agent agent ({', '.join(agent.agent_names)}): policy_of builds one agent's "
            "policy; export_agent writes one per sub-agent"
        )
    if getattr(agent, "model", None) is None or getattr(agent, "env_spaces", None) is None:
        raise ValueError(f"the agent {name} is not initialized (no network built from the env's spaces)")
    recurrent = bool(getattr(agent, "recurrent", False)) or is_recurrent_model(agent.model)
    spaces = agent.env_spaces
    if isinstance(spaces.action, Composite):
        raise ValueError(
            f"{name} acts in the dict/tuple action space {spaces.action!r}; an exported policy returns one "
            "action array (dict actions by agent name are a MultiAgent's, exported one policy per agent)"
        )
    leaves = observation_leaves(spaces.observation)
    model = copy.deepcopy(agent.model).cpu().eval().requires_grad_(False)
    for module in model.modules():
        if isinstance(getattr(module, "grad_scale", None), float):
            # Dueling heads scale the torso's gradient with an autograd.Function, an identity in the forward
            # pass that TorchScript cannot save; with scale 1 it is skipped (this copy is never trained).
            module.grad_scale = 1.0
    common: dict[str, Any] = {"observation_tree": _leaf_tree(spaces.observation, leaves), "recurrent": recurrent}
    if isinstance(agent, CatDqnAgent):
        return (DeterministicPolicy(model, "c51", atoms=agent.z.cpu(), **common),
                "argmax of the return distributions' means")
    if isinstance(agent, DqnAgent):  # R2d1Agent included
        return DeterministicPolicy(model, "argmax", **common), "argmax of the Q-values (greedy, epsilon 0)"
    if isinstance(agent, CategoricalPgAgent):
        distribution = agent.distribution
        if isinstance(distribution, Bernoulli):
            return DeterministicPolicy(model, "bits", **common), "1 where a bit's probability of 1 exceeds 1/2"
        if isinstance(distribution, MultiCategorical):
            low = np.asarray(distribution.low)
            if recurrent and np.any(low != 0):
                # As CategoricalPgAgent.to_agent_inputs: the network sees zero-based previous actions.
                common["prev_action_low"] = low.tolist()
                common["prev_action_high"] = (low + np.asarray(distribution.nvec) - 1).tolist()
            policy = DeterministicPolicy(
                model, "multi_argmax", nvec=distribution.nvec, action_start=distribution.low, **common
            )
            return policy, "argmax of each action dim's probabilities"
        return DeterministicPolicy(model, "argmax", **common), "argmax of the policy's action probabilities"
    if isinstance(agent, GaussianPgAgent):
        return (DeterministicPolicy(model, "mean", **common),
                "the Gaussian policy's mean (not clipped, as the agent's)")
    bounds: dict[str, Any] = {
        "action_low": torch.as_tensor(spaces.action.low, dtype=torch.float32),
        "action_high": torch.as_tensor(spaces.action.high, dtype=torch.float32),
    }
    if isinstance(agent, SacAgent):
        return (DeterministicPolicy(model, "tanh_scaled", **bounds, **common),
                "tanh(mean) of the policy, scaled to the bounds")
    if isinstance(agent, DdpgAgent):
        return DeterministicPolicy(model, "scaled", **bounds, **common), "mu of the policy, scaled to the bounds"
    raise ValueError(
        f"no deterministic policy known for the agent {name}; exported are CategoricalPgAgent, "
        "GaussianPgAgent, DqnAgent, CatDqnAgent, R2d1Agent, DdpgAgent, Td3Agent and SacAgent"
    )


def input_dtype(space: Any) -> np.dtype:
    """The dtype the exported graph takes: the space's, with float64 as float32 (as agents take it)."""
    dtype = np.dtype(space.dtype)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def sample_observations(space: Any, n: int, seed: int = 0) -> Any:
    """``n`` observations ``[n, *shape]`` drawn from a copy of ``space`` seeded with ``seed``: an
    array, or for a dict or tuple space a named tuple of such arrays (the space's own structure)."""
    from lightning_rl.spaces import Composite

    space = copy.deepcopy(space)
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]

    def stack(sub: Any, values: list[Any]) -> Any:
        if isinstance(sub, Composite):
            fields = [stack(child, [tuple.__getitem__(v, i) for v in values]) for i, child in enumerate(sub.spaces)]
            return sub.NamedTupleCls(*fields)
        return np.stack([np.asarray(v) for v in values]).astype(input_dtype(sub))

    return stack(space, samples)


def leaf_arrays(observation: Any, leaves: list[ObservationLeaf]) -> list[np.ndarray]:
    """The arrays of ``observation`` (an array or nested named tuples) in the order of ``leaves``."""
    out = []
    for leaf in leaves:
        value = observation
        for i in leaf.path:
            value = tuple.__getitem__(value, i)
        out.append(np.ascontiguousarray(value))
    return out


def reference_actions(agent: Any, observation: np.ndarray) -> np.ndarray:
    """The agent's own deterministic actions for ``observation`` ``[B, ...]``: ``agent.step`` of a
    copy in eval mode with ``eval_deterministic`` set and (epsilon-greedy agents) epsilon 0."""
    agent = _deterministic_copy(agent)
    B = observation.shape[0]
    null = np.asarray(agent.env_spaces.action.null_value())
    prev_action = np.broadcast_to(null, (B, *null.shape)).copy()
    step = agent.step(observation, prev_action, np.zeros(B, dtype=np.float32))
    return step.action.numpy()


def _deterministic_copy(agent: Any) -> Any:
    agent = copy.deepcopy(agent).cpu()
    for sub in [agent, *getattr(agent, "agents", {}).values()]:
        if hasattr(sub, "eps_eval"):
            sub.eps_eval = 0.0
        sub.eval_deterministic = True
    agent.eval_mode(0)
    agent.reset()
    return agent


def zero_actions(space: Any, B: int) -> Any:
    """``B`` zero actions of ``space`` (named tuples of them for a dict space): what the samplers
    hand an agent as the previous action at an episode's start."""
    from lightning_rl.spaces import Composite

    if isinstance(space, Composite):
        return space.NamedTupleCls(*(zero_actions(sub, B) for sub in space.spaces))
    return np.zeros((B, *space.shape), dtype=np.int64 if np.issubdtype(space.dtype, np.integer) else np.float32)


def reference_rollout(
    agent: Any, observations: list[Any], rewards: np.ndarray, states: list[dict[str | None, Any]] | None = None
) -> list[Any]:
    """The agent's own deterministic actions over ``T`` steps of ``B`` envs, its state carried.

    A copy of ``agent`` in eval mode (``eval_deterministic``, epsilon 0), reset, acts on
    ``observations[t]`` with its own previous action (zeros at ``t = 0``, as an episode starts)
    and ``rewards[t]`` as the previous reward (an alternating agent's first half of envs does).

    Args:
        agent: An initialized agent (a ``MultiAgent`` too).
        observations: ``T`` observations ``[B, ...]`` (named tuples of arrays for dict spaces).
        rewards: ``[T, B]`` previous rewards (``rewards[0]`` is zero at an episode's start).
        states: If given, a list that gets, after each step, the recurrent state ``(h, c)``
            ``[N, rows, H]`` (numpy) of every learner by its key: ``None`` for a single agent,
            the ``MultiAgent.agents`` keys otherwise (``None`` for a feed-forward one).

    Returns:
        ``T`` actions ``[B, ...]`` as numpy arrays (named tuples of them for a dict action space).
    """
    from lightning_rl.data.buffers import buffer_func

    agent = _deterministic_copy(agent)
    learners: dict[str | None, Any] = dict(agent.agents.items()) if hasattr(agent, "agent_names") else {None: agent}
    # An alternating agent (AlternatingSampler's) keeps one state per half of its envs and acts for the
    # halves in turn: the rollout is half 0's, and a second call per step acts for half 1.
    alternating = any(getattr(a, "alternating", False) for a in [agent, *learners.values()])
    prev_action = zero_actions(agent.env_spaces.action, int(rewards.shape[1]))
    actions = []
    for observation, reward in zip(observations, rewards, strict=True):
        action = buffer_func(agent.step(observation, prev_action, reward).action, lambda t: t.numpy().copy())
        if alternating:
            agent.step(observation, prev_action, reward)
        if states is not None:
            states.append({key: _state_arrays(getattr(sub, "prev_rnn_state", None)) for key, sub in learners.items()})
        actions.append(action)
        prev_action = action
    return actions


def _state_arrays(state: Any) -> tuple[np.ndarray, np.ndarray] | None:
    if not isinstance(state, tuple) or len(state) != 2:  # no LSTM state (export refuses other states)
        return None
    h, c = (tuple.__getitem__(state, i).detach().cpu().numpy().copy() for i in range(2))
    return h, c
