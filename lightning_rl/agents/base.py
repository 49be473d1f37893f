"""The acting side of an algorithm: an ``nn.Module`` that turns observations into actions.

An agent (rlpyt section 1.3) owns the model(s), selects actions for the sampler under
``no_grad`` (:meth:`BaseAgent.step`) and runs training forward passes for the algorithm
(``agent(observation, prev_action, prev_reward)``). The LightningModule owns the agent, so
Lightning moves it between devices and saves it; the agent keeps a CPU copy of its model in OS
shared memory when sampler worker processes act with it.

Life cycle:

1. ``agent = SomeAgent(hidden_sizes=...)``: saves arguments only.
2. ``agent.initialize(env_spaces, share_memory=..., global_B=..., env_ranks=...)``: builds the
   model from the env's spaces (:meth:`make_env_to_model_kwargs` + :meth:`make_model`).
3. ``agent.to_device(device)``: the training copy goes to ``device``; the shared CPU copy stays.
4. Every iteration: ``sample_mode(itr)`` then ``step(...)`` in the sampler,
   ``train_mode(itr)`` in the algorithm, ``sync_shared_memory()`` after the update.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from lightning_rl.data.buffers import buffer_to
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase


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
    is kept out of ``state_dict`` so checkpoints hold each weight once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.model: nn.Module | None = None
        self.env_spaces: Any = None
        self.share_memory_enabled = False
        self.global_B = 1
        self.env_ranks: list[int] | None = None
        self._mode = "train"
        object.__setattr__(self, "shared_model", None)

    # ----- construction -----

    def make_env_to_model_kwargs(self, env_spaces: Any) -> dict[str, Any]:
        """Model keyword arguments that depend on the env (observation shape, action count)."""
        return {}

    def make_model(self, env_spaces: Any) -> nn.Module:
        """Build the model for ``env_spaces``; subclasses combine their own arguments with
        :meth:`make_env_to_model_kwargs`."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_model(env_spaces)")

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
        self.share_memory_enabled = share_memory
        if share_memory:
            self.model.share_memory()
            object.__setattr__(self, "shared_model", self.model)

    @property
    def initialized(self) -> bool:
        return self.model is not None

    @property
    def device(self) -> torch.device:
        if self.model is None:
            return torch.device("cpu")
        p = next(self.model.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def to_device(self, device: torch.device | str | None) -> None:
        """Move the training model to ``device``; a shared CPU model stays where it is."""
        device = torch.device(device or "cpu")
        if self.share_memory_enabled and device.type != "cpu" and self.shared_model is self.model:
            # Workers keep reading the shared CPU copy; training continues on a private copy.
            self.model = copy.deepcopy(self.shared_model)
        self.to(device)

    def sync_shared_memory(self) -> None:
        """Copy trained weights into the shared CPU model (no-op when they are the same object)."""
        if self.shared_model is not None and self.shared_model is not self.model:
            self.shared_model.load_state_dict(_strip_prefix(self.model.state_dict()))

    # ----- acting -----

    def forward(self, observation: Any, prev_action: Any, prev_reward: Any) -> Any:
        """Training forward pass over ``[T, B]`` or ``[B]`` inputs; returns what the loss needs."""
        return self.model(*self.to_agent_inputs(observation, prev_action, prev_reward))

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        """Select actions for ``B`` envs. Inputs are ``[B, ...]`` numpy arrays or tensors.

        Returns:
            ``AgentStep(action, agent_info)`` with CPU tensors of leading dim ``[B]``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def to_agent_inputs(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentInputs:
        """Turn numpy or tensor inputs into tensors on the model's device (zero-copy on CPU)."""
        return buffer_to(AgentInputs(observation, prev_action, prev_reward), self.device)

    def reset(self) -> None:
        """Called before sampling starts and when all envs reset (recurrent state, noise)."""

    def reset_one(self, idx: int) -> None:
        """Called when env ``idx`` finishes an episode (recurrent agents zero its state)."""

    # ----- modes -----

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


def _strip_prefix(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Drop DDP's ``module.`` and torch.compile's ``_orig_mod.`` prefixes from parameter names."""
    out = {}
    for k, v in state_dict.items():
        while k.startswith(("module.", "_orig_mod.")):
            k = k.split(".", 1)[1]
        out[k] = v
    return out


def as_numpy_action(action: Any) -> np.ndarray:
    """A CPU numpy view of an action tensor, for envs."""
    return action.numpy() if isinstance(action, torch.Tensor) else np.asarray(action)
