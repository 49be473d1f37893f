"""Explorer: digideep trajectories over the samplers' buffers, checked against hand-rolled env loops."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent, MultiAgent
from lightning_rl.data import buffer_func
from lightning_rl.envs import COOP_GRID_ID
from lightning_rl.explorer import Explorer, flat_dict_to_samples, samples_to_flat_dict
from lightning_rl.samplers import CpuSampler, GpuSampler, SerialSampler
from tests.toy_envs import LastStepRewardEnv

NAMES = ("agent_0", "agent_1")


def hand_rolled(env_id: str, seed: int, B: int, n_steps: int, agent: Any, env_kwargs: dict | None = None) -> dict:
    """Step ``B`` gymnasium envs with ``agent`` (one agent, or a MultiAgent's sub-agents called one by one).

    Returns time-major lists: observations, masks, rewards, infos, and per agent the actions,
    values, probabilities and RNN states, with one more row (the final pre-step) than steps.
    """
    envs = [gymnasium.make(env_id, **(env_kwargs or {})) for _ in range(B)]
    observations = [env.reset(seed=seed + b)[0] for b, env in enumerate(envs)]
    names = getattr(agent, "agent_names", ()) or ("agent",)
    subs = {n: agent.sub_agent(n) for n in names} if isinstance(agent, MultiAgent) else {"agent": agent}
    for sub in subs.values():
        sub.eval_mode(0)
        sub.eval_deterministic = True
        sub.reset()
    prev_action = {n: np.zeros(B, dtype=np.int64) for n in names}
    prev_reward = np.zeros(B, dtype=np.float32)
    masks = np.ones(B, dtype=np.float32)
    out: dict[str, list] = {"masks": [], "rewards": [], "truncated": [], "obs": []}
    for t in range(n_steps + 1):
        out["masks"].append(masks.copy())
        out["obs"].append(observations)
        actions = {}
        for n, sub in subs.items():
            own = [o[n] if isinstance(o, dict) else o for o in observations]
            inputs = (np.stack(own), prev_action[n], prev_reward)
            step = sub.step(*(torch.as_tensor(x) for x in inputs))
            actions[n] = step.action.numpy()
            out.setdefault(f"{n}/actions", []).append(actions[n])
            out.setdefault(f"{n}/value", []).append(step.agent_info.value.numpy())
            out.setdefault(f"{n}/prob", []).append(step.agent_info.dist_info.prob.numpy())
            if hasattr(step.agent_info, "prev_rnn_state"):
                out.setdefault(f"{n}/h", []).append(step.agent_info.prev_rnn_state.h.numpy().copy())
        if t == n_steps:
            break
        rewards, truncations, next_observations = np.zeros(B, np.float32), np.zeros(B, bool), []
        for b, env in enumerate(envs):
            multi = isinstance(agent, MultiAgent)
            action = {n: int(actions[n][b]) for n in names} if multi else int(actions["agent"][b])
            o, r, terminated, truncated, _ = env.step(action)
            rewards[b], truncations[b] = r, truncated and not terminated
            done = terminated or truncated
            masks[b] = 0.0 if done else 1.0
            for n in names:
                prev_action[n][b] = 0 if done else actions[n][b]
            prev_reward[b] = 0.0 if done else r
            if done:
                o = env.reset()[0]
                for sub in subs.values():
                    sub.reset_one(b)
            next_observations.append(o)
        observations = next_observations
        out["rewards"].append(rewards)
        out["truncated"].append(truncations)
    return out


def batch_major(rows: list) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32).swapaxes(0, 1)


@pytest.mark.parametrize("lstm_size", [None, 8])
def test_single_agent_trajectory_matches_a_hand_rolled_loop(lstm_size):
    torch.manual_seed(0)
    agent = CategoricalPgAgent(hidden_sizes=(16,), lstm_size=lstm_size)
    kwargs = {"max_episode_steps": 7}
    sampler = SerialSampler("CartPole-v1", env_kwargs=kwargs, batch_T=6, batch_B=3)
    explorer = Explorer(sampler, agent, mode="test", n_steps=12, deterministic=True, seed=5)
    trajectory = explorer.update()
    expected = hand_rolled("CartPole-v1", 5, 3, 12, agent, kwargs)

    keys = {"/observations", "/masks", "/rewards", "/infos/truncated", "/infos/terminated", "/agents/agent/actions",
            "/agents/agent/artifacts/dist_info/prob", "/agents/agent/artifacts/value"}
    if lstm_size:
        keys |= {"/agents/agent/hidden_state/h", "/agents/agent/hidden_state/c"}
    assert set(trajectory) == keys
    assert all(v.dtype == np.float32 and v.shape[:2] == (3, 13) for v in trajectory.values())
    assert trajectory["/masks"].shape == trajectory["/rewards"].shape == (3, 13, 1)
    np.testing.assert_array_equal(trajectory["/observations"], batch_major(expected["obs"]))
    np.testing.assert_array_equal(trajectory["/masks"][..., 0], batch_major(expected["masks"]))
    np.testing.assert_array_equal(trajectory["/rewards"][:, :12, 0], batch_major(expected["rewards"]))
    assert np.isnan(trajectory["/rewards"][:, 12]).all() and np.isnan(trajectory["/infos/truncated"][:, 12]).all()
    np.testing.assert_array_equal(trajectory["/infos/truncated"][:, :12], batch_major(expected["truncated"]))
    np.testing.assert_array_equal(trajectory["/agents/agent/actions"], batch_major(expected["agent/actions"]))
    np.testing.assert_allclose(trajectory["/agents/agent/artifacts/value"], batch_major(expected["agent/value"]))
    prob = trajectory["/agents/agent/artifacts/dist_info/prob"]
    np.testing.assert_allclose(prob, batch_major(expected["agent/prob"]))
    if lstm_size:
        assert trajectory["/agents/agent/hidden_state/h"].shape == (3, 13, 1, lstm_size)
        np.testing.assert_allclose(trajectory["/agents/agent/hidden_state/h"], batch_major(expected["agent/h"]))
    # Episodes of 7 steps: each env finished one in these 12 steps, and its mask marks the restart.
    assert explorer.episodes == 3 and len(explorer.traj_infos) == 3
    assert (trajectory["/masks"][:, 7, 0] == 0).all()
    assert (explorer.updates, explorer.steps, explorer.env_steps) == (1, 12, 36)


@pytest.mark.parametrize("share", [False, True])
def test_multi_agent_trajectory_matches_a_hand_rolled_loop(share):
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)), share_parameters=share, agent_id=False)
    explorer = Explorer(SerialSampler(COOP_GRID_ID, batch_T=25, batch_B=2), agent, mode="eval", deterministic=True)
    trajectory = explorer.update()
    expected = hand_rolled(COOP_GRID_ID, 0, 2, 25, agent)

    per_agent = {"observations/{}", "agents/{}/actions", "agents/{}/artifacts/dist_info/prob",
                 "agents/{}/artifacts/value", "infos/agent_rewards/{}"}
    keys = {"/masks", "/rewards", "/infos/truncated", "/infos/terminated"}
    keys |= {"/" + k.format(n) for k in per_agent for n in NAMES}
    assert set(trajectory) == keys
    assert trajectory["/observations/agent_0"].shape == (2, 26, 6)
    assert trajectory["/agents/agent_1/artifacts/dist_info/prob"].shape == (2, 26, 5)
    np.testing.assert_array_equal(trajectory["/masks"][..., 0], batch_major(expected["masks"]))
    np.testing.assert_array_equal(trajectory["/rewards"][:, :25, 0], batch_major(expected["rewards"]))
    for n in NAMES:
        observations = batch_major([[o[n] for o in row] for row in expected["obs"]])
        np.testing.assert_array_equal(trajectory[f"/observations/{n}"], observations)
        np.testing.assert_array_equal(trajectory[f"/agents/{n}/actions"], batch_major(expected[f"{n}/actions"]))
        value = batch_major(expected[f"{n}/value"])
        np.testing.assert_allclose(trajectory[f"/agents/{n}/artifacts/value"], value, rtol=1e-5)
    # The team reward is the sum of the agents' own rewards (reported in the infos).
    own = trajectory["/infos/agent_rewards/agent_0"] + trajectory["/infos/agent_rewards/agent_1"]
    np.testing.assert_allclose(own[:, :25], trajectory["/rewards"][:, :25, 0])
    assert (trajectory["/masks"][:, 20, 0] == 0).all() and explorer.episodes == 2


def test_masks_mark_the_first_observation_of_each_episode_across_updates():
    explorer = Explorer(
        SerialSampler(LastStepRewardEnv, env_kwargs={"episode_length": 3}, batch_T=9, batch_B=2), CategoricalPgAgent()
    )
    first, second = explorer.update(), explorer.update()
    for trajectory in (first, second):
        np.testing.assert_array_equal(trajectory["/masks"][:, 1:, 0], [[1, 1, 0, 1, 1, 0, 1, 1, 0]] * 2)
        np.testing.assert_array_equal(trajectory["/rewards"][:, :9, 0], [[0, 0, 1] * 3] * 2)
        np.testing.assert_allclose(trajectory["/observations"][0, :, 0], np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0]) / 3)
    # The first update starts from fresh resets (mask 1), the second right after an episode end.
    np.testing.assert_array_equal(first["/masks"][:, 0, 0], [1, 1])
    np.testing.assert_array_equal(second["/masks"][:, 0, 0], [0, 0])
    assert explorer.episodes == 12 and len(explorer.traj_infos) == 6


def test_do_reset_restarts_every_update_except_right_after_the_start():
    sampler = SerialSampler(LastStepRewardEnv, env_kwargs={"episode_length": 3}, batch_T=4, batch_B=2)
    explorer = Explorer(sampler, CategoricalPgAgent(), do_reset=True)
    first, second = explorer.update(), explorer.update()
    np.testing.assert_allclose(first["/observations"][0, :, 0], np.array([0, 1, 2, 0, 1]) / 3)
    np.testing.assert_allclose(second["/observations"][0, :, 0], np.array([0, 1, 2, 0, 1]) / 3)
    np.testing.assert_array_equal(second["/masks"][:, :, 0], [[1, 1, 1, 0, 1]] * 2)
    # Without do_reset the second update goes on from t=1 of the running episode.
    sampler2 = SerialSampler(LastStepRewardEnv, env_kwargs={"episode_length": 3}, batch_T=4, batch_B=2)
    explorer2 = Explorer(sampler2, CategoricalPgAgent())
    explorer2.update()
    np.testing.assert_allclose(explorer2.update()["/observations"][0, :, 0], np.array([1, 2, 0, 1, 2]) / 3)


def test_an_explorer_on_a_running_sampler_resets_at_its_first_update():
    agent = CategoricalPgAgent()
    sampler = SerialSampler(LastStepRewardEnv, env_kwargs={"episode_length": 3}, batch_T=4, batch_B=1)
    sampler.initialize(agent, seed=0)
    sampler.obtain_samples(0)
    trajectory = Explorer(sampler, agent, do_reset=True).update()
    np.testing.assert_allclose(trajectory["/observations"][0, :, 0], np.array([0, 1, 2, 0, 1]) / 3)


def test_without_final_action_the_final_row_has_observations_but_no_agent_entries():
    explorer = Explorer(SerialSampler("CartPole-v1", batch_T=5, batch_B=2), CategoricalPgAgent(), final_action=False)
    trajectory = explorer.update()
    assert np.isnan(trajectory["/agents/agent/actions"][:, 5]).all()
    assert np.isnan(trajectory["/agents/agent/artifacts/value"][:, 5]).all()
    assert not np.isnan(trajectory["/agents/agent/actions"][:, :5]).any()
    np.testing.assert_array_equal(trajectory["/observations"][:, 5], explorer.sampler.step_buffer.observation)


def test_final_action_leaves_a_recurrent_agents_state_as_it_was():
    agent = CategoricalPgAgent(hidden_sizes=(8,), lstm_size=4)
    explorer = Explorer(SerialSampler("CartPole-v1", batch_T=5, batch_B=2), agent)
    trajectory = explorer.update()
    state = agent.prev_rnn_state.h.transpose(0, 1).numpy()
    # The final row's hidden state is the state the next step will act from, still the agent's.
    np.testing.assert_allclose(trajectory["/agents/agent/hidden_state/h"][:, 5], state)
    again = explorer.update()
    np.testing.assert_allclose(again["/agents/agent/hidden_state/h"][:, 0], state)


def test_train_mode_samples_and_test_mode_acts_deterministically():
    torch.manual_seed(0)
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    train = Explorer(SerialSampler("CartPole-v1", batch_T=64, batch_B=2), agent, mode="train")
    trajectory = train.update()
    greedy = trajectory["/agents/agent/artifacts/dist_info/prob"].argmax(-1)
    assert (trajectory["/agents/agent/actions"] != greedy).any()
    assert agent.mode == "sample"
    test = Explorer(SerialSampler("CartPole-v1", batch_T=64, batch_B=2), agent, mode="test", deterministic=True)
    trajectory = test.update()
    np.testing.assert_array_equal(
        trajectory["/agents/agent/actions"], trajectory["/agents/agent/artifacts/dist_info/prob"].argmax(-1)
    )
    assert agent.mode == "eval" and agent.eval_deterministic is False


def test_render_keeps_a_frame_per_step_of_env_zero():
    sampler = SerialSampler(COOP_GRID_ID, env_kwargs={"render_mode": "rgb_array"}, batch_T=4, batch_B=2)
    explorer = Explorer(sampler, MultiAgent(CategoricalPgAgent()), mode="eval", render=True, render_delay=0.001)
    explorer.update()
    assert len(explorer.frames) == 4 and explorer.frames[0].shape == (40, 40, 3)
    assert all(not hasattr(env, "frames") for env in sampler.train_collector.envs)


@pytest.mark.parametrize("sampler_cls", [CpuSampler, GpuSampler])
def test_parallel_samplers_give_the_serial_trajectory_in_eval_mode_and_reset(sampler_cls):
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)))

    def run(cls) -> list[dict]:
        kwargs = {} if cls is SerialSampler else {"n_workers": 2}
        explorer = Explorer(cls(COOP_GRID_ID, batch_T=8, batch_B=2, **kwargs), agent, mode="test", deterministic=True,
                            do_reset=True, seed=3)
        try:
            return [explorer.update() for _ in range(2)]
        finally:
            explorer.close()

    for parallel, serial in zip(run(sampler_cls), run(SerialSampler), strict=False):
        assert parallel.keys() == serial.keys()
        for key in serial:
            np.testing.assert_allclose(parallel[key], serial[key], rtol=1e-6, err_msg=key)


def test_state_dict_round_trip_continues_exactly():
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)))

    def explorer() -> Explorer:
        sampler = SerialSampler(COOP_GRID_ID, batch_T=7, batch_B=2)
        return Explorer(sampler, agent, mode="test", deterministic=True, seed=1)

    original = explorer()
    original.update()
    original.update()
    state = original.state_dict()
    restored = explorer()
    restored.load_state_dict(state)
    assert (restored.updates, restored.steps, restored.env_steps, restored.episodes) == (2, 14, 28, 0)
    a, b = original.update(), restored.update()
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert original.state_dict()["episodes"] == restored.episodes == 2
    with pytest.raises(ValueError, match="batch_B=3"):
        Explorer(SerialSampler(COOP_GRID_ID, batch_T=7, batch_B=3), agent).load_state_dict(state)


@pytest.mark.parametrize("share", [False, True])
def test_flat_dict_and_sample_tree_round_trip_without_copies(share):
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,), lstm_size=4), share_parameters=share)
    sampler = SerialSampler(COOP_GRID_ID, batch_T=3, batch_B=2, collector="wait_reset")
    sampler.initialize(agent, bootstrap_value=True)
    samples, _ = sampler.obtain_samples(0)
    flat = samples_to_flat_dict(samples, agent.agent_names)
    assert {"/observations/agent_0", "/rewards", "/prev_rewards", "/dones", "/truncations",
            "/infos/agent_rewards/agent_1", "/agents/agent_0/actions", "/agents/agent_0/prev_actions",
            "/agents/agent_1/hidden_state/h", "/agents/agent_1/hidden_state/c", "/agents/agent_1/artifacts/value",
            "/agents/agent_0/bootstrap_value", "/agents/agent_0/artifacts/dist_info/prob"} <= set(flat)
    rebuilt = flat_dict_to_samples(flat, samples, agent.agent_names)
    before, after = [], []
    buffer_func(samples, before.append)
    buffer_func(rebuilt, after.append)
    assert len(before) == len(after) == len(flat) and all(x is y for x, y in zip(before, after, strict=False))
    assert rebuilt.agent.action._fields == NAMES
    flat["/agents/agent_1/actions"][0, 1] = 4
    assert samples.agent.action.agent_1[0, 1] == 4
    with pytest.raises(ValueError, match="no key '/agents/agent_1/artifacts/value'"):
        flat_dict_to_samples({k: v for k, v in flat.items() if k != "/agents/agent_1/artifacts/value"}, samples, NAMES)
    with pytest.raises(ValueError, match="/extra"):
        flat_dict_to_samples({**flat, "/extra": np.zeros(3)}, samples, NAMES)
    with pytest.raises(ValueError, match="one field per agent"):
        samples_to_flat_dict(samples, ("alice", "bob"))


def test_single_agent_samples_live_under_agent():
    agent = CategoricalPgAgent()
    sampler = SerialSampler("CartPole-v1", batch_T=3, batch_B=2)
    sampler.initialize(agent)
    samples, _ = sampler.obtain_samples(0)
    flat = samples_to_flat_dict(samples)
    assert {k for k in flat if k.startswith("/agents/")} == {
        "/agents/agent/actions", "/agents/agent/prev_actions", "/agents/agent/artifacts/dist_info/prob",
        "/agents/agent/artifacts/value",
    }
    assert flat["/agents/agent/actions"] is samples.agent.action
    assert flat_dict_to_samples(flat, samples).agent.action is samples.agent.action


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mode="play"), "mode"),
        (dict(n_steps=6), "n_steps"),
        (dict(n_steps=0), "n_steps"),
        (dict(deterministic=True), "deterministic"),
        (dict(render_delay=-1.0), "render_delay"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Explorer(SerialSampler("CartPole-v1", batch_T=4, batch_B=1), CategoricalPgAgent(), **kwargs)


def test_arguments_the_sampler_cannot_serve_fail_before_it_starts():
    cpu = CpuSampler("CartPole-v1", batch_T=4, batch_B=2)
    with pytest.raises(ValueError, match="render=True needs a SerialSampler"):
        Explorer(cpu, CategoricalPgAgent(), render=True)
    with pytest.raises(ValueError, match="final_action with a recurrent agent"):
        Explorer(cpu, MultiAgent(CategoricalPgAgent(lstm_size=4)))
    assert not cpu.initialized
    serial = SerialSampler("CartPole-v1", batch_T=4, batch_B=1)
    serial.initialize(CategoricalPgAgent())
    with pytest.raises(ValueError, match="another agent"):
        Explorer(serial, CategoricalPgAgent())
