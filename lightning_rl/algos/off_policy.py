"""What DQN, C51, R2D1, DDPG, TD3 and SAC share: the replay, its schedule and its checkpoint.

The replay is built in ``setup()`` from the sampler's sample buffer (so its dtypes and shapes
match the env), fed by :class:`~lightning_rl.datasets.replay.ReplayDataset`, and saved in a side
file ``<checkpoint>.replay`` next to every Lightning checkpoint (``checkpoint_replay=False`` opts
out for huge buffers), so ``--ckpt_path last`` resumes with the same buffer, epsilon and counters.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from lightning_fabric.plugins import CheckpointIO, TorchCheckpointIO

from lightning_rl.agents.base import BaseAgent
from lightning_rl.algos.base import RLModule
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.datasets.replay import ReplayDataset
from lightning_rl.replays import ReplayBuffer
from lightning_rl.samplers.base import BaseSampler

REPLAY_KEY = "lightning_rl_replay"


class SamplesToBuffer(NamedArrayTupleBase):
    """What a transition replay stores per step (``[T, B]`` when appended)."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    timeout: Any
    prev_action: Any
    prev_reward: Any


class OffPolicyAlgorithm(RLModule):
    """Base of replay-based algorithms.

    Args:
        agent: The acting agent (with target networks where the algorithm needs them).
        sampler: Collects ``[T, B]`` batches; ``T * B`` env steps per iteration.
        batch_size: Transitions per replay batch.
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
        total_env_steps: See :class:`RLModule` (and the remaining arguments).
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        batch_size: int = 32,
        replay_size: int = 100_000,
        replay_ratio: float = 8.0,
        min_steps_learn: int = 5_000,
        n_step_return: int = 1,
        discount: float = 0.99,
        prioritized_replay: bool = False,
        pri_alpha: float = 0.6,
        pri_beta_init: float = 0.4,
        pri_beta_final: float = 1.0,
        pri_beta_steps: int = 100_000,
        default_priority: float = 1.0,
        updates_per_sync: int = 1,
        checkpoint_replay: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        super().__init__(
            agent, sampler, total_env_steps, log_interval_steps, seed, checkpoint_sampler_state, torch_threads
        )
        for name, value in (("batch_size", batch_size), ("replay_size", replay_size), ("n_step_return", n_step_return),
                            ("updates_per_sync", updates_per_sync)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.check_positive("replay_ratio", replay_ratio)
        self.check_positive("min_steps_learn", min_steps_learn, allow_zero=True)
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        self.batch_size = batch_size
        self.replay_size = replay_size
        self.replay_ratio = replay_ratio
        self.min_steps_learn = min_steps_learn
        self.n_step_return = n_step_return
        self.discount = discount
        self.prioritized_replay = prioritized_replay
        self.pri_alpha = pri_alpha
        self.pri_beta_init = pri_beta_init
        self.pri_beta_final = pri_beta_final
        self.pri_beta_steps = pri_beta_steps
        self.default_priority = default_priority
        self.updates_per_sync = updates_per_sync
        self.checkpoint_replay = checkpoint_replay
        self.replay: ReplayBuffer | None = None

    # ----- replay -----

    def samples_to_buffer(self, samples: Any) -> Any:
        """The part of the sampler's ``Samples`` ``[T, B]`` the replay stores."""
        return SamplesToBuffer(
            observation=samples.env.observation,
            action=samples.agent.action,
            reward=samples.env.reward,
            done=samples.env.done,
            timeout=samples.env.timeout,
            prev_action=samples.agent.prev_action,
            prev_reward=samples.env.prev_reward,
        )

    def replay_kwargs(self) -> dict[str, Any]:
        """Extra :class:`ReplayBuffer` arguments (frame storage, sequences) of an algorithm."""
        frame_stack = None
        observation = self.sampler.samples.env.observation
        if observation.dtype.name == "uint8" and observation.ndim == 5:
            # [T, B, frames, H, W] Atari stacks: store each frame once.
            frame_stack = int(observation.shape[2])
        return {"frame_stack": frame_stack}

    def build_replay(self) -> ReplayBuffer:
        example = self.samples_to_buffer(self.sampler.samples)[0, 0]
        rank = self.trainer.global_rank if self._trainer is not None else 0
        return ReplayBuffer(
            example,
            size=self.replay_size,
            B=self.sampler.batch_spec.B,
            discount=self.discount,
            n_step_return=self.n_step_return,
            prioritized=self.prioritized_replay,
            alpha=self.pri_alpha,
            beta=self.pri_beta_init,
            beta_final=self.pri_beta_final,
            beta_anneal_steps=self.pri_beta_steps if self.prioritized_replay else None,
            default_priority=self.default_priority,
            seed=self._base_seed() * 1000 + rank,
            **self.replay_kwargs(),
        )

    def setup(self, stage: str) -> None:
        ready = self._sampler_ready
        if not ready and hasattr(self.agent, "set_min_itr_learn"):
            # Before the sampler starts (and forks) its workers, so their agent copies see it too.
            self.agent.set_min_itr_learn(self.min_steps_learn // self.sampler.batch_spec.size)
        super().setup(stage)
        if ready or stage != "fit":
            return
        self.replay = self.build_replay()
        if self.checkpoint_replay:
            strategy = self.trainer.strategy
            strategy.checkpoint_io = ReplayCheckpointIO(strategy.checkpoint_io)

    def make_dataset(self) -> ReplayDataset:
        return ReplayDataset(
            self.sampler,
            self.agent,
            self.replay,
            self.train_state,
            iterations_per_epoch=self.iterations_per_epoch,
            batch_size=self.batch_size,
            replay_ratio=self.replay_ratio,
            min_steps_learn=self.min_steps_learn,
            samples_to_buffer=self.samples_to_buffer,
            updates_per_sync=self.updates_per_sync,
        )

    # ----- checkpoints -----

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        if self.checkpoint_replay and self.replay is not None:
            # Taken out by ReplayCheckpointIO into the side file, never into the .ckpt itself.
            checkpoint[REPLAY_KEY] = self.replay.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        if REPLAY_KEY in checkpoint and self.replay is not None:
            self.replay.load_state_dict(checkpoint[REPLAY_KEY])


class ReplayCheckpointIO(CheckpointIO):
    """Writes the replay of a checkpoint to ``<path>.replay`` and reads it back on load.

    Wraps the strategy's own CheckpointIO, so checkpoints themselves stay small and loadable
    with ``torch.load(weights_only=True)``; the side file also holds only tensors and plain values.
    """

    def __init__(self, inner: CheckpointIO | None) -> None:
        self.inner = inner or TorchCheckpointIO()

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        replay_state = checkpoint.pop(REPLAY_KEY, None)
        self.inner.save_checkpoint(checkpoint, path, storage_options)
        if replay_state is not None:
            tmp = f"{path}.replay.tmp"
            torch.save(replay_state, tmp)
            os.replace(tmp, f"{path}.replay")
            checkpoint[REPLAY_KEY] = replay_state

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        checkpoint = self.inner.load_checkpoint(path, map_location=map_location, weights_only=weights_only)
        side = f"{path}.replay"
        if os.path.exists(side):
            checkpoint[REPLAY_KEY] = torch.load(side, map_location="cpu", weights_only=True)
        return checkpoint

    def remove_checkpoint(self, path: Any) -> None:
        self.inner.remove_checkpoint(path)
        if os.path.exists(f"{path}.replay"):
            os.remove(f"{path}.replay")

    def teardown(self) -> None:
        self.inner.teardown()
