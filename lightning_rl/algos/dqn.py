"""Deep Q-Networks (Mnih et al. 2015, https://www.nature.com/articles/nature14236), with double
DQN (van Hasselt et al. 2016), dueling heads (Wang et al. 2016, an agent flag), n-step returns and
prioritized replay (Schaul et al. 2016) as options, as in rlpyt section 3.1.

Loss for a replay batch of ``N`` transitions (``n``-step window, see
:mod:`lightning_rl.replays.n_step`)::

    a*      = argmax_a Q_target(s_n, a)           (double DQN: argmax_a Q(s_n, a))
    y       = R_n + (1 - done_n) * gamma^k * Q_target(s_n, a*)
    delta   = y - Q(s, a)
    L       = mean_i w_i * huber_delta_clip(delta_i)      (delta_clip=None: 0.5 * delta^2)
    p_i     = |delta_i| + 1e-6                    (new priorities, prioritized replay only)

``R_n`` is the discounted sum of up to ``n`` rewards and ``gamma^k`` its bootstrap discount:
``k = n`` normally, shorter when a time limit cut the window (the target then bootstraps from
the last observation of the truncated episode), and no bootstrap after a termination. ``w_i``
are the importance-sampling weights of prioritized replay (ones otherwise).

Batches: each ``training_step`` gets one sampler iteration's worth of replay batches stacked on a
leading ``[K]`` dim (``K = replay_ratio * T * B / batch_size`` on average, none before
``min_steps_learn``) and runs ``K`` updates. The target network follows the online one every
``target_update_interval`` updates, ``target <- tau * online + (1 - tau) * target``
(``target_update_tau=1``: hard copy). Deviation from rlpyt: the ``K`` batches of an iteration are
drawn together, so priorities written by update ``k`` first affect the next iteration's draws;
all ``K`` priority updates go back to the replay in one call at the end of the step.

:func:`dqn_loss` is the loss as a pure function of tensors. C51 and R2D1 subclass :class:`DQN`
and replace only :meth:`DQN.loss` (and the agent check). Updates take the direct path of
:meth:`~lightning_rl.algos.base.RLModule.update_step` when it is safe; ``direct_updates=False``
forces Lightning's path.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_rl.agents.base import BaseAgent
from lightning_rl.agents.dqn import CatDqnAgent, DqnAgent, R2d1Agent
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.off_policy import ReplaySetup, SoftTargetUpdate
from lightning_rl.algos.optim import LRSchedulerCallable, OptimizerCallable, build_optimizer, with_lr_schedulers
from lightning_rl.samplers.base import BaseSampler

#: Added to ``|TD error|`` so no transition's priority drops to zero (Schaul et al. 2016).
PRIORITY_EPS = 1e-6


def dqn_loss(
    q: Tensor,
    action: Tensor,
    next_target_q: Tensor,
    return_: Tensor,
    done_n: Tensor,
    discount_n: Tensor,
    *,
    next_online_q: Tensor | None = None,
    is_weights: Tensor | None = None,
    delta_clip: float | None = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DQN's TD loss for a replay batch of ``N`` transitions (see the module docstring).

    Args:
        q: Online ``Q(s, .)`` ``[N, A]``, with grad.
        action: Actions taken ``[N]`` (int).
        next_target_q: Target network's ``Q_target(s_n, .)`` at the bootstrap state ``[N, A]``.
        return_: Discounted n-step returns ``R_n`` ``[N]``.
        done_n: Whether the episode terminated inside the n-step window ``[N]`` (bool).
        discount_n: Bootstrap discount ``gamma^k`` ``[N]`` (``k < n`` after a time-limit cut).
        next_online_q: Online ``Q(s_n, .)`` ``[N, A]`` to pick the bootstrap action (double DQN);
            None: the target network picks it.
        is_weights: Importance-sampling weights ``[N]`` (prioritized replay); None: all ones.
        delta_clip: Huber threshold; None: the squared error ``0.5 * delta^2``.

    Returns:
        The scalar loss and the detached per-sample terms ``q`` (``Q(s, a)``), ``target``
        (``y``) and ``td_abs`` (``|delta|``, the new priority before ``PRIORITY_EPS``) ``[N]``.
    """
    q_taken = q.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        chooser = next_target_q if next_online_q is None else next_online_q
        next_action = chooser.argmax(dim=-1, keepdim=True)
        next_q = next_target_q.gather(-1, next_action).squeeze(-1)
        bootstrap = (~done_n).to(next_q.dtype) * discount_n
        y = return_ + bootstrap * next_q
    if delta_clip is None:
        losses = 0.5 * (y - q_taken).square()
    else:
        losses = F.huber_loss(q_taken, y, reduction="none", delta=delta_clip)
    loss = (losses * is_weights).mean() if is_weights is not None else losses.mean()
    q_taken = q_taken.detach()
    return loss, {"q": q_taken, "target": y, "td_abs": (y - q_taken).abs()}


class DQN(RLModule):
    """DQN and its double / n-step / prioritized variants, as a LightningModule.

    Args:
        agent: A :class:`~lightning_rl.agents.DqnAgent` (``dueling`` and the epsilon-greedy
            schedule are its arguments).
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per iteration.
        discount: Discount factor gamma.
        batch_size: Transitions per replay batch.
        min_steps_learn: Env steps (per rank) collected before the first update.
        delta_clip: Huber loss threshold; None for the squared error ``0.5 * delta^2``.
        replay_size: Transitions the replay holds (per rank).
        replay_ratio: Replayed per collected transitions; ``replay_ratio * T * B / batch_size``
            updates per iteration (fractions carry over).
        target_update_tau: Step of the target update, in ``(0, 1]`` (1: copy).
        target_update_interval: Updates between target-network updates.
        n_step_return: n of the n-step return targets.
        double_dqn: Choose the bootstrap action with the online network (double DQN).
        learning_rate: Learning rate.
        optimizer: Any torch optimizer (``class_path``/``init_args``; it gets ``lr=learning_rate``);
            None: Adam with ``optimizer_eps``.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        optimizer_eps: Epsilon of the default Adam (0.01 / 32 as in rlpyt's and Dopamine's Atari
            settings).
        clip_grad_norm: Max global gradient norm; None disables clipping.
        linear_lr_schedule: Decay the learning rate linearly to zero over ``total_env_steps``.
        prioritized_replay: Prioritized replay with ``|TD error|`` priorities.
        pri_alpha: Priority exponent alpha.
        pri_beta_init: Initial importance-sampling exponent beta.
        pri_beta_final: Final beta.
        pri_beta_steps: Updates over which beta anneals linearly to ``pri_beta_final`` (the
            default is rlpyt's 50M env steps at one update per 4 env steps).
        default_priority: Priority of new transitions.
        updates_per_sync: Updates between publishing weights to the sampler's agent.
        checkpoint_replay: Save the replay next to each checkpoint (``<path>.replay``).
        async_sampling: Run the sampler in its own process, writing into a shared-memory replay
            while training runs, at the same replay ratio (README "Asynchronous sampling").
        direct_updates: Skip Lightning's per-update hook dispatch when nothing uses it
            (:meth:`~lightning_rl.algos.base.RLModule.update_step`).
        total_env_steps: Env-step budget (all ranks); None: no limit beyond the Trainer's.
        log_interval_steps: Env steps per Lightning epoch (per rank).
        seed: Env base seed (default: ``seed_everything``'s).
        checkpoint_sampler_state: See :class:`~lightning_rl.algos.base.RLModule`.
        torch_threads: Threads for torch's CPU ops in the training process (None: torch's default).

    Raises:
        ValueError: On a bad hyperparameter (the message names it) or an agent of another kind.
    """

    agent: DqnAgent

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        *,
        discount: float = 0.99,
        batch_size: int = 32,
        min_steps_learn: int = 50_000,
        delta_clip: float | None = 1.0,
        replay_size: int = 1_000_000,
        replay_ratio: float = 8.0,
        target_update_tau: float = 1.0,
        target_update_interval: int = 312,
        n_step_return: int = 1,
        double_dqn: bool = False,
        learning_rate: float = 2.5e-4,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        optimizer_eps: float = 3.125e-4,
        clip_grad_norm: float | None = 10.0,
        linear_lr_schedule: bool = False,
        prioritized_replay: bool = False,
        pri_alpha: float = 0.6,
        pri_beta_init: float = 0.4,
        pri_beta_final: float = 1.0,
        pri_beta_steps: int = 12_500_000,
        default_priority: float = 1.0,
        updates_per_sync: int = 1,
        checkpoint_replay: bool = True,
        async_sampling: bool = False,
        direct_updates: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        super().__init__(
            agent, sampler, total_env_steps=total_env_steps, log_interval_steps=log_interval_steps, seed=seed,
            checkpoint_sampler_state=checkpoint_sampler_state, torch_threads=torch_threads, lr_scheduler=lr_scheduler,
        )
        self.check_agent(agent)
        self.replay_setup = ReplaySetup(
            batch_size=batch_size, replay_size=replay_size, replay_ratio=replay_ratio, min_steps_learn=min_steps_learn,
            n_step_return=n_step_return, discount=discount, prioritized_replay=prioritized_replay,
            pri_alpha=pri_alpha, pri_beta_init=pri_beta_init, pri_beta_final=pri_beta_final,
            pri_beta_steps=pri_beta_steps, default_priority=default_priority, updates_per_sync=updates_per_sync,
            checkpoint_replay=checkpoint_replay, async_sampling=async_sampling,
        )
        if delta_clip is not None:
            self.check_positive("delta_clip", delta_clip)
        if not 0.0 < target_update_tau <= 1.0:
            raise ValueError(f"target_update_tau must be in (0, 1], got {target_update_tau}")
        if isinstance(target_update_interval, bool) or int(target_update_interval) != target_update_interval or (
                target_update_interval < 1):
            raise ValueError(f"target_update_interval must be an int >= 1, got {target_update_interval}")
        self.check_positive("learning_rate", learning_rate)
        self.check_positive("optimizer_eps", optimizer_eps)
        if clip_grad_norm is not None:
            self.check_positive("clip_grad_norm", clip_grad_norm)
        if linear_lr_schedule and lr_scheduler is not None:
            raise ValueError("linear_lr_schedule=True and an lr_scheduler both set the learning rate: choose one")
        if linear_lr_schedule and total_env_steps is None:
            raise ValueError("linear_lr_schedule=True needs total_env_steps to know where the schedule ends")
        self.discount = discount
        self.n_step_return = int(n_step_return)
        self.delta_clip = delta_clip
        self.target_update_tau = float(target_update_tau)
        self.target_update_interval = int(target_update_interval)
        self.double_dqn = double_dqn
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.optimizer_eps = optimizer_eps
        self.clip_grad_norm = clip_grad_norm
        self.linear_lr_schedule = linear_lr_schedule
        self.prioritized_replay = prioritized_replay
        self.default_priority = default_priority
        self.direct_updates = direct_updates
        self.soft_target_update = SoftTargetUpdate()
        self.save_hyperparameters(ignore=["agent", "sampler", "optimizer", "lr_scheduler"])

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a feed-forward, scalar-Q ``DqnAgent``."""
        if not isinstance(agent, DqnAgent) or isinstance(agent, (CatDqnAgent, R2d1Agent)):
            raise ValueError(f"{type(self).__name__} needs a DqnAgent, got agent={type(agent).__name__}")

    def on_train_start(self) -> None:
        super().on_train_start()
        self.soft_target_update.reset()

    #: The per-sample term of :meth:`loss` that becomes the new priority (plus ``PRIORITY_EPS``).
    priority_term = "td_abs"

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """``K`` updates on the stacked replay batches ``[K, batch_size, ...]`` (none if empty)."""
        if not batch:
            return
        optimizer = cast(Any, self.optimizers())
        self.apply_lr_schedule([optimizer], self.linear_lr_schedule)
        losses: list[Tensor] = []
        per_sample: dict[str, list[Tensor]] = {}
        for k in range(int(batch.action.shape[0])):
            terms = self.loss(batch[k])
            loss = terms.pop("loss")
            self.optimize(optimizer, loss, self.clip_grad_norm)
            if self.train_state.updates % self.target_update_interval == 0:
                self.soft_target_update(self.agent, self.target_update_tau)
            for name, value in terms.items():
                per_sample.setdefault(name, []).append(value)
            losses.append(loss.detach())
        # Reduced once per step ([K, N]), not per update: fewer small ops in the update loop.
        stacked = {name: torch.stack(values) for name, values in per_sample.items()}
        if self.prioritized_replay:
            priorities = stacked[self.priority_term].reshape(-1) + PRIORITY_EPS
            self.replay.update_batch_priorities(batch.idxs.reshape(-1), priorities)
        if not self.logging_due():
            return
        metrics: dict[str, Any] = {"train/loss": torch.stack(losses).mean()}
        metrics.update({f"train/{name}_mean": values.mean() for name, values in stacked.items()})
        metrics["train/updates"] = self.train_state.updates
        metrics["train/epsilon"] = float(torch.as_tensor(self.agent.eps_sample).mean())
        metrics["train/learning_rate"] = optimizer.param_groups[0]["lr"]
        if self.prioritized_replay:
            metrics["train/pri_beta"] = self.replay.beta
        self.log_step_metrics(metrics)

    def loss(self, batch: Any) -> dict[str, Tensor]:
        """The online and target networks' forward passes, then :func:`dqn_loss`: ``loss`` and
        the per-sample terms ``[N]``."""
        q = self.agent(*batch.agent_inputs)
        with torch.no_grad():
            next_target_q = self.agent.target(*batch.target_inputs)
            next_online_q = self.agent(*batch.target_inputs) if self.double_dqn else None
        loss, terms = dqn_loss(
            q, batch.action, next_target_q, batch.return_, batch.done_n, batch.discount_n,
            next_online_q=next_online_q, is_weights=batch.is_weights if self.prioritized_replay else None,
            delta_clip=self.delta_clip,
        )
        return {"loss": loss, **terms}

    def configure_optimizers(self) -> Any:
        params = self.agent.parameters_for("model")
        optimizer = build_optimizer(self.optimizer, params, self.learning_rate, self.optimizer_eps)
        return with_lr_schedulers(optimizer, self.lr_scheduler)
