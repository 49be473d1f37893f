"""Algorithms, one LightningModule per file."""

from lightning_rl.algos.a2c import A2C
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.on_policy import OnPolicyAlgorithm
from lightning_rl.algos.ppo import PPO

__all__ = ["A2C", "OnPolicyAlgorithm", "PPO", "RLModule"]
