"""The LightningModule every algorithm builds on: agent, sampler, hyperparameters, env-step budgets,
the one update path (:meth:`RLModule.optimize`), exact resume.

``setup()`` builds this rank's sampler, envs and models; ``train_dataloader()`` wraps the
algorithm's IterableDataset; ``training_step`` updates with manual optimization; an epoch is
``log_interval_steps`` env steps. Checkpoints carry counters, sampler state, RNG states and the
shuffle generator, so resumes are exact. Hyperparameters are declared once
(:mod:`lightning_rl.algos.hparams`); every subclass gets a flat keyword-only ``__init__``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.profilers import PassThroughProfiler, Profiler
from torch.utils.data import DataLoader, IterableDataset

from lightning_rl.agents.base import BaseAgent
from lightning_rl.algos import private_fast_paths
from lightning_rl.algos.checkpointing import RLCheckpointIO, load_module_state, save_before_stopping, save_module_state
from lightning_rl.algos.data_loader import rl_data_loader
from lightning_rl.algos.episode_stats import EpisodeStatsCallback
from lightning_rl.algos.hparams import FRACTION, INT_AT_LEAST_1, POSITIVE, bind, hparam, install_init
from lightning_rl.algos.loading import CheckpointLoading
from lightning_rl.algos.optim import (
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
    with_lr_schedulers,
)
from lightning_rl.algos.throughput import ThroughputCallback
from lightning_rl.data.buffers import buffer_to
from lightning_rl.datasets.evaluation import EvaluationDataset
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers.base import BaseSampler

__all__ = [
    "LRSchedulerCallable", "OptimizerCallable", "RLModule", "build_optimizer", "clip_grad_norm_", "mean_metrics",
    "private_fast_paths",
]

_NO_PROFILER = PassThroughProfiler()
#: A max gradient norm: one for all optimizers, one per optimizer, or None.
Clip = float | None | Sequence[float | None]


class RLModule(CheckpointLoading, pl.LightningModule):
    """Base class of lightning_rl algorithms (manual optimization, env-step budgets).

    Subclasses declare their hyperparameters (:func:`~lightning_rl.algos.hparams.hparam`) and
    implement :meth:`make_dataset`, ``training_step`` and ``configure_optimizers``; cross-parameter
    checks go in :meth:`check_hyperparameters`, other state in :meth:`__post_init__`.
    """

    agent: BaseAgent
    sampler: BaseSampler

    total_env_steps: int | None = hparam(
        None, "The env-step budget, counted over all DDP ranks: training stops before any sampler iteration "
        "would step envs past it; None: no limit beyond the Trainer's.", check=POSITIVE)
    log_interval_steps: int = hparam(
        10_000, "Env steps per Lightning epoch, counted over all DDP ranks (in whole sampler iterations, at "
        "least one): the logging, checkpoint and evaluation interval.", check=INT_AT_LEAST_1)
    seed: int | None = hparam(None, "Env base seed; None: the seed given to ``seed_everything``, else 0.")
    checkpoint_sampler_state: bool = hparam(
        True, "Put the sampler state (the envs' state, as data) into checkpoints so resumes are exact.")
    torch_threads: int | None = hparam(
        None, "Threads for torch's CPU ops in the training process (None: torch's default); small MLPs "
        "train fastest with 1.", check=INT_AT_LEAST_1)
    discount: float = hparam(0.99, "Discount factor gamma.", check=FRACTION)
    learning_rate: float = hparam(
        1e-3, "Initial learning rate (of the policy, where critics have their own).", check=POSITIVE)
    optimizer: OptimizerCallable | None = hparam(
        None, "Any torch optimizer (``class_path``/``init_args``; it gets each network's learning rate); "
        "None: Adam with ``optimizer_eps``.")
    optimizer_eps: float = hparam(1e-8, "Epsilon of the default Adam.", check=POSITIVE)
    lr_scheduler: LRSchedulerCallable | None = hparam(
        None, "Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped once per "
        "sampler iteration and checkpointed; None: none.")
    linear_lr_schedule: bool = hparam(
        False, "Decay the learning rates linearly to zero over ``total_env_steps`` (set before each "
        "iteration's updates from the env steps collected so far).")
    clip_grad_norm: float | None = hparam(
        None, "Max gradient norm of each optimizer's parameters; None: no clipping.", check=POSITIVE)
    direct_updates: bool = hparam(
        True, "Skip Lightning's per-update hook dispatch when nothing uses it (same updates, less time).")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_init(cls, RLModule)

    def __init__(self, agent: BaseAgent, sampler: BaseSampler, **hparams: Any) -> None:
        super().__init__()
        # Every hyperparameter, checked; Lightning's save_hyperparameters reads this frame's `hparams`.
        hparams = bind(type(self), hparams)
        for name, value in hparams.items():
            setattr(self, name, value)
        self.automatic_optimization = False
        self.agent = agent
        self.sampler = sampler
        self.train_state = TrainState()
        self.minibatch_generator = np.random.default_rng(self._base_seed())
        self._sampler_ready = False
        self._direct = False
        self._finite_tensors: list[torch.Tensor] | None = None
        self._finite_at_updates: int | None = None  # train_state.updates when last checked
        #: The model's config as plain data (``{class_path, init_args}``), set by the CLI and saved in
        #: checkpoints, so that :meth:`load_from_checkpoint` needs nothing but the path.
        self.run_config: dict[str, Any] | None = None
        #: ``(return, length)`` of each episode of the last ``validate``/``test`` evaluation.
        self.eval_episodes: list[tuple[float, float]] = []
        #: Whether ``validate``/``test`` act with the policy's mode (``Trainer.validate(deterministic=...)``).
        self.eval_deterministic = True
        self.check_hyperparameters()
        self.__post_init__()
        self.save_hyperparameters(ignore=["agent", "sampler", "optimizer", "lr_scheduler"])

    def check_hyperparameters(self) -> None:
        """Raise ``ValueError`` on a bad combination of hyperparameters (each value is checked already)."""
        if self.linear_lr_schedule and self.lr_scheduler is not None:
            raise ValueError("linear_lr_schedule=True and an lr_scheduler both set the learning rate: choose one")
        if self.linear_lr_schedule and self.total_env_steps is None:
            raise ValueError("linear_lr_schedule=True needs total_env_steps to know where the schedule ends")

    def __post_init__(self) -> None:
        """After the hyperparameters are set and checked: build what else the algorithm holds."""

    #: The replay that checkpoints save with an off-policy algorithm (None here).
    replay_setup: Any = None

    @property
    def replay(self) -> Any:
        """The replay buffer (None: this algorithm has none)."""
        return None

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
        rank = self.trainer.global_rank if self._trainer is not None else 0
        world_size = self.trainer.world_size if self._trainer is not None else 1
        seed = self._base_seed()
        self.minibatch_generator = np.random.default_rng([seed, rank])
        self.initialize_sampler(stage, seed=seed, rank=rank, world_size=world_size)
        device = self.trainer.strategy.root_device if self._trainer is not None else torch.device("cpu")
        self.agent.to_device(device)
        self._sampler_ready = True
        if self._trainer is not None and not isinstance(self.trainer.strategy.checkpoint_io, RLCheckpointIO):
            strategy = self.trainer.strategy
            strategy.checkpoint_io = RLCheckpointIO(strategy.checkpoint_io)

    def initialize_sampler(self, stage: str, seed: int, rank: int, world_size: int) -> None:
        """Initialize the sampler (its envs, the agent's models), before the agent moves to its device."""
        self.sampler.initialize(
            self.agent, seed=seed, rank=rank, world_size=world_size, bootstrap_value=self.bootstrap_value
        )

    def teardown(self, stage: str) -> None:
        if self._sampler_ready and stage == "fit":
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
        # EndOfIteration last of the module's callbacks, before every ModelCheckpoint (Lightning runs those last).
        return [EpisodeStatsCallback(), ThroughputCallback(), EndOfIteration()]

    def val_dataloader(self) -> Any:
        # Fit evaluates through EvaluationCallback; only `validate` uses the validation loop.
        if self._trainer is None or self.trainer.state.fn != "validate":
            return []
        return self.test_dataloader()

    def test_dataloader(self) -> Any:
        """Evaluation episodes (``validate`` and ``test`` both run them, logged as ``eval/...``)."""
        return rl_data_loader(EvaluationDataset(self))

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.log_dict({k: float(v) for k, v in batch.items()}, batch_size=1)

    test_step = validation_step

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        return buffer_to(batch, device, non_blocking=device.type == "cuda")

    def on_train_start(self) -> None:
        self._direct = self.direct_updates and self.direct_updates_safe()
        self._finite_tensors = self.float_parameters()  # fixed during fit: listed once

    def float_parameters(self) -> list[torch.Tensor]:
        return [p for p in self.parameters() if p.is_floating_point()]

    def direct_updates_safe(self) -> bool:
        """Whether an update may bypass Lightning's hook dispatch without changing anything."""
        return self._trainer is not None and direct_updates_safe(self, self.trainer)

    def build_optimizer(self, params: Any, learning_rate: float | None = None) -> torch.optim.Optimizer:
        """``optimizer`` (or Adam with ``optimizer_eps``) over ``params`` at ``learning_rate``."""
        lr = self.learning_rate if learning_rate is None else learning_rate
        return build_optimizer(self.optimizer, params, lr, self.optimizer_eps)

    def with_lr_schedulers(self, optimizers: Any) -> Any:
        """``optimizers`` as ``configure_optimizers`` returns them, with ``lr_scheduler``'s schedulers."""
        return with_lr_schedulers(optimizers, self.lr_scheduler)

    def configure_optimizers(self) -> Any:
        """One optimizer over the agent's model, with ``lr_scheduler``'s schedulers."""
        return self.with_lr_schedulers(self.build_optimizer(self.agent.parameters_for("model")))

    def optimize(self, optimizers: Any, loss: torch.Tensor, clip_grad_norm: Clip, count: int = 1) -> None:
        """The one update path (:func:`~lightning_rl.algos.optim.update_step`) of ``optimizers`` (one or
        a list; disjoint parameters) on ``loss``: finite-loss check, zero grads, one backward, clip
        (``clip_grad_norm``: one for all, one per optimizer, or None), step each, then
        ``train_state.updates += count`` (0: a step inside a counted update). Timed as
        ``learner/update`` by a profiler (the default no-op one is skipped: entering its context costs
        more than it seems)."""
        listed = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
        profiler = self.profiler
        if type(profiler) is PassThroughProfiler:
            update_step(self, listed, loss, clip_grad_norm, direct=self._direct)
        else:
            with profiler.profile("learner/update"):
                update_step(self, listed, loss, clip_grad_norm, direct=self._direct)
        self.train_state.updates += count

    def optimizer_list(self) -> list[Any]:
        """``self.optimizers()`` as a list (Lightning returns a lone optimizer unwrapped)."""
        optimizers = self.optimizers()
        return optimizers if isinstance(optimizers, list) else [optimizers]

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
        Lightning's per-key bookkeeping costs as much as a small update.
        """
        itr = self.train_state.itr
        every = cast(Any, self.trainer).log_every_n_steps if self._trainer is not None else 1
        return itr % max(every, 1) == 0 or itr % self.iterations_per_epoch == 0 or self.budget_reached

    def log_step_metrics(self, metrics: dict[str, Any], reduce: bool = True) -> None:
        """Log a sampler iteration's aggregates against env steps (all ranks), to the loggers and
        ``trainer.callback_metrics`` directly (Lightning's per-key ``self.log`` bookkeeping costs more
        than a small update). Under DDP the mean over ranks unless ``reduce`` is False: one all-reduce,
        which every rank reaches (:meth:`logging_due` is the same on every rank)."""
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

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self.apply_lr_schedule(self.optimizer_list(), self.linear_lr_schedule)

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
        every training step that updated them (:func:`~lightning_rl.algos.optim.check_finite_parameters`).
        Parameters change only in updates: after the first iteration, one without an update (the
        random steps before an off-policy algorithm starts learning) has nothing new to check."""
        updates = self.train_state.updates
        if updates == self._finite_at_updates:
            return
        check_finite_parameters(self, self._finite_tensors or self.float_parameters())
        self._finite_at_updates = updates

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        save_module_state(self, checkpoint)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        load_module_state(self, checkpoint)


class EndOfIteration(pl.Callback):
    """Calls :meth:`RLModule.end_of_iteration` at the end of every training batch."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        pl_module.end_of_iteration()
