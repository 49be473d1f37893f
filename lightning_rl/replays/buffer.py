"""``ReplayBuffer``: one configurable class composing storage, replay index and batch type.

Instead of a class for every combination (rlpyt has 33), a replay is three parts:

* storage: :class:`~lightning_rl.replays.storage.ReplayStorage` (plain),
  :class:`~lightning_rl.replays.frames.FrameReplayStorage` (``frame_stack``: an int) or
  :class:`~lightning_rl.replays.frames.CompositeFrameReplayStorage` (``frame_stack``: frames per
  field of a dict/tuple observation), either in OS shared memory behind an
  :class:`~lightning_rl.replays.shared.RWLock` (``shared``);
* replay index: :class:`~lightning_rl.replays.uniform.UniformIndex` or
  :class:`~lightning_rl.replays.prioritized.PrioritizedIndex` (``prioritized``);
* batch type: transitions with n-step targets
  (:class:`~lightning_rl.replays.n_step.SamplesFromReplay`) or sequences for recurrent agents
  (:class:`~lightning_rl.replays.sequence.SequenceSamplesFromReplay`, ``sequence_T``).

Every argument but ``frame_stack`` (which algorithms read off the sampler's observations) is a
typed scalar, so algorithms expose them to LightningCLI YAML as they are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import torch

from lightning_rl.replays.frames import CompositeFrameReplayStorage, FrameReplayStorage
from lightning_rl.replays.n_step import SamplesFromReplay, extract_transitions
from lightning_rl.replays.prioritized import PrioritizedIndex
from lightning_rl.replays.sequence import SequenceSamplesFromReplay, extract_sequence_batch
from lightning_rl.replays.shared import RWLock
from lightning_rl.replays.storage import ReplayStorage
from lightning_rl.replays.uniform import UniformIndex

__all__ = ["ReplayBuffer"]


class ReplayBuffer:
    """Experience replay: append sampler batches ``[T_in, B]``, sample training batches.

    Storage is a ``[T, B]`` ring with ``T = ceil(size / B)`` (rounded up to a multiple of
    ``rnn_state_interval``), written at a wrapping cursor. See
    :mod:`lightning_rl.replays.n_step` for the n-step return and timeout definitions,
    :mod:`lightning_rl.replays.frames` for frame storage and :mod:`lightning_rl.replays.sequence`
    for sequences. Windows that would cross the cursor, unwritten rows and (for transitions)
    truncated steps are never sampled.

    Args:
        example: One step of the samples to store (namedtuple/namedarraytuple, no leading dims)
            with fields ``observation, action, reward, done`` and optionally ``truncated``,
            ``prev_action``, ``prev_reward``, ``prev_rnn_state`` (sequence replays).
        size: Transitions to hold (``T * B``).
        B: Envs per appended batch (the sampler's ``batch_B``).
        discount: ``γ`` of the n-step returns.
        n_step_return: n of the n-step returns.
        prioritized: Prioritized replay (sum tree) instead of uniform.
        alpha: Priority exponent.
        beta: Initial importance-sampling exponent.
        beta_final: Importance-sampling exponent after annealing.
        beta_anneal_steps: ``sample_batch`` calls over which ``β`` anneals to ``beta_final``
            (None: constant, or set by the algorithm with :meth:`set_beta`).
        default_priority: Priority given to new samples.
        stratified: Stratified prioritized draws.
        eta: Sequence priority ``η · max + (1 - η) · mean`` of per-step priorities.
        frame_stack: Store stacked-frame observations ``[frame_stack, H, W]`` once per frame; for
            dict/tuple observations a mapping from the dotted path of each frame-stacked field
            to its frames (``{"pixels": 4}``), the other fields stored as they are.
        sequence_T: Replay sequences of this many training rows (plus ``n_step_return``).
        rnn_state_interval: Sequence starts (and stored ``prev_rnn_state``) every this many
            rows; None means 1. Sequence replays only.
        shared: Keep everything in OS shared memory with a reader-writer lock, so a forked
            process can append while this one samples.
        seed: Seed of the replay's random generator.

    Raises:
        ValueError: On an invalid argument (the message names it).

    Examples:
        >>> replay = ReplayBuffer(example, size=100_000, B=8, n_step_return=3, prioritized=True)
        >>> replay.append_samples(samples)          # [T_in, 8] from the sampler
        >>> batch = replay.sample_batch(32)         # SamplesFromReplay of torch tensors
        >>> q_next = target_q(*batch.target_inputs).max(-1).values
        >>> y = batch.return_ + (~batch.done_n) * batch.discount_n * q_next
        >>> replay.update_batch_priorities(batch.idxs, (y - q).abs() + 1e-6)
    """

    def __init__(
        self,
        example: Any,
        size: int,
        B: int,
        discount: float = 0.99,
        n_step_return: int = 1,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_anneal_steps: int | None = None,
        default_priority: float = 1.0,
        stratified: bool = False,
        eta: float = 0.9,
        frame_stack: int | Mapping[str, int] | None = None,
        sequence_T: int | None = None,
        rnn_state_interval: int | None = None,
        shared: bool = False,
        seed: int = 0,
    ) -> None:
        _check_args(
            size=size, B=B, discount=discount, n_step_return=n_step_return, alpha=alpha, beta=beta,
            beta_final=beta_final, beta_anneal_steps=beta_anneal_steps, default_priority=default_priority,
            eta=eta, frame_stack=frame_stack, sequence_T=sequence_T, rnn_state_interval=rnn_state_interval,
        )
        self.sequence_T = sequence_T
        interval = 1 if rnn_state_interval is None else int(rnn_state_interval)
        T = -(-size // (B * interval)) * interval
        storage_kwargs: dict[str, Any] = dict(
            discount=discount,
            n_step_return=n_step_return,
            rnn_state_interval=interval if sequence_T is not None else 0,
            shared=shared,
        )
        span = 1 if sequence_T is None else sequence_T + n_step_return
        min_age = span - 1 + n_step_return
        if isinstance(frame_stack, Mapping):
            off_forward = max(1, max(frame_stack.values()) - 1)
        else:
            off_forward = 1 if frame_stack is None else max(1, frame_stack - 1)
        if T < min_age + off_forward + interval + 1:
            raise ValueError(
                f"size={size} is too small: a ring of {T} rows x B={B} cannot hold one replayable "
                f"window of {span} rows plus {n_step_return}-step targets"
            )
        if isinstance(frame_stack, Mapping):
            self.storage: ReplayStorage = CompositeFrameReplayStorage(example, T, B, frame_stack, **storage_kwargs)
        elif frame_stack is not None:
            self.storage = FrameReplayStorage(example, T, B, frame_stack, **storage_kwargs)
        else:
            self.storage = ReplayStorage(example, T, B, **storage_kwargs)
        self.rng = np.random.default_rng(seed)
        sampler_kwargs: dict[str, Any] = dict(
            storage=self.storage,
            min_age=min_age,
            interval=interval,
            exclude_truncated=sequence_T is None,
            rng=self.rng,
        )
        if prioritized:
            self.sampler: UniformIndex | PrioritizedIndex = PrioritizedIndex(
                alpha=alpha, beta=beta, beta_final=beta_final, beta_anneal_steps=beta_anneal_steps,
                default_priority=default_priority, stratified=stratified, eta=eta, **sampler_kwargs,
            )
        else:
            self.sampler = UniformIndex(**sampler_kwargs)
        self._discount_pow = (float(discount) ** np.arange(n_step_return + 1)).astype(np.float32)
        self.lock = RWLock() if shared else None

    @property
    def T(self) -> int:
        """Rows in the ring."""
        return self.storage.T

    @property
    def B(self) -> int:
        """Envs per row."""
        return self.storage.B

    @property
    def size(self) -> int:
        """Capacity in transitions (``T * B``)."""
        return self.storage.T * self.storage.B

    @property
    def n_stored(self) -> int:
        """Transitions stored now (at most ``size``)."""
        return self.storage.filled * self.storage.B

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage and the sum tree."""
        return self.storage.nbytes + self.sampler.nbytes

    @property
    def beta(self) -> float:
        """Current importance-sampling exponent (0 for uniform replay: weights are ones)."""
        return self.sampler.beta if self.sampler.prioritized else 0.0

    def _read(self) -> contextlib.AbstractContextManager:
        return self.lock.read() if self.lock is not None else contextlib.nullcontext()

    def _write(self) -> contextlib.AbstractContextManager:
        return self.lock.write() if self.lock is not None else contextlib.nullcontext()

    def append_samples(self, samples: Any) -> np.ndarray:
        """Write a sampler batch at the cursor (overwriting the oldest rows when full).

        Args:
            samples: namedtuple/namedarraytuple with the example's fields, each ``[T_in, B, ...]``
                numpy (``1 <= T_in <= T``).

        Returns:
            The ring rows written, int64 ``[T_in]``.
        """
        with self._write():
            rows = self.storage.append(samples)
            self.sampler.on_append(rows)
        return rows

    def mark_boundary(self) -> None:
        """End every env's stream at the newest row, as a time limit would (``done`` and
        ``truncated``): rows appended next (envs restarted after a resume) never share an n-step
        window, a frame stack or a sequence with the rows before."""
        with self._write():
            self.storage.mark_boundary()

    def sample_batch(self, batch_B: int) -> SamplesFromReplay | SequenceSamplesFromReplay:
        """Sample a training batch of ``batch_B`` transitions (or sequences).

        Returns:
            :class:`SamplesFromReplay` (leading ``[batch_B]``) or, with ``sequence_T``,
            :class:`SequenceSamplesFromReplay` (``[sequence_T + n_step_return, batch_B]``), as
            CPU torch tensors that do not share memory with the replay.

        Raises:
            ValueError: If ``batch_B`` < 1.
            RuntimeError: If nothing is valid to sample yet.
        """
        if batch_B < 1:
            raise ValueError(f"sample_batch: batch_B must be >= 1, got {batch_B}")
        with self._read():
            t, b, idxs, is_weights = self.sampler.sample(batch_B)
            batch_cls: type[SamplesFromReplay] | type[SequenceSamplesFromReplay]
            if self.sequence_T is None:
                fields = extract_transitions(self.storage, t, b, self._discount_pow)
                batch_cls = SamplesFromReplay
            else:
                fields = extract_sequence_batch(self.storage, t, b, self.sequence_T, self._discount_pow)
                batch_cls = SequenceSamplesFromReplay
        return _torchify(batch_cls(**fields, idxs=idxs, is_weights=is_weights))

    def update_batch_priorities(self, idxs: Any, priorities: Any) -> None:
        """Give the samples of a batch new priorities (prioritized replay).

        Args:
            idxs: ``batch.idxs`` of the batch the priorities belong to, ``[N]``.
            priorities: ``[N]`` non-negative priorities, e.g. ``|TD error|``; for sequence
                replays also ``[T, N]`` per-step values, reduced with ``eta``.

        Raises:
            ValueError: If the replay is not prioritized, or on bad shapes or values.
        """
        if not self.sampler.prioritized:
            raise ValueError("update_batch_priorities: this replay is uniform (prioritized=False)")
        with self._write():
            self.sampler.update_priorities(idxs, priorities)

    def set_beta(self, beta: float) -> None:
        """Fix the importance-sampling exponent from now on (prioritized replay)."""
        if not self.sampler.prioritized:
            raise ValueError("set_beta: this replay is uniform (prioritized=False)")
        self.sampler.set_beta(beta)

    def state_dict(self, copy: bool = False) -> dict[str, Any]:
        """Everything needed to resume exactly: arrays, cursor, sum tree, RNG, counters.

        Args:
            copy: Copy the arrays. By default they are zero-copy views of the live replay (an
                Atari replay holds gigabytes), so save them before the next append.

        Returns:
            A dict of torch tensors and plain Python values (``torch.save`` loads it back with
            ``weights_only=True``).
        """
        with self._read():
            storage = self.storage.state_dict()
            sampler = self.sampler.state_dict()

            def tensor(a: np.ndarray) -> torch.Tensor:
                return torch.from_numpy(np.array(a) if copy else a)

            return {
                "storage": {k: tensor(v) for k, v in storage.items()},
                "sampler": {k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in sampler.items()},
                "rng": self.rng.bit_generator.state,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` into this replay (built with the same arguments).

        Raises:
            ValueError: If arrays are missing or have other shapes.
        """
        with self._write():
            self.storage.load_state_dict(state["storage"])
            self.sampler.load_state_dict(state["sampler"])
            self.rng.bit_generator.state = state["rng"]


def _torchify(x: Any) -> Any:
    # torchify_buffer for the fresh numpy leaves of a batch, with less overhead per leaf.
    if x is None:
        return None
    if isinstance(x, tuple):
        return cast(Any, x)._new(_torchify(v) for v in x)
    return torch.from_numpy(x)


def _check_args(**args: Any) -> None:
    def bad(name: str, rule: str) -> None:
        raise ValueError(f"ReplayBuffer: {name}={args[name]!r} must be {rule}")

    if not isinstance(args["B"], (int, np.integer)) or args["B"] < 1:
        bad("B", "an int >= 1")
    if not isinstance(args["size"], (int, np.integer)) or args["size"] < args["B"]:
        bad("size", f"an int >= B={args['B']}")
    if not 0 <= args["discount"] <= 1:
        bad("discount", "in [0, 1]")
    if not isinstance(args["n_step_return"], (int, np.integer)) or args["n_step_return"] < 1:
        bad("n_step_return", "an int >= 1")
    if args["alpha"] < 0:
        bad("alpha", ">= 0")
    if args["beta"] < 0:
        bad("beta", ">= 0")
    if args["beta_final"] < 0:
        bad("beta_final", ">= 0")
    if args["beta_anneal_steps"] is not None and args["beta_anneal_steps"] < 1:
        bad("beta_anneal_steps", ">= 1 or None")
    if not args["default_priority"] > 0:
        bad("default_priority", "> 0")
    if not 0 <= args["eta"] <= 1:
        bad("eta", "in [0, 1]")
    frame_stack = args["frame_stack"]
    if isinstance(frame_stack, Mapping):
        if not frame_stack or not all(isinstance(c, (int, np.integer)) and c >= 1 for c in frame_stack.values()):
            bad("frame_stack", "a non-empty mapping of field paths to ints >= 1")
    elif frame_stack is not None and frame_stack < 1:
        bad("frame_stack", ">= 1 or None")
    if args["sequence_T"] is not None and args["sequence_T"] < 1:
        bad("sequence_T", ">= 1 or None")
    if args["rnn_state_interval"] is not None:
        if args["sequence_T"] is None:
            bad("rnn_state_interval", "None unless sequence_T is set")
        if args["rnn_state_interval"] < 1:
            bad("rnn_state_interval", ">= 1 or None")
