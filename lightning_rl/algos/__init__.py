"""Algorithms, one LightningModule per file, each with its loss as a pure function.

The names load on first use (PEP 562): ``from lightning_rl.algos import PPO`` imports
``algos/ppo.py`` and what it needs, not the replay machinery of the off-policy algorithms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_rl.lazy import lazy_attributes

#: Where each public name lives (module under ``lightning_rl.algos``).
_MODULES = {
    "A2C": "a2c", "a2c_loss": "a2c",
    "PPO": "ppo", "ppo_loss": "ppo",
    "MultiAgentPPO": "multiagent_ppo",
    "OnPolicyAlgorithm": "on_policy",
    "OffPolicyAlgorithm": "off_policy",
    "RLModule": "base",
    "DQN": "dqn", "dqn_loss": "dqn",
    "CategoricalDQN": "categorical_dqn", "categorical_dqn_loss": "categorical_dqn",
    "R2D1": "r2d1", "r2d1_loss": "r2d1",
    "DDPG": "ddpg", "ddpg_mu_loss": "ddpg", "ddpg_q_loss": "ddpg",
    "TD3": "td3",
    "SAC": "sac", "sac_loss": "sac",
    "hparam": "hparams", "hyperparameters": "hparams",
}

__all__ = ["A2C", "OnPolicyAlgorithm", "PPO", "RLModule", "a2c_loss", "ppo_loss"]
__all__ += ["CategoricalDQN", "DQN", "R2D1", "categorical_dqn_loss", "dqn_loss", "r2d1_loss"]
__all__ += ["MultiAgentPPO"]
__all__ += ["DDPG", "SAC", "TD3", "ddpg_mu_loss", "ddpg_q_loss", "sac_loss"]

if TYPE_CHECKING:
    from lightning_rl.algos.a2c import A2C, a2c_loss
    from lightning_rl.algos.base import RLModule
    from lightning_rl.algos.categorical_dqn import CategoricalDQN, categorical_dqn_loss
    from lightning_rl.algos.ddpg import DDPG, ddpg_mu_loss, ddpg_q_loss
    from lightning_rl.algos.dqn import DQN, dqn_loss
    from lightning_rl.algos.multiagent_ppo import MultiAgentPPO
    from lightning_rl.algos.on_policy import OnPolicyAlgorithm
    from lightning_rl.algos.ppo import PPO, ppo_loss
    from lightning_rl.algos.r2d1 import R2D1, r2d1_loss
    from lightning_rl.algos.sac import SAC, sac_loss
    from lightning_rl.algos.td3 import TD3


__getattr__, __dir__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in _MODULES.items()})
