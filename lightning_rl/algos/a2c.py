"""Advantage Actor-Critic, synchronous (Mnih et al. 2016, https://arxiv.org/abs/1602.01783).

One gradient step per ``[T, B]`` rollout on::

    L_pi    = -mean(log pi(a|s) * A)
    L_value = value_loss_coeff * 0.5 * mean((R - V(s))^2)
    L_ent   = -entropy_loss_coeff * mean(H(pi(.|s)))
    loss    = L_pi + L_value + L_ent

with ``A`` from GAE (``gae_lambda=1`` gives the paper's n-step advantages) and ``R`` the
bootstrapped returns. Recurrent agents train on the whole rollout, masked after a done.
:func:`a2c_loss` is that formula as a pure function of tensors. Defaults follow rlpyt's A2C
(Adam, lr 1e-3, linear decay off); ``optimizer: {class_path: torch.optim.RMSprop, init_args:
{alpha: 0.99, eps: 1e-5}}`` and ``learning_rate: 7e-4`` give the paper's settings.
"""

from __future__ import annotations

from torch import Tensor

from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.datasets.on_policy import OnPolicyBatch
from lightning_rl.returns import valid_mean


def a2c_loss(
    log_prob: Tensor,
    advantage: Tensor,
    value: Tensor,
    return_: Tensor,
    entropy: Tensor,
    valid: Tensor | None = None,
    *,
    value_loss_coeff: float,
    entropy_loss_coeff: float,
) -> tuple[Tensor, dict[str, Tensor]]:
    """A2C's policy-gradient, value and entropy terms (see the module docstring).

    Args:
        log_prob: ``log pi(a|s)`` of the taken actions ``[T, B]`` (or ``[N]``), with grad.
        advantage: Advantages, same shape (no grad).
        value: ``V(s)``, same shape.
        return_: Value targets, same shape.
        entropy: Policy entropy per sample, same shape.
        valid: 0/1 mask of the samples that count (None: all).
        value_loss_coeff: Weight of the value loss.
        entropy_loss_coeff: Weight of the entropy bonus (subtracted).

    Returns:
        The scalar loss and its terms ``pi_loss``, ``value_loss`` (weighted) and ``entropy``.
    """
    pi_loss = -valid_mean(log_prob * advantage, valid)
    value_loss = value_loss_coeff * 0.5 * valid_mean((return_ - value) ** 2, valid)
    mean_entropy = valid_mean(entropy, valid)
    loss = pi_loss + value_loss - entropy_loss_coeff * mean_entropy
    return loss, {"pi_loss": pi_loss, "value_loss": value_loss, "entropy": mean_entropy}


class A2C(OnPolicyAlgorithm):
    """Synchronous advantage actor-critic as a LightningModule: one update per rollout.

    The agent is a policy-gradient agent (``CategoricalPgAgent`` or ``GaussianPgAgent``, ff or
    lstm); the hyperparameters and their defaults are :class:`OnPolicyAlgorithm`'s (rlpyt's A2C).
    """

    def training_step(self, batch: OnPolicyBatch, batch_idx: int) -> None:
        terms = self.loss(batch)
        self.optimize(self.optimizer_list(), terms["loss"], self.clip_grad_norm)
        self.end_of_rollout({f"train/{k}": v.detach() for k, v in terms.items()}, batch)

    def loss(self, batch: OnPolicyBatch) -> dict[str, Tensor]:
        """The agent's forward pass over a rollout, then :func:`a2c_loss`: ``loss`` and its terms."""
        dist = self.agent.distribution
        dist_info, value = self.policy_forward(batch)
        loss, terms = a2c_loss(
            dist.log_likelihood(batch.action, dist_info), batch.advantage, value, batch.return_,
            dist.entropy(dist_info), batch.valid, value_loss_coeff=self.value_loss_coeff,
            entropy_loss_coeff=self.entropy_loss_coeff,
        )
        return {"loss": loss, **terms}
