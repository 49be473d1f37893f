"""IterableDatasets that turn samplers (and replays) into Lightning training batches."""

from lightning_rl.datasets.on_policy import OnPolicyBatch, OnPolicyDataset, iterate_minibatches
from lightning_rl.datasets.state import TrainState

__all__ = ["OnPolicyBatch", "OnPolicyDataset", "TrainState", "iterate_minibatches"]
