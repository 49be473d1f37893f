"""Minibatches of a rollout: every sample once per pass, one minibatch is the rollout as it is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents.base import AgentInputs
from lightning_rl.datasets.on_policy import OnPolicyBatch, iterate_minibatches
from lightning_rl.distributions import DistInfo

T, B = 4, 3


def make_batch(recurrent: bool = False) -> OnPolicyBatch:
    ids = torch.arange(T * B, dtype=torch.float32).reshape(T, B)
    init = torch.arange(B, dtype=torch.float32).reshape(1, B, 1) if recurrent else None
    return OnPolicyBatch(
        agent_inputs=AgentInputs(ids[..., None], torch.zeros(T, B, dtype=torch.long), torch.zeros(T, B)),
        action=torch.zeros(T, B, dtype=torch.long),
        return_=ids.clone(),
        advantage=ids.clone(),
        valid=torch.ones(T, B),
        old_dist_info=DistInfo(prob=torch.full((T, B, 2), 0.5)),
        old_value=ids.clone(),
        init_rnn_state=init,
    )


def test_one_minibatch_is_the_whole_rollout_in_order_without_drawing():
    generator = np.random.default_rng(0)
    state = generator.bit_generator.state
    (mb,) = list(iterate_minibatches(make_batch(), 1, False, generator))
    assert mb.advantage.tolist() == list(range(T * B))
    assert mb.agent_inputs.observation.shape == (T * B, 1)
    assert generator.bit_generator.state == state
    (seq,) = list(iterate_minibatches(make_batch(recurrent=True), 1, True, generator))
    assert seq.advantage.shape == (T, B) and seq.init_rnn_state.shape == (1, B, 1)


def test_minibatches_cover_every_sample_once_per_pass_in_shuffled_order():
    mbs = list(iterate_minibatches(make_batch(), 3, False, np.random.default_rng(0)))
    assert [len(mb.advantage) for mb in mbs] == [4, 4, 4]
    seen = torch.cat([mb.advantage for mb in mbs])
    assert sorted(seen.tolist()) == list(range(T * B))
    assert seen.tolist() != list(range(T * B))
    # Fields stay aligned: each sample's observation is its id.
    for mb in mbs:
        assert torch.equal(mb.agent_inputs.observation[:, 0], mb.advantage)


def test_recurrent_minibatches_split_envs_with_their_initial_state():
    mbs = list(iterate_minibatches(make_batch(recurrent=True), 3, True, np.random.default_rng(1)))
    envs = []
    for mb in mbs:
        assert mb.advantage.shape == (T, 1)
        env = int(mb.advantage[0, 0])
        assert mb.init_rnn_state[0, 0, 0] == env
        envs.append(env)
    assert sorted(envs) == [0, 1, 2]


def test_minibatches_must_divide_the_batch():
    with pytest.raises(ValueError, match="minibatches=5 must divide"):
        list(iterate_minibatches(make_batch(), 5, False, np.random.default_rng(0)))
