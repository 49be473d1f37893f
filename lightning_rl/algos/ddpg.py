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

from typing import Any

import torch
from torch import Tensor

from lightning_rl.agents.qpg import DdpgAgent
from lightning_rl.algos.hparams import INT_AT_LEAST_1, hparam
from lightning_rl.algos.off_policy import OffPolicyAlgorithm
from lightning_rl.algos.optim import mean_metrics
from lightning_rl.algos.qpg_common import (
    QpgBatch,
    QpgHyperparameters,
    as_tuple,
    critic_loss,
    frozen,
    min_over,
    n_step_target,
    split_updates,
)


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


class DDPG(QpgHyperparameters, OffPolicyAlgorithm):
    """DDPG as a LightningModule (separate policy and critic optimizers).

    The agent is a :class:`~lightning_rl.agents.DdpgAgent` (its targets follow by
    ``target_update_tau``); the sampler collects ``[T, B]`` batches, ``T * B`` env steps per
    ``training_step``. ``learning_rate`` is the policy's. The defaults are rlpyt's.

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``DdpgAgent``.
    """

    agent: DdpgAgent

    policy_update_interval: int = hparam(
        1, "Updates between policy updates (TD3's delayed actor).", check=INT_AT_LEAST_1)
    batch_size = 64
    replay_ratio = 64.0
    min_steps_learn = 10_000
    target_update_tau = 0.01
    learning_rate = 1e-4
    q_learning_rate = 1e-3
    q_target_clip = 1e6

    def check_hyperparameters(self) -> None:
        super().check_hyperparameters()
        self.check_agent(self.agent)

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``DdpgAgent`` (a ``Td3Agent`` is one too)."""
        if not isinstance(agent, DdpgAgent):
            raise ValueError(f"{type(self).__name__} needs a DdpgAgent (or Td3Agent), got agent={agent!r}")

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """``K`` updates, rlpyt's order per replay batch: one critic step; every
        ``policy_update_interval`` updates a policy step against the updated critic; every
        ``target_update_interval`` updates a soft target update. Logs the mean metrics."""
        if not batch:
            return
        mu_optimizer, q_optimizer = self.optimizer_list()
        q_rows: list[Tensor] = []
        mu_rows: list[Tensor] = []
        for mb in split_updates(self.agent, batch, self.reward_scale, self.bootstrap_timelimit):
            q_terms = self.q_loss(mb)
            self.optimize(q_optimizer, q_terms["q_loss"], self.clip_grad_norm)
            q_rows.append(torch.stack([q_terms["q_loss"].detach(), q_terms["q_mean"], q_terms["target"].mean()]))
            if self.train_state.updates % self.policy_update_interval == 0:
                mu_loss = self.mu_loss(mb)["mu_loss"]
                self.optimize(mu_optimizer, mu_loss, self.clip_grad_norm, count=0)
                mu_rows.append(mu_loss.detach()[None])
            self.update_target()
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
        return self.with_lr_schedulers([
            self.build_optimizer(self.agent.parameters_for("model")),
            self.build_optimizer(self.agent.parameters_for("q"), self.q_learning_rate),
        ])
