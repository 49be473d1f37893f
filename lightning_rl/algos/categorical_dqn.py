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

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.agents.dqn import CatDqnAgent
from lightning_rl.algos.dqn import DQN
from lightning_rl.replays import SamplesFromReplay

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


class CategoricalDQN(DQN):
    """C51 with DQN's options; only :meth:`loss` (and the agent check) differ from :class:`DQN`.

    Takes the arguments of :class:`~lightning_rl.algos.dqn.DQN` (``delta_clip`` is unused:
    the loss is a cross-entropy). ``V_min``, ``V_max`` and ``n_atoms`` are arguments of the
    :class:`~lightning_rl.agents.CatDqnAgent`.
    """

    priority_term = "kl"

    def check_agent(self, agent: BaseAgent) -> None:
        """Raise ``ValueError`` unless ``agent`` is a ``CatDqnAgent``."""
        if not isinstance(agent, CatDqnAgent):
            raise ValueError(f"{type(self).__name__} needs a CatDqnAgent, got agent={type(agent).__name__}")

    def loss(self, batch: SamplesFromReplay) -> dict[str, torch.Tensor]:
        """C51 loss terms of one replay batch ``[N]`` (see the module docstring).

        Returns:
            ``loss`` (the scalar minimized) and the detached per-sample terms ``q``
            (``Q(s, a)``) and ``kl`` (``KL(m || p(s, a))``, the priority) ``[N]``.
        """
        z = self.agent.z
        rows = torch.arange(batch.action.shape[0], device=z.device)
        p = self.agent(*batch.agent_inputs)[rows, batch.action.long()]  # [N, n_atoms]
        with torch.no_grad():
            target_p = self.agent.target(*batch.target_inputs)  # [N, A, n_atoms]
            select_p = self.agent(*batch.target_inputs) if self.double_dqn else target_p
            p_next = target_p[rows, (select_p * z).sum(-1).argmax(dim=-1)]
            bootstrap = (~batch.done_n).to(p_next.dtype) * batch.discount_n
            m = project_distribution(p_next, batch.return_, bootstrap, z)
        cross_entropy = -(m * p.clamp(min=LOG_P_MIN).log()).sum(-1)
        loss = (cross_entropy * batch.is_weights).mean() if self.prioritized_replay else cross_entropy.mean()
        with torch.no_grad():
            kl = ((m * m.clamp(min=LOG_P_MIN).log()).sum(-1) + cross_entropy).clamp(min=0.0)
            q = (p * z).sum(-1)
        return {"loss": loss, "q": q, "kl": kl}
