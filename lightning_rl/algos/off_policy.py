"""What DQN, C51, R2D1, DDPG, TD3 and SAC share, by composition: the replay and its checkpoint,
and the target-network update.

The replay (:class:`ReplaySetup`) is built in ``setup()`` from the sampler's sample buffer (so its
dtypes and shapes match the env), fed by :class:`~lightning_rl.datasets.replay.ReplayDataset`, and
saved in a side file ``<checkpoint>.replay-<pair>`` next to every Lightning checkpoint
(:class:`~lightning_rl.algos.checkpointing.RLCheckpointIO`; ``checkpoint_replay=False`` opts out for
huge buffers), so ``--ckpt_path last`` resumes with the
same buffer, epsilon and counters.

With ``async_sampling=True`` the sampler runs in its own process and writes into the replay in
shared memory while ``training_step`` trains (:mod:`lightning_rl.datasets.async_replay`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytorch_lightning as pl
import torch

from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.datasets.async_replay import AsyncReplayDataset, AsyncSampling, SharedTrainState
from lightning_rl.datasets.replay import ReplayDataset
from lightning_rl.replays import ReplayBuffer


class SamplesToBuffer(NamedArrayTupleBase):
    """What a transition replay stores per step (``[T, B]`` when appended)."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    truncated: Any
    prev_action: Any
    prev_reward: Any


class SequenceSamplesToBuffer(NamedArrayTupleBase):
    """What the R2D1 replay stores per step: transitions plus the agent's incoming LSTM state."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    truncated: Any
    prev_action: Any
    prev_reward: Any
    prev_rnn_state: Any


class PrioritizedSequenceSamplesToBuffer(NamedArrayTupleBase):
    """:class:`SequenceSamplesToBuffer` plus each row's input priority (float32)."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    truncated: Any
    prev_action: Any
    prev_reward: Any
    prev_rnn_state: Any
    priority: Any


class ReplaySetup:
    """The replay of an off-policy algorithm, composed into its module (not a base class).

    DQN, C51, R2D1, DDPG, TD3 and SAC each build one from their own ``__init__`` arguments; the
    module's :class:`~lightning_rl.algos.base.RLModule` calls :meth:`prepare_agent` before the
    sampler starts, :meth:`build` after it, and saves/loads :attr:`replay` with checkpoints.

    Args:
        batch_size: Transitions (or sequences) per replay batch.
        replay_size: Transitions the replay holds (per rank).
        replay_ratio: Replayed per collected transitions (``batch_size * updates / (T * B)``).
        min_steps_learn: Env steps (per rank) before the first update.
        n_step_return: n of the n-step return targets.
        discount: Discount factor gamma.
        prioritized_replay: Prioritized experience replay (Schaul et al. 2016).
        pri_alpha: Priority exponent alpha.
        pri_beta_init: Initial importance-sampling exponent beta.
        pri_beta_final: Final beta.
        pri_beta_steps: Updates over which beta anneals linearly to ``pri_beta_final``.
        default_priority: Priority of new transitions.
        updates_per_sync: Updates between publishing weights to the sampler's agent.
        checkpoint_replay: Save the replay next to each checkpoint (``<path>.replay``).
        async_sampling: Run the sampler in its own process, writing into a shared-memory replay
            while ``training_step`` trains, with the replay ratio held by throttling whichever
            side is faster (:mod:`lightning_rl.datasets.async_replay`). False: sample a batch,
            then train on it, in the training process.

    Raises:
        ValueError: Naming the first bad argument.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        replay_size: int,
        replay_ratio: float,
        min_steps_learn: int,
        n_step_return: int,
        discount: float,
        updates_per_sync: int,
        checkpoint_replay: bool,
        prioritized_replay: bool = False,
        pri_alpha: float = 0.6,
        pri_beta_init: float = 0.4,
        pri_beta_final: float = 1.0,
        pri_beta_steps: int = 1,
        default_priority: float = 1.0,
        async_sampling: bool = False,
    ) -> None:
        for name, value in (("batch_size", batch_size), ("replay_size", replay_size), ("n_step_return", n_step_return),
                            ("updates_per_sync", updates_per_sync)):
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value}")
        if not replay_ratio > 0:
            raise ValueError(f"replay_ratio must be > 0, got {replay_ratio}")
        if not min_steps_learn >= 0:
            raise ValueError(f"min_steps_learn must be >= 0, got {min_steps_learn}")
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        if prioritized_replay:
            for name, number in (("pri_alpha", pri_alpha), ("pri_beta_init", pri_beta_init),
                                 ("pri_beta_final", pri_beta_final)):
                if not number >= 0:
                    raise ValueError(f"{name} must be >= 0, got {number}")
            for name, number in (("pri_beta_steps", pri_beta_steps), ("default_priority", default_priority)):
                if not number > 0:
                    raise ValueError(f"{name} must be > 0, got {number}")
        self.batch_size = int(batch_size)
        self.replay_size = int(replay_size)
        self.replay_ratio = replay_ratio
        self.min_steps_learn = min_steps_learn
        self.n_step_return = int(n_step_return)
        self.discount = discount
        self.prioritized_replay = prioritized_replay
        self.pri_alpha = pri_alpha
        self.pri_beta_init = pri_beta_init
        self.pri_beta_final = pri_beta_final
        self.pri_beta_steps = pri_beta_steps
        self.default_priority = default_priority
        self.updates_per_sync = int(updates_per_sync)
        self.checkpoint_replay = checkpoint_replay
        self.async_sampling = bool(async_sampling)
        self.replay: ReplayBuffer | None = None
        #: The sampler process of async sampling (started by :meth:`start_async`).
        self.async_runner: AsyncSampling | None = None

    def prepare_agent(self, agent: Any, batch_size: int, pretrain_uniform: bool | None = None) -> None:
        """Tell the agent the first learning iteration (before the sampler forks its workers)."""
        if hasattr(agent, "set_min_itr_learn"):
            min_itr = self.min_steps_learn // batch_size
            if pretrain_uniform is None:
                agent.set_min_itr_learn(min_itr)
            else:
                agent.set_min_itr_learn(min_itr, uniform=pretrain_uniform)

    def build(self, module: Any, seed: int) -> ReplayBuffer:
        """Allocate the replay for one step of what ``module.samples_to_buffer`` stores, with
        ``module.replay_kwargs()`` (frame storage, sequences) and the sampler's ``B`` envs."""
        self.replay = ReplayBuffer(
            module.samples_to_buffer(module.sampler.samples)[0, 0],
            size=self.replay_size,
            B=module.sampler.batch_spec.B,
            discount=self.discount,
            n_step_return=self.n_step_return,
            prioritized=self.prioritized_replay,
            alpha=self.pri_alpha,
            beta=self.pri_beta_init,
            beta_final=self.pri_beta_final,
            beta_anneal_steps=self.pri_beta_steps if self.prioritized_replay else None,
            default_priority=self.default_priority,
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
            world_size=world_size, replay_ratio=self.replay_ratio,
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
            batch_size=self.batch_size,
            replay_ratio=self.replay_ratio,
            min_steps_learn=self.min_steps_learn,
            updates_per_sync=self.updates_per_sync,
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


class SoftTargetUpdate:
    """``target <- tau * online + (1 - tau) * target`` for all of an agent's target networks.

    The one target-update helper of every off-policy algorithm. The pairs come from
    ``agent.target_pairs()``; their tensor lists are cached at the first call (after the
    Trainer placed the model), and :meth:`reset` drops them (call it when tensors may have been
    replaced, e.g. at ``on_train_start``). One fused ``torch._foreach_lerp_`` moves all floating
    tensors (``tau=1``: a copy); integer buffers are copied.
    """

    def __init__(self) -> None:
        self._lists: tuple[list[torch.Tensor], ...] | None = None

    def reset(self) -> None:
        self._lists = None

    def _build(self, agent: Any) -> tuple[list[torch.Tensor], ...]:
        soft_dst, soft_src, hard_dst, hard_src = [], [], [], []
        for target, online in agent.target_pairs():
            t_state = dict(target.named_parameters())
            t_state.update(target.named_buffers())
            o_state = dict(online.named_parameters())
            o_state.update(online.named_buffers())
            if t_state.keys() != o_state.keys():
                differ = sorted(t_state.keys() ^ o_state.keys())
                raise ValueError(f"target network does not match its online network: {differ}")
            for name, dst in t_state.items():
                src = o_state[name].detach()
                if dst.is_floating_point():
                    soft_dst.append(dst)
                    soft_src.append(src)
                else:
                    hard_dst.append(dst)
                    hard_src.append(src)
        return soft_dst, soft_src, hard_dst, hard_src

    @torch.no_grad()
    def __call__(self, agent: Any, tau: float) -> None:
        if self._lists is None:
            self._lists = self._build(agent)
        soft_dst, soft_src, hard_dst, hard_src = self._lists
        if tau == 1.0:
            torch._foreach_copy_(soft_dst, soft_src)
        else:
            torch._foreach_lerp_(soft_dst, soft_src, tau)
        if hard_dst:
            torch._foreach_copy_(hard_dst, hard_src)


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
