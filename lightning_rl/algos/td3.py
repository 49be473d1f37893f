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


class TD3(DDPG):
    """TD3 as a LightningModule: :class:`DDPG` with a ``Td3Agent`` (twin critics, target policy
    smoothing) and the paper's defaults, which are all it changes.

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``Td3Agent``.
    """

    agent: Td3Agent
    batch_size = 100
    replay_ratio = 100.0
    target_update_tau = 0.005
    target_update_interval = 2
    policy_update_interval = 2
    learning_rate = 1e-3

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``Td3Agent``."""
        if not isinstance(agent, Td3Agent):
            raise ValueError(f"{type(self).__name__} needs a Td3Agent (twin critics), got agent={agent!r}")
