"""Memory queue of flat-dict trajectories and its sampler units."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from lightning_rl.memory import (
    CheckNaN,
    CheckShapes,
    FlattenTime,
    Gather,
    LastChunk,
    MemoryQueue,
    MemorySampler,
    NextObservations,
    PrintStats,
    RandomBatch,
    Sample,
    Sequences,
    ToTensor,
)

B = 3


def chunk(start: int, T: int) -> dict[str, np.ndarray]:
    """Steps ``start .. start+T-1`` of B envs; every entry encodes (env, global step)."""
    steps = np.arange(start, start + T)
    code = 1000 * np.arange(B)[:, None] + steps[None, :]  # [B, T]
    return {
        "/observations": np.stack([code, -code], axis=-1).astype(np.float32),  # [B, T, 2]
        "/masks": np.ones((B, T, 1), np.float32),
        "/rewards": (code[..., None] % 7).astype(np.float32),
        "/agents/a/actions": code.astype(np.int64),
        "/agents/a/artifacts/log_prob": -code[..., None].astype(np.float32),
        "/agents/b/actions": (code % 2).astype(np.int64),
    }


def filled(capacity: int, chunks: list[int]) -> MemoryQueue:
    memory = MemoryQueue(capacity)
    start = 0
    for T in chunks:
        memory.store(chunk(start, T))
        start += T
    return memory


def test_store_keeps_keys_dtypes_and_order():
    memory = filled(10, [4, 3])
    assert len(memory) == 7 and memory.size == 7 * B and not memory.full
    assert memory.keys() == list(chunk(0, 1))
    assert memory.buffers["/agents/a/actions"].dtype == np.int64
    assert memory.buffers["/observations"].shape == (B, 10, 2)
    np.testing.assert_array_equal(memory.chronological("/agents/a/actions"), chunk(0, 7)["/agents/a/actions"])


def test_new_data_replaces_the_oldest_when_full():
    memory = filled(5, [3, 3, 2])  # 8 steps into a ring of 5: steps 3..7 remain
    assert len(memory) == 5 and memory.full and memory.total_steps == 8 and memory.last_T == 2
    for key, value in chunk(3, 5).items():
        np.testing.assert_array_equal(memory.chronological(key), value, err_msg=key)
    # The ring wrapped: the head is where step 8 will go.
    assert memory.head == 8 % 5


def test_tensors_are_stored_as_copies():
    memory = MemoryQueue(4)
    data = {k: torch.as_tensor(v) for k, v in chunk(0, 2).items()}
    memory.store(data)
    data["/rewards"].fill_(99.0)
    np.testing.assert_array_equal(memory.chronological("/rewards"), chunk(0, 2)["/rewards"])


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"/rewards": np.zeros((B, 2, 1))}, "missing"),
        ({**chunk(0, 2), "/extra": np.zeros((B, 2))}, "unknown"),
        ({k: v[:2] for k, v in chunk(0, 2).items()}, "B=3"),
        ({**chunk(0, 2), "/observations": np.zeros((B, 2, 5), np.float32)}, "observations"),
        ({**chunk(0, 2), "/masks": np.zeros((B, 1, 1), np.float32)}, "leading dims"),
        (chunk(0, 9), "capacity=8"),
        ({**chunk(0, 2), "/rewards": [1, 2]}, "numpy array"),
    ],
)
def test_bad_chunks_are_rejected(bad, match):
    memory = filled(8, [2])
    with pytest.raises(ValueError, match=match):
        memory.store(bad)
    assert len(memory) == 2


def test_bad_capacity_and_empty_chunk():
    with pytest.raises(ValueError, match="capacity"):
        MemoryQueue(0)
    with pytest.raises(ValueError, match="non-empty"):
        MemoryQueue(3).store({})


def test_state_dict_round_trip_and_smaller_capacity():
    memory = filled(6, [4, 4])
    state = memory.state_dict()
    restored = MemoryQueue(6)
    restored.load_state_dict(state)
    assert (len(restored), restored.total_steps, restored.last_T) == (6, 8, 4)
    for key in memory.keys():
        np.testing.assert_array_equal(restored.chronological(key), memory.chronological(key))
    restored.store(chunk(8, 1))  # keeps working as a ring
    np.testing.assert_array_equal(restored.chronological("/agents/a/actions"), chunk(3, 6)["/agents/a/actions"])
    small = MemoryQueue(3)
    small.load_state_dict(state)
    np.testing.assert_array_equal(small.chronological("/observations"), chunk(5, 3)["/observations"])
    assert small.last_T == 3


def step_of(sample: Sample, key: str = "/agents/a/actions") -> np.ndarray:
    """The global step encoded in each gathered entry."""
    return np.asarray(sample.data[key]) % 1000


def test_random_batch_of_sequences_is_consecutive_across_the_ring_end():
    memory = filled(7, [3, 3, 3, 3])  # steps 5..11 stored; the ring wrapped twice
    sampler = MemorySampler(
        [RandomBatch(batch_size=200, span=4, generator=np.random.default_rng(0)), Sequences(4), Gather()]
    )
    sample = sampler(memory)
    assert sample.t_idxs.shape == (200, 4)
    assert sample["/observations"].shape == (200, 4, 2)
    assert sample["/masks"].shape == (200, 4, 1)
    steps = step_of(sample)
    np.testing.assert_array_equal(np.diff(steps, axis=1), 1)  # consecutive in time
    assert steps.min() == 5 and steps.max() == 11  # only stored steps, all starts reachable
    np.testing.assert_array_equal(sample["/agents/a/actions"] // 1000, np.repeat(sample.b_idxs[:, None], 4, 1))
    assert set(sample.t_idxs[:, 0]) == {0, 1, 2, 3}  # starts leave room for 4 steps
    np.testing.assert_array_equal(sample["/agents/a/artifacts/log_prob"][..., 0], -sample["/agents/a/actions"])


def test_next_observations_and_flatten_time():
    memory = filled(6, [4, 4])
    sampler = MemorySampler(
        [
            RandomBatch(batch_size=16, span=3, generator=np.random.default_rng(1)),
            Sequences(2),
            Gather(["/observations", "/agents/a/"]),
            NextObservations(),
            FlattenTime(),
            ToTensor(),
        ]
    )
    sample = sampler(memory)
    assert sorted(sample.data) == ["/agents/a/actions", "/agents/a/artifacts/log_prob", "/next_observations",
                                   "/observations"]
    assert sample["/observations"].shape == (32, 2) and isinstance(sample["/observations"], torch.Tensor)
    torch.testing.assert_close(sample["/next_observations"][:, 0], sample["/observations"][:, 0] + 1)
    assert sample.b_idxs.shape == sample.t_idxs.shape == (32,)


def test_next_observations_needs_the_extra_step():
    memory = filled(4, [4])
    sampler = MemorySampler([LastChunk(), Gather(), NextObservations()])
    with pytest.raises(ValueError, match="no next one"):
        sampler(memory)


def test_last_chunk_gives_the_chunk_back():
    memory = filled(5, [4, 3])
    sample = MemorySampler([LastChunk(), Gather(), CheckShapes({"/observations": [2], "/rewards": [1]})])(memory)
    for key, value in chunk(4, 3).items():
        np.testing.assert_array_equal(sample[key], value, err_msg=key)


def test_index_units_check_the_memory():
    with pytest.raises(ValueError, match="span=5"):
        MemorySampler([RandomBatch(4, span=5)])(filled(8, [4]))
    with pytest.raises(ValueError, match="no chunk"):
        MemorySampler([LastChunk()])(MemoryQueue(3))
    with pytest.raises(ValueError, match="index unit"):
        MemorySampler([Gather()])(filled(8, [4]))
    with pytest.raises(ValueError, match="matches no stored key"):
        MemorySampler([LastChunk(), Gather(["/agents/c/"])])(filled(8, [4]))
    with pytest.raises(ValueError, match="batch_size"):
        RandomBatch(0)
    with pytest.raises(ValueError, match="units\\[1\\]"):
        MemorySampler([LastChunk(), "not a unit"])


def test_check_shapes_reports_mismatches():
    memory = filled(5, [3])
    with pytest.raises(ValueError, match="'/rewards' has trailing shape \\(1,\\), expected \\(2,\\)"):
        MemorySampler([LastChunk(), Gather(), CheckShapes({"/rewards": [2]})])(memory)
    with pytest.raises(ValueError, match="expected key '/values'"):
        MemorySampler([LastChunk(), Gather(), CheckShapes({"/values": [1]})])(memory)

    def broken(sample: Sample) -> Sample:
        sample.data["/rewards"] = sample.data["/rewards"][:, :2]
        return sample

    with pytest.raises(ValueError, match="leading dims should be \\(3, 3\\)"):
        MemorySampler([LastChunk(), Gather(), broken, CheckShapes()])(memory)
    out = io.StringIO()
    MemorySampler([LastChunk(), Gather(["/masks"]), CheckShapes(verbose=True, stream=out)])(memory)
    assert "/masks: (3, 3, 1) float32" in out.getvalue()


def test_check_nan_names_the_key_and_index():
    memory = filled(5, [3])
    data = chunk(3, 2)
    data["/agents/a/artifacts/log_prob"][1, 0, 0] = np.nan
    memory.store(data)
    sampler = MemorySampler([LastChunk(), Gather(), CheckNaN()])
    match = "'/agents/a/artifacts/log_prob' has 1 non-finite value\\(s\\), first at \\(1, 0, 0\\)"
    with pytest.raises(ValueError, match=match):
        sampler(memory)
    MemorySampler([LastChunk(), Gather(), CheckNaN(["/observations"])])(memory)  # other keys are fine


def test_print_stats_prints_hand_computed_numbers():
    memory = MemoryQueue(4)
    memory.store({"/rewards": np.array([[[1.0], [3.0]], [[5.0], [7.0]]], np.float32), "/masks": np.ones((2, 2, 1))})
    out = io.StringIO()
    sample = MemorySampler([LastChunk(), Gather(), PrintStats(["/rewards"], stream=out)])(memory)
    # values 1, 3, 5, 7: mean 4, population std sqrt(5)
    assert sample.info["stats"]["/rewards"] == pytest.approx({"mean": 4.0, "std": 5**0.5, "min": 1.0, "max": 7.0})
    assert out.getvalue().strip() == "[PrintStats] /rewards: shape (2, 2, 1) mean 4 std 2.236 min 1 max 7"
    with pytest.raises(ValueError, match="'/values'"):
        MemorySampler([LastChunk(), Gather(), PrintStats(["/values"])])(memory)
