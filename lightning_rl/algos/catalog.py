"""Every algorithm, imported: LightningCLI finds ``--model PPO`` and ``class_path`` short names
among the subclasses of :class:`~lightning_rl.algos.RLModule` that are loaded
(``lightning_rl.algos`` itself loads each on first use)."""

from lightning_rl.algos.a2c import A2C
from lightning_rl.algos.categorical_dqn import CategoricalDQN
from lightning_rl.algos.ddpg import DDPG
from lightning_rl.algos.dqn import DQN
from lightning_rl.algos.multiagent_ppo import MultiAgentPPO
from lightning_rl.algos.ppo import PPO
from lightning_rl.algos.r2d1 import R2D1
from lightning_rl.algos.sac import SAC
from lightning_rl.algos.td3 import TD3

__all__ = ["A2C", "DDPG", "DQN", "PPO", "R2D1", "SAC", "TD3", "CategoricalDQN", "MultiAgentPPO"]
