"""digideep's memory: a queue of flat-dict trajectories and samplers made of composable units."""

from lightning_rl.memory.sampler import (
    CheckNaN,
    CheckShapes,
    FlattenTime,
    Gather,
    LastChunk,
    MemorySampler,
    NextObservations,
    PrintStats,
    RandomBatch,
    Sample,
    Sequences,
    ToTensor,
    Unit,
)
from lightning_rl.memory.storage import MemoryQueue

__all__ = [
    "CheckNaN",
    "CheckShapes",
    "FlattenTime",
    "Gather",
    "LastChunk",
    "MemoryQueue",
    "MemorySampler",
    "NextObservations",
    "PrintStats",
    "RandomBatch",
    "Sample",
    "Sequences",
    "ToTensor",
    "Unit",
]
