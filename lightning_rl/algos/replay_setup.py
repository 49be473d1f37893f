"""The replay of an off-policy algorithm, by composition: what the replay stores of a sampler
batch, how it stores frames, and :class:`ReplaySetup`, which builds it, feeds it (in the training
process or, with ``async_sampling``, from a sampler process) and hands it to checkpoints.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytorch_lightning as pl

from lightning_rl.data.namedarraytuple import NamedArrayTupleBase, namedarraytuple
from lightning_rl.datasets.async_replay import AsyncReplayDataset, AsyncSampling, SharedTrainState
from lightning_rl.datasets.replay import ReplayDataset
from lightning_rl.replays import ReplayBuffer

__all__ = [
    "AsyncShutdownCallback", "PrioritizedSequenceSamplesToBuffer", "ReplaySetup", "SamplesToBuffer",
    "SequenceSamplesToBuffer", "frame_stack_of", "samples_to_buffer", "uninitialized_copy",
]


class SamplesToBuffer(NamedArrayTupleBase):
    """What a transition replay stores per step (``[T, B]`` when appended)."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    truncated: Any
    prev_action: Any
    prev_reward: Any


_TRANSITION_FIELDS = ("observation", "action", "reward", "done", "truncated", "prev_action", "prev_reward")
#: What the R2D1 replay stores per step: transitions plus the agent's incoming LSTM state.
SequenceSamplesToBuffer = namedarraytuple("SequenceSamplesToBuffer", [*_TRANSITION_FIELDS, "prev_rnn_state"])
#: :data:`SequenceSamplesToBuffer` plus each row's input priority (float32).
PrioritizedSequenceSamplesToBuffer = namedarraytuple(
    "PrioritizedSequenceSamplesToBuffer", (*SequenceSamplesToBuffer._fields, "priority"))


class ReplaySetup:
    """The replay of an off-policy algorithm, composed into its module (not a base class).

    :class:`~lightning_rl.algos.off_policy.OffPolicyAlgorithm` builds one from its hyperparameters,
    calls :meth:`prepare_agent` before the sampler starts and :meth:`build` after it; checkpoints
    save and load :attr:`replay`.

    It reads the module's replay hyperparameters (``batch_size``, ``replay_size``, ``replay_ratio``,
    ``min_steps_learn``, ``n_step_return``, ``discount``, ``updates_per_sync``, ``checkpoint_replay``,
    ``async_sampling``). With ``async_sampling`` the sampler runs in its own process and writes into
    a shared-memory replay while ``training_step`` trains, with the replay ratio held by throttling
    whichever side is faster (:mod:`lightning_rl.datasets.async_replay`).

    Args:
        module: The off-policy module whose replay this is.
    """

    def __init__(self, module: Any) -> None:
        self.module = module
        self.replay: ReplayBuffer | None = None
        #: The sampler process of async sampling (started by :meth:`start_async`).
        self.async_runner: AsyncSampling | None = None

    @property
    def async_sampling(self) -> bool:
        return bool(self.module.async_sampling)

    @property
    def checkpoint_replay(self) -> bool:
        """Save the replay next to each checkpoint."""
        return bool(self.module.checkpoint_replay)

    def prepare_agent(self, agent: Any, batch_size: int, pretrain_uniform: bool | None = None) -> None:
        """Tell the agent the first learning iteration (before the sampler forks its workers)."""
        if hasattr(agent, "set_min_itr_learn"):
            min_itr = self.module.min_steps_learn // batch_size
            if pretrain_uniform is None:
                agent.set_min_itr_learn(min_itr)
            else:
                agent.set_min_itr_learn(min_itr, uniform=pretrain_uniform)

    def build(self, module: Any, seed: int) -> ReplayBuffer:
        """Allocate the replay for one step of what ``module.samples_to_buffer`` stores, with
        ``module.replay_kwargs()`` (frame storage, sequences, priorities) and the sampler's ``B`` envs."""
        self.replay = ReplayBuffer(
            module.samples_to_buffer(module.sampler.samples)[0, 0],
            size=module.replay_size,
            B=module.sampler.batch_spec.B,
            discount=module.discount,
            n_step_return=module.n_step_return,
            seed=seed,
            shared=self.async_sampling,
            **module.replay_kwargs(),
        )
        return self.replay

    def start_async(self, module: Any, sampler_copy: Any, seed: int, rank: int, world_size: int) -> AsyncSampling:
        """Fork the sampler process of async sampling (after :meth:`build`, before the agent
        moves to its training device) and share ``module.train_state``'s update count with it.

        Args:
            module: The module (its agent, sampler and ``samples_to_buffer``).
            sampler_copy: A copy of ``module.sampler`` made before it was initialized.
            seed: Base seed of the envs.
            rank: DDP rank.
            world_size: DDP world size.
        """
        runner = AsyncSampling(
            sampler_copy, module.agent, self.replay, module.samples_to_buffer, seed=seed, rank=rank,
            world_size=world_size, replay_ratio=module.replay_ratio,
        )
        state = SharedTrainState(runner.counters.updates, runner.update_bell)
        state.load_state_dict(module.train_state.state_dict())
        module.train_state = state
        self.async_runner = runner
        runner.start()
        return runner

    def shutdown_async(self) -> None:
        """Stop the sampler process of async sampling (idempotent)."""
        if self.async_runner is not None:
            self.async_runner.shutdown()

    def dataset(self, module: Any, samples_to_buffer: Callable[[Any], Any]) -> ReplayDataset | AsyncReplayDataset:
        """The module's :class:`~lightning_rl.datasets.replay.ReplayDataset` over this replay (an
        :class:`~lightning_rl.datasets.async_replay.AsyncReplayDataset` with async sampling)."""
        parts = (module.sampler, module.agent, self.replay, module.train_state)
        schedule: dict[str, Any] = dict(
            iterations_per_epoch=module.iterations_per_epoch,
            batch_size=module.batch_size,
            replay_ratio=module.replay_ratio,
            min_steps_learn=module.min_steps_learn,
            updates_per_sync=module.updates_per_sync,
        )
        if self.async_runner is not None:
            return AsyncReplayDataset(self.async_runner, *parts, **schedule)
        return ReplayDataset(*parts, samples_to_buffer=samples_to_buffer, **schedule)


def samples_to_buffer(samples: Any) -> SamplesToBuffer:
    """The part of the sampler's ``Samples`` ``[T, B]`` a transition replay stores."""
    return SamplesToBuffer(
        observation=samples.env.observation,
        action=samples.agent.action,
        reward=samples.env.reward,
        done=samples.env.done,
        truncated=samples.env.truncated,
        prev_action=samples.agent.prev_action,
        prev_reward=samples.env.prev_reward,
    )


def frame_stack_of(observation: Any, declared: int | dict[str, int] | None) -> int | dict[str, int] | None:
    """How the replay stores the sampler's observations frame by frame: the env's declared
    :attr:`~lightning_rl.envs.Env.frame_stack`, checked against the sampler's observations.

    Only a declaration turns frame storage on: a uint8 ``[C, H, W]`` array alone may as well be
    an RGB image, whose channels are no frames (storing its last channel alone would corrupt it).

    Args:
        observation: The sampler's observation buffer ``[T, B, ...]`` (an array, or a
            namedarraytuple for dict and tuple observations).
        declared: What the env declares: ``C`` for an array observation, ``{dotted field path:
            C}`` (``{"pixels": 4}``, nested ``{"camera.left": 4}``) for a dict or tuple one, whose
            other fields are stored as they are; None for nothing.

    Returns:
        ``declared`` once checked (None for None).

    Raises:
        ValueError: If the declaration does not fit the observations: a count for a dict
            observation or a mapping for an array one, a path that names no field, or a stack
            that is not uint8 ``[C, H, W]`` with ``C`` the declared frames.
    """
    if declared is None:
        return None
    if isinstance(declared, dict) != isinstance(observation, tuple):
        kind = "a dict/tuple" if isinstance(observation, tuple) else "an array"
        want = "a mapping {field path: frames}" if isinstance(observation, tuple) else "an int frame count"
        raise ValueError(f"frame_stack: the env declares {declared!r} for {kind} observation, which takes {want}")
    if not isinstance(declared, dict):
        _check_stack(observation, declared, "its observations")
        return int(declared)
    leaves = dict(_leaf_paths(observation, ""))
    for path, frames in declared.items():
        if path not in leaves:
            raise ValueError(f"frame_stack: the env declares field {path!r}, but the observation has {sorted(leaves)}")
        _check_stack(leaves[path], frames, f"field {path!r}")
    return {path: int(frames) for path, frames in declared.items()}


def _check_stack(array: Any, frames: Any, what: str) -> None:
    shape = tuple(array.shape[2:])
    if not isinstance(frames, int) or array.dtype.name != "uint8" or len(shape) != 3 or shape[0] != frames:
        raise ValueError(
            f"frame_stack: the env declares {frames!r} frames, but {what} are {array.dtype.name} {list(shape)}; "
            f"frame storage needs uint8 [{frames}, H, W]"
        )


def _leaf_paths(observation: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for name, value in zip(observation._fields, observation, strict=True):
        if isinstance(value, tuple):
            yield from _leaf_paths(value, f"{prefix}{name}.")
        elif value is not None:
            yield f"{prefix}{name}", value


def uninitialized_copy(sampler: Any) -> Any:
    """A copy of a sampler that is not initialized yet (for the sampler process of async sampling)."""
    if sampler.initialized:
        raise ValueError("sampler: copy it before initialize()")
    return copy.deepcopy(sampler)


class AsyncShutdownCallback(pl.Callback):
    """Stops the sampler process of async sampling, and the training process's own sampler, when
    ``fit`` raises (Lightning calls no module ``teardown`` then): a failed async run leaves no
    process behind. The processes also end with the training process."""

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        pl_module.teardown("fit")
