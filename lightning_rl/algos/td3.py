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

``d``, time-outs (``bootstrap_timelimit``), batches and pretraining are as in DDPG: TD3 is a
:class:`~lightning_rl.algos.ddpg.DDPG` subclass (same update loop and pure losses
:func:`~lightning_rl.algos.ddpg.ddpg_q_loss` / :func:`~lightning_rl.algos.ddpg.ddpg_mu_loss`, the
first taking the minimum over the twin target critics; the agent brings the twin critics and
the smoothing) with the paper's defaults.
Deviations from rlpyt: none but the uniform pretraining actions (``pretrain_uniform``).
"""

from __future__ import annotations

from typing import Any

from lightning_rl.agents.qpg import Td3Agent
from lightning_rl.algos.ddpg import DDPG
from lightning_rl.algos.optim import LRSchedulerCallable, OptimizerCallable
from lightning_rl.samplers.base import BaseSampler


class TD3(DDPG):
    """TD3 as a LightningModule (separate policy and critic optimizers; the paper's defaults).

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
        optimizer: Any torch optimizer for both networks; None: Adam.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        reward_scale: Factor on rewards (returns) in the target.
        clip_grad_norm: Max gradient norm of each network; None for no clipping.
        q_target_clip: Clip targets to ``+-q_target_clip``; None for no clipping.
        bootstrap_timelimit: Bootstrap the target after time-outs (terminations never).
        pretrain_uniform: Act uniformly at random before ``min_steps_learn``.
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
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``Td3Agent``.
    """

    def __init__(
        self,
        agent: Td3Agent,
        sampler: BaseSampler,
        *,
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
        super().__init__(
            agent, sampler, batch_size=batch_size, replay_size=replay_size, replay_ratio=replay_ratio,
            min_steps_learn=min_steps_learn, n_step_return=n_step_return, discount=discount,
            target_update_tau=target_update_tau, target_update_interval=target_update_interval,
            policy_update_interval=policy_update_interval, learning_rate=learning_rate,
            q_learning_rate=q_learning_rate, optimizer=optimizer, lr_scheduler=lr_scheduler, reward_scale=reward_scale,
            clip_grad_norm=clip_grad_norm, q_target_clip=q_target_clip, bootstrap_timelimit=bootstrap_timelimit,
            pretrain_uniform=pretrain_uniform, updates_per_sync=updates_per_sync, checkpoint_replay=checkpoint_replay,
            async_sampling=async_sampling,
            total_env_steps=total_env_steps, log_interval_steps=log_interval_steps, seed=seed,
            checkpoint_sampler_state=checkpoint_sampler_state, torch_threads=torch_threads,
        )

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``Td3Agent``."""
        if not isinstance(agent, Td3Agent):
            raise ValueError(f"{type(self).__name__} needs a Td3Agent (twin critics), got agent={agent!r}")
