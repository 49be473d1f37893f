"""Epsilon-greedy exploration schedules for value-based agents (rlpyt section 3.1).

Sampling epsilon anneals linearly in env steps, counted over all ranks as ``total_env_steps``
is. Sampler iteration ``itr`` starts after ``steps = itr * steps_per_itr`` env steps, where
``steps_per_itr`` (``batch_T * batch_B * world_size``) is what the algorithm passes to
:meth:`EpsilonGreedyAgentMixin.set_steps_per_itr` before the sampler starts:

    prog = clip((steps - eps_steps_min) / (eps_steps_max - eps_steps_min), 0, 1)
    eps  = (1 - prog) * eps_init + prog * eps_final

The epsilon changes once per iteration (the whole batch acts with the epsilon of its first step).

With ``eps_final_min`` set, each env gets its own final epsilon (Ape-X, Horgan et al. 2018):
the ``global_B`` envs over all ranks are given values log-spaced from ``eps_final_min`` (global
env 0) to ``eps_final`` (global env ``global_B - 1``), and this agent keeps the ones of its
``env_ranks``. Evaluation always uses ``eps_eval``.

An agent whose ``alternating`` flag is set (an alternating sampler's agent, which acts for one
half of its ``B`` envs at a time) gets ``B / 2`` epsilons, spaced over ``global_B / 2`` env
pairs, that both halves use: env ``j`` of the first half and env ``j`` of the second share
one (rlpyt's ``alternating`` flag).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

__all__ = ["EpsilonGreedyAgentMixin", "log_spaced_epsilons"]


def log_spaced_epsilons(eps_final_min: float, eps_final: float, global_B: int) -> np.ndarray:
    """``global_B`` epsilons log-spaced from ``eps_final_min`` to ``eps_final`` (float64 ``[global_B]``)."""
    return np.logspace(math.log10(eps_final_min), math.log10(eps_final), global_B)


if TYPE_CHECKING:
    from lightning_rl.agents.base import BaseAgent

    # A mixin of agents: type checkers see the agent it is mixed into (``super()`` calls go there).
    _AgentBase = BaseAgent
else:
    _AgentBase = object


class EpsilonGreedyAgentMixin(_AgentBase):
    """Epsilon annealing, evaluation epsilon and per-env vector epsilon for epsilon-greedy agents.

    Use as ``class MyAgent(EpsilonGreedyAgentMixin, BaseAgent)``, with a distribution that has
    ``set_epsilon`` (``EpsilonGreedy``, ``CategoricalEpsilonGreedy``) returned by
    ``make_distribution``. The schedule values live in the agent's ``state_dict``.

    Epsilon is a function of the env steps collected before an iteration, so the agent must be
    told the env steps of one iteration (:meth:`set_steps_per_itr`, which every
    ``RLModule`` calls in ``setup``). Until then only iteration 0 (no env steps yet) has a known
    epsilon (and every iteration when ``eps_steps_max == 0``); asking for another raises.
    The checkpointed state is the iteration (``itr``), so old checkpoints load unchanged.

    Args:
        eps_init: Sampling epsilon until ``eps_steps_min`` env steps have been collected.
        eps_final: Sampling epsilon from ``eps_steps_max`` env steps on (the largest of the
            per-env values when ``eps_final_min`` is set).
        eps_final_min: Smallest per-env final epsilon; ``None`` gives every env ``eps_final``.
        eps_steps_min: Env steps (over all ranks) at which annealing starts. The default,
            50k, is rlpyt's DQN ``min_steps_learn`` (its annealing starts with learning).
        eps_steps_max: Env steps (over all ranks) at which annealing ends. The default, 1M,
            is rlpyt's DQN ``eps_steps`` (Mnih et al. 2015 anneal over the first 1M frames).
        eps_eval: Epsilon in :meth:`eval_mode`.

    Raises:
        ValueError: If an epsilon is outside ``[0, 1]``, ``eps_final_min`` is not in
            ``(0, eps_final]``, ``eps_steps_min < 0`` or ``eps_steps_max < eps_steps_min``.
    """

    #: Acts for the two halves of an alternating sampler's envs in turn (set by
    #: ``AlternatingRecurrentAgentMixin``; set it on a feed-forward agent used with one).
    alternating = False

    def __init__(
        self,
        *args: Any,
        eps_init: float = 1.0,
        eps_final: float = 0.01,
        eps_final_min: float | None = None,
        eps_steps_min: int = 50_000,
        eps_steps_max: int = 1_000_000,
        eps_eval: float = 0.001,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        for name, value in (("eps_init", eps_init), ("eps_final", eps_final), ("eps_eval", eps_eval)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value} must be in [0, 1]")
        if eps_final_min is not None and not 0.0 < eps_final_min <= eps_final:
            raise ValueError(f"eps_final_min={eps_final_min} must be in (0, eps_final={eps_final}]")
        for name, steps in (("eps_steps_min", eps_steps_min), ("eps_steps_max", eps_steps_max)):
            if isinstance(steps, bool) or int(steps) != steps:
                raise ValueError(f"{name}={steps!r} must be an int (env steps)")
        if eps_steps_min < 0:
            raise ValueError(f"eps_steps_min={eps_steps_min} must be >= 0")
        if eps_steps_max < eps_steps_min:
            raise ValueError(f"eps_steps_max={eps_steps_max} must be >= eps_steps_min={eps_steps_min}")
        self._eps_init_scalar = float(eps_init)
        self._eps_final_scalar = float(eps_final)
        self.eps_final_min = eps_final_min
        self.eps_steps_min = int(eps_steps_min)
        self.eps_steps_max = int(eps_steps_max)
        self.eps_eval = float(eps_eval)
        # Scalars, or [B] tensors (one per local env) once make_vec_eps runs with eps_final_min.
        self.eps_init: float | torch.Tensor = self._eps_init_scalar
        self.eps_final: float | torch.Tensor = self._eps_final_scalar
        self.eps_sample: float | torch.Tensor = self._eps_init_scalar
        self._eps_itr = 0
        self._epsilon: float | torch.Tensor = self._eps_init_scalar

    @property
    def epsilon(self) -> float | torch.Tensor:
        """The epsilon the distribution acts with now (scalar or ``[B]``)."""
        return self._epsilon

    def finish_initialize(self, env_spaces: Any) -> None:
        """This rank's epsilons (see :meth:`make_vec_eps`), once the agent is built."""
        super().finish_initialize(env_spaces)
        self.make_vec_eps(self.global_B, self.env_ranks)
        self._set_epsilon(self.eps_sample)

    def set_steps_per_itr(self, steps_per_itr: int) -> None:
        """Env steps of one sampler iteration over all ranks (``batch_T * batch_B * world_size``).

        The algorithm calls it before the sampler starts (forked sampler workers copy it); see
        :meth:`BaseAgent.set_steps_per_itr`. The current sampling epsilon is recomputed with it.

        Raises:
            ValueError: If ``steps_per_itr`` is not an int >= 1.
        """
        super().set_steps_per_itr(steps_per_itr)
        if self.initialized:
            self.eps_sample = self.epsilon_at(self._eps_itr)
            if self._mode == "sample":
                self._set_epsilon(self.eps_sample)

    def collector_initialize(self, global_B: int = 1, env_ranks: list[int] | None = None) -> None:
        """Give an agent copy in a sampler worker the epsilons of that worker's envs."""
        self.make_vec_eps(global_B, env_ranks)
        self.sample_mode(self._eps_itr)

    def make_vec_eps(self, global_B: int, env_ranks: list[int] | None) -> None:
        """Set per-env ``eps_init``/``eps_final`` tensors ``[len(env_ranks)]`` when ``eps_final_min``
        is set; keep scalars otherwise.

        Args:
            global_B: Number of envs over all ranks and workers.
            env_ranks: Global indexes of this agent's envs (default ``range(global_B)``).

        Raises:
            ValueError: If an env rank is outside ``[0, global_B)``, or an alternating agent's
                envs do not form whole pairs ``(2k, 2k + 1)``.
        """
        if self.eps_final_min is None:
            self.eps_init, self.eps_final = self._eps_init_scalar, self._eps_final_scalar
        else:
            ranks = list(range(global_B)) if env_ranks is None else [int(r) for r in env_ranks]
            if any(not 0 <= r < global_B for r in ranks):
                raise ValueError(f"env_ranks={ranks} must lie in [0, global_B={global_B})")
            if self.alternating:
                # Each step acts for one half of the envs: B / 2 epsilons, one per pair (rlpyt).
                pairs = sorted({r // 2 for r in ranks})
                if global_B % 2 or 2 * len(pairs) != len(ranks):
                    raise ValueError(
                        f"alternating agent: global_B={global_B} must be even and env_ranks={ranks} must form "
                        "pairs (2k, 2k + 1), as an even number of consecutive envs does"
                    )
                global_B, ranks = global_B // 2, pairs
            finals = log_spaced_epsilons(self.eps_final_min, self._eps_final_scalar, global_B)[ranks]
            self.eps_final = torch.as_tensor(finals, dtype=torch.float32)
            self.eps_init = torch.full((len(ranks),), self._eps_init_scalar)
        self.eps_sample = self.epsilon_at(self._eps_itr)

    def epsilon_at(self, itr: int) -> float | torch.Tensor:
        """The sampling epsilon of iteration ``itr`` (scalar or ``[B]``), which starts after
        ``itr * steps_per_itr`` env steps.

        Raises:
            RuntimeError: If the epsilon depends on :attr:`steps_per_itr` (``itr > 0`` and
                ``eps_steps_max > 0``) and :meth:`set_steps_per_itr` was never called.
        """
        steps = self.env_steps_before(itr)
        span = self.eps_steps_max - self.eps_steps_min
        if span == 0:
            prog = 1.0 if steps >= self.eps_steps_max else 0.0
        else:
            prog = min(1.0, max(0.0, (steps - self.eps_steps_min) / span))
        return (1.0 - prog) * self.eps_init + prog * self.eps_final

    def env_steps_before(self, itr: int) -> int:
        """Env steps over all ranks collected before iteration ``itr``: ``itr * steps_per_itr``.

        Raises:
            RuntimeError: If that number is needed (``itr > 0`` and ``eps_steps_max > 0``) and
                :meth:`set_steps_per_itr` was never called.
        """
        if itr <= 0 or self.eps_steps_max == 0:
            return 0  # the same epsilon whatever the iteration's size
        if self.steps_per_itr is None:
            raise RuntimeError(
                f"{type(self).__name__}: the epsilon schedule counts env steps (eps_steps_min={self.eps_steps_min}, "
                f"eps_steps_max={self.eps_steps_max}), but the agent was never told the env steps of one sampler "
                f"iteration: call agent.set_steps_per_itr(batch_T * batch_B * world_size) before sampling "
                f"iteration {itr} (the sampler's initialize does)"
            )
        return int(itr) * self.steps_per_itr

    def sample_mode(self, itr: int) -> None:
        """Act with the annealed epsilon of iteration ``itr``."""
        super().sample_mode(itr)
        self._eps_itr = int(itr)
        self.eps_sample = self.epsilon_at(itr)
        self._set_epsilon(self.eps_sample)

    def eval_mode(self, itr: int) -> None:
        """Act with ``eps_eval``."""
        super().eval_mode(itr)
        self._set_epsilon(self.eps_eval)

    def _set_epsilon(self, epsilon: float | torch.Tensor) -> None:
        self._epsilon = epsilon
        if self.distribution is not None:
            self.distribution.set_epsilon(epsilon)

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state["epsilon"] = {
            "itr": self._eps_itr,
            "eps_init": _clone(self.eps_init),
            "eps_final": _clone(self.eps_final),
            "eps_sample": _clone(self.eps_sample),
        }
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        if "epsilon" not in state:
            return
        eps = state["epsilon"]
        self._eps_itr = int(eps["itr"])
        self.eps_init, self.eps_final, self.eps_sample = eps["eps_init"], eps["eps_final"], eps["eps_sample"]
        self._set_epsilon(self.eps_eval if self._mode == "eval" else self.eps_sample)


def _clone(x: float | torch.Tensor) -> float | torch.Tensor:
    return x.clone() if isinstance(x, torch.Tensor) else x
