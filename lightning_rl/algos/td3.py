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
:class:`~lightning_rl.algos.ddpg.DDPG` subclass (same update loop and losses; the agent brings
the twin critics and the smoothing) with the paper's defaults.
Deviations from rlpyt: none but the uniform pretraining actions (``pretrain_uniform``).
"""

from __future__ import annotations

from typing import Any

from lightning_rl.agents.qpg import Td3Agent
from lightning_rl.algos.ddpg import DDPG
from lightning_rl.samplers.base import BaseSampler


class TD3(DDPG):
    """TD3 as a LightningModule (separate policy and critic Adam optimizers; rlpyt's defaults).

    Args:
        agent: A :class:`~lightning_rl.agents.Td3Agent` (twin critics, target policy smoothing).
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per ``training_step``.
        batch_size: Transitions per replay batch.
        replay_ratio: Replayed per collected transitions (``batch_size * K / (T * B)``).
        target_update_tau: Soft target update step tau in (0, 1].
        target_update_interval: Updates between target updates.
        policy_update_interval: Updates between policy updates (the delayed actor).
        learning_rate: Policy (mu) learning rate.
        **kwargs: The other :class:`~lightning_rl.algos.ddpg.DDPG` arguments, with DDPG's defaults
            (``replay_size``, ``min_steps_learn``, ``n_step_return``, ``discount``,
            ``q_learning_rate``, ``reward_scale``, ``clip_grad_norm``, ``q_target_clip``,
            ``bootstrap_timelimit``, ``pretrain_uniform``, ``updates_per_sync``,
            ``checkpoint_replay``, ``total_env_steps``, ...).

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``Td3Agent``.
    """

    def __init__(
        self,
        agent: Td3Agent,
        sampler: BaseSampler,
        batch_size: int = 100,
        replay_ratio: float = 100.0,
        target_update_tau: float = 0.005,
        target_update_interval: int = 2,
        policy_update_interval: int = 2,
        learning_rate: float = 1e-3,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            agent, sampler, batch_size=batch_size, replay_ratio=replay_ratio, target_update_tau=target_update_tau,
            target_update_interval=target_update_interval, policy_update_interval=policy_update_interval,
            learning_rate=learning_rate, **kwargs,
        )

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``Td3Agent``."""
        if not isinstance(agent, Td3Agent):
            raise ValueError(f"{type(self).__name__} needs a Td3Agent (twin critics), got agent={agent!r}")
