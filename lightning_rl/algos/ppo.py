"""Proximal Policy Optimization (Schulman et al. 2017, https://arxiv.org/abs/1707.06347).

Loss for a minibatch of samples with advantages ``A`` (GAE) and returns ``R``::

    r        = pi(a|s) / pi_old(a|s)
    L_pi     = -mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))
    L_value  = value_loss_coeff * 0.5 * mean((R - V(s))^2)
               (value_clip: 0.5 * mean(max((R - V)^2, (R - V_old - clip(V - V_old, +-value_clip))^2)))
    L_ent    = -entropy_loss_coeff * mean(H(pi(.|s)))
    loss     = L_pi + L_value + L_ent

:func:`ppo_loss` is that formula as a pure function of tensors. Batches: the dataset yields one
``[T, B]`` rollout with advantages and returns computed once; ``training_step`` runs ``epochs``
passes of ``minibatches`` shuffled minibatches over it (recurrent agents: minibatches of whole
env sequences, masked after a done). With ``linear_lr_schedule`` the learning rate and
``ratio_clip`` decay linearly in env steps (rlpyt). Deviations from the paper: none beyond
rlpyt's (whole-rollout advantage normalization, optional).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from lightning_rl.algos.hparams import INT_AT_LEAST_1, POSITIVE, hparam
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.algos.optim import mean_metrics
from lightning_rl.datasets.on_policy import OnPolicyBatch, iterate_minibatches
from lightning_rl.returns import valid_mean


def ppo_loss(
    ratio: Tensor,
    advantage: Tensor,
    value: Tensor,
    return_: Tensor,
    entropy: Tensor | None,
    valid: Tensor | None = None,
    *,
    ratio_clip: float,
    value_loss_coeff: float,
    entropy_loss_coeff: float,
    old_value: Tensor | None = None,
    value_clip: float | None = None,
    diagnostics: bool = True,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO's clipped surrogate, value and entropy terms (see the module docstring).

    Args:
        ratio: ``pi(a|s) / pi_old(a|s)`` per sample ``[N]`` (or ``[T, B]``), with grad.
        advantage: Advantages, same shape (no grad).
        value: ``V(s)`` of the current network, same shape.
        return_: Value targets, same shape.
        entropy: Policy entropy per sample, same shape; None when ``entropy_loss_coeff`` is 0
            and no diagnostics are wanted.
        valid: 0/1 mask of the samples that count (None: all).
        ratio_clip: epsilon of ``clip(r, 1 - eps, 1 + eps)``.
        value_loss_coeff: Weight of the value loss.
        entropy_loss_coeff: Weight of the entropy bonus (subtracted).
        old_value: ``V_old(s)`` of the acting network; needed with ``value_clip``.
        value_clip: Clip the value change to ``+-value_clip`` (PPO2's value clipping); None: off.
        diagnostics: Also compute ``clip_fraction`` (no effect on the loss; a few small ops per
            update, so the module asks for it only on logged rollouts).

    Returns:
        The scalar loss and its named terms: ``pi_loss``, ``value_loss`` (weighted),
        ``entropy`` (when given) and, with ``diagnostics``, ``clip_fraction`` (share of samples
        outside the clip range).
    """
    surrogate = ratio * advantage
    clipped = torch.clamp(ratio, 1.0 - ratio_clip, 1.0 + ratio_clip) * advantage
    pi_loss = -valid_mean(torch.min(surrogate, clipped), valid)
    value_error = (return_ - value) ** 2
    if value_clip is not None:
        if old_value is None:
            raise ValueError("ppo_loss: value_clip needs old_value")
        clipped_value = old_value + torch.clamp(value - old_value, -value_clip, value_clip)
        value_error = torch.max(value_error, (return_ - clipped_value) ** 2)
    value_loss = value_loss_coeff * 0.5 * valid_mean(value_error, valid)
    loss = pi_loss + value_loss
    terms = {"pi_loss": pi_loss, "value_loss": value_loss}
    if entropy is not None:
        mean_entropy = valid_mean(entropy, valid)
        loss = loss - entropy_loss_coeff * mean_entropy
        terms["entropy"] = mean_entropy
    if diagnostics:
        with torch.no_grad():
            terms["clip_fraction"] = valid_mean(((ratio - 1.0).abs() > ratio_clip).to(ratio.dtype), valid)
    return loss, terms


class PPO(OnPolicyAlgorithm):
    """PPO with a clipped likelihood ratio, as a LightningModule.

    The agent is a policy-gradient agent (``CategoricalPgAgent`` or ``GaussianPgAgent``, ff or
    lstm); ``linear_lr_schedule`` also decays ``ratio_clip``.
    """

    ratio_clip: float = hparam(0.1, "Clip range epsilon of the likelihood ratio.", check=POSITIVE)
    value_clip: float | None = hparam(
        None, "Clip the value change per update to ``+-value_clip``; None: no clipping.", check=POSITIVE)
    epochs: int = hparam(4, "Passes over each rollout.", check=INT_AT_LEAST_1)
    minibatches: int = hparam(
        4, "Minibatches per pass; must divide ``batch_T * batch_B`` (``batch_B`` for recurrent agents).",
        check=INT_AT_LEAST_1)
    gae_lambda = 0.98
    value_loss_coeff = 1.0
    normalize_advantage = True
    linear_lr_schedule = True

    def check_hyperparameters(self) -> None:
        super().check_hyperparameters()
        check_minibatches(self.minibatches, self.sampler, self.recurrent)

    def current_ratio_clip(self) -> float:
        """``ratio_clip``, scaled by the linear schedule's factor when the schedule is on."""
        return self.ratio_clip * (self.schedule_factor() if self.linear_lr_schedule else 1.0)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizers = self.optimizer_list()
        ratio_clip = self.current_ratio_clip()
        # Diagnostics (entropy when it is not in the loss, KL, clip fraction) only for rollouts
        # whose metrics are logged, and there only in the last epoch: on a small MLP they cost a
        # sixth of an update. The logged terms are the last epoch's means.
        logged = self.logging_due()
        rows: list[Tensor] = []
        names: list[str] = []
        for epoch in range(self.epochs):
            diagnostics = logged and epoch == self.epochs - 1
            for minibatch in self.minibatches_of(batch):
                terms = self.loss(minibatch, ratio_clip, diagnostics)
                self.optimize(optimizers, terms["loss"], self.clip_grad_norm)
                if diagnostics:
                    # One op per update; averaged once per rollout.
                    names = list(terms)
                    rows.append(torch.stack([v.detach() for v in terms.values()]))
        self.end_of_rollout(mean_metrics(names, rows), batch)

    def minibatches_of(self, batch: Any) -> Iterator[Any]:
        """One pass of shuffled minibatches over a rollout."""
        return iterate_minibatches(batch, self.minibatches, self.recurrent, self.minibatch_generator)

    def loss(self, batch: Any, ratio_clip: float, diagnostics: bool = True) -> dict[str, Tensor]:
        """The agent's forward pass on a minibatch, then :func:`ppo_loss`: ``loss`` and its terms."""
        return self.agent_loss(self.agent, batch, ratio_clip, diagnostics)

    def agent_loss(self, agent: Any, batch: OnPolicyBatch, ratio_clip: float, diagnostics: bool) -> dict[str, Tensor]:
        """``agent``'s forward pass on a minibatch, then :func:`ppo_loss`: ``loss`` and its terms.

        With ``diagnostics`` also ``entropy`` (even when not in the loss) and ``approx_kl``.
        """
        dist = agent.distribution
        dist_info, value = self.policy_forward(batch, agent)
        ratio = dist.likelihood_ratio(batch.action, batch.old_dist_info, dist_info)
        entropy = dist.entropy(dist_info) if (self.entropy_loss_coeff != 0 or diagnostics) else None
        loss, terms = ppo_loss(
            ratio, batch.advantage, value, batch.return_, entropy, batch.valid, ratio_clip=ratio_clip,
            value_loss_coeff=self.value_loss_coeff, entropy_loss_coeff=self.entropy_loss_coeff,
            old_value=batch.old_value, value_clip=self.value_clip, diagnostics=diagnostics,
        )
        if diagnostics:
            with torch.no_grad():
                terms["approx_kl"] = valid_mean(dist.kl(batch.old_dist_info, dist_info), batch.valid)
        return {"loss": loss, **terms}


def check_minibatches(minibatches: int, sampler: Any, recurrent: bool) -> None:
    """Raise ``ValueError`` unless ``minibatches`` divides the rollout.

    A rollout has ``batch_T * batch_B`` samples (``batch_B`` whole sequences for recurrent agents).
    """
    spec = getattr(sampler, "batch_spec", None)
    if spec is None:
        return
    n, unit = (spec.B, "batch_B (envs; recurrent agents train on whole sequences)") if recurrent else (
        spec.T * spec.B, "batch_T * batch_B")
    if n % minibatches:
        raise ValueError(f"minibatches={minibatches} must divide {unit} = {n}")
