"""Replay buffers composed from storage x replay index x batch type (rlpyt section 13).

Use :class:`ReplayBuffer`; the parts are public for algorithms that need something else.
"""

from lightning_rl.replays.buffer import ReplayBuffer
from lightning_rl.replays.frames import CompositeFrameReplayStorage, FrameReplayStorage, FrameRing
from lightning_rl.replays.index import ReplayIndex
from lightning_rl.replays.n_step import SamplesFromReplay, compute_n_step_targets, extract_transitions
from lightning_rl.replays.prioritized import PrioritizedIndex
from lightning_rl.replays.sequence import SequenceSamplesFromReplay, extract_sequence_batch
from lightning_rl.replays.shared import RWLock, allocate
from lightning_rl.replays.storage import ReplayStorage
from lightning_rl.replays.sum_tree import SumTree
from lightning_rl.replays.uniform import UniformIndex

__all__ = [
    "CompositeFrameReplayStorage",
    "FrameReplayStorage",
    "FrameRing",
    "PrioritizedIndex",
    "RWLock",
    "ReplayBuffer",
    "ReplayIndex",
    "ReplayStorage",
    "SamplesFromReplay",
    "SequenceSamplesFromReplay",
    "SumTree",
    "UniformIndex",
    "allocate",
    "compute_n_step_targets",
    "extract_sequence_batch",
    "extract_transitions",
]
