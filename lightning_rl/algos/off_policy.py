"""What DQN, C51, R2D1, DDPG, TD3 and SAC share: :class:`OffPolicyAlgorithm`, the replay
hyperparameters and their replay (composed, :class:`~lightning_rl.algos.replay_setup.ReplaySetup`),
asynchronous sampling, uniform pretraining and the target-network update.

The replay is built in ``setup()`` from the sampler's sample buffer (so its dtypes and shapes
match the env), fed by :class:`~lightning_rl.datasets.replay.ReplayDataset`, and saved in a side
file ``<checkpoint>.replay-<pair>`` next to every Lightning checkpoint
(:class:`~lightning_rl.algos.checkpointing.RLCheckpointIO`; ``checkpoint_replay=False`` opts out for
huge buffers), so ``--ckpt_path last`` resumes with the same buffer, epsilon and counters.

With ``async_sampling=True`` the sampler runs in its own process and writes into the replay in
shared memory while ``training_step`` trains (:mod:`lightning_rl.datasets.async_replay`).
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch

from lightning_rl.algos.base import RLModule
from lightning_rl.algos.hparams import INT_AT_LEAST_0, INT_AT_LEAST_1, POSITIVE, TAU, hparam
from lightning_rl.algos.replay_setup import (
    AsyncShutdownCallback,
    ReplaySetup,
    frame_stack_of,
    samples_to_buffer,
    uninitialized_copy,
)

__all__ = ["OffPolicyAlgorithm", "SoftTargetUpdate", "frame_stack_of", "samples_to_buffer"]


class OffPolicyAlgorithm(RLModule):
    """Base of the algorithms that learn from a replay of past transitions (or sequences).

    Subclasses implement ``training_step`` over the ``[K, N]`` replay batches of one sampler
    iteration (``K = replay_ratio * T * B / batch_size`` on average, none before
    ``min_steps_learn``), calling :meth:`update_target` after each counted update.
    """

    batch_size: int = hparam(32, "Transitions (R2D1: sequences) per replay batch.", check=INT_AT_LEAST_1)
    replay_size: int = hparam(1_000_000, "Transitions the replay holds (per rank).", check=INT_AT_LEAST_1)
    replay_ratio: float = hparam(
        8.0, "Replayed per collected transitions: ``replay_ratio * T * B / batch_size`` updates per iteration "
        "(fractions carry over).", check=POSITIVE)
    min_steps_learn: int = hparam(50_000, "Env steps (per rank) collected before the first update.",
                                  check=INT_AT_LEAST_0)
    n_step_return: int = hparam(1, "n of the n-step return targets.", check=INT_AT_LEAST_1)
    target_update_tau: float = hparam(
        1.0, "Step of the target update ``target <- tau * online + (1 - tau) * target``, in (0, 1] (1: copy).",
        check=TAU)
    target_update_interval: int = hparam(1, "Updates between target-network updates.", check=INT_AT_LEAST_1)
    pretrain_uniform: bool | None = hparam(
        None, "Act uniformly at random before ``min_steps_learn``; False: with the agent's own pretraining "
        "noise; None: as the agent decides (DQN: its epsilon schedule).")
    updates_per_sync: int = hparam(1, "Updates between publishing weights to the sampler's agent.",
                                   check=INT_AT_LEAST_1)
    checkpoint_replay: bool = hparam(True, "Save the replay next to each checkpoint (``<checkpoint>.replay-*``).")
    async_sampling: bool = hparam(
        False, "Run the sampler in its own process, writing into a shared-memory replay while training runs, "
        "at the same replay ratio.")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.replay_setup = ReplaySetup(self)
        self.soft_target_update = SoftTargetUpdate()

    @property
    def replay(self) -> Any:
        """The replay buffer once built (None before ``setup``)."""
        return self.replay_setup.replay

    def initialize_sampler(self, stage: str, seed: int, rank: int, world_size: int) -> None:
        setup = self.replay_setup
        # Before the sampler starts (and forks) its workers, so their agent copies see it too.
        setup.prepare_agent(self.agent, self.sampler.batch_spec.size, self.pretrain_uniform)
        run_async = setup.async_sampling and stage == "fit"
        sampler_copy = uninitialized_copy(self.sampler) if run_async else None
        super().initialize_sampler(stage, seed, rank, world_size)
        if run_async:
            # Forked while the agent is still on CPU; the training process's sampler only evaluates.
            setup.build(self, seed=seed * 1000 + rank)
            setup.start_async(self, sampler_copy, seed=seed, rank=rank, world_size=world_size)

    def setup(self, stage: str) -> None:
        ready = self._sampler_ready
        super().setup(stage)
        if not ready and stage == "fit" and not self.replay_setup.async_sampling:
            # Allocated from one step of the sampler's buffer (its dtypes and shapes).
            rank = self.trainer.global_rank if self._trainer is not None else 0
            self.replay_setup.build(self, seed=self._base_seed() * 1000 + rank)

    def samples_to_buffer(self, samples: Any) -> Any:
        """The part of the sampler's ``Samples`` ``[T, B]`` the replay stores (transitions)."""
        return samples_to_buffer(samples)

    def replay_kwargs(self) -> dict[str, Any]:
        """Extra :class:`~lightning_rl.replays.ReplayBuffer` arguments (frame storage, sequences, priorities)."""
        samples = self.sampler.samples
        assert samples is not None, "the sampler is initialized in setup()"
        return {"frame_stack": frame_stack_of(samples.env.observation, self.sampler.frame_stack)}

    def make_dataset(self) -> Any:
        return self.replay_setup.dataset(self, self.samples_to_buffer)

    def teardown(self, stage: str) -> None:
        if self._sampler_ready and stage == "fit":
            self.replay_setup.shutdown_async()
        super().teardown(stage)

    def configure_callbacks(self) -> list[pl.Callback]:
        callbacks = super().configure_callbacks()
        if self.replay_setup.async_sampling:
            callbacks.insert(len(callbacks) - 1, AsyncShutdownCallback())  # the base's EndOfIteration stays last
        return callbacks

    def on_train_start(self) -> None:
        super().on_train_start()
        self.soft_target_update.reset()

    def end_of_iteration(self) -> None:
        runner = self.replay_setup.async_runner
        if runner is not None:
            self.log_step_metrics(runner.metrics(self.train_state.updates))
        super().end_of_iteration()

    def update_target(self) -> None:
        """Move the target networks by ``target_update_tau`` every ``target_update_interval`` updates."""
        if self.train_state.updates % self.target_update_interval == 0:
            self.soft_target_update(self.agent, self.target_update_tau)


class SoftTargetUpdate:
    """``target <- tau * online + (1 - tau) * target`` for all of an agent's target networks.

    The one target-update helper of every off-policy algorithm. The pairs come from
    ``agent.target_pairs()``; their tensor lists are cached at the first call (after the
    Trainer placed the model), and :meth:`reset` drops them (call it when tensors may have been
    replaced, e.g. at ``on_train_start``). Floating tensors move by ``lerp_`` (``tau=1``: a copy);
    integer buffers are copied.
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
        for dst, src in zip(soft_dst, soft_src, strict=True):
            if tau == 1.0:
                dst.copy_(src)
            else:
                dst.lerp_(src, tau)
        for dst, src in zip(hard_dst, hard_src, strict=True):
            dst.copy_(src)


