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
and replace only :meth:`DQN.loss` (and the agent check). Updates go through
:meth:`~lightning_rl.algos.base.RLModule.optimize`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_rl.agents.dqn import CatDqnAgent, DqnAgent, R2d1Agent
from lightning_rl.algos.hparams import NON_NEGATIVE, POSITIVE, hparam
from lightning_rl.algos.off_policy import OffPolicyAlgorithm

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


class DQN(OffPolicyAlgorithm):
    """DQN and its double / n-step / prioritized variants, as a LightningModule.

    The agent is a :class:`~lightning_rl.agents.DqnAgent` (``dueling`` and the epsilon-greedy
    schedule are its arguments); the sampler collects ``[T, B]`` batches, ``T * B`` env steps per
    iteration. The defaults are rlpyt's Atari settings (Adam epsilon 0.01 / 32 as in Dopamine's).

    Raises:
        ValueError: On a bad hyperparameter (the message names it) or an agent of another kind.
    """

    agent: DqnAgent

    delta_clip: float | None = hparam(
        1.0, "Huber loss threshold; None for the squared error ``0.5 * delta^2``.", check=POSITIVE)
    double_dqn: bool = hparam(False, "Choose the bootstrap action with the online network (double DQN).")
    prioritized_replay: bool = hparam(False, "Prioritized replay (Schaul et al. 2016) with ``|TD error|`` priorities.")
    pri_alpha: float = hparam(0.6, "Priority exponent alpha.", check=NON_NEGATIVE)
    pri_beta_init: float = hparam(0.4, "Initial importance-sampling exponent beta.", check=NON_NEGATIVE)
    pri_beta_final: float = hparam(1.0, "Final beta.", check=NON_NEGATIVE)
    pri_beta_steps: int = hparam(
        12_500_000, "Updates over which beta anneals linearly to ``pri_beta_final`` (rlpyt's 50M env steps at "
        "one update per 4 env steps).", check=POSITIVE)
    default_priority: float = hparam(1.0, "Priority of new transitions.", check=POSITIVE)
    learning_rate = 2.5e-4
    optimizer_eps = 3.125e-4
    clip_grad_norm = 10.0
    target_update_interval = 312

    def check_hyperparameters(self) -> None:
        super().check_hyperparameters()
        self.check_agent(self.agent)

    def replay_kwargs(self) -> dict[str, Any]:
        kwargs = super().replay_kwargs()
        if self.prioritized_replay:
            kwargs.update(prioritized=True, alpha=self.pri_alpha, beta=self.pri_beta_init,
                          beta_final=self.pri_beta_final, beta_anneal_steps=self.pri_beta_steps,
                          default_priority=self.default_priority)
        return kwargs

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a feed-forward, scalar-Q ``DqnAgent``."""
        if not isinstance(agent, DqnAgent) or isinstance(agent, (CatDqnAgent, R2d1Agent)):
            raise ValueError(f"{type(self).__name__} needs a DqnAgent, got agent={type(agent).__name__}")

    #: The per-sample term of :meth:`loss` that becomes the new priority (plus ``PRIORITY_EPS``).
    priority_term = "td_abs"

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """``K`` updates on the stacked replay batches ``[K, batch_size, ...]`` (none if empty)."""
        if not batch:
            return
        optimizers = self.optimizer_list()
        losses: list[Tensor] = []
        per_sample: dict[str, list[Tensor]] = {}
        for k in range(int(batch.action.shape[0])):
            terms = self.loss(batch[k])
            loss = terms.pop("loss")
            self.optimize(optimizers, loss, self.clip_grad_norm)
            self.update_target()
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
        metrics["train/learning_rate"] = optimizers[0].param_groups[0]["lr"]
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
