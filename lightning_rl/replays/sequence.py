"""Sequence batches for recurrent replay (R2D2, Kapturowski et al. 2019).

A sequence of ``T`` training rows starts at a row ``s`` where the agent's recurrent state was
stored (a multiple of ``rnn_state_interval``) and carries ``T + n_step_return`` rows of agent
inputs and actions, so the algorithm slices the bootstrap targets ``n`` rows later on device
(rlpyt section 13.1.3). The recurrent state stored at ``s`` (the field ``prev_rnn_state``: the
state *before* step ``s``) is returned as ``init_rnn_state``; warm-up, if any, is the
algorithm's slice of the same sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lightning_rl.agents.base import AgentInputs
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.replays.shared import take
from lightning_rl.replays.storage import ReplayStorage

__all__ = ["SequenceSamplesFromReplay", "extract_sequence_batch"]


class SequenceSamplesFromReplay(NamedArrayTupleBase):
    """A batch of ``N`` replayed sequences of ``T`` training rows (torch tensors).

    Fields:
        agent_inputs: ``AgentInputs(observation, prev_action, prev_reward)``, ``[T+n, N, ...]``.
        action: ``[T+n, N, ...]`` actions.
        return_: ``[T, N]`` n-step returns of the first ``T`` rows (float32).
        done: ``[T, N]`` bool.
        done_n: ``[T, N]`` bool, termination inside the row's n-step window.
        truncated: ``[T, N]`` bool, the row's own step was truncated.
        truncated_n: ``[T, N]`` bool, the window was cut by a timeout.
        discount_n: ``[T, N]`` float32, ``discount ** n_steps``.
        n_steps: ``[T, N]`` int64: row ``t`` bootstraps from row ``t + n_steps`` of the
            sequence (``n_step_return`` unless cut by a timeout; 0 at a truncated step, which
            has no stored next state: mask it out).
        init_rnn_state: Stored ``prev_rnn_state`` at each start, ``[N, ...]`` as stored (e.g.
            ``RnnState(h, c)`` with ``[N, num_layers, H]``; transpose for the LSTM), or None.
        idxs: ``[N]`` int64 sample ids of the starts (``absolute_row * B + b``), for
            ``update_batch_priorities``.
        is_weights: ``[N]`` float32 importance weights (ones for uniform replay).
    """

    agent_inputs: Any
    action: Any
    return_: Any
    done: Any
    done_n: Any
    truncated: Any
    truncated_n: Any
    discount_n: Any
    n_steps: Any
    init_rnn_state: Any
    idxs: Any
    is_weights: Any


def extract_sequence_batch(
    storage: ReplayStorage, t: np.ndarray, b: np.ndarray, T: int, discount_pow: np.ndarray
) -> dict[str, Any]:
    """Gather the numpy fields of :class:`SequenceSamplesFromReplay` (all but ``idxs``/``is_weights``).

    Args:
        storage: The storage.
        t: Start rows ``[N]`` (multiples of ``storage.rnn_state_interval`` when it keeps states).
        b: Env indices ``[N]``.
        T: Training rows per sequence.
        discount_pow: ``discount ** k`` for ``k = 0 .. n_step_return`` (float32).
    """
    B, L = storage.B, T + storage.n_step_return
    rows = (t[None, :] + np.arange(L)[:, None]) % storage.T  # [T+n, N]
    idx = rows * B + b[None, :]
    prev_action, prev_reward = storage.prev_action_reward(idx)
    head = idx[:T]
    n_steps = take(storage.n_steps, head)
    truncated = take(storage.truncated, head) if storage.truncated is not None else np.zeros(head.shape, dtype=bool)
    init_rnn_state = None
    if storage.rnn_states is not None:
        init_rnn_state = take(storage.rnn_states, (t // storage.rnn_state_interval) * B + b)
    return dict(
        agent_inputs=AgentInputs(storage.observation(idx), prev_action, prev_reward),
        action=storage.get("action", idx),
        return_=take(storage.return_, head),
        done=storage.get("done", head),
        done_n=take(storage.done_n, head),
        truncated=truncated,
        truncated_n=take(storage.truncated_n, head),
        discount_n=discount_pow[n_steps],
        n_steps=n_steps.astype(np.int64),
        init_rnn_state=init_rnn_state,
    )
