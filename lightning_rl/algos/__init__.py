"""Algorithms, one LightningModule per file."""

from lightning_rl.algos.a2c import A2C
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.categorical_dqn import CategoricalDQN
from lightning_rl.algos.ddpg import DDPG
from lightning_rl.algos.dqn import DQN
from lightning_rl.algos.multiagent_ppo import MultiAgentPPO
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.algos.ppo import PPO
from lightning_rl.algos.r2d1 import R2D1
from lightning_rl.algos.sac import SAC
from lightning_rl.algos.td3 import TD3

__all__ = ["A2C", "OnPolicyAlgorithm", "PPO", "RLModule"]
__all__ += ["CategoricalDQN", "DQN"]
__all__ += ["MultiAgentPPO"]
__all__ += ["DDPG", "SAC", "TD3"]
__all__ += ["R2D1"]
