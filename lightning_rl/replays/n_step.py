"""n-step return targets, computed as samples arrive, and the batch of replayed transitions.

Definition (row ``t`` of one env, ``n = n_step_return``, ``γ = discount``). Walk the window
``j = 0 .. n-1`` and stop at the first step that ends the episode:

* a **timeout** at ``t + j`` (``truncated`` True: truncated by a time limit, not terminated):
  the return keeps the rewards *before* it, ``return_ = Σ_{i<j} γ^i r[t+i]``, and the target
  bootstraps from the last observation of the truncated episode, ``observation[t+j]``:
  ``n_steps = j``, ``truncated_n = True``, ``done_n = False``. The sampler resets at a timeout,
  so ``observation[t+j+1]`` belongs to the next episode and the true next state of step
  ``t+j`` is not stored; the row ``t`` with ``j = 0`` (``n_steps = 0``) therefore has no
  usable target, and transition replays never sample it.
* a **termination** at ``t + j`` (``done`` True, ``truncated`` False): ``return_ = Σ_{i<=j} γ^i
  r[t+i]``, ``done_n = True`` (no bootstrap), ``n_steps = n``.
* neither: ``return_ = Σ_{i<n} γ^i r[t+i]``, ``done_n = truncated_n = False``, ``n_steps = n``.

The target is then ``return_ + (1 - done_n) * γ^{n_steps} * V(observation[t + n_steps])``; a
batch carries ``discount_n = γ^{n_steps}`` for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lightning_rl.agents.base import AgentInputs
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.replays.shared import take

__all__ = ["SamplesFromReplay", "compute_n_step_targets", "extract_transitions"]


class SamplesFromReplay(NamedArrayTupleBase):
    """A batch of ``N`` replayed transitions; every field is a torch tensor with leading ``[N]``.

    Fields:
        agent_inputs: ``AgentInputs(observation, prev_action, prev_reward)`` at row ``t``.
        action: Action taken at ``t``.
        return_: n-step discounted return (float32), see :mod:`lightning_rl.replays.n_step`.
        done: ``done[t]`` (bool).
        done_n: A termination within the n-step window (bool): do not bootstrap.
        truncated_n: The window was cut by a timeout (bool): bootstrap from ``target_inputs``.
        discount_n: ``discount ** n_steps`` (float32), the bootstrap value's discount.
        target_inputs: ``AgentInputs`` at ``t + n_steps`` (the bootstrap state).
        idxs: Sample ids ``absolute_row * B + b`` (int64; ``absolute_row`` counts appended
            rows from 0), for ``update_batch_priorities``.
        is_weights: Importance-sampling weights (float32; ones for uniform replay).
    """

    agent_inputs: Any
    action: Any
    return_: Any
    done: Any
    done_n: Any
    truncated_n: Any
    discount_n: Any
    target_inputs: Any
    idxs: Any
    is_weights: Any


def compute_n_step_targets(
    reward: np.ndarray,
    done: np.ndarray,
    truncated: np.ndarray | None,
    rows: np.ndarray,
    n_step_return: int,
    discount: float,
    return_: np.ndarray,
    done_n: np.ndarray,
    truncated_n: np.ndarray,
    n_steps: np.ndarray,
) -> None:
    """Write n-step targets for ``rows`` of a ``[T, B]`` ring, in place.

    The window of row ``t`` reads rows ``(t + j) % T`` for ``j < n_step_return``, which must
    already hold their samples. All windows are gathered at once (``[L, n, B]``), no Python
    loop.

    Args:
        reward: ``[T, B]`` rewards.
        done: ``[T, B]`` bool, episode ended after the step (terminated or truncated).
        truncated: ``[T, B]`` bool, truncated by a time limit, or None (never).
        rows: Ring rows to compute, int ``[L]``.
        n_step_return: Window length ``n`` (>= 1).
        discount: ``γ``.
        return_: ``[T, B]`` float32 destination.
        done_n: ``[T, B]`` bool destination.
        truncated_n: ``[T, B]`` bool destination.
        n_steps: ``[T, B]`` integer destination (rewards summed, bootstrap offset).
    """
    if n_step_return == 1:
        # The common 1-step case in a few array ops (appends of single steps are frequent).
        if truncated is None:
            return_[rows] = reward[rows]
            done_n[rows] = done[rows]
            truncated_n[rows] = False
            n_steps[rows] = 1
        else:
            to = truncated[rows]
            return_[rows] = np.where(to, 0.0, reward[rows])
            done_n[rows] = done[rows] & ~to
            truncated_n[rows] = to
            n_steps[rows] = ~to
        return
    # Gather each row's window once: [L, n, B]; the loop-free form of the definition above.
    window = (rows[:, None] + np.arange(n_step_return)) % reward.shape[0]
    r, d = reward[window], done[window]
    to = truncated[window] if truncated is not None else np.zeros_like(d)
    ended = d | to
    # open_[:, j]: no episode end at steps 0 .. j-1 of the window.
    open_ = np.ones_like(ended)
    np.logical_not(np.logical_or.accumulate(ended[:, :-1], axis=1), out=open_[:, 1:])
    live = open_ & ~to  # reward j counts: inside the episode and not cut by a timeout at j
    discounts = (discount ** np.arange(n_step_return)).reshape((1, -1) + (1,) * (r.ndim - 2))
    return_[rows] = (np.where(live, r, 0.0) * discounts).sum(axis=1)
    done_n[rows] = (live & d).any(axis=1)
    cut = open_ & to
    truncated_n[rows] = cut.any(axis=1)
    n_steps[rows] = np.where(cut.any(axis=1), cut.argmax(axis=1), n_step_return)


def extract_transitions(storage: Any, t: np.ndarray, b: np.ndarray, discount_pow: np.ndarray) -> dict[str, Any]:
    """Gather the numpy fields of :class:`SamplesFromReplay` (all but ``idxs``/``is_weights``).

    Args:
        storage: A :class:`~lightning_rl.replays.storage.ReplayStorage`.
        t: Ring rows ``[N]``.
        b: Env indices ``[N]``.
        discount_pow: ``discount ** k`` for ``k = 0 .. n_step_return`` (float32).
    """
    B = storage.B
    idx = t * B + b
    n_steps = take(storage.n_steps, idx)
    idx_n = (idx + n_steps.astype(np.int64) * B) % (storage.T * B)
    # One gather serves both the agent inputs at t and the targets at t + n_steps.
    both = np.concatenate([idx, idx_n])
    obs = storage.observation(both)
    prev_action, prev_reward = storage.prev_action_reward(both)
    n = len(idx)
    first, second = slice(0, n), slice(n, 2 * n)
    return dict(
        agent_inputs=AgentInputs(obs[first], prev_action[first], prev_reward[first]),
        action=storage.get("action", idx),
        return_=take(storage.return_, idx),
        done=storage.get("done", idx),
        done_n=take(storage.done_n, idx),
        truncated_n=take(storage.truncated_n, idx),
        discount_n=discount_pow[n_steps],
        target_inputs=AgentInputs(obs[second], prev_action[second], prev_reward[second]),
    )
