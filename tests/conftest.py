"""Test-wide settings."""

import torch

# The suite's networks are small MLPs: one thread is several times faster than two on the
# 2-core CI machine, where intra-op threads otherwise spin against each other.
torch.set_num_threads(1)
