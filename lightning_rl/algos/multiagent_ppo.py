"""Multi-agent PPO with independent learners (IPPO: de Witt et al. 2020, https://arxiv.org/abs/2011.09533).

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
``train/<agent>/<term>`` for every PPO term of every agent, plus ``train/loss``. Deviations: none
beyond PPO's; each critic sees what its agent sees (no centralized value function, as in MAPPO).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lightning_rl.agents.multiagent import MultiAgent
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.algos.optim import (
    LRSchedulerCallable,
    OptimizerCallable,
    build_optimizer,
    mean_metrics,
    with_lr_schedulers,
)
from lightning_rl.algos.ppo import check_ppo_args, ppo_loss
from lightning_rl.data.arrays import valid_mean
from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema
from lightning_rl.datasets.on_policy import OnPolicyDataset, iterate_minibatches
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers.base import AgentSamplesBsv, BaseSampler, Samples

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

    Args:
        agent_rewards_key: ``env_info`` field with per-agent rewards; None: the env's reward.
        sampler: The remaining arguments are :class:`OnPolicyDataset`'s.
    """

    def __init__(
        self,
        sampler: Any,
        agent: MultiAgent,
        state: TrainState,
        iterations_per_epoch: int,
        discount: float,
        gae_lambda: float,
        normalize_advantage: bool,
        recurrent: bool = False,
        agent_rewards_key: str | None = None,
    ) -> None:
        super().__init__(
            sampler, agent, state, iterations_per_epoch, discount, gae_lambda, normalize_advantage, recurrent
        )
        self.agent: MultiAgent = agent
        self.agent_rewards_key = agent_rewards_key
        self.batch_schema = NamedArrayTupleSchema("MultiAgentBatch", agent.agent_names)

    def process_samples(self, samples: Samples) -> Any:
        """``MultiAgentBatch(<name>=OnPolicyBatch, ...)`` of CPU tensors, ``[T, B]`` each."""
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


class MultiAgentPPO(OnPolicyAlgorithm):
    """PPO for multi-agent envs with independent learners, as a LightningModule.

    Args:
        agent: A :class:`~lightning_rl.agents.MultiAgent` (policy-gradient sub-agents, e.g.
            ``CategoricalPgAgent``; optionally ``share_parameters``).
        sampler: Rollout sampler over a multi-agent env.
        agent_rewards_key: Name of the env's ``info`` entry holding a dict of per-agent rewards
            keyed by agent name; each agent then learns from its own rewards. None: every agent
            learns from the env's (team) reward.
        ratio_clip: Clip range epsilon of the likelihood ratio (every learner).
        value_clip: Clip the value change per update to ``+-value_clip``; None: no clipping.
        epochs: Passes over each rollout.
        minibatches: Minibatches per pass (each agent's samples split alike).
        discount: Discount factor gamma.
        gae_lambda: GAE lambda.
        value_loss_coeff: Weight of the value loss ``0.5 * (return - V)^2``.
        entropy_loss_coeff: Weight of the entropy bonus (subtracted from the loss).
        learning_rate: Initial learning rate of every learner.
        optimizer: Any torch optimizer (``class_path``/``init_args``; it gets ``lr=learning_rate``);
            None: Adam with ``optimizer_eps``. One per learner.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        optimizer_eps: Epsilon of the default Adam.
        clip_grad_norm: Max gradient norm of each learner; None disables clipping.
        normalize_advantage: Standardize each agent's advantages over each rollout.
        linear_lr_schedule: Decay learning rates and ``ratio_clip`` linearly over ``total_env_steps``.
        total_env_steps: Env-step budget (all ranks); None: no limit beyond the Trainer's.
        log_interval_steps: Env steps per Lightning epoch (per rank).
        seed: Env base seed (default: ``seed_everything``'s).
        checkpoint_sampler_state: See :class:`~lightning_rl.algos.base.RLModule`.
        torch_threads: Threads for torch's CPU ops in the training process (None: torch's default).

    Raises:
        ValueError: If ``agent`` is not a ``MultiAgent``; in ``setup``, if the env has no
            ``agent_rewards_key`` info with one entry per agent.
    """

    agent: MultiAgent

    def __init__(
        self,
        agent: MultiAgent,
        sampler: BaseSampler,
        *,
        agent_rewards_key: str | None = None,
        ratio_clip: float = 0.1,
        value_clip: float | None = None,
        epochs: int = 4,
        minibatches: int = 4,
        discount: float = 0.99,
        gae_lambda: float = 0.98,
        value_loss_coeff: float = 1.0,
        entropy_loss_coeff: float = 0.01,
        learning_rate: float = 1e-3,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        optimizer_eps: float = 1e-5,
        clip_grad_norm: float | None = 1.0,
        normalize_advantage: bool = True,
        linear_lr_schedule: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        if not isinstance(agent, MultiAgent):
            raise ValueError(f"MultiAgentPPO: agent must be a MultiAgent, got {type(agent).__name__}")
        super().__init__(
            agent, sampler, discount=discount, gae_lambda=gae_lambda, value_loss_coeff=value_loss_coeff,
            entropy_loss_coeff=entropy_loss_coeff, learning_rate=learning_rate, optimizer=optimizer,
            lr_scheduler=lr_scheduler, optimizer_eps=optimizer_eps, clip_grad_norm=clip_grad_norm,
            normalize_advantage=normalize_advantage,
            linear_lr_schedule=linear_lr_schedule, total_env_steps=total_env_steps,
            log_interval_steps=log_interval_steps, seed=seed, checkpoint_sampler_state=checkpoint_sampler_state,
            torch_threads=torch_threads,
        )
        check_ppo_args(ratio_clip, value_clip, epochs, minibatches, sampler, False)
        self.agent_rewards_key = agent_rewards_key
        self.ratio_clip = ratio_clip
        self.value_clip = value_clip
        self.epochs = int(epochs)
        self.minibatches = int(minibatches)

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

    def make_dataset(self) -> MultiAgentOnPolicyDataset:
        return MultiAgentOnPolicyDataset(
            self.sampler,
            self.agent,
            self.train_state,
            iterations_per_epoch=self.iterations_per_epoch,
            discount=self.discount,
            gae_lambda=self.gae_lambda,
            normalize_advantage=self.normalize_advantage,
            recurrent=self.recurrent,
            agent_rewards_key=self.agent_rewards_key,
        )

    def training_step(self, batch: Any, batch_idx: int) -> None:
        self.start_of_rollout()
        optimizers = self.optimizer_list()
        ratio_clip = self.ratio_clip * (self.schedule_factor() if self.linear_lr_schedule else 1.0)
        names = self.agent.agent_names
        rows: list[torch.Tensor] = []
        keys: list[str] = []
        for _ in range(self.epochs):
            per_agent = [
                iterate_minibatches(getattr(batch, name), self.minibatches, self.recurrent, self.minibatch_generator)
                for name in names
            ]
            for minibatches in zip(*per_agent, strict=True):
                terms = self.loss(batch._new(minibatches), ratio_clip)
                # Clipped per learner: one learner's large gradient does not shrink another's step.
                self.update_step(optimizers, terms["loss"], self.clip_grad_norm)
                self.train_state.updates += 1
                keys = list(terms)
                rows.append(torch.stack([v.detach() for v in terms.values()]))
        self.end_of_rollout(mean_metrics(keys, rows), batch)

    def loss(self, batch: Any, ratio_clip: float) -> dict[str, torch.Tensor]:
        """Every agent's :func:`~lightning_rl.algos.ppo.ppo_loss` terms as ``<agent>/<term>``, and
        as ``loss`` the sum over learners of the mean over each learner's agents.

        Args:
            batch: ``MultiAgentBatch`` with an :class:`OnPolicyBatch` (minibatch) per agent.
            ratio_clip: Current clip range.
        """
        terms: dict[str, torch.Tensor] = {}
        total = torch.zeros((), device=self.agent.device)
        for names in self.agent.learners().values():
            for name in names:
                sub, data = self.agent.sub_agent(name), getattr(batch, name)
                dist_info, value = self.agent.evaluate(name, data.agent_inputs, data.init_rnn_state)
                dist = sub.distribution
                ratio = dist.likelihood_ratio(data.action, data.old_dist_info, dist_info)
                loss, agent_terms = ppo_loss(
                    ratio, data.advantage, value, data.return_, dist.entropy(dist_info), data.valid,
                    ratio_clip=ratio_clip, value_loss_coeff=self.value_loss_coeff,
                    entropy_loss_coeff=self.entropy_loss_coeff, old_value=data.old_value, value_clip=self.value_clip,
                )
                with torch.no_grad():
                    agent_terms["approx_kl"] = valid_mean(dist.kl(data.old_dist_info, dist_info), data.valid)
                terms[f"{name}/loss"] = loss
                terms.update({f"{name}/{k}": v for k, v in agent_terms.items()})
                total = total + loss / len(names)
        terms["loss"] = total
        return terms

    def configure_optimizers(self) -> Any:
        """One optimizer per learner, over its sub-agent's parameters."""
        return with_lr_schedulers([
            build_optimizer(self.optimizer, self.agent.parameters_for(f"model/{key}"), self.learning_rate,
                            self.optimizer_eps)
            for key in self.agent.learners()
        ], self.lr_scheduler)

    def update_obs_statistics(self, batch: Any, all_gather: Any) -> None:
        """Fold each agent's observations of the rollout into its sub-agent's running statistics
        (a shared model sees every agent's observations)."""
        for name in self.agent.agent_names:
            self.agent.update_obs_rms(name, getattr(batch, name).agent_inputs.observation, all_gather)
