"""The DataLoader every algorithm's dataset (training and evaluation) goes through."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

__all__ = ["rl_data_loader"]


def _keep_batch(batch: Any) -> Any:
    return batch


def rl_data_loader(dataset: IterableDataset) -> DataLoader:
    """``DataLoader(dataset, batch_size=None)`` in the training process, drawing nothing from the
    global torch generator.

    Every new DataLoader iterator draws a base seed (for worker processes, which lightning_rl never
    uses) from its ``generator``, the global torch generator by default. A run resumed in the middle
    of an epoch starts an iterator where the uninterrupted run did not, and that one draw would
    shift every later action and minibatch; a generator of its own leaves the global one alone.
    """
    return DataLoader(
        dataset, batch_size=None, num_workers=0, collate_fn=_keep_batch, generator=torch.Generator().manual_seed(0)
    )
