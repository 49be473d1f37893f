"""R2D1: recurrent replay DQN (Kapturowski et al. 2019, https://openreview.net/forum?id=r1lyTjAqYX),
R2D2 without the distributed actors, as in rlpyt section 3.3.

The replay holds sequences: every ``rnn_state_interval`` rows it keeps the LSTM state the agent
acted from, and a replayed sequence starts at such a row with ``L = warmup_T + batch_T +
n_step_return`` rows. Loss for a batch of ``N`` sequences, training rows ``t < batch_T`` after
the burn-in (``n``-step window and timeouts as in :mod:`lightning_rl.replays.n_step`)::

    s_0      = stored state;   burn-in: run Q and Q_target over rows [0, warmup_T), no grad
    h(x)     = sign(x) (sqrt(|x| + 1) - 1) + eps x              (value rescaling)
    a*       = argmax_a Q(s_{t+k}, a)                           (double DQN; else Q_target)
    y_t      = h(R_t + (1 - done_n_t) gamma^k h^-1(Q_target(s_{t+k}, a*)))
    delta_t  = y_t - Q(s_t, a_t)
    L        = mean over valid (t, i) of w_i * 0.5 delta^2     (Huber with ``delta_clip``)
    p_i      = eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|   (over valid rows)

``valid`` drops the rows after the first ``done`` of the training rows (a new episode seen with
the old one's memory) and truncated steps (no stored next state). A sequence whose episode
ended during the burn-in starts its training rows from a zero state, as the agent did after
the reset (rlpyt). ``w_i`` are importance weights (prioritized replay; ones otherwise).

Input priorities (rlpyt): as a sampler batch enters the replay, each env's sequences starting
in it get the priority ``p`` of that batch's own n-step TD errors, computed from the Q-values the
agent acted with (``agent_info.q``, max over actions for the bootstrap), instead of
``default_priority``; the replay applies it once the sequence is complete.

Batches: :class:`~lightning_rl.replays.SequenceSamplesFromReplay` ``[L, N]`` stacked ``[K, L, N]``
per sampler iteration; the schedule is :class:`~lightning_rl.algos.dqn.DQN`'s (only
:meth:`R2D1.loss`, the agent check and the replay hooks differ), with ``replay_ratio`` counted
in replayed training rows: ``K = replay_ratio * T * B / (batch_size * batch_T)`` on average.
Deviations from the paper: one process (no distributed actors); sequences may cross episode
ends (masked as above) instead of being padded; input priorities see one sampler batch.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_rl.agents.dqn import R2d1Agent
from lightning_rl.agents.recurrent import rnn_state_from_samples
from lightning_rl.algos.dqn import DQN, PRIORITY_EPS
from lightning_rl.algos.hparams import FRACTION, INT_AT_LEAST_0, INT_AT_LEAST_1, NON_NEGATIVE, hparam
from lightning_rl.algos.replay_setup import PrioritizedSequenceSamplesToBuffer, SequenceSamplesToBuffer
from lightning_rl.data.buffers import buffer_func
from lightning_rl.datasets.replay import ReplayDataset
from lightning_rl.replays import compute_n_step_targets
from lightning_rl.returns import valid_from_done, valid_mean

__all__ = ["R2D1", "inv_value_rescale", "r2d1_loss", "sequence_priority", "value_rescale"]


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`` (Pohlen et al. 2018), elementwise."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inv_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """The exact inverse of :func:`value_rescale` (any ``eps >= 0``), elementwise.

    Solving ``eps u^2 + u - (1 + eps + |x|) = 0`` for ``u = sqrt(|h^-1(x)| + 1)`` in the
    rationalized form ``u = 2 c / (1 + sqrt(1 + 4 eps c))``, ``c = 1 + eps + |x|``, which has no
    cancellation for small ``eps`` and gives ``u = 1 + |x|`` at ``eps = 0``.
    """
    c = 1.0 + eps + x.abs()
    u = 2.0 * c / (1.0 + torch.sqrt(1.0 + 4.0 * eps * c))
    return torch.sign(x) * (u * u - 1.0)


def sequence_priority(td_abs: Tensor, valid: Tensor, eta: float, delta_clip: float | None = None) -> Tensor:
    """``eta * max + (1 - eta) * mean`` of ``|delta|`` ``[T, N]`` over the valid rows: ``[N]``."""
    if delta_clip is not None:
        td_abs = td_abs.clamp(max=delta_clip)
    max_d = (td_abs * valid).max(dim=0).values
    mean_d = valid_mean(td_abs, valid, dim=0)
    return eta * max_d + (1.0 - eta) * mean_d


def r2d1_loss(
    q: Tensor,
    target_q: Tensor,
    action: Tensor,
    return_: Tensor,
    done: Tensor,
    done_n: Tensor,
    discount_n: Tensor,
    n_steps: Tensor,
    *,
    batch_T: int,
    double_dqn: bool,
    value_scale_eps: float,
    pri_eta: float,
    delta_clip: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """R2D1's sequence loss after the burn-in (see the module docstring).

    All ``[bT + n, N]`` tensors start at the first training row (the burn-in rows are cut off).

    Args:
        q: Online ``Q(s_t, .)`` ``[bT + n, N, A]``, with grad.
        target_q: Target ``Q_target(s_t, .)`` ``[bT + n, N, A]``.
        action: Actions taken ``[bT, N]`` (int).
        return_: n-step returns ``R_t`` ``[bT + n, N]`` (rows ``t < bT`` are used).
        done: Episode-end flags ``[bT + n, N]`` (bool): rows after the first done are not trained.
        done_n: Terminated inside row ``t``'s n-step window ``[bT + n, N]`` (bool).
        discount_n: Bootstrap discount ``gamma^k`` ``[bT + n, N]``.
        n_steps: ``k``, the rows from ``t`` to its bootstrap row ``[bT + n, N]`` (0: truncated
            step without a stored next state, not trained).
        batch_T: Training rows ``bT``.
        double_dqn: The online network picks the bootstrap action.
        value_scale_eps: ``eps`` of the value rescaling ``h``.
        pri_eta: Priority mix ``eta * max + (1 - eta) * mean`` of ``|delta|``.
        delta_clip: Huber threshold; None: ``0.5 * delta^2``.
        is_weights: Importance-sampling weights ``[N]``; None: ones.

    Returns:
        The scalar loss (mean over valid rows) and per-sequence terms ``[N]``: ``priority``,
        ``q`` and ``td_abs`` (means over valid rows) and ``valid_fraction``.
    """
    bT, eps = batch_T, value_scale_eps
    q_taken = q[:bT].gather(-1, action.long()[..., None]).squeeze(-1)  # [bT, N]
    with torch.no_grad():
        rows = torch.arange(bT, device=q.device)[:, None] + n_steps[:bT]  # bootstrap rows of q / target_q
        rows = rows[..., None].expand(-1, -1, q.shape[-1])
        next_target_q = target_q.gather(0, rows)
        next_q = q.detach().gather(0, rows) if double_dqn else next_target_q
        next_value = next_target_q.gather(-1, next_q.argmax(dim=-1, keepdim=True)).squeeze(-1)
        bootstrap = (~done_n[:bT]).to(q.dtype) * discount_n[:bT]
        y = value_rescale(return_[:bT] + bootstrap * inv_value_rescale(next_value, eps), eps)
        valid = valid_from_done(done[:bT]) * (n_steps[:bT] > 0).to(q.dtype)
    delta = y - q_taken
    if delta_clip is None:
        losses = 0.5 * delta.square()
    else:
        losses = F.huber_loss(q_taken, y, reduction="none", delta=delta_clip)
    if is_weights is not None:
        losses = losses * is_weights[None, :]
    td_abs = delta.detach().abs()
    return valid_mean(losses, valid), {
        "priority": sequence_priority(td_abs, valid, pri_eta, delta_clip),
        "q": valid_mean(q_taken.detach(), valid, dim=0),
        "td_abs": valid_mean(td_abs, valid, dim=0),
        "valid_fraction": valid.mean(dim=0),
    }


class R2D1(DQN):
    """R2D1 as a LightningModule: :class:`DQN`'s schedule with a sequence loss.

    The agent is an :class:`~lightning_rl.agents.R2d1Agent` (``AlternatingR2d1Agent`` with an
    alternating sampler); any collector works (episode ends are masked). ``batch_size`` counts
    sequences, ``replay_ratio`` replayed training rows per collected step, and ``min_steps_learn``
    must be at least ``(warmup_T + batch_T + 2 * n_step_return) * batch_B`` so a whole sequence
    exists. The defaults are the paper's (via rlpyt), with ``delta_clip=None`` (squared error).

    Raises:
        ValueError: On a bad hyperparameter (the message names it) or an agent of another kind.
    """

    batch_T: int = hparam(80, "Training rows per sequence (after the burn-in).", check=INT_AT_LEAST_1)
    warmup_T: int = hparam(40, "Burn-in rows per sequence: they only warm up the LSTM state (no loss).",
                           check=INT_AT_LEAST_0)
    rnn_state_interval: int = hparam(
        40, "Rows between stored LSTM states, i.e. between sequence starts.", check=INT_AT_LEAST_1)
    value_scale_eps: float = hparam(1e-3, "``eps`` of the value rescaling ``h``.", check=NON_NEGATIVE)
    pri_eta: float = hparam(
        0.9, "Sequence priority mix ``eta * max + (1 - eta) * mean`` of ``|delta|``.", check=FRACTION)
    input_priorities: bool = hparam(
        True, "Give new sequences the TD-error priority of their sampler batch (prioritized replay only).")
    discount = 0.997
    batch_size = 64
    min_steps_learn = 100_000
    delta_clip = None
    replay_ratio = 1.0
    target_update_interval = 2500
    n_step_return = 5
    double_dqn = True
    learning_rate = 1e-4
    optimizer_eps = 1e-3
    clip_grad_norm = 80.0
    prioritized_replay = True
    pri_alpha = 0.9
    pri_beta_init = 0.6
    pri_beta_final = 0.6
    pri_beta_steps = 1_000_000

    agent: R2d1Agent
    #: The per-sequence term of :meth:`loss` that becomes the new priority (plus ``PRIORITY_EPS``).
    priority_term = "priority"

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is an ``R2d1Agent``."""
        if not isinstance(agent, R2d1Agent):
            raise ValueError(f"{type(self).__name__} needs an R2d1Agent, got agent={type(agent).__name__}")

    @property
    def min_steps_needed(self) -> int:
        """Env steps before the replay holds one whole sequence with its n-step targets."""
        return (self.warmup_T + self.batch_T + 2 * self.n_step_return) * self.sampler.batch_spec.B

    def setup(self, stage: str) -> None:
        min_steps_learn = self.min_steps_learn
        if stage == "fit" and min_steps_learn < self.min_steps_needed:
            raise ValueError(
                f"min_steps_learn={min_steps_learn} is less than the {self.min_steps_needed} env steps "
                f"(warmup_T + batch_T + 2 * n_step_return rows x batch_B) before a whole sequence is stored"
            )
        super().setup(stage)

    def replay_kwargs(self) -> dict[str, Any]:
        kwargs = super().replay_kwargs()
        kwargs.update(
            sequence_T=self.warmup_T + self.batch_T, rnn_state_interval=self.rnn_state_interval, eta=self.pri_eta
        )
        return kwargs

    def samples_to_buffer(self, samples: Any) -> Any:
        """The sampler's ``[T, B]`` samples plus the LSTM state of each step (and input priorities)."""
        transitions = super().samples_to_buffer(samples)
        fields = dict(zip(transitions._fields, transitions, strict=True))
        fields["prev_rnn_state"] = samples.agent.agent_info.prev_rnn_state
        if self.prioritized_replay and self.input_priorities:
            return PrioritizedSequenceSamplesToBuffer(**fields, priority=self.compute_input_priorities(samples))
        return SequenceSamplesToBuffer(**fields)

    def compute_input_priorities(self, samples: Any) -> np.ndarray:
        """Each env's priority from the n-step TD errors of a sampler batch (rlpyt's input priorities).

        Uses the Q-values the agent acted with: ``y_t = h(R_t + (1 - done_n) gamma^k h^-1(max_a
        Q(s_{t+k}, a)))`` for the rows whose bootstrap step lies in the batch, up to the env's
        first episode end, reduced like the training priorities. Envs without such a row get
        ``default_priority``.

        Returns:
            float32 ``[T, B]``: every row of an env gets that env's priority.
        """
        env = samples.env
        T, B = env.reward.shape
        n = self.n_step_return
        out = np.full((T, B), self.default_priority, dtype=np.float32)
        if T <= n:
            return out
        return_, n_steps = np.zeros((T, B), np.float32), np.zeros((T, B), np.int64)
        done_n, truncated_n = np.zeros((T, B), bool), np.zeros((T, B), bool)
        rows = np.arange(T - n)
        compute_n_step_targets(
            env.reward, env.done, env.truncated, rows, n, self.discount, return_, done_n, truncated_n, n_steps
        )
        q = torch.as_tensor(samples.agent.agent_info.q, dtype=torch.float32)  # [T, B, A]
        action = torch.as_tensor(samples.agent.action, dtype=torch.long)[: T - n]
        k = torch.from_numpy(n_steps[: T - n])
        boot = torch.arange(T - n)[:, None] + k
        next_q = q.max(dim=-1).values.gather(0, boot)
        bootstrap = torch.from_numpy(~done_n[: T - n]).float() * self.discount ** k.float()
        eps = self.value_scale_eps
        y = value_rescale(torch.from_numpy(return_[: T - n]) + bootstrap * inv_value_rescale(next_q, eps), eps)
        td_abs = (y - q[: T - n].gather(-1, action[..., None]).squeeze(-1)).abs()
        # As in training: nothing after an env's first episode end, no truncated step.
        valid = valid_from_done(torch.from_numpy(np.asarray(env.done[: T - n]))) * (k > 0)
        has_valid = valid.sum(dim=0) > 0
        priority = sequence_priority(td_abs, valid, self.pri_eta, self.delta_clip) + PRIORITY_EPS
        out[:, has_valid.numpy()] = priority[has_valid].numpy()
        return out

    def make_dataset(self) -> ReplayDataset:
        dataset = cast(ReplayDataset, super().make_dataset())
        # replay_ratio counts replayed training rows (rlpyt): a batch trains batch_size * batch_T.
        dataset.updates_per_iteration /= self.batch_T
        return dataset

    def loss(self, batch: Any) -> dict[str, Tensor]:
        """Burn-in, the online and target networks over the training rows, then :func:`r2d1_loss`.

        ``batch`` holds ``N`` sequences ``[warmup_T + batch_T + n, N]``. A sequence whose episode
        ended during the burn-in starts its training rows from a zero state.
        """
        wT = self.warmup_T
        inputs = batch.agent_inputs
        online_state = target_state = rnn_state_from_samples(batch.init_rnn_state)
        if wT > 0:
            with torch.no_grad():
                _, online_state = self.agent(*inputs[:wT], online_state)
                _, target_state = self.agent.target(*inputs[:wT], target_state)  # type: ignore[call-arg]
            keep = (~batch.done[:wT].any(dim=0)).to(online_state.h.dtype)[None, :, None]  # [1, N, 1]
            online_state = buffer_func(online_state, lambda s: s * keep)
            target_state = buffer_func(target_state, lambda s: s * keep)
        q, _ = self.agent(*inputs[wT:], online_state)  # [bT + n, N, A]
        with torch.no_grad():
            target_q, _ = self.agent.target(*inputs[wT:], target_state)  # type: ignore[call-arg]
        loss, terms = r2d1_loss(
            q, target_q, batch.action[wT : wT + self.batch_T], batch.return_[wT:], batch.done[wT:],
            batch.done_n[wT:], batch.discount_n[wT:], batch.n_steps[wT:], batch_T=self.batch_T,
            double_dqn=self.double_dqn, value_scale_eps=self.value_scale_eps, pri_eta=self.pri_eta,
            delta_clip=self.delta_clip, is_weights=batch.is_weights if self.prioritized_replay else None,
        )
        return {"loss": loss, **terms}
