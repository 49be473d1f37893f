"""Off-policy data: collect, append to the replay, then the replay batches the replay ratio asks for.

Each item of :class:`ReplayDataset` is one sampler iteration: the agent's newest weights are
published to the sampler, one ``[T, B]`` batch is collected and appended to the replay, and
``replay_ratio * T * B / batch_size`` replay batches (fractions carry over between iterations)
are sampled and stacked along a new leading ``[K]`` dim, so ``training_step`` runs ``K``
updates from one call (so Lightning's per-call cost is paid once per K updates). Before
``min_steps_learn`` env steps, an item is an empty tuple and ``training_step`` does nothing.

Every replay batch carries its own ``idxs`` and ``is_weights``, so priorities computed in
``training_step`` go back to the right rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.data.buffers import buffer_func
from lightning_rl.datasets.base import SamplerDataset
from lightning_rl.datasets.state import TrainState


class ReplayRatioDataset(SamplerDataset):
    """What the replay datasets share: a replay, trained on at a replay ratio.

    Args:
        sampler: The module's sampler (its ``batch_spec``).
        agent: The agent being trained.
        replay: A replay buffer (``append_samples``, ``sample_batch``).
        state: Counters shared with the LightningModule (checkpointed there).
        iterations_per_epoch: Sampler iterations per Lightning epoch (``__len__``).
        batch_size: Transitions (or sequences) per replay batch.
        replay_ratio: Replayed transitions per collected transition (rlpyt's ``replay_ratio``);
            ``batch_size * K / (T * B)`` on average.
        min_steps_learn: Env steps (this rank) collected before the first update.
        updates_per_sync: Publish the trained weights to the sampler every this many updates.
    """

    def __init__(
        self,
        sampler: Any,
        agent: BaseAgent,
        replay: Any,
        state: TrainState,
        iterations_per_epoch: int,
        batch_size: int,
        replay_ratio: float,
        min_steps_learn: int,
        updates_per_sync: int = 1,
    ) -> None:
        super().__init__(sampler, agent, state, iterations_per_epoch)
        self.replay = replay
        self.batch_size = batch_size
        self.updates_per_iteration = replay_ratio * sampler.batch_spec.size / batch_size
        self.min_steps_learn = min_steps_learn
        self.updates_per_sync = updates_per_sync


class ReplayDataset(ReplayRatioDataset):
    """Collects with the current agent into a replay and yields stacked replay batches.

    Args:
        samples_to_buffer: Turns the sampler's ``Samples`` ``[T, B]`` into what the replay stores
            (by keyword); the other arguments are :class:`ReplayRatioDataset`'s.
    """

    def __init__(self, *args: Any, samples_to_buffer: Callable[[Any], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.samples_to_buffer = samples_to_buffer

    def collect(self) -> Any:
        """One sampler iteration into the replay, then this iteration's replay batches."""
        if self.state.updates - self.state.updates_at_sync >= self.updates_per_sync:
            self.agent.sync_shared_memory()
            self.state.updates_at_sync = self.state.updates
        with self.profiler.profile("sampler"):
            samples = self.obtain()
            with self.profiler.profile("sampler/append"):
                self.replay.append_samples(self.samples_to_buffer(samples))
        n_updates = self.state.take_owed_updates(self.updates_per_iteration, self.min_steps_learn)
        if n_updates == 0:
            return ()
        with self.profiler.profile("sampler/replay_batches"):
            return stack_batches([self.replay.sample_batch(self.batch_size) for _ in range(n_updates)])


def stack_batches(batches: list[Any]) -> Any:
    """Stack same-structured batches along a new leading ``[K]`` dim (tensors or arrays)."""
    first = batches[0]
    if len(batches) == 1:
        return buffer_func(first, lambda x: x[None])
    leaves: list[list[Any]] = []
    for b in batches:
        flat: list[Any] = []
        buffer_func(b, flat.append)
        leaves.append(flat)
    stacked = iter([torch.stack([torch.as_tensor(group[i]) for group in leaves]) for i in range(len(leaves[0]))])
    return buffer_func(first, lambda _: next(stacked))
