"""Recurrent state kept by the agent while sampling, so samplers stay agnostic of it (rlpyt 1.3.1).

The state is a namedarraytuple of tensors in the cuDNN layout ``[N, B, H]`` (layers, envs,
hidden), e.g. ``RnnState(h, c)``. ``None`` means zeros (PyTorch's LSTMs read it that way).

Samples store each step's *incoming* state as ``agent_info.prev_rnn_state`` with the env dim
first, ``[B, N, H]``, so the sampler's ``[T, B]`` buffers hold it like any other field; an
algorithm turns the state at the start of a training sequence back into the model layout with
:func:`rnn_state_from_samples`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_rl.data.buffers import buffer_func, buffer_method, buffer_to

__all__ = [
    "AlternatingRecurrentAgentMixin",
    "RecurrentAgentMixin",
    "rnn_state_from_samples",
    "rnn_state_to_samples",
]


def rnn_state_to_samples(rnn_state: Any) -> Any:
    """``[N, B, H]`` model layout -> ``[B, N, H]`` sample layout (a view)."""
    return buffer_method(rnn_state, "transpose", 0, 1)


def rnn_state_from_samples(prev_rnn_state: Any) -> Any:
    """``[B, N, H]`` samples (e.g. ``samples.agent.agent_info.prev_rnn_state[0]``) -> ``[N, B, H]``.

    The result is contiguous, as cuDNN LSTMs require.
    """
    return buffer_func(prev_rnn_state, lambda t: t.transpose(0, 1).contiguous())


def _zero_env(rnn_state: Any, idx: int) -> None:
    buffer_func(rnn_state, lambda t: t[:, idx].zero_())


if TYPE_CHECKING:
    from lightning_rl.agents.base import BaseAgent

    # A mixin of agents: type checkers see the agent it is mixed into (``super()`` calls go there).
    _AgentBase = BaseAgent
else:
    _AgentBase = object


class RecurrentAgentMixin(_AgentBase):
    """Keeps each env's RNN state between :meth:`step` calls.

    Use as ``class MyAgent(RecurrentAgentMixin, BaseAgent)``; the agent's ``step`` reads
    :attr:`prev_rnn_state` (``[N, B, H]`` or ``None``) and ends with
    :meth:`advance_rnn_state`. Switching from sample mode to train or eval mode stashes the
    sampling state and starts from zeros; returning to sample mode restores it, so evaluation
    in the middle of training does not disturb the training envs' memories. The sampling state
    is part of the agent's ``state_dict`` (``get_extra_state``) for exact resumption.
    """

    # Class-level defaults instead of an __init__, so agents keep their own explicit signatures.
    _prev_rnn_state: Any = None
    _sample_rnn_state: Any = None

    @property
    def prev_rnn_state(self) -> Any:
        """The state for the next :meth:`step`: ``[N, B, H]`` tensors, or ``None`` (zeros)."""
        return self._prev_rnn_state

    def device_rnn_state(self) -> Any:
        """:attr:`prev_rnn_state` on the model's device (states restored from a checkpoint may
        arrive on another one)."""
        return buffer_to(self._prev_rnn_state, self.device)

    def advance_rnn_state(self, new_rnn_state: Any) -> None:
        """Use ``new_rnn_state`` (``[N, B, H]``) for the next step; call at the end of ``step``."""
        self._prev_rnn_state = new_rnn_state

    def reset(self) -> None:
        """Forget every env's state (zeros at the next step)."""
        super().reset()
        self._prev_rnn_state = None

    def reset_one(self, idx: int) -> None:
        """Zero env ``idx``'s state in place, leaving the other envs' states alone."""
        super().reset_one(idx)
        if self._prev_rnn_state is not None:
            _zero_env(self._prev_rnn_state, idx)

    def train_mode(self, itr: int) -> None:
        if self._mode == "sample":
            self._sample_rnn_state = self._prev_rnn_state
        self._prev_rnn_state = None
        super().train_mode(itr)

    def eval_mode(self, itr: int) -> None:
        if self._mode == "sample":
            self._sample_rnn_state = self._prev_rnn_state
        self._prev_rnn_state = None
        super().eval_mode(itr)

    def sample_mode(self, itr: int) -> None:
        if self._mode != "sample":
            self._prev_rnn_state = self._sample_rnn_state
        super().sample_mode(itr)

    def _sampling_state(self) -> Any:
        return self._prev_rnn_state if self._mode == "sample" else self._sample_rnn_state

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        state["sample_rnn_state"] = _to_storable(self._sampling_state())
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        if "sample_rnn_state" not in state:
            return
        rnn_state = _from_storable(state["sample_rnn_state"], self._rnn_state_cls())
        if self._mode == "sample":
            self._prev_rnn_state = rnn_state
        else:
            self._sample_rnn_state = rnn_state

    def _rnn_state_cls(self) -> Any:
        from lightning_rl.models import RnnState

        return RnnState


class AlternatingRecurrentAgentMixin(RecurrentAgentMixin):
    """Two RNN states that take turns, for alternating samplers (rlpyt 1.3.1).

    An alternating sampler steps two halves of its envs in turn: the agent acts for one half
    while the other half's envs step. Each :meth:`advance_rnn_state` stores the new state as the
    state of the half that just acted and switches to the other half's state. Env indexes in
    :meth:`reset_one` count over both halves: envs ``0 .. B/2 - 1`` act first and
    ``B/2 .. B - 1`` second. After a batch the sampler asks :meth:`value` for half 0 and then
    half 1 without stepping in between, so values keep their own turn: it starts at the half
    due to act next and moves on at every :meth:`value` call. ``alternating = True`` also tells
    per-env schedules (vector epsilon) that each step acts for half of the envs.
    """

    alternating = True
    # Replaced, never mutated: the tuples are safe class-level defaults.
    _rnn_state_pair: tuple[Any, Any] | list[Any] = (None, None)
    _sample_rnn_state_pair: tuple[Any, Any] | list[Any] = (None, None)
    _alt = 0
    _sample_alt = 0
    _value_alt = 0

    def advance_rnn_state(self, new_rnn_state: Any) -> None:
        self._rnn_state_pair = list(self._rnn_state_pair)
        self._rnn_state_pair[self._alt] = new_rnn_state
        self._alt ^= 1
        self._value_alt = self._alt
        self._prev_rnn_state = self._rnn_state_pair[self._alt]

    def value(self, observation: Any, prev_action: Any, prev_reward: Any) -> Any:
        """The agent's ``value`` for the half whose value turn it is (see the class docstring)."""
        acting = self._prev_rnn_state
        self._prev_rnn_state = self._rnn_state_pair[self._value_alt]
        try:
            # ``value`` comes from the agent this is mixed into (PgAgentBase), not from BaseAgent.
            return super().value(observation, prev_action, prev_reward)  # type: ignore[misc]
        finally:
            self._prev_rnn_state = acting
            self._value_alt ^= 1

    def reset(self) -> None:
        super().reset()
        self._rnn_state_pair = [None, None]
        self._alt = 0
        self._value_alt = 0

    def reset_one(self, idx: int) -> None:
        """Zero env ``idx``'s state, ``idx`` counting over both halves."""
        # Skip RecurrentAgentMixin.reset_one: its single state is the other half's here.
        super(RecurrentAgentMixin, self).reset_one(idx)
        half = next((_batch_size(s) for s in self._rnn_state_pair if s is not None), None)
        if half is None:
            return
        if not 0 <= idx < 2 * half:
            raise ValueError(f"reset_one: idx={idx} must lie in [0, {2 * half}) (two halves of {half} envs)")
        state = self._rnn_state_pair[idx // half]
        if state is not None:
            _zero_env(state, idx % half)

    def train_mode(self, itr: int) -> None:
        self._stash_pair()
        super().train_mode(itr)

    def eval_mode(self, itr: int) -> None:
        self._stash_pair()
        super().eval_mode(itr)

    def sample_mode(self, itr: int) -> None:
        if self._mode != "sample":
            self._rnn_state_pair = list(self._sample_rnn_state_pair)
            self._alt = self._value_alt = self._sample_alt
        super().sample_mode(itr)

    def _stash_pair(self) -> None:
        if self._mode == "sample":
            self._sample_rnn_state_pair = list(self._rnn_state_pair)
            self._sample_alt = self._alt
        self._rnn_state_pair = [None, None]
        self._alt = self._value_alt = 0

    def get_extra_state(self) -> dict[str, Any]:
        state = super().get_extra_state()
        sampling = self._mode == "sample"
        pair = self._rnn_state_pair if sampling else self._sample_rnn_state_pair
        state["sample_rnn_state_pair"] = [_to_storable(s) for s in pair]
        state["sample_alt"] = self._alt if sampling else self._sample_alt
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        if "sample_rnn_state_pair" not in state:
            return
        cls = self._rnn_state_cls()
        pair = [_from_storable(s, cls) for s in state["sample_rnn_state_pair"]]
        if self._mode == "sample":
            self._rnn_state_pair, self._alt = pair, int(state["sample_alt"])
            self._value_alt = self._alt
            self._prev_rnn_state = pair[self._alt]
        else:
            self._sample_rnn_state_pair, self._sample_alt = pair, int(state["sample_alt"])


def _batch_size(rnn_state: Any) -> int:
    return int(next(iter(rnn_state)).shape[1])


def _to_storable(rnn_state: Any) -> Any:
    # Plain tuples of tensors load under torch.load(weights_only=True); namedarraytuples do not.
    if rnn_state is None:
        return None
    return tuple(t.detach().clone() for t in rnn_state)


def _from_storable(stored: Any, cls: Any) -> Any:
    if stored is None:
        return None
    return cls(*stored)
