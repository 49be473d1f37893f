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

Updates take the direct path of :meth:`~lightning_rl.algos.base.RLModule.update_step` when it is
safe (0.2-0.35 ms saved per update on a 2-core CPU, 12-17% of a CartPole update);
``direct_updates=False`` forces Lightning's path.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from lightning_rl.agents.base import BaseAgent
from lightning_rl.agents.dqn import CatDqnAgent, DqnAgent, R2d1Agent
from lightning_rl.algos.base import linear_decay
from lightning_rl.algos.off_policy import OffPolicyAlgorithm
from lightning_rl.replays import SamplesFromReplay
from lightning_rl.samplers.base import BaseSampler

#: Added to ``|TD error|`` so no transition's priority drops to zero (Schaul et al. 2016).
PRIORITY_EPS = 1e-6


class DQN(OffPolicyAlgorithm):
    """DQN and its double / n-step / prioritized variants, as a LightningModule.

    Args:
        agent: A :class:`~lightning_rl.agents.DqnAgent` (``dueling`` and the epsilon-greedy
            schedule, in sampler iterations, are its arguments).
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
        learning_rate: Adam learning rate.
        optimizer_eps: Adam epsilon (0.01 / 32 as in rlpyt's and Dopamine's Atari settings).
        clip_grad_norm: Max global gradient norm; None disables clipping.
        linear_lr_schedule: Decay the learning rate linearly to zero over ``total_env_steps``
            (set each iteration from the checkpointed iteration counter).
        prioritized_replay: Prioritized replay with ``|TD error|`` priorities.
        pri_alpha: Priority exponent alpha.
        pri_beta_init: Initial importance-sampling exponent beta.
        pri_beta_final: Final beta.
        pri_beta_steps: Updates over which beta anneals linearly to ``pri_beta_final`` (the
            default is rlpyt's 50M env steps at one update per 4 env steps).
        default_priority: Priority of new transitions.
        updates_per_sync: Updates between publishing weights to the sampler's agent.
        checkpoint_replay: Save the replay next to each checkpoint (``<path>.replay``).
        direct_updates: Skip Lightning's per-update hook dispatch when nothing uses it
            (:meth:`~lightning_rl.algos.base.RLModule.update_step`).
        total_env_steps: See :class:`~lightning_rl.algos.base.RLModule` (and the remaining
            arguments).

    Raises:
        ValueError: On a bad hyperparameter (the message names it) or an agent of another kind.
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
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
        direct_updates: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        super().__init__(
            agent, sampler, batch_size, replay_size, replay_ratio, min_steps_learn, n_step_return, discount,
            prioritized_replay, pri_alpha, pri_beta_init, pri_beta_final, pri_beta_steps, default_priority,
            updates_per_sync, checkpoint_replay, total_env_steps, log_interval_steps, seed,
            checkpoint_sampler_state, torch_threads,
        )
        self.check_agent(agent)
        if delta_clip is not None:
            self.check_positive("delta_clip", delta_clip)
        if not 0.0 < target_update_tau <= 1.0:
            raise ValueError(f"target_update_tau must be in (0, 1], got {target_update_tau}")
        if int(target_update_interval) < 1:
            raise ValueError(f"target_update_interval must be >= 1, got {target_update_interval}")
        self.check_positive("learning_rate", learning_rate)
        self.check_positive("optimizer_eps", optimizer_eps)
        if clip_grad_norm is not None:
            self.check_positive("clip_grad_norm", clip_grad_norm)
        if linear_lr_schedule and total_env_steps is None:
            raise ValueError("linear_lr_schedule=True needs total_env_steps to know where the schedule ends")
        if prioritized_replay:
            self.check_positive("pri_alpha", pri_alpha, allow_zero=True)
            self.check_positive("pri_beta_init", pri_beta_init, allow_zero=True)
            self.check_positive("pri_beta_final", pri_beta_final, allow_zero=True)
            self.check_positive("pri_beta_steps", pri_beta_steps)
            self.check_positive("default_priority", default_priority)
        self.delta_clip = delta_clip
        self.target_update_tau = float(target_update_tau)
        self.target_update_interval = int(target_update_interval)
        self.double_dqn = double_dqn
        self.learning_rate = learning_rate
        self.optimizer_eps = optimizer_eps
        self.clip_grad_norm = clip_grad_norm
        self.linear_lr_schedule = linear_lr_schedule
        self.direct_updates = direct_updates
        self.save_hyperparameters(ignore=["agent", "sampler"])

    def check_agent(self, agent: BaseAgent) -> None:
        """Raise ``ValueError`` unless ``agent`` is a feed-forward, scalar-Q ``DqnAgent``."""
        if not isinstance(agent, DqnAgent) or isinstance(agent, (CatDqnAgent, R2d1Agent)):
            raise ValueError(f"{type(self).__name__} needs a DqnAgent, got agent={type(agent).__name__}")

    # ----- training -----

    #: The per-sample term of :meth:`loss` that becomes the new priority (plus ``PRIORITY_EPS``).
    priority_term = "td_abs"

    def training_step(self, batch: SamplesFromReplay | tuple, batch_idx: int) -> None:
        """``K`` updates on the stacked replay batches ``[K, batch_size, ...]`` (none if empty)."""
        if not batch:
            return
        optimizer = self.optimizers()
        if self.linear_lr_schedule:
            # Set from the checkpointed iteration counter: decays with env steps, resumes exactly.
            for group in optimizer.param_groups:
                group["lr"] = self.learning_rate * self._lr_factor(self.train_state.itr - 1)
        losses: list[torch.Tensor] = []
        per_sample: dict[str, list[torch.Tensor]] = {}
        for k in range(int(batch.action.shape[0])):
            terms = self.loss(batch[k])
            loss = terms.pop("loss")
            self.optimizer_step(optimizer, loss, self.clip_grad_norm)
            if self.train_state.updates % self.target_update_interval == 0:
                self.agent.update_target(self.target_update_tau)
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
        metrics = {"train/loss": torch.stack(losses).mean()}
        metrics.update({f"train/{name}_mean": values.mean() for name, values in stacked.items()})
        metrics["train/updates"] = self.train_state.updates
        metrics["train/epsilon"] = float(torch.as_tensor(self.agent.eps_sample).mean())
        metrics["train/learning_rate"] = optimizer.param_groups[0]["lr"]
        if self.prioritized_replay:
            metrics["train/pri_beta"] = self.replay.beta
        self.log_step_metrics(metrics)

    def td_target(self, batch: SamplesFromReplay) -> torch.Tensor:
        """``y = R_n + (1 - done_n) * gamma^k * Q_target(s_n, a*)`` ``[N]`` (no grad)."""
        with torch.no_grad():
            target_q = self.agent.target(*batch.target_inputs)
            if self.double_dqn:
                next_action = self.agent(*batch.target_inputs).argmax(dim=-1, keepdim=True)
                next_q = target_q.gather(-1, next_action).squeeze(-1)
            else:
                next_q = target_q.max(dim=-1).values
            bootstrap = (~batch.done_n).to(next_q.dtype) * batch.discount_n
            return batch.return_ + bootstrap * next_q

    def loss(self, batch: SamplesFromReplay) -> dict[str, torch.Tensor]:
        """DQN loss terms of one replay batch ``[N]`` (see the module docstring).

        Returns:
            ``loss`` (the scalar minimized; importance-weighted under prioritized replay) and the
            detached per-sample terms ``q`` (``Q(s, a)``) and ``td_abs`` (``|delta|``) ``[N]``.
        """
        q = self.agent(*batch.agent_inputs)
        q_taken = q.gather(-1, batch.action.long().unsqueeze(-1)).squeeze(-1)
        y = self.td_target(batch)
        if self.delta_clip is None:
            losses = 0.5 * (y - q_taken).square()
        else:
            losses = F.huber_loss(q_taken, y, reduction="none", delta=self.delta_clip)
        loss = (losses * batch.is_weights).mean() if self.prioritized_replay else losses.mean()
        q_taken = q_taken.detach()
        return {"loss": loss, "q": q_taken, "td_abs": (y - q_taken).abs()}

    def _lr_factor(self, itr: int) -> float:
        per_rank_steps = self.total_env_steps / max(self.trainer.world_size, 1)
        return linear_decay(max(1, int(per_rank_steps // self.sampler.batch_spec.size)))(itr)

    def configure_optimizers(self) -> Any:
        params = self.agent.parameters_for("model")
        # The fused kernel updates all parameters at once: about 3x faster steps for small nets.
        fused = all(p.device.type in ("cpu", "cuda") for p in params) or None
        return torch.optim.Adam(params, lr=self.learning_rate, eps=self.optimizer_eps, fused=fused)
