"""Advantage Actor-Critic, synchronous (Mnih et al. 2016, https://arxiv.org/abs/1602.01783).

One gradient step per ``[T, B]`` rollout on::

    L_pi    = -mean(log pi(a|s) * A)
    L_value = value_loss_coeff * 0.5 * mean((R - V(s))^2)
    L_ent   = -entropy_loss_coeff * mean(H(pi(.|s)))
    loss    = L_pi + L_value + L_ent

with ``A`` from GAE (``gae_lambda=1`` gives the paper's n-step advantages) and ``R`` the
bootstrapped returns. Recurrent agents train on the whole rollout, masked after a done.
Defaults follow rlpyt's A2C (Adam, lr 1e-3 linear decay off); set ``optimizer: rmsprop`` and
``learning_rate: 7e-4`` for the paper's settings.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.samplers.base import BaseSampler
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.data.arrays import valid_mean
from lightning_rl.datasets.on_policy import OnPolicyBatch


class A2C(OnPolicyAlgorithm):
    """Synchronous advantage actor-critic as a LightningModule.

    Args:
        agent: Policy-gradient agent (``CategoricalPgAgent`` or ``GaussianPgAgent``, ff or lstm).
        sampler: Rollout sampler.
        discount: See :class:`OnPolicyAlgorithm` (and the remaining arguments).
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        discount: float = 0.99,
        gae_lambda: float = 1.0,
        value_loss_coeff: float = 0.5,
        entropy_loss_coeff: float = 0.01,
        learning_rate: float = 1e-3,
        optimizer: Literal["adam", "rmsprop"] = "adam",
        optimizer_eps: float = 1e-5,
        clip_grad_norm: float | None = 1.0,
        normalize_advantage: bool = False,
        linear_lr_schedule: bool = False,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        super().__init__(
            agent, sampler, discount, gae_lambda, value_loss_coeff, entropy_loss_coeff, learning_rate, optimizer,
            optimizer_eps, clip_grad_norm, normalize_advantage, linear_lr_schedule, total_env_steps,
            log_interval_steps, seed, checkpoint_sampler_state, torch_threads,
        )

    def training_step(self, batch: OnPolicyBatch, batch_idx: int) -> None:
        terms = self.loss(batch)
        self.optimizer_step(self.optimizers(), terms["loss"], self.clip_grad_norm)
        self.end_of_rollout({f"train/{k}": v.detach() for k, v in terms.items()}, batch)

    def loss(self, batch: OnPolicyBatch) -> dict[str, torch.Tensor]:
        """A2C loss terms of a rollout (see the module docstring)."""
        dist = self.agent.distribution
        dist_info, value = self.policy_forward(batch)
        logli = dist.log_likelihood(batch.action, dist_info)
        pi_loss = -valid_mean(logli * batch.advantage, batch.valid)
        value_loss = self.value_loss_coeff * 0.5 * valid_mean((batch.return_ - value) ** 2, batch.valid)
        entropy = dist.mean_entropy(dist_info, batch.valid)
        loss = pi_loss + value_loss - self.entropy_loss_coeff * entropy
        return {"loss": loss, "pi_loss": pi_loss, "value_loss": value_loss, "entropy": entropy}
