from __future__ import annotations

import io
from collections import namedtuple

import numpy as np
import pytest
import torch

from lightning_rl.data import namedarraytuple
from lightning_rl.replays import ReplayBuffer, SamplesFromReplay, SequenceSamplesFromReplay
from tests.replays.replay_reference import Stream

CONFIGS = {
    "uniform": dict(n_step_return=3),
    "prioritized": dict(n_step_return=2, prioritized=True, beta_anneal_steps=10, stratified=True),
    "frames": dict(frame_stack=4, prioritized=True),
    "sequence": dict(sequence_T=4, rnn_state_interval=2, prioritized=True),
    "shared": dict(n_step_return=2, prioritized=True, shared=True),
}


def _stream(name, seed=0):
    kind = "rnn" if name == "sequence" else "plain"
    return Stream(B=2, frame_stack=4 if name == "frames" else None, kind=kind, seed=seed)


def _equal(x, y):
    if x is None or y is None:
        assert x is None and y is None
    elif isinstance(x, tuple):
        for u, v in zip(x, y, strict=False):
            _equal(u, v)
    else:
        assert torch.equal(x, y)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_save_load_round_trip_gives_identical_samples(name):
    stream = _stream(name)
    replay = ReplayBuffer(stream.example(), size=2 * 30, B=2, seed=1, **CONFIGS[name])
    for T_in in [12, 25, 8]:
        replay.append_samples(stream.batch(T_in))
    batch = replay.sample_batch(8)
    if replay.sampler.prioritized:
        replay.update_batch_priorities(batch.idxs, torch.arange(1.0, 9.0))
    file = io.BytesIO()
    torch.save(replay.state_dict(), file)
    file.seek(0)
    restored = ReplayBuffer(stream.example(), size=2 * 30, B=2, seed=99, **CONFIGS[name])
    restored.load_state_dict(torch.load(file, weights_only=True))
    # The same future: samples, priorities and appends continue identically.
    more = stream.batch(5)
    for r in (replay, restored):
        r.append_samples(more)
    for _ in range(3):
        x, y = replay.sample_batch(16), restored.sample_batch(16)
        _equal(x, y)
        if replay.sampler.prioritized:
            assert replay.beta == restored.beta
            for r in (replay, restored):
                r.update_batch_priorities(x.idxs, torch.rand(16, generator=torch.Generator().manual_seed(0)))


def test_state_dict_views_and_copies():
    stream = Stream(B=2)
    replay = ReplayBuffer(stream.example(), size=20, B=2)
    replay.append_samples(stream.batch(4))
    view, copy = replay.state_dict(), replay.state_dict(copy=True)
    replay.append_samples(stream.batch(4))
    assert view["storage"]["counters"][1] == 8 and copy["storage"]["counters"][1] == 4
    # Only the 4 filled rows of the 10 are saved.
    assert copy["storage"]["samples.reward"].shape == (4, 2)
    with pytest.raises(ValueError, match="shape"):
        ReplayBuffer(stream.example(), size=40, B=4).load_state_dict(copy)


def test_saved_filled_rows_load_back_with_the_rest_zeroed():
    stream = Stream(B=2)
    replay = ReplayBuffer(stream.example(), size=20, B=2)
    replay.append_samples(stream.batch(7))
    state = replay.state_dict(copy=True)
    reward = np.array(replay.storage.arrays()["samples.reward"])
    used = ReplayBuffer(stream.example(), size=20, B=2)
    used.append_samples(stream.batch(10))  # every row written: the load must zero rows 7..9
    used.load_state_dict(state)
    np.testing.assert_array_equal(used.storage.arrays()["samples.reward"], reward)
    assert not used.storage.arrays()["samples.reward"][7:].any() and used.storage.rows_written == 7
    # A wrapped ring (all rows, cursor inside) cannot become part of a larger one.
    used.append_samples(stream.batch(8))
    with pytest.raises(ValueError, match="filled rows"):
        ReplayBuffer(stream.example(), size=40, B=2).load_state_dict(used.state_dict(copy=True))


def test_nbytes_by_hand():
    Ex = namedarraytuple("Ex", ["observation", "action", "reward", "done"])
    example = Ex(np.zeros(5, np.float32), np.zeros(2, np.float32), np.float32(0), False)
    replay = ReplayBuffer(example, size=100, B=4)  # T = 25
    # obs 20 + action 8 + reward 4 + done 1 + return_ 4 + done_n 1 + timeout_n 1 + n_steps 1 = 40 bytes.
    assert replay.nbytes == 100 * 40 + 16
    prioritized = ReplayBuffer(example, size=100, B=4, prioritized=True)
    # 100 leaves pad to 112 (a multiple of 16), then 7 -> 16 and the root: 129 float64.
    assert prioritized.nbytes == 100 * 40 + 16 + (112 + 16 + 1) * 8


def test_batch_types_and_dtypes():
    stream = Stream(B=2)
    replay = ReplayBuffer(stream.example(), size=40, B=2, n_step_return=2)
    with pytest.raises(RuntimeError, match="no valid samples"):
        replay.sample_batch(4)
    replay.append_samples(stream.batch(10))
    batch = replay.sample_batch(4)
    assert isinstance(batch, SamplesFromReplay)
    assert batch.agent_inputs.observation.dtype == torch.float32 and batch.action.dtype == torch.int64
    assert batch.done.dtype == torch.bool and batch.idxs.dtype == torch.int64
    assert batch.is_weights.dtype == torch.float32 and batch.discount_n.dtype == torch.float32
    seq = ReplayBuffer(stream.example(), size=40, B=2, sequence_T=3).sample_batch
    with pytest.raises(RuntimeError):
        seq(1)
    r = ReplayBuffer(stream.example(), size=40, B=2, sequence_T=3)
    r.append_samples(stream.batch(10))
    assert isinstance(r.sample_batch(2), SequenceSamplesFromReplay)


def test_namedtuple_example_and_nested_action():
    Act = namedtuple("Act", ["move", "fire"])
    Ex = namedtuple("Ex", ["observation", "action", "reward", "done"])
    example = Ex(np.zeros(2, np.float32), Act(np.float32(0), np.int64(0)), 0.0, False)
    replay = ReplayBuffer(example, size=20, B=1)
    ActN = namedarraytuple("Act", ["move", "fire"])
    T = 6
    samples = Ex(
        np.arange(2 * T, dtype=np.float32).reshape(T, 1, 2),
        ActN(np.arange(T, dtype=np.float32)[:, None], 10 * np.arange(T)[:, None]),
        np.ones((T, 1), np.float32),
        np.zeros((T, 1), bool),
    )
    replay.append_samples(samples)
    batch = replay.sample_batch(20)
    t = (batch.agent_inputs.observation[:, 0] / 2).long()
    assert torch.equal(batch.action.fire, 10 * t)
    assert torch.equal(batch.agent_inputs.prev_action.fire, torch.where(t > 0, 10 * (t - 1), 0))


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(size=0), "size"),
        (dict(B=0), "B"),
        (dict(discount=1.5), "discount"),
        (dict(n_step_return=0), "n_step_return"),
        (dict(alpha=-1.0), "alpha"),
        (dict(beta=-0.1), "beta"),
        (dict(beta_final=-0.1), "beta_final"),
        (dict(beta_anneal_steps=0), "beta_anneal_steps"),
        (dict(default_priority=0.0), "default_priority"),
        (dict(eta=2.0), "eta"),
        (dict(frame_stack=0), "frame_stack"),
        (dict(sequence_T=0), "sequence_T"),
        (dict(rnn_state_interval=2), "rnn_state_interval"),
        (dict(size=8, n_step_return=5), "size"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, name):
    args = dict(example=Stream(B=2).example(), size=100, B=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        ReplayBuffer(**args)


def test_bad_examples():
    Ex = namedtuple("Ex", ["observation", "action", "reward"])
    with pytest.raises(ValueError, match="missing field"):
        ReplayBuffer(Ex(0.0, 0, 0.0), size=10, B=1)
    Ex = namedtuple("Ex", ["observation", "action", "reward", "done", "value"])
    with pytest.raises(ValueError, match="unknown field"):
        ReplayBuffer(Ex(0.0, 0, 0.0, False, 0.0), size=10, B=1)
    Ex = namedtuple("Ex", ["observation", "action", "reward", "done"])
    with pytest.raises(ValueError, match="reward"):
        ReplayBuffer(Ex(0.0, 0, np.zeros(2), False), size=10, B=1)
    with pytest.raises(ValueError, match="example"):
        ReplayBuffer({"observation": 0.0}, size=10, B=1)
