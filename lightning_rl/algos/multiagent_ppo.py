"""Multi-agent PPO: independent learners (IPPO: de Witt et al. 2020, https://arxiv.org/abs/2011.09533).

Every agent ``a`` of a multi-agent env (dict action space, one policy per agent through
:class:`~lightning_rl.agents.MultiAgent`) is trained with PPO's own loss (:meth:`PPO.loss`) on its
own actions, its own value estimates and its own GAE advantages (:func:`~lightning_rl.algos.ppo.ppo_loss`)::

    A_a, R_a = GAE(r_a, V_a)                         # per agent, from its own rewards
    L_a      = PPO loss of agent a's minibatch        # clipped ratio, value, entropy terms
    L_g      = mean over the agents a of learner g of L_a
    loss     = sum over learners g of L_g

A *learner* is a sub-agent: one per agent (independent parameters), or one for all agents with
``share_parameters``. Each learner has its own optimizer, gradient-norm clipping and learning-rate
schedule, so no learner's update depends on another's gradients; one backward pass of ``loss``
gives every learner exactly the gradient of its own ``L_g``.

Rewards ``r_a``: the env's reward for every agent (a cooperative team reward), or each agent's own
from an ``info`` dict keyed by agent name (``agent_rewards_key``, e.g. ``"agent_rewards"`` for
``lightning_rl/CoopGrid-v0``).

Batches: the dataset yields each ``[T, B]`` rollout as a ``MultiAgentBatch``, a namedarraytuple
with one :class:`~lightning_rl.datasets.OnPolicyBatch` per agent name; ``training_step`` runs
``epochs`` passes of ``minibatches`` minibatches, each agent's shuffled on its own. Logs
``train/<agent>/<term>`` for every PPO term of every agent, plus ``train/loss``. The critic is the
agent's choice: each policy's own value head on its agent's observation (IPPO, ``critic="local"``)
or one centralised critic per policy on the env's global state (MAPPO, ``critic="centralized"``,
Yu et al. 2022, https://arxiv.org/abs/2103.01955); this module's loss is the same for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch

from lightning_rl.agents.multiagent import MultiAgent
from lightning_rl.algos.hparams import hparam
from lightning_rl.algos.ppo import PPO
from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema
from lightning_rl.datasets.on_policy import OnPolicyDataset, iterate_minibatches
from lightning_rl.samplers.base import AgentSamplesBsv, Samples

__all__ = ["MultiAgentOnPolicyDataset", "MultiAgentPPO", "agent_mask", "agent_samples"]


def agent_samples(samples: Samples, agent: MultiAgent, name: str, agent_rewards_key: str | None = None) -> Samples:
    """Agent ``name``'s view of a multi-agent batch, shaped like a single-agent batch (no copies).

    Its observation is :meth:`MultiAgent.agent_view` (its own, plus the centralised critic's
    input with one). Where the env reports when each agent leaves (``env_info.agent_terminated``
    and ``agent_truncated``, see :mod:`lightning_rl.envs.multiagent`), ``done`` and ``truncated``
    are the agent's own: it is done at the step it left (or when the episode ends).

    Args:
        samples: ``[T, B]`` batch whose agent fields have one field per agent name.
        agent: The ``MultiAgent`` that collected it (says whether observations are per agent).
        name: The agent.
        agent_rewards_key: ``env_info`` field holding per-agent rewards by name; None: the env's reward.
    """
    a, env = samples.agent, samples.env
    reward = env.reward if agent_rewards_key is None else getattr(getattr(env.env_info, agent_rewards_key), name)
    done, truncated = env.done, env.truncated
    terminated_by_agent = getattr(env.env_info, "agent_terminated", None)
    truncated_by_agent = getattr(env.env_info, "agent_truncated", None)
    if terminated_by_agent is not None and truncated_by_agent is not None:
        truncated = getattr(truncated_by_agent, name)
        done = env.done | getattr(terminated_by_agent, name) | truncated
    return Samples(
        agent=AgentSamplesBsv(
            action=getattr(a.action, name),
            prev_action=getattr(a.prev_action, name),
            agent_info=getattr(a.agent_info, name),
            bootstrap_value=getattr(a.bootstrap_value, name),
        ),
        env=env._replace(observation=agent.agent_view(env.observation, name), reward=reward, done=done,
                         truncated=truncated),
    )


def agent_mask(samples: Samples, agent: MultiAgent, name: str) -> np.ndarray | None:
    """``[T, B]`` float 0/1: whether agent ``name`` acted at each step (the observation's
    ``agent_mask``), or None for envs without one (every agent acts at every step)."""
    mask = agent.agent_mask(samples.env.observation)
    if mask is None:
        return None
    return np.asarray(mask[..., agent.agent_names.index(name)], dtype=np.float32)


class MultiAgentOnPolicyDataset(OnPolicyDataset):
    """:class:`OnPolicyDataset` whose rollouts hold one :class:`OnPolicyBatch` per agent.

    Each agent's returns and advantages come from :meth:`OnPolicyDataset.process_samples` on its
    :func:`agent_samples` view (its actions, values, bootstrap values, rewards and done flags).
    Steps at which an agent did not act (:func:`agent_mask`: it left the episode early, or has
    not joined) are invalid for it: no loss term, and no part of its advantage normalization.

    Its ``agent_rewards_key`` (``env_info`` field with per-agent rewards; None: the env's reward)
    is set by :class:`MultiAgentPPO` after construction.
    """

    agent: MultiAgent
    agent_rewards_key: str | None = None
    batch_schema: Any = None

    def process_samples(self, samples: Samples) -> Any:
        """``MultiAgentBatch(<name>=OnPolicyBatch, ...)`` of CPU tensors, ``[T, B]`` each."""
        if self.batch_schema is None:
            self.batch_schema = NamedArrayTupleSchema("MultiAgentBatch", self.agent.agent_names)
        batches = []
        for name in self.agent.agent_names:
            view = agent_samples(samples, self.agent, name, self.agent_rewards_key)
            mask = agent_mask(samples, self.agent, name)
            if mask is None:
                batches.append(super().process_samples(view))
                continue
            # Normalized here, over the steps the agent acted at, not by the single-agent path.
            normalize, self.normalize_advantage = self.normalize_advantage, False
            try:
                batch = super().process_samples(view)
            finally:
                self.normalize_advantage = normalize
            valid = batch.valid * torch.from_numpy(mask)
            advantage = batch.advantage
            if normalize:
                adv = advantage[valid > 0]
                if adv.numel():
                    advantage = (advantage - adv.mean()) / (adv.std(correction=0) + 1e-8)
            batches.append(batch._replace(valid=valid, advantage=advantage))
        return self.batch_schema(*batches)


class MultiAgentPPO(PPO):
    """PPO for multi-agent envs with independent learners, as a LightningModule.

    The agent is a :class:`~lightning_rl.agents.MultiAgent` (policy-gradient sub-agents, e.g.
    ``CategoricalPgAgent``; optionally ``share_parameters``); each learner gets its own optimizer,
    gradient-norm clipping and learning rates. Everything else is :class:`PPO`'s: its update loop,
    loss call, clip schedule and hyperparameters.

    Raises:
        ValueError: If ``agent`` is not a ``MultiAgent``; in ``setup``, if the env has no
            ``agent_rewards_key`` info with one entry per agent.
    """

    agent: MultiAgent
    agent_rewards_key: str | None = hparam(
        None, "The env's ``info`` entry holding a dict of per-agent rewards keyed by agent name; each agent "
        "then learns from its own rewards. None: every agent learns from the env's (team) reward.")

    def check_hyperparameters(self) -> None:
        if not isinstance(self.agent, MultiAgent):
            raise ValueError(f"MultiAgentPPO: agent must be a MultiAgent, got {type(self.agent).__name__}")
        super().check_hyperparameters()

    def setup(self, stage: str) -> None:
        super().setup(stage)
        key = self.agent_rewards_key
        if key is None:
            return
        rewards = getattr(self.sampler.examples["env_info"], key, None)
        fields = tuple(getattr(rewards, "_fields", ()))
        if fields != self.agent.agent_names:
            raise ValueError(
                f"MultiAgentPPO: agent_rewards_key={key!r} must name an info dict with one reward per agent "
                f"{list(self.agent.agent_names)}; the env's info has {key!r}: {rewards!r}"
            )

    dataset_class = MultiAgentOnPolicyDataset

    def make_dataset(self) -> MultiAgentOnPolicyDataset:
        dataset = cast(MultiAgentOnPolicyDataset, super().make_dataset())
        dataset.agent_rewards_key = self.agent_rewards_key
        return dataset

    def minibatches_of(self, batch: Any) -> Iterator[Any]:
        """One pass of minibatches, each agent's samples shuffled on their own."""
        per_agent = [
            iterate_minibatches(getattr(batch, name), self.minibatches, self.recurrent, self.minibatch_generator)
            for name in self.agent.agent_names
        ]
        for minibatches in zip(*per_agent, strict=True):
            yield batch._new(minibatches)

    def loss(self, batch: Any, ratio_clip: float, diagnostics: bool = True) -> dict[str, torch.Tensor]:
        """Every agent's :meth:`PPO.agent_loss` terms as ``<agent>/<term>``, and as ``loss`` the sum
        over learners of the mean over each learner's agents.

        Args:
            batch: ``MultiAgentBatch`` with an :class:`OnPolicyBatch` (minibatch) per agent.
            ratio_clip: Current clip range.
            diagnostics: Also each agent's ``entropy``, ``approx_kl`` and ``clip_fraction``.
        """
        terms: dict[str, torch.Tensor] = {}
        total = torch.zeros((), device=self.agent.device)
        for names in self.agent.learners().values():
            for name in names:
                agent_terms = self.agent_loss(self.agent.policy(name), getattr(batch, name), ratio_clip, diagnostics)
                terms.update({f"{name}/{k}": v for k, v in agent_terms.items()})
                total = total + agent_terms["loss"] / len(names)
        terms["loss"] = total
        return terms

    def configure_optimizers(self) -> Any:
        """One optimizer per learner, over its sub-agent's parameters."""
        return self.with_lr_schedulers([
            self.build_optimizer(self.agent.parameters_for(f"model/{key}")) for key in self.agent.learners()
        ])

    def update_obs_statistics(self, batch: Any, all_gather: Any) -> None:
        """Fold each agent's observations of the rollout into its sub-agent's running statistics
        (a shared model sees every agent's observations)."""
        for name in self.agent.agent_names:
            self.agent.update_obs_rms(name, getattr(batch, name).agent_inputs.observation, all_gather)
