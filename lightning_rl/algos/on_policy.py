"""What A2C and PPO share: the rollout dataset, the optimizer and its linear schedule, logging.

Each algorithm keeps its own loss and update loop in its own file (``a2c.py``, ``ppo.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.optim import LRSchedulerCallable, OptimizerCallable, build_optimizer, with_lr_schedulers
from lightning_rl.datasets.on_policy import OnPolicyBatch, OnPolicyDataset
from lightning_rl.samplers.base import BaseSampler


class OnPolicyAlgorithm(RLModule):
    """Base of policy-gradient algorithms trained on fresh rollouts (rlpyt ``PolicyGradientAlgo``).

    Args:
        agent: A policy-gradient agent (``CategoricalPgAgent``, ``GaussianPgAgent``); it must
            report ``value`` in its ``agent_info``.
        sampler: Collects ``[T, B]`` rollouts; the algorithm asks it for bootstrap values.
        discount: Discount factor gamma.
        gae_lambda: GAE lambda; 1 gives discounted returns with a bootstrap value.
        value_loss_coeff: Weight of the value loss ``0.5 * (return - V)^2``.
        entropy_loss_coeff: Weight of the entropy bonus (subtracted from the loss).
        learning_rate: Initial learning rate.
        optimizer: Any torch optimizer (``class_path``/``init_args``; it gets ``lr=learning_rate``);
            None: Adam with ``optimizer_eps``.
        lr_scheduler: Any torch LR scheduler (``class_path``/``init_args``), one per optimizer, stepped
            once per sampler iteration; None: none.
        optimizer_eps: Epsilon of the default Adam.
        clip_grad_norm: Max global gradient norm; None disables clipping.
        normalize_advantage: Standardize advantages over each rollout.
        linear_lr_schedule: Decay the learning rate linearly to zero over ``total_env_steps``
            (set before each rollout's updates from the env steps collected so far).
        total_env_steps: Env-step budget (all ranks).
        log_interval_steps: Env steps per Lightning epoch.
        seed: Env base seed (default: ``seed_everything``'s).
        checkpoint_sampler_state: See :class:`RLModule`.
        torch_threads: See :class:`RLModule`.
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        *,
        discount: float,
        gae_lambda: float,
        value_loss_coeff: float,
        entropy_loss_coeff: float,
        learning_rate: float,
        optimizer: OptimizerCallable | None,
        lr_scheduler: LRSchedulerCallable | None,
        optimizer_eps: float,
        clip_grad_norm: float | None,
        normalize_advantage: bool,
        linear_lr_schedule: bool,
        total_env_steps: int | None,
        log_interval_steps: int,
        seed: int | None,
        checkpoint_sampler_state: bool,
        torch_threads: int | None,
    ) -> None:
        super().__init__(
            agent, sampler, total_env_steps=total_env_steps, log_interval_steps=log_interval_steps, seed=seed,
            checkpoint_sampler_state=checkpoint_sampler_state, torch_threads=torch_threads,
            lr_scheduler=lr_scheduler,
        )
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        if not 0.0 <= gae_lambda <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1], got {gae_lambda}")
        self.check_positive("learning_rate", learning_rate)
        self.check_positive("value_loss_coeff", value_loss_coeff, allow_zero=True)
        self.check_positive("entropy_loss_coeff", entropy_loss_coeff, allow_zero=True)
        if clip_grad_norm is not None:
            self.check_positive("clip_grad_norm", clip_grad_norm)
        if linear_lr_schedule and lr_scheduler is not None:
            raise ValueError("linear_lr_schedule=True and an lr_scheduler both set the learning rate: choose one")
        if linear_lr_schedule and total_env_steps is None:
            raise ValueError("linear_lr_schedule=True needs total_env_steps to know where the schedule ends")
        self.discount = discount
        self.gae_lambda = gae_lambda
        self.value_loss_coeff = value_loss_coeff
        self.entropy_loss_coeff = entropy_loss_coeff
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.optimizer_eps = optimizer_eps
        self.clip_grad_norm = clip_grad_norm
        self.normalize_advantage = normalize_advantage
        self.linear_lr_schedule = linear_lr_schedule
        self.save_hyperparameters(ignore=["agent", "sampler", "optimizer", "lr_scheduler"])

    @property
    def bootstrap_value(self) -> bool:
        return True

    @property
    def recurrent(self) -> bool:
        return bool(getattr(self.agent, "recurrent", False))

    def setup(self, stage: str) -> None:
        if self.recurrent and getattr(self.sampler, "collector", "wait_reset") != "wait_reset":
            raise ValueError(
                "recurrent agents train on whole [T, B] sequences and need collector='wait_reset' "
                f"in the sampler, got collector={self.sampler.collector!r}"
            )
        super().setup(stage)

    def make_dataset(self) -> OnPolicyDataset:
        return OnPolicyDataset(
            self.sampler,
            self.agent,
            self.train_state,
            iterations_per_epoch=self.iterations_per_epoch,
            discount=self.discount,
            gae_lambda=self.gae_lambda,
            normalize_advantage=self.normalize_advantage,
            recurrent=self.recurrent,
        )

    def policy_forward(self, batch: OnPolicyBatch) -> tuple[Any, torch.Tensor]:
        """The agent's training forward pass over a (mini)batch: ``(dist_info, value)``."""
        inputs = batch.agent_inputs
        if self.recurrent:
            dist_info, value, _ = self.agent(*inputs, batch.init_rnn_state)
        else:
            dist_info, value = self.agent(*inputs)
        return dist_info, value

    def configure_optimizers(self) -> Any:
        params = self.agent.parameters_for("model")
        optimizer = build_optimizer(self.optimizer, params, self.learning_rate, self.optimizer_eps)
        return with_lr_schedulers(optimizer, self.lr_scheduler)

    def optimizer_list(self) -> list[Any]:
        """``self.optimizers()`` as a list (Lightning returns a lone optimizer unwrapped)."""
        optimizers = self.optimizers()
        return optimizers if isinstance(optimizers, list) else [optimizers]

    def start_of_rollout(self) -> None:
        """Before the updates on a rollout: set the learning rates of the linear schedule (env steps)."""
        self.apply_lr_schedule(self.optimizer_list(), self.linear_lr_schedule)

    def end_of_rollout(self, metrics: dict[str, Any], batch: Any) -> None:
        """After the updates on ``batch``: fold its observations into the running normalization
        statistics (``normalize_observation``; after the updates, so the rollout was sampled and
        trained on with the same ones), publish weights and statistics to sampler workers and log
        once per rollout."""
        all_gather = self.all_gather if self.trainer.world_size > 1 else None
        self.update_obs_statistics(batch, all_gather)
        self.agent.sync_shared_memory()
        metrics["train/learning_rate"] = self.optimizer_list()[0].param_groups[0]["lr"]
        self.log_step_metrics(metrics)

    def update_obs_statistics(self, batch: Any, all_gather: Any) -> None:
        """Fold the rollout's observations into the agent's running statistics."""
        update = getattr(self.agent, "update_obs_rms", None)  # policy-gradient agents have it
        if update is not None:
            update(batch.agent_inputs.observation, all_gather)
