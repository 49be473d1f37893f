"""Categorical DQN, C51 (Bellemare et al. 2017, https://arxiv.org/abs/1707.06887); with the
double, dueling, n-step and prioritized options of :class:`~lightning_rl.algos.dqn.DQN` it is
Rainbow minus noisy nets (Hessel et al. 2018), as in rlpyt section 3.2.

The return of each action is a distribution ``p(s, a)`` over fixed atoms
``z_i = V_min + i * dz`` (``i < n_atoms``, from the :class:`~lightning_rl.agents.CatDqnAgent`).
Loss for a replay batch of ``N`` transitions::

    Q(s, a)  = sum_i p_i(s, a) z_i
    a*       = argmax_a Q_target(s_n, a)          (double DQN: argmax_a Q(s_n, a))
    Tz_j     = clip(R_n + (1 - done_n) * gamma^k * z_j, V_min, V_max)
    m_i      = sum_j p_j^target(s_n, a*) * clip(1 - |Tz_j - z_i| / dz, 0, 1)   (projection)
    L        = mean_n w_n * (-sum_i m_i log p_i(s, a))       (cross-entropy)
    priority = KL(m || p(s, a)) + 1e-6

The projection splits each shifted atom ``Tz_j`` between its two neighbouring atoms in
proportion to closeness (Bellemare et al. 2017, algorithm 1); the ``clip(1 - |.|/dz)`` form does
it for all atoms at once without index scatter (Rowland et al. 2018). ``R_n``, ``gamma^k``,
``done_n`` and the update schedule are those of :class:`~lightning_rl.algos.dqn.DQN`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from lightning_rl.agents.dqn import CatDqnAgent
from lightning_rl.algos.dqn import DQN

#: Floor of the predicted probabilities inside ``log`` (rlpyt's value).
LOG_P_MIN = 1e-6


def project_distribution(
    p_next: torch.Tensor, return_: torch.Tensor, bootstrap: torch.Tensor, z: torch.Tensor
) -> torch.Tensor:
    """Project the shifted return distribution ``R + bootstrap * z`` onto the atoms ``z``.

    Args:
        p_next: Probabilities of the bootstrap distribution ``[N, n_atoms]``.
        return_: n-step returns ``[N]``.
        bootstrap: Discount of the bootstrap value ``[N]``, 0 where the episode terminated.
        z: Atom values ``[n_atoms]``, evenly spaced and increasing.

    Returns:
        Target probabilities ``[N, n_atoms]`` on ``z`` (each row sums to the row of ``p_next``).
    """
    v_min, v_max = z[0], z[-1]
    dz = (v_max - v_min) / (z.numel() - 1)
    shifted = (return_.unsqueeze(-1) + bootstrap.unsqueeze(-1) * z).clamp(v_min, v_max)  # Tz_j [N, n_atoms]
    # weight[n, i, j]: the share of atom j's mass that lands on atom i.
    weight = (1.0 - (shifted.unsqueeze(-2) - z.unsqueeze(-1)).abs() / dz).clamp(min=0.0)
    return torch.einsum("nij,nj->ni", weight, p_next)


def categorical_dqn_loss(
    p: Tensor,
    action: Tensor,
    next_target_p: Tensor,
    return_: Tensor,
    done_n: Tensor,
    discount_n: Tensor,
    z: Tensor,
    *,
    next_online_p: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """C51's cross-entropy loss for a replay batch of ``N`` transitions (see the module docstring).

    Args:
        p: Online return distributions ``p(s, .)`` ``[N, A, n_atoms]``, with grad.
        action: Actions taken ``[N]`` (int).
        next_target_p: Target network's distributions at the bootstrap state ``[N, A, n_atoms]``.
        return_: n-step returns ``[N]``.
        done_n: Terminated inside the n-step window ``[N]`` (bool).
        discount_n: Bootstrap discount ``gamma^k`` ``[N]``.
        z: Atom values ``[n_atoms]``, evenly spaced and increasing.
        next_online_p: Online distributions at the bootstrap state, to choose the bootstrap action
            (double DQN); None: the target network chooses.
        is_weights: Importance-sampling weights ``[N]``; None: all ones.

    Returns:
        The scalar loss and the detached per-sample terms ``q`` (``Q(s, a)``) and ``kl``
        (``KL(m || p(s, a))``, the priority) ``[N]``.
    """
    rows = torch.arange(action.shape[0], device=z.device)
    p_taken = p[rows, action.long()]  # [N, n_atoms]
    with torch.no_grad():
        chooser = next_target_p if next_online_p is None else next_online_p
        p_next = next_target_p[rows, (chooser * z).sum(-1).argmax(dim=-1)]
        bootstrap = (~done_n).to(p_next.dtype) * discount_n
        m = project_distribution(p_next, return_, bootstrap, z)
    cross_entropy = -(m * p_taken.clamp(min=LOG_P_MIN).log()).sum(-1)
    loss = (cross_entropy * is_weights).mean() if is_weights is not None else cross_entropy.mean()
    with torch.no_grad():
        kl = ((m * m.clamp(min=LOG_P_MIN).log()).sum(-1) + cross_entropy).clamp(min=0.0)
        q = (p_taken * z).sum(-1)
    return loss, {"q": q, "kl": kl}


class CategoricalDQN(DQN):
    """C51 with DQN's options; only :meth:`loss` (and the agent check) differ from :class:`DQN`.

    Takes the arguments of :class:`~lightning_rl.algos.dqn.DQN` (``delta_clip`` is unused:
    the loss is a cross-entropy). ``V_min``, ``V_max`` and ``n_atoms`` are arguments of the
    :class:`~lightning_rl.agents.CatDqnAgent`.
    """

    agent: CatDqnAgent
    priority_term = "kl"

    def check_agent(self, agent: Any) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``CatDqnAgent``."""
        if not isinstance(agent, CatDqnAgent):
            raise ValueError(f"{type(self).__name__} needs a CatDqnAgent, got agent={type(agent).__name__}")

    def loss(self, batch: Any) -> dict[str, Tensor]:
        """The online and target networks' forward passes, then :func:`categorical_dqn_loss`:
        ``loss`` and the per-sample terms ``[N]``."""
        p = self.agent(*batch.agent_inputs)
        with torch.no_grad():
            next_target_p = self.agent.target(*batch.target_inputs)
            next_online_p = self.agent(*batch.target_inputs) if self.double_dqn else None
        loss, terms = categorical_dqn_loss(
            p, batch.action, next_target_p, batch.return_, batch.done_n, batch.discount_n, self.agent.z,
            next_online_p=next_online_p, is_weights=batch.is_weights if self.prioritized_replay else None,
        )
        return {"loss": loss, **terms}
