"""ReplayDataset: the replay-ratio schedule, min_steps_learn, stacked batches, priorities, syncs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents import DqnAgent
from lightning_rl.algos.off_policy import samples_to_buffer
from lightning_rl.datasets.replay import ReplayDataset
from lightning_rl.datasets.state import TrainState
from lightning_rl.replays import ReplayBuffer, SamplesFromReplay
from lightning_rl.samplers import SerialSampler


def to_buffer(samples):
    return samples_to_buffer(samples)


def make_dataset(
    batch_T: int = 4,
    batch_B: int = 2,
    batch_size: int = 32,
    replay_ratio: float = 10.0,
    min_steps_learn: int = 16,
    prioritized: bool = False,
    updates_per_sync: int = 1,
    iterations_per_epoch: int = 5,
) -> ReplayDataset:
    torch.manual_seed(0)
    agent = DqnAgent(hidden_sizes=[8])
    sampler = SerialSampler(env_id="CartPole-v1", batch_T=batch_T, batch_B=batch_B)
    sampler.initialize(agent, seed=0)
    example = to_buffer(sampler.samples)[0, 0]
    replay = ReplayBuffer(example, size=1000, B=batch_B, prioritized=prioritized, alpha=1.0, beta=0.5, seed=0)
    return ReplayDataset(
        sampler, agent, replay, TrainState(), iterations_per_epoch=iterations_per_epoch, batch_size=batch_size,
        replay_ratio=replay_ratio, min_steps_learn=min_steps_learn, samples_to_buffer=to_buffer,
        updates_per_sync=updates_per_sync,
    )


def n_batches(item) -> int:
    return 0 if not item else int(item.action.shape[0])


def test_replay_ratio_schedule_carries_fractional_credit():
    # 8 env steps per iteration, 10 replayed per collected, batches of 32: 2.5 updates each.
    ds = make_dataset(replay_ratio=10.0, min_steps_learn=16, iterations_per_epoch=7)
    assert len(ds) == 7
    counts = [n_batches(item) for item in ds]
    # Nothing at 8 env steps; from 16 on: 2.5 -> 2 (0.5 owed), 3.0 -> 3, 2.5 -> 2, ...
    assert counts == [0, 2, 3, 2, 3, 2, 3]
    assert ds.state.env_steps == 7 * 8
    assert ds.state.update_credit == pytest.approx(0.0)
    # Over the learning iterations the replay ratio is exact: updates * batch / env steps.
    assert sum(counts) * 32 / (6 * 8) == pytest.approx(10.0)


def test_nothing_is_replayed_before_min_steps_learn_but_samples_are_stored():
    ds = make_dataset(min_steps_learn=40, iterations_per_epoch=6)
    items = list(ds)
    assert [n_batches(i) for i in items[:4]] == [0, 0, 0, 0]
    assert all(i == () for i in items[:4])
    assert n_batches(items[4]) > 0  # 40 env steps: learning starts
    assert ds.replay.n_stored == 6 * 8


def test_replay_batches_are_stacked_on_a_leading_k_dim():
    ds = make_dataset(replay_ratio=12.0, batch_size=16, min_steps_learn=8, iterations_per_epoch=2)
    item = next(iter(ds))
    K = 6  # 12 * 8 / 16
    assert isinstance(item, SamplesFromReplay)
    assert item.agent_inputs.observation.shape == (K, 16, 4)
    assert item.action.shape == item.return_.shape == item.idxs.shape == item.is_weights.shape == (K, 16)
    assert item.target_inputs.observation.shape == (K, 16, 4)
    one = item[2]
    assert one.agent_inputs.observation.shape == (16, 4)
    # Batch k is an independent draw: the K batches do not repeat one another.
    assert not all(torch.equal(item.idxs[0], item.idxs[k]) for k in range(1, K))


def test_priorities_from_a_stacked_batch_flow_back_to_the_replay():
    ds = make_dataset(prioritized=True, min_steps_learn=48, replay_ratio=4.0, batch_size=32, iterations_per_epoch=8)
    it = iter(ds)
    item = next(x for x in it if x)
    idxs = item.idxs[0]
    favoured = idxs[:4].unique()
    priorities = torch.full((len(idxs),), 1e-3)
    priorities[torch.isin(idxs, favoured)] = 1e3
    ds.replay.update_batch_priorities(idxs, priorities)
    drawn = torch.cat([x.idxs.reshape(-1) for x in it if x])
    share = torch.isin(drawn, favoured).float().mean().item()
    # The favoured samples are a few of the ~48-56 stored; with priority 1e3 they are
    # drawn almost always (uniform replay would give them about 4 / 50).
    assert share > 0.9, share


def test_uniform_replay_gives_unit_importance_weights():
    ds = make_dataset(min_steps_learn=8, iterations_per_epoch=2)
    item = next(iter(ds))
    assert torch.equal(item.is_weights, torch.ones_like(item.is_weights))


@pytest.mark.parametrize("updates_per_sync", [1, 4])
def test_weights_are_published_every_updates_per_sync(updates_per_sync, monkeypatch):
    ds = make_dataset(replay_ratio=8.0, batch_size=32, min_steps_learn=8, updates_per_sync=updates_per_sync,
                      iterations_per_epoch=9)
    syncs = []
    monkeypatch.setattr(ds.agent, "sync_shared_memory", lambda: syncs.append(ds.state.updates))
    for item in ds:
        ds.state.updates += n_batches(item)  # what training_step does: 2 updates per item
    # Before collecting, the dataset publishes once updates_per_sync updates are unpublished.
    expected, last = [], 0
    for updates in np.cumsum([2] * 8):
        if updates - last >= updates_per_sync:
            expected.append(int(updates))
            last = int(updates)
    assert syncs == expected


def test_owed_updates_start_at_min_steps_learn_and_carry_the_fraction():
    state = TrainState()
    state.env_steps = 9
    assert state.take_owed_updates(2.5, min_steps_learn=10) == 0 and state.update_credit == 0.0
    owed = []
    for _ in range(4):
        state.env_steps += 1
        owed.append(state.take_owed_updates(2.5, min_steps_learn=10))
    # Credit 2.5 -> 2 taken (0.5 left), 3.0 -> 3 (0), 2.5 -> 2 (0.5), 3.0 -> 3 (0).
    assert owed == [2, 3, 2, 3] and state.update_credit == 0.0
    assert state.take_owed_updates(0.25, min_steps_learn=10) == 0 and state.update_credit == 0.25
