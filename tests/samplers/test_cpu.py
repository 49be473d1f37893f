"""CpuSampler: workers act with the shared-memory agent and write the shared batch."""

from __future__ import annotations

import numpy as np
import psutil
import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.samplers import CpuSampler, SerialSampler
from lightning_rl.samplers.base import cpu_count
from tests.samplers.helpers import ObsAgent, SpyInfo, assert_same_runs, make_counter_env, run_sampler

KWARGS = dict(
    env_kwargs=dict(episode_lengths=(2, 3, 5), max_episode_steps=4),
    batch_T=7,
    batch_B=4,
    max_decorrelation_steps=6,
    eval_n_envs=3,
    eval_max_steps=9,
)


@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
def test_same_seed_gives_the_serial_samplers_batches(collector, no_leaks):
    serial = run_sampler(SerialSampler, collector=collector, **KWARGS)
    cpu = run_sampler(CpuSampler, collector=collector, n_workers=2, **KWARGS)
    assert_same_runs(serial, cpu)
    assert sum(len(t) for t in serial[1]) > 3, "episodes should end in this test"


def test_evaluation_stops_at_the_trajectory_limit(no_leaks):
    kwargs = dict(KWARGS, eval_max_steps=None, eval_max_trajectories=4)
    _, _, eval_trajs = run_sampler(CpuSampler, n_batches=1, n_workers=2, **kwargs)
    assert len(eval_trajs) == 4 and all(t.Length in (2, 3, 4) for t in eval_trajs)


def test_uneven_worker_slices_and_default_worker_count(no_leaks):
    serial = run_sampler(SerialSampler, n_batches=2, batch_T=5, batch_B=3)
    cpu = run_sampler(CpuSampler, n_batches=2, batch_T=5, batch_B=3, n_workers=2)
    assert_same_runs(serial, cpu)
    assert CpuSampler(make_counter_env, batch_B=64)._resolve_n_workers() == min(64, cpu_count())


def test_workers_act_with_the_newest_shared_weights(no_leaks):
    sampler = CpuSampler("CartPole-v1", batch_T=5, batch_B=2, n_workers=2)
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    sampler.initialize(agent, seed=0)
    try:
        assert agent.share_memory_enabled
        for favored in (1, 0, 1):
            # Make the policy (almost) deterministic in the main process only.
            with torch.no_grad():
                for p in agent.model.parameters():
                    p.zero_()
                head = [m for m in agent.model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 2]
                head[0].bias[favored] = 50.0
            samples, _ = sampler.obtain_samples(0)
            assert (samples.agent.action == favored).all()
    finally:
        sampler.shutdown()


class RankAgent(ObsAgent):
    """Reports, as ``agent_info.value``, the env ranks its worker copy was given."""

    def collector_initialize(self, global_B: int = 1, env_ranks: list[int] | None = None) -> None:
        self.worker_ranks = torch.tensor(env_ranks, dtype=torch.float32)
        self.worker_global_B = global_B

    def step(self, observation, prev_action, prev_reward):
        step = super().step(observation, prev_action, prev_reward)
        value = self.worker_ranks + 1000 * self.worker_global_B
        return step._replace(agent_info=SpyInfo(value=value, steps=step.agent_info.steps))


def test_worker_agents_get_their_env_ranks(no_leaks):
    sampler = CpuSampler(make_counter_env, batch_T=2, batch_B=3, n_workers=2)
    agent = RankAgent()
    agent.collector_initialize(1, [0, 0, 0])
    sampler.initialize(agent, seed=0, rank=1, world_size=2)
    try:
        samples, _ = sampler.obtain_samples(0)
        np.testing.assert_array_equal(samples.agent.agent_info.value[0], [6003, 6004, 6005])
    finally:
        sampler.shutdown()


def test_cpu_affinity_pins_workers(no_leaks):
    sampler = CpuSampler(make_counter_env, batch_T=2, batch_B=2, n_workers=2, cpu_affinity=[0])
    sampler.initialize(ObsAgent(), seed=0)
    try:
        assert [psutil.Process(pid).cpu_affinity() for pid in sampler.worker_pids] == [[0], [0]]
        sampler.obtain_samples(0)
    finally:
        sampler.shutdown()


def test_unavailable_cpu_raises():
    sampler = CpuSampler(make_counter_env, batch_T=2, batch_B=2, cpu_affinity=[0, 4096])
    with pytest.raises(ValueError, match=r"cpu_affinity=\[0, 4096\] names CPUs \[4096\] not available"):
        sampler.initialize(ObsAgent())


def test_agent_already_initialized_without_shared_memory_is_shared(no_leaks):
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    probe = SerialSampler("CartPole-v1", batch_T=2, batch_B=1)
    probe.initialize(agent)
    assert not agent.share_memory_enabled
    sampler = CpuSampler("CartPole-v1", batch_T=2, batch_B=2, n_workers=1)
    sampler.initialize(agent)
    try:
        assert agent.share_memory_enabled
        assert all(p.is_shared() for p in agent.model.parameters())
    finally:
        sampler.shutdown()


def test_atari_frames_stay_uint8_in_shared_memory(no_leaks):
    sampler = CpuSampler("ALE/Pong-v5", batch_T=4, batch_B=2, n_workers=2)
    agent = CategoricalPgAgent()
    sampler.initialize(agent, seed=0)
    try:
        samples, _ = sampler.obtain_samples(0)
        obs = samples.env.observation
        assert obs.shape == (4, 2, 4, 84, 84) and obs.dtype == np.uint8
        assert obs[-1].any(), "workers wrote frames"
        assert samples.env.env_info.traj_done.dtype == bool
        assert sampler.traj_info_factory().__class__.__name__ == "AtariTrajInfo"
    finally:
        sampler.shutdown()
