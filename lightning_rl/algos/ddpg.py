"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016, https://arxiv.org/abs/1509.02971).

Losses for a replay batch of ``N`` transitions ``(s, a, R^n, s')`` with n-step returns
(rlpyt 4.1)::

    y        = reward_scale * R^n + gamma^n * (1 - d) * Q'(s', mu'(s'))      (clipped to +-q_target_clip)
    L_q      = 0.5 * mean((y - Q(s, a))^2)
    L_mu     = -mean(Q(s, mu(s)))                                         (Q held constant)

``d`` is 1 after a termination inside the n-step window; after a time-out the target
bootstraps from the last state of the truncated episode (``bootstrap_timelimit=True``) or not
at all (``False``), see :mod:`lightning_rl.replays.n_step`. Per replay batch: one critic step,
a policy step every ``policy_update_interval`` updates (against the updated critic, rlpyt's
order) and a soft target update ``theta' <- tau * theta + (1 - tau) * theta'`` every
``target_update_interval`` updates.

Batches: each ``training_step`` gets the ``K`` replay batches ``[K, N]`` the replay ratio asks
for after one sampler iteration (:class:`~lightning_rl.datasets.replay.ReplayDataset`), and
runs ``K`` updates. Before ``min_steps_learn`` env steps the agent acts uniformly at random
(``pretrain_uniform``) or with its ``pretrain_std`` noise. Deviations from rlpyt: none but the
uniform pretraining actions (Stable-Baselines3's ``learning_starts``).

:func:`ddpg_q_loss` and :func:`ddpg_mu_loss` are the losses as pure functions of tensors. TD3
(:mod:`lightning_rl.algos.td3`) is this class with a ``Td3Agent`` (twin critics, smoothed target
actions) and delayed policy updates: the critic target takes the minimum over the agent's target
critics (one here), and ``L_mu`` uses the first critic.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor

from lightning_rl.agents.qpg import DdpgAgent
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.off_policy import ReplaySetup, SoftTargetUpdate
from lightning_rl.algos.optim import (
    LRSchedulerCallable,
    OptimizerCallable,
    build_optimizer,
    mean_metrics,
    with_lr_schedulers,
)
from lightning_rl.algos.qpg_common import (
    QpgBatch,
    as_tuple,
    check_qpg_args,
    critic_loss,
    frozen,
    min_over,
    n_step_target,
    split_updates,
)
from lightning_rl.samplers.base import BaseSampler


def ddpg_q_loss(
    q_values: tuple[Tensor, ...],
    return_: Tensor,
    bootstrap: Tensor,
    next_target_q: tuple[Tensor, ...],
    *,
    q_target_clip: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Critic loss ``sum_i 0.5 * mean((y - Q_i(s, a))^2)``, ``y = R + bootstrap * min_j Q'_j(s', a')``.

    Args:
        q_values: Each online critic's ``Q_i(s, a)`` ``[N]`` (one for DDPG, two for TD3), with grad.
        return_: Scaled n-step returns ``[N]``.
        bootstrap: Bootstrap discount ``[N]``: ``gamma^k``, 0 after a termination.
        next_target_q: Each target critic's ``Q'_j(s', a')`` at the target action ``[N]``.
        q_target_clip: Clip ``y`` to ``+-q_target_clip``; None: no clipping.

    Returns:
        The scalar loss, ``q_mean`` (first critic) and ``target`` (``y`` ``[N]``).
    """
    with torch.no_grad():
        y = n_step_target(return_, bootstrap, min_over(next_target_q), q_target_clip)
    loss = critic_loss(q_values, y)
    return loss, {"q_mean": q_values[0].detach().mean(), "target": y}


def ddpg_mu_loss(q_at_mu: Tensor) -> Tensor:
    """Policy loss ``-mean(Q_1(s, mu(s)))`` from the first critic at the policy's actions ``[N]``."""
    return -q_at_mu.mean()


class DDPG(RLModule):
    """DDPG as a LightningModule (separate policy and critic optimizers).

    Args:
        agent: A :class:`~lightning_rl.agents.DdpgAgent` (its targets follow by ``target_update_tau``).
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per ``training_step``.
        batch_size: Transitions per replay batch.
        replay_size: Transitions the replay holds.
        replay_ratio: Replayed per collected transitions (``batch_size * K / (T * B)``).
        min_steps_learn: Env steps before the first update.
        n_step_return: n of the n-step return.
        discount: Discount gamma.
        target_update_tau: Soft target update step tau in (0, 1].
        target_update_interval: Updates between target updates.
        policy_update_interval: Updates between policy updates (TD3's delayed actor).
        learning_rate: Policy (mu) learning rate.
        q_learning_rate: Critic learning rate.
        optimizer: Any torch optimizer for both networks (``class_path``/``init_args``; it gets
            each network's learning rate); None: Adam.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        reward_scale: Factor on rewards (returns) in the target.
        clip_grad_norm: Max gradient norm of each network; None for no clipping.
        q_target_clip: Clip targets to ``+-q_target_clip``; None for no clipping.
        bootstrap_timelimit: Bootstrap the target after time-outs (terminations never).
        pretrain_uniform: Act uniformly at random before ``min_steps_learn``; False: with the
            agent's ``pretrain_std`` noise (or its usual noise when that is None).
        updates_per_sync: Updates between publishing weights to the sampler.
        checkpoint_replay: Save the replay next to each checkpoint.
        async_sampling: Run the sampler in its own process, writing into a shared-memory replay
            while training runs, at the same replay ratio (README "Asynchronous sampling").
        total_env_steps: Env-step budget (all ranks); None: no limit beyond the Trainer's.
        log_interval_steps: Env steps per Lightning epoch (per rank).
        seed: Env base seed (default: ``seed_everything``'s).
        checkpoint_sampler_state: See :class:`~lightning_rl.algos.base.RLModule`.
        torch_threads: Threads for torch's CPU ops in the training process (None: torch's default).

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``DdpgAgent``.
    """

    agent: DdpgAgent

    def __init__(
        self,
        agent: DdpgAgent,
        sampler: BaseSampler,
        *,
        batch_size: int = 64,
        replay_size: int = 1_000_000,
        replay_ratio: float = 64.0,
        min_steps_learn: int = 10_000,
        n_step_return: int = 1,
        discount: float = 0.99,
        target_update_tau: float = 0.01,
        target_update_interval: int = 1,
        policy_update_interval: int = 1,
        learning_rate: float = 1e-4,
        q_learning_rate: float = 1e-3,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        reward_scale: float = 1.0,
        clip_grad_norm: float | None = None,
        q_target_clip: float | None = 1e6,
        bootstrap_timelimit: bool = True,
        pretrain_uniform: bool = True,
        updates_per_sync: int = 1,
        checkpoint_replay: bool = True,
        async_sampling: bool = False,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        self.check_agent(agent)
        super().__init__(
            agent, sampler, total_env_steps=total_env_steps, log_interval_steps=log_interval_steps, seed=seed,
            checkpoint_sampler_state=checkpoint_sampler_state, torch_threads=torch_threads, lr_scheduler=lr_scheduler,
        )
        self.replay_setup = ReplaySetup(
            batch_size=batch_size, replay_size=replay_size, replay_ratio=replay_ratio, min_steps_learn=min_steps_learn,
            n_step_return=n_step_return, discount=discount, updates_per_sync=updates_per_sync,
            checkpoint_replay=checkpoint_replay, async_sampling=async_sampling,
        )
        check_qpg_args(
            target_update_tau=target_update_tau, target_update_interval=target_update_interval,
            policy_update_interval=policy_update_interval, learning_rate=learning_rate,
            q_learning_rate=q_learning_rate, reward_scale=reward_scale, clip_grad_norm=clip_grad_norm,
            q_target_clip=q_target_clip,
        )
        self.target_update_tau = target_update_tau
        self.target_update_interval = target_update_interval
        self.policy_update_interval = policy_update_interval
        self.learning_rate = learning_rate
        self.q_learning_rate = q_learning_rate
        self.optimizer = optimizer
        self.reward_scale = reward_scale
        self.clip_grad_norm = clip_grad_norm
        self.q_target_clip = q_target_clip
        self.bootstrap_timelimit = bootstrap_timelimit
        self.pretrain_uniform = pretrain_uniform
        self.soft_target_update = SoftTargetUpdate()
        self.save_hyperparameters(ignore=["agent", "sampler", "optimizer", "lr_scheduler"])

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``DdpgAgent`` (a ``Td3Agent`` is one too)."""
        if not isinstance(agent, DdpgAgent):
            raise ValueError(f"{type(self).__name__} needs a DdpgAgent (or Td3Agent), got agent={agent!r}")

    def on_train_start(self) -> None:
        super().on_train_start()
        self.soft_target_update.reset()

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """``K`` updates, rlpyt's order per replay batch: one critic step; every
        ``policy_update_interval`` updates a policy step against the updated critic; every
        ``target_update_interval`` updates a soft target update. Logs the mean metrics."""
        if not batch:
            return
        mu_optimizer, q_optimizer = cast(list[Any], self.optimizers())
        state = self.train_state
        q_rows: list[Tensor] = []
        mu_rows: list[Tensor] = []
        with self.profiler.profile("learner/update"):
            for mb in split_updates(self.agent, batch, self.reward_scale, self.bootstrap_timelimit):
                state.updates += 1
                q_terms = self.q_loss(mb)
                self.update_step([q_optimizer], q_terms["q_loss"], self.clip_grad_norm)
                q_rows.append(torch.stack([q_terms["q_loss"].detach(), q_terms["q_mean"], q_terms["target"].mean()]))
                if state.updates % self.policy_update_interval == 0:
                    mu_loss = self.mu_loss(mb)["mu_loss"]
                    self.update_step([mu_optimizer], mu_loss, self.clip_grad_norm)
                    mu_rows.append(mu_loss.detach()[None])
                if state.updates % self.target_update_interval == 0:
                    self.soft_target_update(self.agent, self.target_update_tau)
        metrics = mean_metrics(("q_loss", "q_mean", "target_mean"), q_rows)
        metrics.update(mean_metrics(("mu_loss",), mu_rows))
        self.log_step_metrics(metrics)

    def q_loss(self, batch: QpgBatch) -> dict[str, Tensor]:
        """The critics and target critics (at the target policy's action), then :func:`ddpg_q_loss`:
        ``q_loss``, ``q_mean`` and ``target`` ``[N]``."""
        agent = self.agent
        with torch.no_grad():
            next_q = as_tuple(agent.target_q_at_mu(*batch.next_inputs))
        q_values = as_tuple(agent.q(*batch.inputs, agent.to_env_action(batch.action)))  # type: ignore[call-arg]
        loss, terms = ddpg_q_loss(q_values, batch.return_, batch.bootstrap, next_q, q_target_clip=self.q_target_clip)
        return {"q_loss": loss, **terms}

    def mu_loss(self, batch: QpgBatch) -> dict[str, Tensor]:
        """:func:`ddpg_mu_loss` of the first critic at ``mu(s)``, the critics' weights held constant."""
        with frozen(self.agent.parameters_for("q")):
            return {"mu_loss": ddpg_mu_loss(self.agent.q_at_mu(*batch.inputs))}

    def configure_optimizers(self) -> Any:
        # rlpyt's order: the policy's optimizer first, then the critics'.
        return with_lr_schedulers([
            build_optimizer(self.optimizer, self.agent.parameters_for("model"), self.learning_rate),
            build_optimizer(self.optimizer, self.agent.parameters_for("q"), self.q_learning_rate),
        ], self.lr_scheduler)
