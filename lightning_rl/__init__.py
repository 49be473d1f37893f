"""lightning_rl: deep reinforcement learning on PyTorch Lightning."""

__version__ = "0.2.0"
