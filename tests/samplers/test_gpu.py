"""GpuSampler: workers step envs, the main process serves actions for all of them."""

from __future__ import annotations

import pytest

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.samplers import GpuSampler, SerialSampler
from tests.samplers.helpers import ObsAgent, assert_same_runs, make_counter_env, run_sampler

KWARGS = dict(
    env_kwargs=dict(episode_lengths=(2, 3, 5), max_episode_steps=4),
    batch_T=7,
    batch_B=4,
    max_decorrelation_steps=6,
    eval_n_envs=3,
    eval_max_steps=9,
)


@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
def test_deterministic_agent_gives_the_serial_samplers_batches(collector, no_leaks):
    serial = run_sampler(SerialSampler, collector=collector, **KWARGS)
    gpu = run_sampler(GpuSampler, collector=collector, n_workers=3, **KWARGS)
    assert_same_runs(serial, gpu)


def test_reset_one_in_the_main_process_uses_global_env_indexes(no_leaks):
    sampler = GpuSampler(make_counter_env, env_kwargs=dict(episode_lengths=(2,)), batch_T=4, batch_B=4, n_workers=2)
    agent = ObsAgent()
    sampler.initialize(agent, seed=0)
    try:
        sampler.obtain_samples(0)
        # Every env ends an episode at steps 1 and 3: the main agent resets each of the 4.
        assert sorted(agent.reset_one_calls) == [0, 0, 1, 1, 2, 2, 3, 3]
    finally:
        sampler.shutdown()


def test_evaluation_stops_at_the_trajectory_limit(no_leaks):
    kwargs = dict(KWARGS, eval_max_steps=None, eval_max_trajectories=5)
    _, _, eval_trajs = run_sampler(GpuSampler, n_batches=1, n_workers=2, **kwargs)
    assert len(eval_trajs) == 5


def test_stochastic_agent_acts_in_the_main_process(no_leaks):
    sampler = GpuSampler("CartPole-v1", batch_T=6, batch_B=3, n_workers=2)
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    sampler.initialize(agent, seed=0)
    try:
        assert not agent.share_memory_enabled
        samples, _ = sampler.obtain_samples(0)
        assert set(samples.agent.action.ravel().tolist()) <= {0, 1}
        assert (samples.agent.agent_info.dist_info.prob.sum(-1) > 0.99).all()
    finally:
        sampler.shutdown()
