"""Soft Actor-Critic (Haarnoja et al. 2018, https://arxiv.org/abs/1801.01290, 1812.05905).

Losses for a replay batch of ``N`` transitions ``(s, a, R^n, s')`` with n-step returns, a
reparameterized tanh-squashed Gaussian policy ``a~ = tanh(mean(s) + std(s) * eps)`` (log-density
``log pi`` in network scale ``[-1, 1]^A``), twin critics and their targets (rlpyt 4.3)::

    a', log pi' ~ pi(.|s')                                                       (no grad)
    y        = reward_scale * R^n + gamma^n * (1 - d) * (min_i Q'_i(s', a') - alpha * log pi')
    L_q      = 0.5 * mean((y - Q_1(s, a))^2) + 0.5 * mean((y - Q_2(s, a))^2)
    L_pi     = mean(alpha * log pi(a~|s) - min_i Q_i(s, a~))                      (Q held constant)
    L_alpha  = -mean(log_alpha * (log pi(a~|s) + target_entropy))                 (log pi constant)

``alpha = exp(log_alpha)`` is learned towards ``target_entropy`` (``'auto'``: ``-A``, the
action dim) unless ``fixed_alpha`` is given. ``d`` is 1 after a termination inside the n-step
window; after a time-out the target bootstraps from the truncated episode's last state
(``bootstrap_timelimit=True``) or not at all. ``y`` is clipped to ``+-q_target_clip`` if set.

:func:`sac_loss` is the three losses as a pure function of tensors. All three come from the same
parameters (rlpyt's SAC steps them one after another from one forward pass), so one
``manual_backward`` of ``L_q + L_pi + L_alpha`` gives each optimizer
exactly its own gradients: the policy loss runs the critics with their weights held constant
and ``alpha`` enters the critic and policy losses as a constant. Then the policy, critic and
alpha optimizers step, and every ``target_update_interval`` updates the target critics move
``theta' <- tau * theta + (1 - tau) * theta'``.

Batches: each ``training_step`` gets the ``K`` replay batches ``[K, N]`` of one sampler
iteration and runs ``K`` updates; metrics are averaged over them and logged once. Before
``min_steps_learn`` env steps the agent acts uniformly at random (``pretrain_uniform``) or with
its ``pretrain_std``. Deviations from rlpyt: the uniform pretraining actions
(Stable-Baselines3's ``learning_starts``), ``initial_alpha`` (rlpyt: 1), only the uniform action
prior, and only reparameterized policy gradients (rlpyt's ``reparameterize=True``).
"""

from __future__ import annotations

import math
from typing import Any, Literal, cast

import torch
from torch import Tensor, nn

from lightning_rl.agents.qpg import SacAgent
from lightning_rl.algos.hparams import POSITIVE, Check, hparam
from lightning_rl.algos.off_policy import OffPolicyAlgorithm
from lightning_rl.algos.optim import mean_metrics
from lightning_rl.algos.qpg_common import (
    QpgBatch,
    QpgHyperparameters,
    critic_loss,
    frozen,
    n_step_target,
    split_updates,
)
from lightning_rl.distributions import DistInfoStd

METRICS = ("loss", "q_loss", "pi_loss", "alpha_loss", "alpha", "entropy", "q_mean")


def sac_loss(
    q1: Tensor,
    q2: Tensor,
    return_: Tensor,
    bootstrap: Tensor,
    next_target_q1: Tensor,
    next_target_q2: Tensor,
    next_log_pi: Tensor,
    log_pi: Tensor,
    q1_pi: Tensor,
    q2_pi: Tensor,
    log_alpha: Tensor,
    *,
    target_entropy: float,
    learn_alpha: bool = True,
    q_target_clip: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """SAC's critic, policy and temperature losses, summed (see the module docstring).

    Args:
        q1: First critic's ``Q_1(s, a)`` at the replayed action ``[N]``, with grad.
        q2: Second critic's ``Q_2(s, a)`` ``[N]``, with grad.
        return_: Scaled n-step returns ``[N]``.
        bootstrap: Bootstrap discount ``[N]`` (``gamma^k``, 0 after a termination).
        next_target_q1: Target critic 1 at ``(s', a')``, ``a' ~ pi(.|s')`` ``[N]``.
        next_target_q2: Target critic 2 at ``(s', a')`` ``[N]``.
        next_log_pi: ``log pi(a'|s')`` ``[N]``.
        log_pi: ``log pi(a~|s)`` of a reparameterized sample ``[N]``, with grad to the policy.
        q1_pi: ``Q_1(s, a~)`` ``[N]`` (critics held constant, grad to the policy through ``a~``).
        q2_pi: ``Q_2(s, a~)`` ``[N]``, likewise.
        log_alpha: ``log alpha`` (scalar; a parameter when learned).
        target_entropy: The entropy the temperature steers towards (``-A`` by default).
        learn_alpha: Whether ``log_alpha`` is trained (otherwise ``alpha_loss`` is 0).
        q_target_clip: Clip ``y`` to ``+-q_target_clip``; None: no clipping.

    Returns:
        ``L_q + L_pi + L_alpha`` and the terms ``q_loss``, ``pi_loss``, ``alpha_loss``,
        ``alpha``, ``entropy`` (``-mean(log pi)``), ``q_mean`` and ``target`` (``y`` ``[N]``).
    """
    alpha = log_alpha.detach().exp()
    with torch.no_grad():
        next_value = torch.minimum(next_target_q1, next_target_q2) - alpha * next_log_pi
        y = n_step_target(return_, bootstrap, next_value, q_target_clip)
    q_loss = critic_loss((q1, q2), y)
    pi_loss = torch.mean(alpha * log_pi - torch.minimum(q1_pi, q2_pi))
    entropy = -log_pi.detach().mean()
    alpha_loss = log_alpha * (entropy - target_entropy) if learn_alpha else torch.zeros((), device=y.device)
    return q_loss + pi_loss + alpha_loss, {
        "q_loss": q_loss,
        "pi_loss": pi_loss,
        "alpha_loss": alpha_loss,
        "alpha": alpha,
        "entropy": entropy,
        "q_mean": q1.detach().mean(),
        "target": y,
    }


class SAC(QpgHyperparameters, OffPolicyAlgorithm):
    """SAC as a LightningModule (policy, critic and alpha optimizers, all checkpointed).

    The agent is a :class:`~lightning_rl.agents.SacAgent`; the sampler collects ``[T, B]``
    batches, ``T * B`` env steps per ``training_step``. ``learning_rate`` is the policy's (and the
    others' unless given); ``clip_grad_norm`` clips the policy and the critics separately, never
    alpha. ``replay_ratio`` 256 with batch 256 is one update per env step.

    Raises:
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``SacAgent``.
    """

    agent: SacAgent

    alpha_learning_rate: float | None = hparam(
        None, "Entropy temperature learning rate; None: ``learning_rate``.", check=POSITIVE)
    fixed_alpha: float | None = hparam(None, "A constant temperature alpha; None learns it.", check=POSITIVE)
    initial_alpha: float = hparam(1.0, "Starting alpha when learned.", check=POSITIVE)
    target_entropy: float | Literal["auto"] = hparam(
        "auto", "Entropy target of the learned alpha; ``'auto'`` is ``-A`` (the action dimension).",
        check=Check(lambda v: v == "auto" or (isinstance(v, (int, float)) and math.isfinite(v)),
                    "'auto' or a finite number"))
    batch_size = 256
    replay_ratio = 256.0
    min_steps_learn = 10_000
    target_update_tau = 0.005
    learning_rate = 3e-4

    def check_hyperparameters(self) -> None:
        super().check_hyperparameters()
        if not isinstance(self.agent, SacAgent):
            raise ValueError(f"SAC needs a SacAgent, got agent={self.agent!r}")

    def __post_init__(self) -> None:
        super().__post_init__()
        log_alpha = torch.tensor(math.log(self.initial_alpha if self.fixed_alpha is None else self.fixed_alpha))
        if self.fixed_alpha is None:
            self.log_alpha = nn.Parameter(log_alpha)
        else:
            self.register_buffer("log_alpha", log_alpha)
        self._critic_parameters: list[nn.Parameter] | None = None

    def on_train_start(self) -> None:
        super().on_train_start()
        self._critic_parameters = None

    @property
    def critic_parameters(self) -> list[nn.Parameter]:
        """The critics' parameters (cached: listing them costs as much as a small layer)."""
        if self._critic_parameters is None:
            self._critic_parameters = self.agent.parameters_for("q")
        return self._critic_parameters

    @property
    def entropy_target(self) -> float:
        """``target_entropy``, with ``'auto'`` resolved to ``-A`` (needs the agent initialized)."""
        if self.target_entropy == "auto":
            return -float(self.agent.env_spaces.action.shape[0])
        return float(self.target_entropy)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        if not batch:
            return
        optimizers = self.optimizer_list()
        # Policy and critics clipped separately; alpha (a scalar) never.
        clips = [self.clip_grad_norm, self.clip_grad_norm, None][: len(optimizers)]
        rows: list[Tensor] = []
        for mb in split_updates(self.agent, batch, self.reward_scale, self.bootstrap_timelimit):
            terms = self.loss(mb)
            self.optimize(optimizers, terms["loss"], clips)
            self.update_target()
            rows.append(torch.stack([terms[k].detach() for k in METRICS]))
        self.log_step_metrics(mean_metrics(METRICS, rows))

    def loss(self, batch: QpgBatch) -> dict[str, Tensor]:
        """The networks' forward passes for one replay batch, then :func:`sac_loss`: ``loss`` (the
        sum of the three) and its terms."""
        agent = cast(Any, self.agent)  # its networks exist once setup() built them
        with torch.no_grad():
            next_action, next_log_pi = self.policy_sample(batch.next_inputs)
            next_q1 = agent.target_q1_model(*batch.next_inputs, next_action)
            next_q2 = agent.target_q2_model(*batch.next_inputs, next_action)
        q1, q2 = agent.q1_model(*batch.inputs, batch.action), agent.q2_model(*batch.inputs, batch.action)
        action, log_pi = self.policy_sample(batch.inputs)
        with frozen(self.critic_parameters):
            q1_pi, q2_pi = agent.q1_model(*batch.inputs, action), agent.q2_model(*batch.inputs, action)
        loss, terms = sac_loss(
            q1, q2, batch.return_, batch.bootstrap, next_q1, next_q2, next_log_pi, log_pi, q1_pi, q2_pi,
            self.log_alpha, target_entropy=self.entropy_target, learn_alpha=self.fixed_alpha is None,
            q_target_clip=self.q_target_clip,
        )
        return {"loss": loss, **terms}

    def policy_sample(self, inputs: Any) -> tuple[Tensor, Tensor]:
        """Reparameterized squashed action ``[N, A]`` (network scale) and its ``log pi`` ``[N]``."""
        mean, log_std = cast(Any, self.agent.model)(*inputs)
        return self.agent.distribution.sample_loglikelihood(DistInfoStd(mean=mean, log_std=log_std))

    def configure_optimizers(self) -> Any:
        optimizers = [
            self.build_optimizer(self.agent.parameters_for("model")),
            self.build_optimizer(self.agent.parameters_for("q"), self.q_learning_rate),
        ]
        if self.fixed_alpha is None:
            optimizers.append(self.build_optimizer([self.log_alpha], self.alpha_learning_rate))
        return self.with_lr_schedulers(optimizers)
