"""Twin Delayed DDPG (Fujimoto et al. 2018, https://arxiv.org/abs/1802.09477).

DDPG (see :mod:`lightning_rl.algos.ddpg`) with the paper's three changes (rlpyt 4.2)::

    a'       = clip(mu'(s') + clip(N(0, target_noise_std), +-target_noise_clip), -1, 1)   (Td3Agent)
    y        = reward_scale * R^n + gamma^n * (1 - d) * min(Q'_1(s', a'), Q'_2(s', a'))  (clipped to +-q_target_clip)
    L_q      = 0.5 * mean((y - Q_1(s, a))^2) + 0.5 * mean((y - Q_2(s, a))^2)
    L_mu     = -mean(Q_1(s, mu(s)))                    every policy_update_interval updates (Q held constant)

1. clipped double-Q: twin critics, the target takes their minimum;
2. delayed policy updates: the policy and the targets move every ``policy_update_interval``
   (``target_update_interval``) critic updates, 2 by default;
3. target policy smoothing: clipped Gaussian noise on the target action (the agent's
   ``target_noise_std``/``target_noise_clip``).

``d``, time-outs (``bootstrap_timelimit``), batches and pretraining are as in DDPG; the update
loop is :func:`~lightning_rl.algos.qpg_common.deterministic_updates`, shared with DDPG.
Deviations from rlpyt: none but the uniform pretraining actions (``pretrain_uniform``).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from lightning_rl.agents.qpg import Td3Agent
from lightning_rl.algos.off_policy import OffPolicyAlgorithm
from lightning_rl.algos.qpg_common import (
    SoftTargetUpdate,
    check_qpg_args,
    deterministic_mu_loss,
    deterministic_q_loss,
    deterministic_q_target,
    deterministic_updates,
    QpgBatch,
    make_adam,
)
from lightning_rl.samplers.base import BaseSampler


class TD3(OffPolicyAlgorithm):
    """TD3 as a LightningModule (separate policy and critic Adam optimizers; rlpyt's defaults).

    Args:
        agent: A :class:`~lightning_rl.agents.Td3Agent` (twin critics, target policy smoothing).
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per ``training_step``.
        batch_size: Transitions per replay batch.
        replay_size: Transitions the replay holds.
        replay_ratio: Replayed per collected transitions (``batch_size * K / (T * B)``).
        min_steps_learn: Env steps before the first update.
        n_step_return: n of the n-step return.
        discount: Discount gamma.
        target_update_tau: Soft target update step tau in (0, 1].
        target_update_interval: Updates between target updates.
        policy_update_interval: Updates between policy updates (the delayed actor).
        learning_rate: Policy (mu) learning rate.
        q_learning_rate: Critic learning rate.
        reward_scale: Factor on rewards (returns) in the target.
        clip_grad_norm: Max gradient norm of each network; None for no clipping.
        q_target_clip: Clip targets to ``+-q_target_clip``; None for no clipping.
        bootstrap_timelimit: Bootstrap the target after time-outs (terminations never).
        pretrain_uniform: Act uniformly at random before ``min_steps_learn``; False: with the
            agent's ``pretrain_std`` noise (or its usual noise when that is None).
        updates_per_sync: Updates between publishing weights to the sampler.
        checkpoint_replay: Save the replay next to each checkpoint.
        total_env_steps: See :class:`~lightning_rl.algos.base.RLModule` (and the rest).

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``Td3Agent``.
    """

    def __init__(
        self,
        agent: Td3Agent,
        sampler: BaseSampler,
        batch_size: int = 100,
        replay_size: int = 1_000_000,
        replay_ratio: float = 100.0,
        min_steps_learn: int = 10_000,
        n_step_return: int = 1,
        discount: float = 0.99,
        target_update_tau: float = 0.005,
        target_update_interval: int = 2,
        policy_update_interval: int = 2,
        learning_rate: float = 1e-3,
        q_learning_rate: float = 1e-3,
        reward_scale: float = 1.0,
        clip_grad_norm: float | None = None,
        q_target_clip: float | None = 1e6,
        bootstrap_timelimit: bool = True,
        pretrain_uniform: bool = True,
        updates_per_sync: int = 1,
        checkpoint_replay: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        if not isinstance(agent, Td3Agent):
            raise ValueError(f"{type(self).__name__} needs a Td3Agent (twin critics), got agent={agent!r}")
        super().__init__(
            agent, sampler, batch_size=batch_size, replay_size=replay_size, replay_ratio=replay_ratio,
            min_steps_learn=min_steps_learn, n_step_return=n_step_return, discount=discount,
            updates_per_sync=updates_per_sync, checkpoint_replay=checkpoint_replay, total_env_steps=total_env_steps,
            log_interval_steps=log_interval_steps, seed=seed, checkpoint_sampler_state=checkpoint_sampler_state,
            torch_threads=torch_threads,
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
        self.reward_scale = reward_scale
        self.clip_grad_norm = clip_grad_norm
        self.q_target_clip = q_target_clip
        self.bootstrap_timelimit = bootstrap_timelimit
        self.pretrain_uniform = pretrain_uniform
        self.soft_target_update = SoftTargetUpdate()
        self.save_hyperparameters(ignore=["agent", "sampler"])

    def setup(self, stage: str) -> None:
        if not self._sampler_ready:
            # Before the sampler forks its workers, so they pretrain too.
            min_itr = self.min_steps_learn // self.sampler.batch_spec.size
            self.agent.set_min_itr_learn(min_itr, uniform=self.pretrain_uniform)
        super().setup(stage)

    def on_train_start(self) -> None:
        self.soft_target_update.reset()

    def training_step(self, batch: Any, batch_idx: int) -> None:
        if not batch:
            return
        self.log_step_metrics(deterministic_updates(self, batch))

    def q_loss(self, batch: QpgBatch) -> dict[str, Tensor]:
        """Twin critic loss ``L_q`` of one replay batch (``q_loss``, ``q_mean``, ``target_mean``)."""
        return deterministic_q_loss(self.agent, batch, self.q_target_clip)

    def q_target(self, batch: QpgBatch) -> Tensor:
        """The critics' regression target ``y`` ``[N]`` of one replay batch (no grad)."""
        return deterministic_q_target(self.agent, batch, self.q_target_clip)

    def mu_loss(self, batch: QpgBatch) -> dict[str, Tensor]:
        """Policy loss ``L_mu`` of one replay batch (``mu_loss``)."""
        return deterministic_mu_loss(self.agent, batch)

    def configure_optimizers(self) -> Any:
        # rlpyt's order: the policy's optimizer first, then the critics'.
        return [
            make_adam(self.agent.parameters_for("model"), self.learning_rate),
            make_adam(self.agent.parameters_for("q"), self.q_learning_rate),
        ]
