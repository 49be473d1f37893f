"""Alternating samplers: two worker groups take turns; same data as the serial sampler."""

from __future__ import annotations

import pytest

from lightning_rl.agents import AlternatingCategoricalPgAgent
from lightning_rl.samplers import AlternatingSampler, NoOverlapAlternatingSampler, SerialSampler
from tests.samplers.helpers import ObsAgent, assert_same_runs, make_counter_env, run_sampler

KWARGS = dict(
    env_kwargs=dict(episode_lengths=(2, 3, 5), max_episode_steps=4),
    batch_T=7,
    batch_B=6,
    max_decorrelation_steps=6,
    eval_n_envs=4,
    eval_max_steps=9,
)


@pytest.mark.parametrize("sampler_cls", [AlternatingSampler, NoOverlapAlternatingSampler])
@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
def test_deterministic_agent_gives_the_serial_samplers_batches(sampler_cls, collector, no_leaks):
    serial = run_sampler(SerialSampler, collector=collector, **KWARGS)
    # The alternating agent keeps one state per half and gets reset_one over all B envs, so its
    # per-env step counters (agent_info.steps) match the serial agent's.
    alternating = run_sampler(sampler_cls, collector=collector, alternating=True, n_workers=4, **KWARGS)
    assert_same_runs(serial, alternating)


def test_each_half_resets_its_own_state(no_leaks):
    sampler = AlternatingSampler(
        make_counter_env, env_kwargs=dict(episode_lengths=(2,)), batch_T=3, batch_B=4, n_workers=2
    )
    agent = ObsAgent(alternating=True)
    sampler.initialize(agent, seed=0)
    try:
        sampler.obtain_samples(0)
        # Half 0 (envs 0, 1) is reset before half 1 (envs 2, 3), with indexes over all envs.
        assert agent.reset_one_calls == [0, 1, 2, 3]
    finally:
        sampler.shutdown()


def test_evaluation_stops_at_the_trajectory_limit(no_leaks):
    kwargs = dict(KWARGS, eval_max_steps=None, eval_max_trajectories=3)
    _, _, eval_trajs = run_sampler(NoOverlapAlternatingSampler, n_batches=1, alternating=True, n_workers=2, **kwargs)
    assert len(eval_trajs) == 3


def test_recurrent_alternating_agent_runs(no_leaks):
    sampler = AlternatingSampler("CartPole-v1", batch_T=5, batch_B=4, n_workers=2, collector="wait_reset")
    agent = AlternatingCategoricalPgAgent(hidden_sizes=(8,), lstm_size=4)
    sampler.initialize(agent, seed=0)
    try:
        samples, _ = sampler.obtain_samples(0)
        assert samples.agent.agent_info.prev_rnn_state.h.shape == (5, 4, 1, 4)
        # The first step starts from zero state in both halves; later steps carry state.
        assert (samples.agent.agent_info.prev_rnn_state.h[0] == 0).all()
        assert (samples.agent.agent_info.prev_rnn_state.h[1] != 0).any(axis=(-1, -2)).all()
    finally:
        sampler.shutdown()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(batch_B=5), "batch_B=5 must be even"),
        (dict(batch_B=4, n_workers=3), "n_workers=3 must be even"),
        (dict(batch_B=4, eval_n_envs=3, eval_max_steps=2), "eval_n_envs=3 must be even"),
    ],
)
def test_odd_sizes_raise(kwargs, match):
    sampler = AlternatingSampler(make_counter_env, batch_T=2, **kwargs)
    with pytest.raises(ValueError, match=match):
        sampler.initialize(ObsAgent(alternating=True))
