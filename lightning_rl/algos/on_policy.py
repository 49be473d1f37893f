"""What A2C and PPO share: the rollout dataset, the optimizer and its linear schedule, logging.

Each algorithm keeps its own loss and update loop in its own file (``a2c.py``, ``ppo.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from lightning_rl.algos.base import RLModule
from lightning_rl.algos.hparams import FRACTION, NON_NEGATIVE, hparam
from lightning_rl.datasets.on_policy import OnPolicyBatch, OnPolicyDataset


class OnPolicyAlgorithm(RLModule):
    """Base of policy-gradient algorithms trained on fresh rollouts (rlpyt ``PolicyGradientAlgo``).

    The agent (``CategoricalPgAgent``, ``GaussianPgAgent``, ff or lstm) must report ``value`` in
    its ``agent_info``; the sampler collects ``[T, B]`` rollouts with bootstrap values. The
    defaults are rlpyt's A2C's; PPO changes a few.
    """

    gae_lambda: float = hparam(1.0, "GAE lambda; 1 gives discounted returns with a bootstrap value.", check=FRACTION)
    value_loss_coeff: float = hparam(
        0.5, "Weight of the value loss ``0.5 * (return - V)^2``.", check=NON_NEGATIVE)
    entropy_loss_coeff: float = hparam(
        0.01, "Weight of the entropy bonus (subtracted from the loss).", check=NON_NEGATIVE)
    normalize_advantage: bool = hparam(False, "Standardize advantages over each rollout.")
    optimizer_eps = 1e-5
    clip_grad_norm = 1.0

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

    #: The dataset :meth:`make_dataset` builds (MultiAgentPPO's has one batch per agent).
    dataset_class: type[OnPolicyDataset] = OnPolicyDataset

    def make_dataset(self) -> OnPolicyDataset:
        return self.dataset_class(
            self.sampler,
            self.agent,
            self.train_state,
            iterations_per_epoch=self.iterations_per_epoch,
            discount=self.discount,
            gae_lambda=self.gae_lambda,
            normalize_advantage=self.normalize_advantage,
            recurrent=self.recurrent,
        )

    def policy_forward(self, batch: OnPolicyBatch, agent: Any = None) -> tuple[Any, torch.Tensor]:
        """``agent``'s (default: the module's) training forward pass over a (mini)batch: ``(dist_info, value)``."""
        agent = self.agent if agent is None else agent
        inputs = batch.agent_inputs
        if self.recurrent:
            dist_info, value, _ = agent(*inputs, batch.init_rnn_state)
        else:
            dist_info, value = agent(*inputs)
        return dist_info, value

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
