"""Episode bookkeeping of the collectors, checked against hand-computed batches.

The env is :class:`conftest.CounterEnv` (observation ``[seed, episode, t]``, reward
``t + action / 10``) with episode lengths alternating 2, 4 under a 3-step time limit: episode 0
terminates after 2 steps, episode 1 is truncated after 3, episode 2 terminates after 2, ...
The agent acts ``sum(observation) % 3``. With seed 7 and one env:

=====  ===========  ======  =====================================
step   observation  action  result
=====  ===========  ======  =====================================
0      [7, 0, 0]    1       r 1.1
1      [7, 0, 1]    2       r 2.2, terminated (episode 0 ends)
2      [7, 1, 0]    2       r 1.2
3      [7, 1, 1]    0       r 2.0
4      [7, 1, 2]    1       r 3.1, truncated (timeout)
5      [7, 2, 0]    0       r 1.0
6      [7, 2, 1]    1       r 2.1, terminated
7      [7, 3, 0]    1       r 1.1
=====  ===========  ======  =====================================
"""

from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema
from lightning_rl.envs.traj_info import AtariTrajInfo, TrajInfo
from lightning_rl.samplers import SerialSampler, collectors
from lightning_rl.samplers.collectors import ResetCollector
from tests.samplers.helpers import LivesEnv, ObsAgent, make_counter_env

ENV_KWARGS = dict(episode_lengths=(2, 4), max_episode_steps=3)


def make_sampler(collector: str, **kwargs) -> tuple[SerialSampler, ObsAgent]:
    sampler = SerialSampler(
        make_counter_env, env_kwargs=ENV_KWARGS, batch_T=4, batch_B=1, collector=collector, **kwargs
    )
    agent = ObsAgent()
    sampler.initialize(agent, seed=7)
    return sampler, agent


def column(samples, field_path: str) -> np.ndarray:
    x = samples
    for name in field_path.split("."):
        x = getattr(x, name)
    return np.array(x[:, 0])


def test_reset_collector_bookkeeping_across_batch_boundaries():
    sampler, agent = make_sampler("reset")
    s, trajs = sampler.obtain_samples(0)
    assert column(s, "env.observation").tolist() == [[7, 0, 0], [7, 0, 1], [7, 1, 0], [7, 1, 1]]
    assert column(s, "agent.action").tolist() == [1, 2, 2, 0]
    assert column(s, "agent.prev_action").tolist() == [0, 1, 0, 2]
    np.testing.assert_allclose(column(s, "env.reward"), [1.1, 2.2, 1.2, 2.0], rtol=1e-6)
    np.testing.assert_allclose(column(s, "env.prev_reward"), [0.0, 1.1, 0.0, 1.2], rtol=1e-6)
    assert column(s, "env.done").tolist() == [False, True, False, False]
    assert column(s, "env.truncated").tolist() == [False, False, False, False]
    assert column(s, "env.env_info.t").tolist() == [1, 2, 1, 2]
    assert column(s, "agent.agent_info.steps").tolist() == [0, 1, 0, 1]
    assert [(t.Length, round(t.Return, 6)) for t in trajs] == [(2, 3.3)]

    s, trajs = sampler.obtain_samples(1)
    # The batch starts where the last one stopped: mid-episode, with its prev action/reward.
    assert column(s, "env.observation").tolist() == [[7, 1, 2], [7, 2, 0], [7, 2, 1], [7, 3, 0]]
    assert column(s, "agent.action").tolist() == [1, 0, 1, 1]
    assert column(s, "agent.prev_action").tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(column(s, "env.reward"), [3.1, 1.0, 2.1, 1.1], rtol=1e-6)
    np.testing.assert_allclose(column(s, "env.prev_reward"), [2.0, 0.0, 1.0, 0.0], rtol=1e-6)
    assert column(s, "env.done").tolist() == [True, False, True, False]
    assert column(s, "env.truncated").tolist() == [True, False, False, False]
    assert column(s, "env.env_info.terminated").tolist() == [False, False, True, False]
    assert column(s, "agent.agent_info.steps").tolist() == [2, 0, 1, 0]
    assert [(t.Length, round(t.Return, 6)) for t in trajs] == [(3, 6.3), (2, 3.1)]
    # reset_one ran for exactly the envs that were done, before their next action.
    assert agent.reset_one_calls == [0, 0, 0]
    assert sampler.env_steps == 8


def test_wait_reset_collector_waits_until_the_next_batch():
    sampler, agent = make_sampler("wait_reset")
    s, trajs = sampler.obtain_samples(0)
    # After the done at step 1 the env waits: zeros, done=True, nothing else recorded.
    assert column(s, "env.observation").tolist() == [[7, 0, 0], [7, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert column(s, "agent.action").tolist() == [1, 2, 0, 0]
    assert column(s, "agent.prev_action").tolist() == [0, 1, 0, 0]
    np.testing.assert_allclose(column(s, "env.reward"), [1.1, 2.2, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(column(s, "env.prev_reward"), [0.0, 1.1, 0.0, 0.0], rtol=1e-6)
    assert column(s, "env.done").tolist() == [False, True, True, True]
    assert column(s, "env.env_info.t").tolist() == [1, 2, 0, 0]
    assert column(s, "agent.agent_info.steps").tolist() == [0, 1, 0, 0]
    assert [(t.Length, round(t.Return, 6)) for t in trajs] == [(2, 3.3)]
    assert agent.reset_one_calls == []

    s, trajs = sampler.obtain_samples(1)
    # Reset at the batch start; the agent's state restarts there too.
    assert agent.reset_one_calls == [0]
    assert column(s, "env.observation").tolist() == [[7, 1, 0], [7, 1, 1], [7, 1, 2], [0, 0, 0]]
    assert column(s, "agent.action").tolist() == [2, 0, 1, 0]
    assert column(s, "agent.prev_action").tolist() == [0, 2, 0, 0]
    np.testing.assert_allclose(column(s, "env.reward"), [1.2, 2.0, 3.1, 0.0], rtol=1e-6)
    assert column(s, "env.done").tolist() == [False, False, True, True]
    assert column(s, "env.truncated").tolist() == [False, False, True, False]
    assert column(s, "agent.agent_info.steps").tolist() == [0, 1, 2, 0]
    assert [(t.Length, round(t.Return, 6)) for t in trajs] == [(3, 6.3)]


def test_decorrelation_is_deterministic_and_discards_episodes():
    kwargs = dict(env_kwargs=dict(episode_lengths=(5,)), batch_T=3, batch_B=6, max_decorrelation_steps=20)
    starts = []
    for _ in range(2):
        sampler = SerialSampler(make_counter_env, **kwargs)
        sampler.initialize(ObsAgent(), seed=3)
        s, trajs = sampler.obtain_samples(0)
        starts.append(np.array(s.env.observation[0]))
        # Episodes that ended during decorrelation are not reported; a first reported episode
        # counts only the steps taken after decorrelation.
        assert all(t.Length <= 3 for t in trajs)
    np.testing.assert_array_equal(starts[0], starts[1])
    assert np.array_equal(starts[0][:, 0], np.arange(3, 9))
    # Envs start out of phase: several distinct episode/step positions.
    assert len({tuple(x) for x in starts[0][:, 1:]}) > 2


def test_eval_collector_stops_at_trajectory_limit():
    sampler = SerialSampler(
        make_counter_env,
        env_kwargs=dict(episode_lengths=(3,)),
        batch_T=2,
        batch_B=1,
        eval_n_envs=2,
        eval_max_trajectories=3,
    )
    sampler.initialize(ObsAgent(), seed=0)
    trajs = sampler.evaluate_agent(0)
    # Two envs finish an episode every 3 steps: 2 after step 3, 4 after step 6 -> first 3 kept.
    assert [t.Length for t in trajs] == [3, 3, 3]
    assert all(isinstance(t, TrajInfo) for t in trajs) and trajs[0].Return > 0


def test_eval_collector_stops_at_step_limit():
    sampler = SerialSampler(
        make_counter_env,
        env_kwargs=dict(episode_lengths=(3,)),
        batch_T=2,
        batch_B=1,
        eval_n_envs=2,
        eval_max_steps=7,
    )
    agent = ObsAgent()
    sampler.initialize(agent, seed=0)
    trajs = sampler.evaluate_agent(0)
    # 7 steps per env: two complete episodes each, the third unfinished and dropped.
    assert [t.Length for t in trajs] == [3, 3, 3, 3]
    assert agent.mode == "eval"


def test_evaluation_does_not_disturb_training_envs():
    sampler = SerialSampler(
        make_counter_env, env_kwargs=dict(episode_lengths=(50,)), batch_T=3, batch_B=1, eval_n_envs=1, eval_max_steps=5
    )
    sampler.initialize(ObsAgent(), seed=0)
    s, _ = sampler.obtain_samples(0)
    sampler.evaluate_agent(0)
    s, _ = sampler.obtain_samples(1)
    assert column(s, "env.observation")[:, 2].tolist() == [3, 4, 5]


def test_start_envs_needs_one_generator_per_env():
    from lightning_rl.envs import GymEnvWrapper
    from tests.samplers.helpers import CounterEnv

    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=1)
    sampler.initialize(ObsAgent(), seed=0)
    collector = ResetCollector(
        [GymEnvWrapper(CounterEnv())], sampler.step_buffer, sampler.samples, sampler.traj_info_factory
    )
    with pytest.raises(ValueError, match="one random generator per env"):
        collector.start_envs(5, rngs=[])


def test_lost_life_resets_the_agent_but_not_the_game():
    sampler = SerialSampler(LivesEnv, batch_T=7, batch_B=1, traj_info_cls=AtariTrajInfo)
    agent = ObsAgent()
    sampler.initialize(agent, seed=0)
    s, trajs = sampler.obtain_samples(0)
    # [games, lives_left, t]: a life is lost every 2 steps; the game (3 lives) ends at step 6.
    assert column(s, "env.observation").tolist() == [
        [0, 3, 0], [0, 3, 1], [0, 2, 2], [0, 2, 3], [0, 1, 4], [0, 1, 5], [1, 3, 0]
    ]
    assert column(s, "env.done").tolist() == [False, True, False, True, False, True, False]
    assert column(s, "env.prev_reward").tolist() == [0, 1, 0, 1, 0, 1, 0]
    assert agent.reset_one_calls == [0, 0, 0]
    assert sampler.train_collector.envs[0].n_resets == 2
    assert [(t.Length, t.Return, t.GameScore) for t in trajs] == [(6, 6.0, 60.0)]


def test_wait_reset_after_a_lost_life_continues_the_game():
    sampler = SerialSampler(LivesEnv, batch_T=3, batch_B=1, collector="wait_reset")
    sampler.initialize(ObsAgent(), seed=0)
    s, trajs = sampler.obtain_samples(0)
    assert column(s, "env.observation").tolist() == [[0, 3, 0], [0, 3, 1], [0, 0, 0]]
    s, trajs = sampler.obtain_samples(1)
    # The next batch resumes the same game after the lost life, without a reset.
    assert column(s, "env.observation").tolist() == [[0, 2, 2], [0, 2, 3], [0, 0, 0]]
    assert sampler.train_collector.envs[0].n_resets == 1 and trajs == []


class AgentInfoTrajInfo(TrajInfo):
    """Records the ``agent_info.steps`` it is handed at every step."""

    def __init__(self, discount: float = 0.99) -> None:
        super().__init__(discount=discount)
        self._steps_seen: list[float] = []

    def step(self, observation, action, reward, done, agent_info, env_info) -> None:
        super().step(observation, action, reward, done, agent_info, env_info)
        self._steps_seen.append(float(agent_info.steps))


@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
def test_custom_traj_info_gets_each_envs_agent_info(collector):
    sampler, _ = make_sampler(collector, traj_info_cls=AgentInfoTrajInfo)
    s, trajs = sampler.obtain_samples(0)
    steps = column(s, "agent.agent_info.steps").tolist()
    # Episode 0 ends after two steps; the TrajInfo saw the agent_info of exactly those steps.
    assert trajs[0]._steps_seen == steps[:2] == [0, 1]


def test_builtin_traj_infos_do_not_need_agent_info():
    assert not collectors.traj_info_wants_agent_info([TrajInfo(), TrajInfo()])
    assert not collectors.traj_info_wants_agent_info([AtariTrajInfo()])
    assert collectors.traj_info_wants_agent_info([AgentInfoTrajInfo()])


def test_write_rows_fills_nested_fields_and_names_a_misfit():
    inner = NamedArrayTupleSchema("Inner", ["lives"])
    outer = NamedArrayTupleSchema("Info", ["truncated", "ale"])
    dst = outer(np.zeros((2, 3), bool), inner(np.zeros((2, 3), np.int64)))
    rows = [outer(i == 1, inner(10 + i)) for i in range(3)]
    collectors.write_rows(dst, 1, rows)
    assert dst.truncated.tolist() == [[False, False, False], [False, True, False]]
    assert dst.ale.lives.tolist() == [[0, 0, 0], [10, 11, 12]]
    with pytest.raises(ValueError, match=r"env_info\.ale\.lives"):
        collectors.write_rows(dst, 0, [outer(False, inner(np.zeros(2))) for _ in range(3)])


def test_info_value_reads_present_fields_and_defaults_absent_ones():
    info = NamedArrayTupleSchema("Info", ["truncated"])(True)
    assert collectors.info_value(info, "truncated", False) is True
    assert collectors.info_value(info, "traj_done", "default") == "default"

    class Plain:
        traj_done = False

    # Objects without named-tuple fields fall back to getattr.
    assert collectors.info_value(Plain(), "traj_done", True) is False
    assert collectors.info_value(Plain(), "truncated", 3) == 3
