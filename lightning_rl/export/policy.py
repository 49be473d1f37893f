"""The deterministic policy that ``lightning-rl export`` writes, built from a feed-forward agent.

:func:`policy_of` picks the agent family's evaluation-mode action (argmax, C51's argmax of the atoms'
means, the Gaussian mean, DDPG/TD3 ``mu`` or SAC ``tanh(mean)`` scaled to the action bounds) and wraps
a copy of the agent's policy network in a :class:`DeterministicPolicy`; :func:`reference_actions` is the
agent's own action for the same observations, which every written file is checked against.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["DeterministicPolicy", "input_dtype", "policy_of", "reference_actions", "sample_observations"]


class DeterministicPolicy(nn.Module):
    """The deterministic action of a feed-forward agent's policy network, as a plain module.

    ``forward(observation [B, *obs_shape]) -> action``: ``[B]`` int64 (``kind`` ``argmax``, ``c51``)
    or ``[B, A]`` float32 (``mean``, ``scaled``, ``tanh_scaled``).

    Args:
        model: The agent's policy network (a copy: the export never shares weights with training).
        kind: ``argmax`` (argmax of the first output: PG probabilities or DQN Q-values), ``c51``
            (argmax of ``sum_i p[a, i] z[i]``), ``mean`` (the first output: the Gaussian mean),
            ``scaled`` (``bias + scale * out``: DDPG/TD3 ``mu``), ``tanh_scaled`` (``bias + scale *
            tanh(mean)``: SAC).
        atoms: C51's atom values ``z`` ``[n_atoms]``.
        action_low: Lower action bounds ``[A]`` (``scaled``, ``tanh_scaled``).
        action_high: Upper action bounds ``[A]``.

    Raises:
        ValueError: If ``kind`` is unknown or lacks the atoms or bounds it needs.
    """

    KINDS = ("argmax", "c51", "mean", "scaled", "tanh_scaled")

    def __init__(
        self,
        model: nn.Module,
        kind: str,
        atoms: torch.Tensor | None = None,
        action_low: torch.Tensor | None = None,
        action_high: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if kind not in self.KINDS:
            raise ValueError(f"kind={kind!r} is not one of {self.KINDS}")
        if kind == "c51" and atoms is None:
            raise ValueError("kind='c51' needs the atoms z")
        scaled = kind in ("scaled", "tanh_scaled")
        if scaled and (action_low is None or action_high is None):
            raise ValueError(f"kind={kind!r} needs action_low and action_high")
        self.model = model
        self.kind = kind
        # A FeedForwardModel's own forward reads the batch size as a Python int (to accept [], [B] and
        # [T, B]), which tracing would freeze; its parts take [B, ...] and keep the batch dim dynamic.
        self.feed_forward = all(hasattr(model, name) for name in ("encoder", "head", "outputs"))
        if atoms is not None:
            self.register_buffer("atoms", atoms.detach().clone().float())
        if scaled:
            assert action_low is not None and action_high is not None
            low, high = action_low.detach().float(), action_high.detach().float()
            self.register_buffer("action_scale", (high - low) / 2)
            self.register_buffer("action_bias", (high + low) / 2)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Actions for observations ``[B, *obs_shape]`` (see the class docstring)."""
        model: Any = self.model
        out = model.outputs(model.head(model.encoder(observation))) if self.feed_forward else model(observation)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if self.kind == "argmax":
            return first.argmax(dim=-1)
        if self.kind == "c51":
            return (first * self.atoms).sum(dim=-1).argmax(dim=-1)
        if self.kind == "mean":
            return first
        if self.kind == "tanh_scaled":
            first = torch.tanh(first)
        return self.action_bias + self.action_scale * first


def policy_of(agent: Any) -> tuple[DeterministicPolicy, str]:
    """The :class:`DeterministicPolicy` of an initialized agent, and a sentence saying what it computes.

    Raises:
        ValueError: Naming the agent and why, for an uninitialized, recurrent or multi-agent agent,
            dict/tuple observations, a non-discrete categorical action space, or an agent family
            this exporter does not know.
    """
    from lightning_rl.agents import (
        CatDqnAgent,
        CategoricalPgAgent,
        DdpgAgent,
        DqnAgent,
        GaussianPgAgent,
        SacAgent,
    )
    from lightning_rl.models.base import is_recurrent_model
    from lightning_rl.spaces import Composite

    name = type(agent).__name__
    if hasattr(agent, "agent_names"):
        raise ValueError(
            f"{name} is a multi-agent agent ({', '.join(agent.agent_names)}): this exporter writes one "
            "single-agent policy (observation -> action)"
        )
    if getattr(agent, "model", None) is None or getattr(agent, "env_spaces", None) is None:
        raise ValueError(f"the agent {name} is not initialized (no network built from the env's spaces)")
    if getattr(agent, "recurrent", False) or is_recurrent_model(agent.model):
        raise ValueError(
            f"{name} is recurrent (an LSTM policy): its action depends on an LSTM state carried between "
            "steps, and this exporter writes feed-forward policies only (observation -> action)"
        )
    spaces = agent.env_spaces
    if isinstance(spaces.observation, Composite) or isinstance(spaces.action, Composite):
        raise ValueError(
            f"{name} has dict/tuple observations or actions ({spaces.observation!r} -> {spaces.action!r}); "
            "the exported policy takes one observation array and returns one action array"
        )
    model = copy.deepcopy(agent.model).cpu().eval().requires_grad_(False)
    for module in model.modules():
        if isinstance(getattr(module, "grad_scale", None), float):
            # Dueling heads scale the torso's gradient with an autograd.Function, an identity in the forward
            # pass that TorchScript cannot save; with scale 1 it is skipped (this copy is never trained).
            module.grad_scale = 1.0
    if isinstance(agent, CatDqnAgent):
        return DeterministicPolicy(model, "c51", atoms=agent.z.cpu()), "argmax of the return distributions' means"
    if isinstance(agent, DqnAgent):
        return DeterministicPolicy(model, "argmax"), "argmax of the Q-values (greedy, epsilon 0)"
    if isinstance(agent, CategoricalPgAgent):
        if spaces.action.shape != ():
            raise ValueError(
                f"{name} acts in {spaces.action!r}; only a Discrete action space (a scalar IntBox) is "
                "exported, not MultiDiscrete or MultiBinary"
            )
        return DeterministicPolicy(model, "argmax"), "argmax of the policy's action probabilities"
    if isinstance(agent, GaussianPgAgent):
        return DeterministicPolicy(model, "mean"), "the Gaussian policy's mean (not clipped, as the agent's)"
    bounds = {
        "action_low": torch.as_tensor(spaces.action.low, dtype=torch.float32),
        "action_high": torch.as_tensor(spaces.action.high, dtype=torch.float32),
    }
    if isinstance(agent, SacAgent):
        return DeterministicPolicy(model, "tanh_scaled", **bounds), "tanh(mean) of the policy, scaled to the bounds"
    if isinstance(agent, DdpgAgent):
        return DeterministicPolicy(model, "scaled", **bounds), "mu of the policy, scaled to the bounds"
    raise ValueError(
        f"no deterministic policy known for the agent {name}; exported are CategoricalPgAgent, "
        "GaussianPgAgent, DqnAgent, CatDqnAgent, DdpgAgent, Td3Agent and SacAgent (feed-forward)"
    )


def input_dtype(space: Any) -> np.dtype:
    """The dtype the exported graph takes: the space's, with float64 as float32 (as agents take it)."""
    dtype = np.dtype(space.dtype)
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def sample_observations(space: Any, n: int, seed: int = 0) -> np.ndarray:
    """``n`` observations ``[n, *shape]`` drawn from a copy of ``space`` seeded with ``seed``."""
    space = copy.deepcopy(space)
    space.seed(seed)
    return np.stack([np.asarray(space.sample()) for _ in range(n)]).astype(input_dtype(space))


def reference_actions(agent: Any, observation: np.ndarray) -> np.ndarray:
    """The agent's own deterministic actions for ``observation`` ``[B, ...]``: ``agent.step`` of a
    copy in eval mode with ``eval_deterministic`` set and (epsilon-greedy agents) epsilon 0."""
    agent = copy.deepcopy(agent).cpu()
    if hasattr(agent, "eps_eval"):
        agent.eps_eval = 0.0
    agent.eval_mode(0)
    agent.eval_deterministic = True
    B = observation.shape[0]
    null = np.asarray(agent.env_spaces.action.null_value())
    prev_action = np.broadcast_to(null, (B, *null.shape)).copy()
    step = agent.step(observation, prev_action, np.zeros(B, dtype=np.float32))
    return step.action.numpy()
