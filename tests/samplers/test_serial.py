"""SerialSampler: same data as a hand-written loop, exact resume from its state_dict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.envs import make_env
from lightning_rl.samplers import SerialSampler
from tests.samplers.helpers import ObsAgent, assert_state_round_trip_continues, make_counter_env


def test_samples_match_a_hand_rolled_loop():
    T, B, seed = 40, 3, 11
    sampler = SerialSampler("CartPole-v1", batch_T=T, batch_B=B)
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    sampler.initialize(agent, seed=seed)
    torch.manual_seed(5)
    samples, trajs = sampler.obtain_samples(0)

    envs = [make_env("CartPole-v1", seed=seed + b) for b in range(B)]
    obs = np.stack([e.reset() for e in envs])
    prev_action = np.zeros(B, dtype=np.int64)
    prev_reward = np.zeros(B, dtype=np.float32)
    torch.manual_seed(5)
    returns, lengths, done_seen = [], [], 0
    ep_return, ep_len = np.zeros(B), np.zeros(B, dtype=int)
    for t in range(T):
        np.testing.assert_array_equal(samples.env.observation[t], obs)
        np.testing.assert_array_equal(samples.agent.prev_action[t], prev_action)
        np.testing.assert_array_equal(samples.env.prev_reward[t], prev_reward)
        action, agent_info = agent.step(obs, prev_action, prev_reward)
        action = action.numpy()
        np.testing.assert_array_equal(samples.agent.action[t], action)
        np.testing.assert_allclose(samples.agent.agent_info.value[t], agent_info.value.numpy())
        for b, env in enumerate(envs):
            o, r, d, info = env.step(action[b])
            assert samples.env.reward[t, b] == r and samples.env.done[t, b] == d
            assert samples.env.truncated[t, b] == info.truncated
            ep_return[b] += r
            ep_len[b] += 1
            if d:
                returns.append(ep_return[b])
                lengths.append(ep_len[b])
                ep_return[b], ep_len[b] = 0, 0
                o = env.reset()
                done_seen += 1
            obs[b] = o
            prev_action[b] = 0 if d else action[b]
            prev_reward[b] = 0 if d else r
    assert done_seen > 0, "the test should cover episode ends"
    assert sorted(zip(lengths, returns, strict=False)) == sorted((t.Length, t.Return) for t in trajs)
    np.testing.assert_array_equal(sampler.step_buffer.observation, obs)


def test_reset_one_is_called_for_exactly_the_done_envs():
    sampler = SerialSampler(
        make_counter_env, env_kwargs=dict(episode_lengths=(2, 3, 4)), batch_T=6, batch_B=3, max_decorrelation_steps=4
    )
    agent = ObsAgent()
    sampler.initialize(agent, seed=1)
    n_calls = 0
    last_done, last_steps = np.zeros(3, bool), None
    for itr in range(3):
        agent.reset_one_calls.clear()
        s, _ = sampler.obtain_samples(itr)
        done = np.concatenate([last_done[None], np.array(s.env.done)])
        # reset_one(b) follows each done of env b (a done at the last step is handled at the
        # end of its batch, before bootstrap values).
        expected = [b for t in range(1, len(done)) for b in np.flatnonzero(done[t])]
        assert sorted(agent.reset_one_calls) == sorted(expected)
        n_calls += len(expected)
        # The agent's per-env state restarts right after a done and counts up otherwise.
        steps = np.array(s.agent.agent_info.steps)
        if last_steps is not None:
            steps = np.concatenate([last_steps[None], steps])
            prev_done = done[:-1]
        else:
            prev_done = done[1:-1]
        np.testing.assert_array_equal(steps[1:][prev_done], 0)
        np.testing.assert_array_equal(steps[1:][~prev_done], steps[:-1][~prev_done] + 1)
        last_done, last_steps = np.array(s.env.done[-1]), np.array(s.agent.agent_info.steps[-1])
    assert n_calls > 3, "episodes should end in this test"


@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
def test_state_dict_round_trip_continues_identically(collector, tmp_path):
    assert_state_round_trip_continues(
        SerialSampler, "CartPole-v1", tmp_path, n_batches=2, batch_T=16, batch_B=3, max_decorrelation_steps=30,
        collector=collector, eval_n_envs=1, eval_max_steps=5,
    )


def test_load_state_dict_checks_env_count():
    a = SerialSampler(make_counter_env, batch_T=2, batch_B=2)
    a.initialize(ObsAgent())
    b = SerialSampler(make_counter_env, batch_T=2, batch_B=3)
    b.initialize(ObsAgent())
    with pytest.raises(ValueError, match="holds 2 envs, this sampler has batch_B=3"):
        b.load_state_dict(a.state_dict())


def test_shutdown_closes_envs():
    sampler = SerialSampler(make_counter_env, batch_T=2, batch_B=2)
    sampler.initialize(ObsAgent())
    envs = list(sampler.train_collector.envs)
    sampler.shutdown()
    assert sampler.train_collector.envs == [] and len(envs) == 2
