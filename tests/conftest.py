"""Test-wide settings."""

import os

import torch

# The suite's networks are small MLPs: one thread is several times faster than two on the
# 2-core CI machine, where intra-op threads otherwise spin against each other.
torch.set_num_threads(1)
# LightningCLI calls jsonargparse functions that jsonargparse deprecates (Lightning's to change), as
# the lightning-rl command says too (lightning_cli.quiet_lightning).
os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")
