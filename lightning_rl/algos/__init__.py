"""Algorithms, one LightningModule per file, each with its loss as a pure function."""

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

__all__ = ["A2C", "OnPolicyAlgorithm", "PPO", "RLModule", "a2c_loss", "ppo_loss"]
__all__ += ["CategoricalDQN", "DQN", "R2D1", "categorical_dqn_loss", "dqn_loss", "r2d1_loss"]
__all__ += ["MultiAgentPPO"]
__all__ += ["DDPG", "SAC", "TD3", "ddpg_mu_loss", "ddpg_q_loss", "sac_loss"]
