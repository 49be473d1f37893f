"""What A2C and PPO share: the rollout dataset, the optimizer and its linear schedule, logging.

Each algorithm keeps its own loss and update loop in its own file (``a2c.py``, ``ppo.py``).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from lightning_rl.agents.base import BaseAgent
from lightning_rl.samplers.base import BaseSampler
from lightning_rl.algos.base import RLModule, linear_decay, make_optimizer
from lightning_rl.datasets.on_policy import OnPolicyBatch, OnPolicyDataset


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
        optimizer: ``"adam"`` or ``"rmsprop"``.
        optimizer_eps: Epsilon of the optimizer.
        clip_grad_norm: Max global gradient norm; None disables clipping.
        normalize_advantage: Standardize advantages over each rollout.
        linear_lr_schedule: Decay the learning rate linearly to zero over ``total_env_steps``
            (a ``LambdaLR`` stepped once per rollout).
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
        discount: float = 0.99,
        gae_lambda: float = 1.0,
        value_loss_coeff: float = 0.5,
        entropy_loss_coeff: float = 0.01,
        learning_rate: float = 1e-3,
        optimizer: Literal["adam", "rmsprop"] = "adam",
        optimizer_eps: float = 1e-5,
        clip_grad_norm: float | None = 1.0,
        normalize_advantage: bool = False,
        linear_lr_schedule: bool = True,
        total_env_steps: int | None = None,
        log_interval_steps: int = 10_000,
        seed: int | None = None,
        checkpoint_sampler_state: bool = True,
        torch_threads: int | None = None,
    ) -> None:
        super().__init__(
            agent, sampler, total_env_steps, log_interval_steps, seed, checkpoint_sampler_state, torch_threads
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
        if linear_lr_schedule and total_env_steps is None:
            raise ValueError("linear_lr_schedule=True needs total_env_steps to know where the schedule ends")
        self.discount = discount
        self.gae_lambda = gae_lambda
        self.value_loss_coeff = value_loss_coeff
        self.entropy_loss_coeff = entropy_loss_coeff
        self.learning_rate = learning_rate
        self.optimizer_name = optimizer
        self.optimizer_eps = optimizer_eps
        self.clip_grad_norm = clip_grad_norm
        self.normalize_advantage = normalize_advantage
        self.linear_lr_schedule = linear_lr_schedule
        self.save_hyperparameters(ignore=["agent", "sampler"])

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
        optimizer = make_optimizer(
            self.optimizer_name, self.agent.parameters_for("model"), self.learning_rate, self.optimizer_eps
        )
        if not self.linear_lr_schedule:
            return optimizer
        per_rank_steps = self.total_env_steps / max(self.trainer.world_size, 1)
        total_itr = max(1, int(per_rank_steps // self.sampler.batch_spec.size))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_decay(total_itr))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def end_of_rollout(self, metrics: dict[str, Any], batch: OnPolicyBatch) -> None:
        """After the updates on ``batch``: step the LR schedule, fold its observations into the
        running normalization statistics (``normalize_observation``; after the updates, so the
        rollout was sampled and trained on with the same ones), publish weights and statistics
        to sampler workers and log once per rollout."""
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()
        all_gather = self.all_gather if self.trainer.world_size > 1 else None
        self.agent.update_obs_rms(batch.agent_inputs.observation, all_gather)
        self.agent.sync_shared_memory()
        metrics["train/learning_rate"] = self.optimizers().param_groups[0]["lr"]
        self.log_step_metrics(metrics)
