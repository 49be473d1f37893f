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
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.off_policy import ReplaySetup, SoftTargetUpdate
from lightning_rl.algos.optim import (
    LRSchedulerCallable,
    OptimizerCallable,
    build_optimizer,
    mean_metrics,
    with_lr_schedulers,
)
from lightning_rl.algos.qpg_common import QpgBatch, check_qpg_args, critic_loss, frozen, n_step_target, split_updates
from lightning_rl.distributions import DistInfoStd
from lightning_rl.samplers.base import BaseSampler

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


class SAC(RLModule):
    """SAC as a LightningModule (policy, critic and alpha optimizers, all checkpointed).

    Args:
        agent: A :class:`~lightning_rl.agents.SacAgent`.
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per ``training_step``.
        batch_size: Transitions per replay batch.
        replay_size: Transitions the replay holds.
        replay_ratio: Replayed per collected transitions (``batch_size * K / (T * B)``; 256 with
            batch 256 is one update per env step).
        min_steps_learn: Env steps before the first update.
        n_step_return: n of the n-step return.
        discount: Discount gamma.
        target_update_tau: Soft target update step tau in (0, 1].
        target_update_interval: Updates between target updates.
        learning_rate: Policy learning rate (and the others' unless given).
        q_learning_rate: Critic learning rate; None: ``learning_rate``.
        alpha_learning_rate: Entropy temperature learning rate; None: ``learning_rate``.
        optimizer: Any torch optimizer for the three (``class_path``/``init_args``; it gets each
            one's learning rate); None: Adam.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        fixed_alpha: A constant temperature alpha; None learns it.
        initial_alpha: Starting alpha when learned.
        target_entropy: Entropy target of the learned alpha; ``'auto'`` is ``-A``.
        reward_scale: Factor on rewards (returns) in the target.
        clip_grad_norm: Max gradient norm of the policy and of the critics; None for no clipping.
        q_target_clip: Clip targets to ``+-q_target_clip``; None for no clipping.
        bootstrap_timelimit: Bootstrap the target after time-outs (terminations never).
        pretrain_uniform: Act uniformly at random before ``min_steps_learn``; False: with the
            agent's ``pretrain_std`` (rlpyt: 0.75) or its policy when that is None.
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
        ValueError: Naming a bad hyperparameter, or if ``agent`` is not a ``SacAgent``.
    """

    agent: SacAgent

    def __init__(
        self,
        agent: SacAgent,
        sampler: BaseSampler,
        *,
        batch_size: int = 256,
        replay_size: int = 1_000_000,
        replay_ratio: float = 256.0,
        min_steps_learn: int = 10_000,
        n_step_return: int = 1,
        discount: float = 0.99,
        target_update_tau: float = 0.005,
        target_update_interval: int = 1,
        learning_rate: float = 3e-4,
        q_learning_rate: float | None = None,
        alpha_learning_rate: float | None = None,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        fixed_alpha: float | None = None,
        initial_alpha: float = 1.0,
        target_entropy: float | Literal["auto"] = "auto",
        reward_scale: float = 1.0,
        clip_grad_norm: float | None = None,
        q_target_clip: float | None = None,
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
        if not isinstance(agent, SacAgent):
            raise ValueError(f"SAC needs a SacAgent, got agent={agent!r}")
        super().__init__(
            agent, sampler, total_env_steps=total_env_steps, log_interval_steps=log_interval_steps, seed=seed,
            checkpoint_sampler_state=checkpoint_sampler_state, torch_threads=torch_threads, lr_scheduler=lr_scheduler,
        )
        self.replay_setup = ReplaySetup(
            batch_size=batch_size, replay_size=replay_size, replay_ratio=replay_ratio, min_steps_learn=min_steps_learn,
            n_step_return=n_step_return, discount=discount, updates_per_sync=updates_per_sync,
            checkpoint_replay=checkpoint_replay, async_sampling=async_sampling,
        )
        check_qpg_args(
            target_update_tau=target_update_tau, target_update_interval=target_update_interval,
            reward_scale=reward_scale, clip_grad_norm=clip_grad_norm, q_target_clip=q_target_clip,
            learning_rate=learning_rate, q_learning_rate=q_learning_rate, alpha_learning_rate=alpha_learning_rate,
            fixed_alpha=fixed_alpha, initial_alpha=initial_alpha,
        )
        numeric = isinstance(target_entropy, (int, float)) and math.isfinite(target_entropy)
        if target_entropy != "auto" and not numeric:
            raise ValueError(f"target_entropy must be 'auto' or a finite number, got {target_entropy!r}")
        self.target_update_tau = target_update_tau
        self.target_update_interval = target_update_interval
        self.reward_scale = reward_scale
        self.clip_grad_norm = clip_grad_norm
        self.q_target_clip = q_target_clip
        self.bootstrap_timelimit = bootstrap_timelimit
        self.pretrain_uniform = pretrain_uniform
        self.learning_rate = learning_rate
        self.q_learning_rate = learning_rate if q_learning_rate is None else q_learning_rate
        self.alpha_learning_rate = learning_rate if alpha_learning_rate is None else alpha_learning_rate
        self.optimizer = optimizer
        self.fixed_alpha = fixed_alpha
        self.target_entropy = target_entropy
        log_alpha = torch.tensor(math.log(initial_alpha if fixed_alpha is None else fixed_alpha))
        if fixed_alpha is None:
            self.log_alpha = nn.Parameter(log_alpha)
        else:
            self.register_buffer("log_alpha", log_alpha)
        self.soft_target_update = SoftTargetUpdate()
        self._critic_parameters: list[nn.Parameter] | None = None
        self.save_hyperparameters(ignore=["agent", "sampler", "optimizer", "lr_scheduler"])

    def on_train_start(self) -> None:
        super().on_train_start()
        self.soft_target_update.reset()
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
        optimizers = cast(list[Any], self.optimizers())
        # Policy and critics clipped separately; alpha (a scalar) never.
        clips = [self.clip_grad_norm, self.clip_grad_norm, None][: len(optimizers)]
        rows: list[Tensor] = []
        with self.profiler.profile("learner/update"):
            for mb in split_updates(self.agent, batch, self.reward_scale, self.bootstrap_timelimit):
                terms = self.loss(mb)
                self.update_step(optimizers, terms["loss"], clips)
                self.train_state.updates += 1
                if self.train_state.updates % self.target_update_interval == 0:
                    self.soft_target_update(self.agent, self.target_update_tau)
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
            build_optimizer(self.optimizer, self.agent.parameters_for("model"), self.learning_rate),
            build_optimizer(self.optimizer, self.agent.parameters_for("q"), self.q_learning_rate),
        ]
        if self.fixed_alpha is None:
            optimizers.append(build_optimizer(self.optimizer, [self.log_alpha], self.alpha_learning_rate))
        return with_lr_schedulers(optimizers, self.lr_scheduler)
