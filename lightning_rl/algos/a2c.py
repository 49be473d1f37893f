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

from lightning_rl.agents.base import BaseAgent
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.algos.optim import LRSchedulerCallable, OptimizerCallable
from lightning_rl.data.arrays import valid_mean
from lightning_rl.datasets.on_policy import OnPolicyBatch
from lightning_rl.samplers.base import BaseSampler


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
    """Synchronous advantage actor-critic as a LightningModule.

    Args:
        agent: Policy-gradient agent (``CategoricalPgAgent`` or ``GaussianPgAgent``, ff or lstm).
        sampler: Rollout sampler.
        discount: Discount factor gamma.
        gae_lambda: GAE lambda; 1 gives the paper's n-step advantages.
        value_loss_coeff: Weight of the value loss ``0.5 * (return - V)^2``.
        entropy_loss_coeff: Weight of the entropy bonus (subtracted from the loss).
        learning_rate: Initial learning rate.
        optimizer: Any torch optimizer (``class_path``/``init_args``; it gets ``lr=learning_rate``),
            e.g. ``torch.optim.RMSprop`` for the paper's setting; None: Adam with ``optimizer_eps``.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        optimizer_eps: Epsilon of the default Adam.
        clip_grad_norm: Max global gradient norm; None disables clipping.
        normalize_advantage: Standardize advantages over each rollout.
        linear_lr_schedule: Decay the learning rate linearly to zero over ``total_env_steps``.
        total_env_steps: Env-step budget (all ranks); None: no limit beyond the Trainer's.
        log_interval_steps: Env steps per Lightning epoch (per rank).
        seed: Env base seed (default: ``seed_everything``'s).
        checkpoint_sampler_state: See :class:`~lightning_rl.algos.base.RLModule`.
        torch_threads: Threads for torch's CPU ops in the training process (None: torch's default).
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        *,
        discount: float = 0.99,
        gae_lambda: float = 1.0,
        value_loss_coeff: float = 0.5,
        entropy_loss_coeff: float = 0.01,
        learning_rate: float = 1e-3,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
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
            agent, sampler, discount=discount, gae_lambda=gae_lambda, value_loss_coeff=value_loss_coeff,
            entropy_loss_coeff=entropy_loss_coeff, learning_rate=learning_rate, optimizer=optimizer,
            lr_scheduler=lr_scheduler, optimizer_eps=optimizer_eps, clip_grad_norm=clip_grad_norm,
            normalize_advantage=normalize_advantage,
            linear_lr_schedule=linear_lr_schedule, total_env_steps=total_env_steps,
            log_interval_steps=log_interval_steps, seed=seed, checkpoint_sampler_state=checkpoint_sampler_state,
            torch_threads=torch_threads,
        )

    def training_step(self, batch: OnPolicyBatch, batch_idx: int) -> None:
        self.start_of_rollout()
        terms = self.loss(batch)
        self.optimize(self.optimizers(), terms["loss"], self.clip_grad_norm)
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
