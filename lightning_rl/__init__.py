"""lightning_rl: deep reinforcement learning on PyTorch Lightning."""

__version__ = "0.1.0"
