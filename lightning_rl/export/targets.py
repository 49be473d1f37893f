"""Which policies an agent exports: one for a single agent, one per learner of a ``MultiAgent``.

:func:`policy_targets` is the one place that knows how a multi-agent agent splits into exported
policies and which rows of the env's observations, actions and rewards each one sees. It follows
:class:`~lightning_rl.agents.MultiAgent` exactly: sub-agent ``<name>`` acts on its agent's
observation (its field of a per-agent dict observation, else the whole observation) and the env's
reward; a shared sub-agent acts on all agents' rows stacked agent-major (``[n_agents * B]``).
A policy that needs more than its agent's observation (an agent-id one-hot for a shared policy)
gets it from its target's ``observation_rows``, and its graph an input for it; a centralised
critic is no part of an exported policy (only the acting network is: ``policy_of``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = ["PolicyTarget", "policy_targets", "stack_rows"]


def _same(value: Any) -> Any:
    return value


def stack_rows(values: list[Any]) -> Any:
    """Arrays (or named tuples of them, nested) concatenated along their first dim, leaf by leaf."""
    first = values[0]
    if isinstance(first, tuple):
        fields = [stack_rows([tuple.__getitem__(v, i) for v in values]) for i in range(len(first))]
        return cast(Any, first)._make(fields)  # a namedtuple or a namedarraytuple
    return values[0] if len(values) == 1 else np.concatenate([np.asarray(v) for v in values])


@dataclass(frozen=True)
class PolicyTarget:
    """One policy to export: the network of ``agent`` and the rows of the env's data it acts on.

    Attributes:
        key: ``None`` for a single agent (files ``<name>.pt``); else the learner's key, the agent
            name or ``shared`` (files ``<name>.<key>.pt``).
        agent: The (sub-)agent whose network is exported (:func:`~lightning_rl.export.policy_of`).
        agent_names: The env's agents it acts for, in row order (empty for a single agent).
        observation_rows: The env's observation ``[B, ...]`` -> this policy's ``[n * B, ...]``.
        action_rows: The agent's action ``[B, ...]`` -> this policy's ``[n * B, ...]``.
        reward_rows: The env's reward ``[B]`` -> this policy's previous rewards ``[n * B]``.
    """

    key: str | None
    agent: Any
    agent_names: tuple[str, ...] = ()
    observation_rows: Callable[[Any], Any] = _same
    action_rows: Callable[[Any], Any] = _same
    reward_rows: Callable[[np.ndarray], np.ndarray] = _same


def policy_targets(agent: Any) -> list[PolicyTarget]:
    """The policies ``agent`` exports: itself, or one per learner of a ``MultiAgent`` (each sub-agent,
    or the one shared sub-agent acting for every agent).

    Raises:
        ValueError: If a ``MultiAgent`` is not initialized.
    """
    if not hasattr(agent, "agent_names"):
        return [PolicyTarget(None, agent)]
    if not agent.initialized:
        raise ValueError(
            f"the agent {type(agent).__name__} is not initialized (no sub-agents built from the env's spaces)"
        )
    targets = []
    for key, names in agent.learners().items():
        names = tuple(names)

        def observation_rows(observation: Any, names: tuple[str, ...] = names) -> Any:
            return stack_rows([agent.agent_observation(observation, n) for n in names])

        def action_rows(action: Any, names: tuple[str, ...] = names) -> Any:
            return stack_rows([getattr(action, n) for n in names])

        def reward_rows(reward: np.ndarray, n: int = len(names)) -> np.ndarray:
            return np.concatenate([reward] * n)

        targets.append(PolicyTarget(key, agent.agents[key], names, observation_rows, action_rows, reward_rows))
    return targets
