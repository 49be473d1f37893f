"""The shared sampler interface: arguments, buffers, seeding."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.envs.traj_info import AtariTrajInfo, TrajInfo
from lightning_rl.samplers import (
    AgentSamples,
    AgentSamplesBsv,
    AlternatingSampler,
    BatchSpec,
    CpuSampler,
    GpuSampler,
    NoOverlapAlternatingSampler,
    SerialSampler,
)
from lightning_rl.samplers.base import split_slices
from tests.samplers.helpers import ObsAgent, make_counter_env

ALL_SAMPLERS = [SerialSampler, CpuSampler, GpuSampler, AlternatingSampler, NoOverlapAlternatingSampler]


def test_batch_spec_size():
    spec = BatchSpec(T=5, B=3)
    assert spec.size == 15 and spec.T == 5 and spec.B == 3


def test_all_samplers_share_one_constructor_signature():
    signatures = {cls: inspect.signature(cls.__init__) for cls in ALL_SAMPLERS}
    first = signatures[SerialSampler]
    assert all(sig == first for sig in signatures.values())
    assert list(first.parameters)[1:4] == ["env_id", "env_kwargs", "batch_T"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(batch_T=0), "batch_T must be >= 1, got 0"),
        (dict(batch_B=-2), "batch_B must be >= 1, got -2"),
        (dict(batch_B=2.5), "batch_B must be an int"),
        (dict(max_decorrelation_steps=-1), "max_decorrelation_steps must be >= 0"),
        (dict(eval_n_envs=1, eval_max_steps=0), "eval_max_steps must be >= 1, got 0"),
        (dict(collector="sometimes"), "collector must be 'reset' or 'wait_reset', got 'sometimes'"),
        (dict(n_workers=0), "n_workers must be >= 1, got 0"),
        (dict(cpu_affinity=[-1]), r"cpu_affinity must be a non-empty list"),
        (dict(env_kwargs=[1]), r"env_kwargs must be a dict"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SerialSampler(make_counter_env, **kwargs)


def test_eval_settings_left_unset_take_their_defaults_each_on_its_own():
    # The documented defaults: 4 eval envs, 10 episodes (when no step limit is set), 100,000 steps.
    sampler = SerialSampler(make_counter_env)
    assert sampler.use_eval_defaults() == ["eval_n_envs=4", "eval_max_trajectories=10"]
    assert (sampler.eval_n_envs, sampler.eval_max_trajectories, sampler.eval_max_steps) == (4, 10, 100_000)
    sampler = SerialSampler(make_counter_env, eval_n_envs=2)  # was an error: "needs eval_max_steps or ..."
    assert sampler.use_eval_defaults() == ["eval_max_trajectories=10"] and sampler.eval_n_envs == 2
    sampler = SerialSampler(make_counter_env, eval_max_trajectories=3)
    assert sampler.use_eval_defaults() == ["eval_n_envs=4"] and sampler.eval_max_trajectories == 3
    sampler = SerialSampler(make_counter_env, eval_n_envs=1, eval_max_steps=5)
    assert sampler.use_eval_defaults() == []
    assert (sampler.eval_max_trajectories, sampler.eval_max_steps) == (None, 5)  # the step limit ends it


def test_bad_env_id_raises():
    with pytest.raises(ValueError, match="env_id must be an env id string or a callable, got 3"):
        SerialSampler(3)


def test_bad_initialize_arguments_raise():
    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=2)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, world_size=2\), got 2"):
        sampler.initialize(ObsAgent(), rank=2, world_size=2)
    with pytest.raises(ValueError, match="bootstrap_value=True needs an agent with a value"):
        sampler.initialize(_NoValueAgent(), bootstrap_value=True)
    sampler.initialize(ObsAgent())
    with pytest.raises(ValueError, match="already initialized"):
        sampler.initialize(ObsAgent())


class _NoValueAgent(ObsAgent):
    value = None


def test_n_workers_above_batch_b_raises():
    sampler = CpuSampler(make_counter_env, batch_T=2, batch_B=2, n_workers=3)
    with pytest.raises(ValueError, match="n_workers=3 must not exceed batch_B=2"):
        sampler.initialize(ObsAgent())


def test_sample_buffer_structure_dtypes_and_shapes():
    sampler = SerialSampler("CartPole-v1", batch_T=4, batch_B=3)
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    sampler.initialize(agent, seed=0, bootstrap_value=True, traj_info_kwargs=dict(discount=0.5))
    s = sampler.samples
    assert isinstance(s.agent, AgentSamplesBsv)
    assert s.env.observation.shape == (4, 3, 4) and s.env.observation.dtype == np.float32
    assert s.agent.action.shape == (4, 3) and s.agent.action.dtype == np.int64
    assert s.agent.prev_action.dtype == np.int64
    assert s.env.reward.dtype == np.float32 and s.env.prev_reward.dtype == np.float32
    assert s.env.done.dtype == bool and s.env.truncated.dtype == bool
    assert s.env.env_info.truncated.shape == (4, 3)
    assert s.agent.agent_info.dist_info.prob.shape == (4, 3, 2)
    assert s.agent.bootstrap_value.shape == (3,)
    assert agent.initialized and sampler.env_spaces.action.n == 2
    samples, _ = sampler.obtain_samples(0)
    assert samples is s, "the same buffer object is returned every call"
    assert sampler.traj_info_factory()._discount == 0.5
    # Bootstrap value: the agent's value of the observation after the last step.
    next_obs = np.array(sampler.step_buffer.observation)
    np.testing.assert_allclose(
        s.agent.bootstrap_value, agent.value(next_obs, s.agent.action[-1], s.env.reward[-1]).numpy(), rtol=1e-6
    )


def test_without_bootstrap_value_the_agent_samples_have_no_such_field():
    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=2)
    sampler.initialize(ObsAgent())
    assert isinstance(sampler.samples.agent, AgentSamples)


def test_env_seeds_follow_global_env_index():
    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=3, eval_n_envs=2, eval_max_steps=3)
    agent = ObsAgent()
    sampler.initialize(agent, seed=100, rank=1, world_size=2)
    s, _ = sampler.obtain_samples(0)
    # Rank 1 of 2 with B=3 owns global envs 3, 4, 5.
    assert s.env.observation[0, :, 0].tolist() == [103, 104, 105]
    assert sampler.env_ranks == [3, 4, 5] and sampler.global_B == 6
    assert agent.global_B == 6 and agent.env_ranks == [3, 4, 5]
    # Eval envs come after all training envs of all ranks: 100 + 6 + rank * 2 + i.
    assert [int(e.env.unwrapped.seed_value) for e in _reset(sampler.eval_collector.envs)] == [108, 109]


def _reset(envs):
    for e in envs:
        e.reset()
    return envs


def test_default_traj_info_class_follows_the_env_id():
    assert SerialSampler("ALE/Pong-v5")._make_traj_info_factory(None)().__class__ is AtariTrajInfo
    assert SerialSampler("CartPole-v1")._make_traj_info_factory(None)().__class__ is TrajInfo
    assert SerialSampler(make_counter_env)._make_traj_info_factory(None)().__class__ is TrajInfo
    custom = SerialSampler(make_counter_env, traj_info_cls=AtariTrajInfo)
    assert custom._make_traj_info_factory({"discount": 0.9})()._discount == 0.9


def test_split_slices_cover_everything_in_order():
    assert split_slices(7, 3) == [slice(0, 3), slice(3, 5), slice(5, 7)]
    assert split_slices(2, 4) == [slice(0, 1), slice(1, 2), slice(2, 2), slice(2, 2)]
    assert split_slices(0, 2) == [slice(0, 0), slice(0, 0)]


def test_evaluate_without_eval_envs_raises():
    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=1)
    sampler.initialize(ObsAgent())
    with pytest.raises(ValueError, match="eval_n_envs=0"):
        sampler.evaluate_agent(0)


@pytest.mark.parametrize("sampler_cls", ALL_SAMPLERS)
def test_samplers_swap_in_a_config_by_class_path(sampler_cls):
    from jsonargparse import ArgumentParser

    from lightning_rl.samplers import BaseSampler

    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--sampler", type=BaseSampler)
    init_args = dict(
        env_id="CartPole-v1",
        batch_B=4,
        collector="wait_reset",
        traj_info_cls="lightning_rl.envs.AtariTrajInfo",
        env_kwargs={"max_episode_steps": 100},
    )
    class_path = f"{sampler_cls.__module__}.{sampler_cls.__name__}"
    cfg = parser.parse_object({"sampler": {"class_path": class_path, "init_args": init_args}})
    init = parser.instantiate(cfg) if hasattr(parser, "instantiate") else parser.instantiate_classes(cfg)
    sampler = init.sampler
    assert type(sampler) is sampler_cls
    assert sampler.batch_spec == (128, 4) and sampler.collector == "wait_reset"
    assert sampler.traj_info_cls is AtariTrajInfo and sampler.env_kwargs == {"max_episode_steps": 100}
