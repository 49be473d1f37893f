"""Proximal Policy Optimization (Schulman et al. 2017, https://arxiv.org/abs/1707.06347).

Loss for a minibatch of samples with advantages ``A`` (GAE) and returns ``R``::

    r        = pi(a|s) / pi_old(a|s)
    L_pi     = -mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))
    L_value  = value_loss_coeff * 0.5 * mean((R - V(s))^2)
    L_ent    = -entropy_loss_coeff * mean(H(pi(.|s)))
    loss     = L_pi + L_value + L_ent

Batches: the dataset yields one ``[T, B]`` rollout with advantages and returns computed once;
``training_step`` runs ``epochs`` passes of ``minibatches`` shuffled minibatches over it (recurrent
agents: minibatches of whole env sequences, masked after a done). ``ratio_clip`` decays linearly
with the learning rate when ``linear_lr_schedule`` is on (rlpyt). Deviations from the paper: none
beyond rlpyt's (whole-rollout advantage normalization, optional).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.samplers.base import BaseSampler
from lightning_rl.algos.base import mean_metrics
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.data.arrays import valid_mean
from lightning_rl.datasets.on_policy import OnPolicyBatch, iterate_minibatches


class PPO(OnPolicyAlgorithm):
    """PPO with a clipped likelihood ratio, as a LightningModule.

    Args:
        agent: Policy-gradient agent (``CategoricalPgAgent`` or ``GaussianPgAgent``, ff or lstm).
        sampler: Rollout sampler.
        ratio_clip: Clip range epsilon of the likelihood ratio.
        epochs: Passes over each rollout.
        minibatches: Minibatches per pass.
        discount: See :class:`OnPolicyAlgorithm` (and the remaining arguments).
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        ratio_clip: float = 0.1,
        epochs: int = 4,
        minibatches: int = 4,
        discount: float = 0.99,
        gae_lambda: float = 0.98,
        value_loss_coeff: float = 1.0,
        entropy_loss_coeff: float = 0.01,
        learning_rate: float = 1e-3,
        optimizer: Literal["adam", "rmsprop"] = "adam",
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
        super().__init__(
            agent, sampler, discount, gae_lambda, value_loss_coeff, entropy_loss_coeff, learning_rate, optimizer,
            optimizer_eps, clip_grad_norm, normalize_advantage, linear_lr_schedule, total_env_steps,
            log_interval_steps, seed, checkpoint_sampler_state, torch_threads,
        )
        self.check_positive("ratio_clip", ratio_clip)
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        if minibatches < 1:
            raise ValueError(f"minibatches must be >= 1, got {minibatches}")
        self.ratio_clip = ratio_clip
        self.epochs = epochs
        self.minibatches = minibatches

    def current_ratio_clip(self) -> float:
        """``ratio_clip`` scaled by the learning-rate schedule's current factor."""
        if not self.linear_lr_schedule:
            return self.ratio_clip
        return self.ratio_clip * self.optimizers().param_groups[0]["lr"] / self.learning_rate

    def training_step(self, batch: OnPolicyBatch, batch_idx: int) -> None:
        optimizer = self.optimizers()
        ratio_clip = self.current_ratio_clip()
        # Diagnostics (entropy when it is not in the loss, clip fraction, KL) only for rollouts
        # whose metrics are logged: on a small MLP they cost a sixth of an update.
        diagnostics = self.logging_due()
        rows: list[torch.Tensor] = []
        for _ in range(self.epochs):
            for minibatch in iterate_minibatches(batch, self.minibatches, self.recurrent, self.minibatch_generator):
                terms = self.loss(minibatch, ratio_clip, diagnostics)
                self.optimizer_step(optimizer, terms["loss"], self.clip_grad_norm)
                if diagnostics:
                    # One op per update; averaged once per rollout.
                    rows.append(torch.stack([v.detach() for v in terms.values()]))
        self.end_of_rollout(mean_metrics(list(terms), rows), batch)

    def loss(self, batch: OnPolicyBatch, ratio_clip: float, diagnostics: bool = True) -> dict[str, torch.Tensor]:
        """PPO loss terms of a minibatch (see the module docstring).

        With ``diagnostics=False`` only ``loss`` is returned, and the entropy is computed only if
        ``entropy_loss_coeff`` is nonzero: the same gradients, fewer ops.
        """
        dist = self.agent.distribution
        dist_info, value = self.policy_forward(batch)
        ratio = dist.likelihood_ratio(batch.action, batch.old_dist_info, dist_info)
        surrogate = ratio * batch.advantage
        clipped = torch.clamp(ratio, 1.0 - ratio_clip, 1.0 + ratio_clip) * batch.advantage
        pi_loss = -valid_mean(torch.min(surrogate, clipped), batch.valid)
        value_loss = self.value_loss_coeff * 0.5 * valid_mean((batch.return_ - value) ** 2, batch.valid)
        loss = pi_loss + value_loss
        if self.entropy_loss_coeff != 0 or diagnostics:
            entropy = dist.mean_entropy(dist_info, batch.valid)
            if self.entropy_loss_coeff != 0:
                loss = loss - self.entropy_loss_coeff * entropy
        if not diagnostics:
            return {"loss": loss}
        with torch.no_grad():
            clip_fraction = valid_mean(((ratio - 1.0).abs() > ratio_clip).float(), batch.valid)
            approx_kl = valid_mean(dist.kl(batch.old_dist_info, dist_info), batch.valid)
        return {
            "loss": loss,
            "pi_loss": pi_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "clip_fraction": clip_fraction,
            "approx_kl": approx_kl,
        }
