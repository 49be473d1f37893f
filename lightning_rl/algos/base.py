"""The LightningModule every algorithm builds on: agent, sampler, env-step budgets, exact resume.

Flow (DESIGN.md): ``setup()`` builds this rank's sampler, envs and models; ``train_dataloader()``
wraps the algorithm's IterableDataset in ``DataLoader(batch_size=None)``; ``training_step`` updates
with manual optimization; an epoch is ``log_interval_steps`` env steps. Checkpoints carry the
counters, the sampler state, RNG states and the shuffle generator, so resumes are exact.

Direct updates: :meth:`RLModule.update_step` calls ``zero_grad``, ``backward``, the gradient
clip and ``step`` itself when nothing would see Lightning's per-update hooks (one device, 32-bit,
no hook overridden; see :meth:`RLModule.direct_updates_safe`), with the same arithmetic and
counters as Lightning's manual optimization, which it uses otherwise.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.profilers import PassThroughProfiler, Profiler
from torch.utils.data import DataLoader, IterableDataset

from lightning_rl.agents.base import BaseAgent
from lightning_rl.algos.checkpointing import (
    RLCheckpointIO,
    load_data,
    load_module_state,
    migrate_config,
    migrate_hyperparameters,
    save_before_stopping,
    save_module_state,
)
from lightning_rl.algos.data_loader import rl_data_loader
from lightning_rl.algos.loading import module_from_config
from lightning_rl.algos.off_policy import (
    AsyncShutdownCallback,
    ReplaySetup,
    frame_stack_of,
    samples_to_buffer,
    uninitialized_copy,
)
from lightning_rl.algos.optim import (
    FiniteCheck,
    LRSchedulerCallable,
    OptimizerCallable,
    build_optimizer,
    check_finite_parameters,
    clip_grad_norm_,
    direct_updates_safe,
    mean_metrics,
    mean_over_ranks,
    step_lr_schedulers,
    update_step,
)
from lightning_rl.data.buffers import buffer_to
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers.base import BaseSampler

__all__ = ["LRSchedulerCallable", "OptimizerCallable", "RLModule", "build_optimizer", "clip_grad_norm_", "mean_metrics"]

_NO_PROFILER = PassThroughProfiler()


class RLModule(pl.LightningModule):
    """Base class of lightning_rl algorithms (manual optimization, env-step budgets).

    Subclasses implement :meth:`make_dataset`, ``training_step`` and ``configure_optimizers``.

    Args:
        agent: The acting policy (``class_path``/``init_args`` in YAML); its models are built in
            ``setup()`` from the env's spaces.
        sampler: Collects ``[T, B]`` batches (serial, CPU or GPU sampler, ...). Holds the env id.
        total_env_steps: The env-step budget, counted over all DDP ranks: training stops before any
            sampler iteration would step envs past it (at the last whole iteration within it);
            None: no limit beyond the Trainer's own.
        log_interval_steps: Env steps per Lightning epoch, counted over all DDP ranks as the budget is
            (in whole sampler iterations, at least one): the logging, checkpoint and evaluation
            interval.
        seed: Base seed of the envs; default: the seed given to ``seed_everything``, else 0.
        checkpoint_sampler_state: Put the sampler state (for the serial sampler: the envs' state,
            as data) into checkpoints so resumes are exact.
        torch_threads: Threads for torch's CPU ops in the training process (``None``: torch's
            default). Small MLPs train several times faster with 1, most of all when other
            processes (sampler workers) share the cores.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer,
            stepped once per sampler iteration and checkpointed; None: none.
    """

    agent: BaseAgent
    sampler: BaseSampler

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        *,
        total_env_steps: int | None,
        log_interval_steps: int,
        seed: int | None,
        checkpoint_sampler_state: bool,
        torch_threads: int | None,
        lr_scheduler: LRSchedulerCallable | None = None,
    ) -> None:
        super().__init__()
        if torch_threads is not None and torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1 or None, got {torch_threads}")
        if total_env_steps is not None and total_env_steps <= 0:
            raise ValueError(f"total_env_steps must be positive, got {total_env_steps}")
        if log_interval_steps <= 0:
            raise ValueError(f"log_interval_steps must be positive, got {log_interval_steps}")
        self.automatic_optimization = False
        self.agent = agent
        self.sampler = sampler
        self.total_env_steps = total_env_steps
        self.log_interval_steps = log_interval_steps
        self.seed = seed
        self.checkpoint_sampler_state = checkpoint_sampler_state
        self.torch_threads = torch_threads
        self.lr_scheduler = lr_scheduler
        self.train_state = TrainState()
        self.minibatch_generator = np.random.default_rng(self._base_seed())
        self._sampler_ready = False
        #: Allow the direct update path (see the module docstring); False forces Lightning's path.
        self.direct_updates = True
        self._direct = False
        self._finite_check: FiniteCheck | None = None
        #: Off-policy algorithms compose a replay here (built in ``setup``, saved with checkpoints).
        self.replay_setup: ReplaySetup | None = None
        #: Off-policy algorithms: act uniformly before ``min_steps_learn`` (None: the agent decides).
        self.pretrain_uniform: bool | None = None
        #: The model's config as plain data (``{class_path, init_args}``), set by the CLI and saved in
        #: checkpoints, so that :meth:`load_from_checkpoint` needs nothing but the path.
        self.run_config: dict[str, Any] | None = None
        #: ``(return, length)`` of each episode of the last ``validate``/``test`` evaluation.
        self.eval_episodes: list[tuple[float, float]] = []

    def _base_seed(self) -> int:
        if self.seed is not None:
            return int(self.seed)
        return int(os.environ.get("PL_GLOBAL_SEED", 0))

    @property
    def bootstrap_value(self) -> bool:
        """Whether the sampler must store the value of each rollout's last observation."""
        return False

    def setup(self, stage: str) -> None:
        """Build this rank's envs and sampler and the agent's models (once per process)."""
        if self._sampler_ready:
            return
        if self.torch_threads is not None:
            torch.set_num_threads(self.torch_threads)
        if self.replay_setup is not None:
            # Before the sampler starts (and forks) its workers, so their agent copies see it too.
            self.replay_setup.prepare_agent(self.agent, self.sampler.batch_spec.size, self.pretrain_uniform)
        rank = self.trainer.global_rank if self._trainer is not None else 0
        world_size = self.trainer.world_size if self._trainer is not None else 1
        seed = self._base_seed()
        self.minibatch_generator = np.random.default_rng([seed, rank])
        run_async = self.replay_setup is not None and self.replay_setup.async_sampling and stage == "fit"
        sampler_copy = uninitialized_copy(self.sampler) if run_async else None
        self.sampler.initialize(
            self.agent, seed=seed, rank=rank, world_size=world_size, bootstrap_value=self.bootstrap_value
        )
        if run_async:
            assert self.replay_setup is not None
            # Forked while the agent is still on CPU; the training process's sampler only evaluates.
            self.replay_setup.build(self, seed=seed * 1000 + rank)
            self.replay_setup.start_async(self, sampler_copy, seed=seed, rank=rank, world_size=world_size)
        device = self.trainer.strategy.root_device if self._trainer is not None else torch.device("cpu")
        self.agent.to_device(device)
        self._sampler_ready = True
        if self.replay_setup is not None and stage == "fit" and not run_async:
            # Allocated from one step of the sampler's buffer (its dtypes and shapes).
            self.replay_setup.build(self, seed=seed * 1000 + rank)
        if self._trainer is not None and not isinstance(self.trainer.strategy.checkpoint_io, RLCheckpointIO):
            strategy = self.trainer.strategy
            strategy.checkpoint_io = RLCheckpointIO(strategy.checkpoint_io)

    @property
    def replay(self) -> Any:
        """The replay buffer of an off-policy algorithm once built (None before ``setup`` or on-policy)."""
        return None if self.replay_setup is None else self.replay_setup.replay

    def samples_to_buffer(self, samples: Any) -> Any:
        """The part of the sampler's ``Samples`` ``[T, B]`` the replay stores (transitions)."""
        return samples_to_buffer(samples)

    def replay_kwargs(self) -> dict[str, Any]:
        """Extra :class:`~lightning_rl.replays.ReplayBuffer` arguments (frame storage, sequences)."""
        samples = self.sampler.samples
        assert samples is not None, "the sampler is initialized in setup()"
        return {"frame_stack": frame_stack_of(samples.env.observation, self.sampler.frame_stack)}

    def teardown(self, stage: str) -> None:
        if self._sampler_ready and stage == "fit":
            if self.replay_setup is not None:
                self.replay_setup.shutdown_async()
            self.sampler.shutdown()
            self._sampler_ready = False

    @property
    def iterations_per_epoch(self) -> int:
        """Sampler iterations in one Lightning epoch: ``log_interval_steps`` env steps over all ranks, in
        whole iterations (at least one)."""
        return max(1, self.log_interval_steps // self.steps_per_iteration)

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one sampler iteration collects over all ranks (``batch_T * batch_B * world size``)."""
        world = self.trainer.world_size if self._trainer is not None else 1
        return self.sampler.batch_spec.size * world

    def make_dataset(self) -> IterableDataset:
        """The algorithm's IterableDataset over the sampler (and replay)."""
        if self.replay_setup is not None:
            return self.replay_setup.dataset(self, self.samples_to_buffer)
        raise NotImplementedError(f"{type(self).__name__} must implement make_dataset()")

    def train_dataloader(self) -> DataLoader:
        # batch_size=None: the dataset yields whole batches; workers would copy the sampler.
        # The identity collate keeps batches as they are (no per-item conversion pass).
        dataset = self.make_dataset()
        if hasattr(dataset, "profiler"):
            # The dataset times its sections ("sampler/obtain", ...) with the Trainer's profiler.
            dataset.profiler = self.profiler
        return rl_data_loader(dataset)

    @property
    def profiler(self) -> Profiler:
        """The Trainer's profiler: a no-op ``PassThroughProfiler`` unless ``Trainer(profiler=...)``."""
        return cast(Any, self._trainer).profiler if self._trainer is not None else _NO_PROFILER

    def configure_callbacks(self) -> list[pl.Callback]:
        """Episode statistics and throughput are part of every run."""
        from lightning_rl.callbacks import EpisodeStatsCallback, ThroughputCallback

        callbacks: list[pl.Callback] = [EpisodeStatsCallback(), ThroughputCallback()]
        if self.replay_setup is not None and self.replay_setup.async_sampling:
            callbacks.append(AsyncShutdownCallback())
        # Last of the module's callbacks, before every ModelCheckpoint (Lightning runs those last).
        callbacks.append(EndOfIteration())
        return callbacks

    def val_dataloader(self) -> Any:
        # Fit evaluates through EvaluationCallback; only `validate` uses the validation loop.
        if self._trainer is None or self.trainer.state.fn != "validate":
            return []
        return self.test_dataloader()

    def test_dataloader(self) -> Any:
        """Evaluation episodes (``validate`` and ``test`` both run them, logged as ``eval/...``)."""
        from lightning_rl.callbacks.evaluation import EvaluationDataset

        return rl_data_loader(EvaluationDataset(self))

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log_dict({k: float(v) for k, v in batch.items()}, batch_size=1)

    test_step = validation_step

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        return buffer_to(batch, device, non_blocking=device.type == "cuda")

    def on_train_start(self) -> None:
        self._direct = self.direct_updates and self.direct_updates_safe()
        self._finite_check = FiniteCheck(self.float_parameters())  # fixed during fit; made once for row 14's check

    def float_parameters(self) -> list[torch.Tensor]:
        return [p for p in self.parameters() if p.is_floating_point()]

    def direct_updates_safe(self) -> bool:
        """Whether an update may bypass Lightning's hook dispatch without changing anything."""
        return self._trainer is not None and direct_updates_safe(self, self.trainer)

    def update_step(
        self,
        optimizers: Sequence[Any],
        loss: torch.Tensor,
        clip_grad_norm: float | None | Sequence[float | None] = None,
    ) -> None:
        """One update of ``optimizers`` on ``loss`` (not counted): :func:`~lightning_rl.algos.optim.update_step`,
        direct or through Lightning (see the module docstring); ``FloatingPointError`` on a non-finite loss."""
        update_step(self, optimizers, loss, clip_grad_norm, direct=self._direct)

    def optimize(self, optimizer: Any, loss: torch.Tensor, clip_grad_norm: float | None) -> None:
        """One counted update of one optimizer (:meth:`update_step`), timed as ``learner/update`` by a
        profiler (the default no-op one is skipped: entering its context costs more than it seems)."""
        profiler = self.profiler
        if type(profiler) is PassThroughProfiler:
            self.update_step([optimizer], loss, clip_grad_norm)
        else:
            with profiler.profile("learner/update"):
                self.update_step([optimizer], loss, clip_grad_norm)
        self.train_state.updates += 1

    def schedule_factor(self) -> float:
        """``1 - env steps (all ranks) before this iteration / total_env_steps``: the linear
        schedule's factor, from checkpointed counters only (a resume continues the schedule)."""
        if self.total_env_steps is None:
            return 1.0
        world = self.trainer.world_size if self._trainer is not None else 1
        before = max(self.train_state.itr - 1, 0) * self.sampler.batch_spec.size * world
        return max(1.0 - before / self.total_env_steps, 0.0)

    def apply_lr_schedule(self, optimizers: Sequence[Any], linear: bool) -> None:
        """Set every parameter group's ``lr`` to its ``initial_lr`` (kept in the group, as torch's
        schedulers do, so it travels with the optimizer state) times :meth:`schedule_factor`."""
        if not linear:
            return
        factor = self.schedule_factor()
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor

    @property
    def budget_reached(self) -> bool:
        """Whether the next sampler iteration would step envs past ``total_env_steps`` (over all
        ranks): a budget that is not a whole number of iterations stops at the last whole one."""
        total = self.total_env_steps
        return total is not None and self.global_env_steps + self.steps_per_iteration > total

    def logging_due(self) -> bool:
        """Whether this sampler iteration's metrics are logged.

        Every ``Trainer(log_every_n_steps)`` iterations, at the last iteration of each epoch (so
        epoch-end callbacks such as EarlyStopping see fresh values) and at the end of the budget;
        Lightning's per-key bookkeeping costs as much as a small update (DESIGN.md).
        """
        itr = self.train_state.itr
        every = cast(Any, self.trainer).log_every_n_steps if self._trainer is not None else 1
        return itr % max(every, 1) == 0 or itr % self.iterations_per_epoch == 0 or self.budget_reached

    def log_step_metrics(self, metrics: dict[str, Any], reduce: bool = True) -> None:
        """Log a sampler iteration's aggregates, with env steps (over all ranks) as the x-axis.

        They go to the loggers directly (``logger.log_metrics(..., step=env_steps)``, DESIGN.md "One
        x-axis") and into ``trainer.callback_metrics`` for callbacks and the progress display, without
        Lightning's per-key ``self.log`` bookkeeping, which costs more than a small update. Under DDP
        the mean over ranks unless ``reduce`` is False (values equal on every rank already): one
        all-reduce, which every rank reaches, since :meth:`logging_due` is the same on every rank.
        """
        if not self.logging_due() or self._trainer is None:
            return
        trainer = self.trainer
        values = {k: float(v) for k, v in (mean_over_ranks(trainer, metrics) if reduce else metrics).items()}
        tensors = torch.tensor(list(values.values())).unbind()  # one tensor op for all of them
        trainer.callback_metrics.update(zip(values, tensors, strict=True))
        if trainer.is_global_zero:
            step = int(self.global_env_steps)
            for logger in trainer.loggers:
                logger.log_metrics(values, step=step)

    @property
    def global_env_steps(self) -> int:
        """Env steps over all ranks (each rank runs the same schedule)."""
        world = self.trainer.world_size if self._trainer is not None else 1
        return self.train_state.env_steps * world

    def end_of_iteration(self) -> None:
        """After each sampler iteration's ``training_step``: the finite check, the LR schedulers'
        step, the budget; when the run stops, the checkpoints of a stop in the middle of an epoch.

        Called by :class:`EndOfIteration` before any ``ModelCheckpoint`` saves at the batch's end
        (``every_n_train_steps``), so such a checkpoint holds the whole iteration (a LightningModule's
        own ``on_train_batch_end`` runs after every callback's).
        """
        self.check_finite_parameters()
        if self.lr_scheduler is not None:  # manual optimization: stepped here, once per iteration
            step_lr_schedulers(self.lr_schedulers())
        runner = None if self.replay_setup is None else self.replay_setup.async_runner
        if runner is not None:
            self.log_step_metrics(runner.metrics(self.train_state.updates))
        trainer = self.trainer
        # ModelCheckpoint names files by ``step`` (``{epoch}-{step}``): env steps, the x-axis, kept
        # current at every iteration, so checkpoints saved within an epoch get names of their own.
        trainer.callback_metrics["step"] = torch.tensor(float(self.global_env_steps))
        if self.budget_reached:
            trainer.should_stop = True
        if trainer.should_stop:
            save_before_stopping(trainer, self)

    def check_finite_parameters(self) -> None:
        """Raise ``FloatingPointError`` naming the parameters that hold a NaN or an infinity, after
        every training step (:func:`~lightning_rl.algos.optim.check_finite_parameters`, row 14)."""
        check_finite_parameters(self, self._finite_check or FiniteCheck(self.float_parameters()))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        save_module_state(self, checkpoint)

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: Any, map_location: Any = None, hparams_file: Any = None, strict: bool | None = None,
        weights_only: bool | None = None, **kwargs: Any,
    ) -> Any:
        """Lightning's ``load_from_checkpoint``, reading the file as data only.

        ``PPO.load_from_checkpoint(path)`` needs nothing else when the checkpoint carries its config
        (every checkpoint of a ``lightning-rl`` run does): the agent, sampler and hyperparameters are
        built from it, then the weights and counters are loaded. Given ``agent``/``sampler`` keyword
        arguments (or a checkpoint without a config), Lightning's own loading runs.

        Raises:
            ValueError: If ``weights_only`` is False, the file would need unpickling (nothing in it
                runs), or the checkpoint's module is not a ``cls``.
        """
        if weights_only is False:
            raise ValueError("lightning_rl reads checkpoints as data only (weights_only=True); drop weights_only")
        data = load_data(checkpoint_path)  # refuses a file that needs unpickling, naming it
        config = (data.get("lightning_rl") or {}).get("config")
        if config and not kwargs and hparams_file is None:
            return module_from_config(cls, migrate_config(config), data, map_location)
        # Lightning's own loading, from the hyperparameters in today's form (older versions named
        # the optimizer): handed over as an in-memory copy of the checkpoint.
        data["hyper_parameters"] = migrate_hyperparameters(data.get("hyper_parameters") or {})
        buffer = io.BytesIO()
        torch.save(data, buffer)
        buffer.seek(0)
        return super().load_from_checkpoint(
            buffer, map_location=map_location, hparams_file=hparams_file, strict=strict, weights_only=True, **kwargs,
        )

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        load_module_state(self, checkpoint)

    @staticmethod
    def check_positive(name: str, value: float, allow_zero: bool = False) -> None:
        """Raise ``ValueError`` naming ``name`` unless ``value`` is positive (or zero if allowed)."""
        if value < 0 or (value == 0 and not allow_zero) or (isinstance(value, float) and math.isnan(value)):
            raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


class EndOfIteration(pl.Callback):
    """Calls :meth:`RLModule.end_of_iteration` at the end of every training batch."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        pl_module.end_of_iteration()
