"""The part every RL dataset shares: a fixed number of sampler iterations per epoch, timed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pytorch_lightning.profilers import PassThroughProfiler, Profiler
from torch.utils.data import IterableDataset, get_worker_info

from lightning_rl.agents.base import BaseAgent
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers.base import check_finite_samples


class SamplerDataset(IterableDataset):
    """An IterableDataset whose items each come from one sampler iteration.

    It has a ``__len__`` (iterations per Lightning epoch), so Lightning does not fetch an item
    ahead: every item is collected after the previous ``training_step`` has updated the weights.
    Subclasses implement :meth:`collect` with :meth:`obtain` at its core.

    Args:
        sampler: An initialized sampler.
        agent: The agent the sampler acts with.
        state: Counters shared with the LightningModule (checkpointed there).
        iterations_per_epoch: Items per Lightning epoch.
    """

    def __init__(self, sampler: Any, agent: BaseAgent, state: TrainState, iterations_per_epoch: int) -> None:
        super().__init__()
        if iterations_per_epoch < 1:
            raise ValueError(f"iterations_per_epoch must be >= 1, got {iterations_per_epoch}")
        self.sampler = sampler
        self.agent = agent
        self.state = state
        self.iterations_per_epoch = iterations_per_epoch
        # The module puts the Trainer's profiler here; the default costs nothing.
        self.profiler: Profiler = PassThroughProfiler()

    def __len__(self) -> int:
        return self.iterations_per_epoch

    def __iter__(self) -> Iterator[Any]:
        if get_worker_info() is not None:
            raise ValueError(
                f"{type(self).__name__} runs in the training process only (DataLoader num_workers=0): a "
                "DataLoader worker would step its own copy of the sampler, envs and replay, with stale weights"
            )
        for _ in range(self.iterations_per_epoch):
            yield self.collect()

    def collect(self) -> Any:
        """One item: a sampler iteration and what the algorithm trains on from it."""
        raise NotImplementedError(f"{type(self).__name__} must implement collect()")

    def obtain(self) -> Any:
        """Collect one ``[T, B]`` batch, check it (NaN or infinite observations and rewards raise,
        unless the sampler's ``check_finite`` is off), count it and keep its finished episodes.

        Returns:
            The sampler's ``Samples`` buffer (overwritten by the next call).
        """
        itr = self.state.itr
        t0 = time.perf_counter()
        with self.profiler.profile("sampler/obtain"):
            samples, traj_infos = self.sampler.obtain_samples(itr)
        self.state.sampler_time += time.perf_counter() - t0
        if getattr(self.sampler, "check_finite", False):
            check_finite_samples(samples, itr, self.sampler.env_id, self.sampler.env_ranks,
                                 pending=self.sampler.step_buffer.observation)
        self.agent.train_mode(itr)
        self.state.record_rollout(self.sampler.batch_spec.size, traj_infos)
        return samples
