"""VectorSampler(backend="envpool"): EnvPool behind the gymnasium VectorEnv calls.

Expected values come from gymnasium's single envs and from the ``ale`` backend (itself equal to
AtariEnv frame for frame), never from the EnvPool adapter's own code.
"""

from __future__ import annotations

import sys

import gymnasium
import numpy as np
import pytest
import torch

from lightning_rl.agents import GaussianPgAgent
from lightning_rl.samplers import VectorSampler
from tests.samplers.helpers import ObsAgent, check_cartpole_transitions, leaves

pytest.importorskip("envpool")


class ScheduleAgent(ObsAgent):
    """The same action for every env, from a fixed schedule (independent of the observations)."""

    SCHEDULE = (0, 1, 2, 3, 2, 3, 2, 3)

    def step(self, observation, prev_action, prev_reward):
        out = super().step(observation, prev_action, prev_reward)
        self.calls = getattr(self, "calls", 0) + 1
        action = np.full(len(observation), self.SCHEDULE[(self.calls // 5) % len(self.SCHEDULE)])
        return type(out)(torch.as_tensor(action), out.agent_info)


def atari_run(backend: str, game: str, batches: int):
    sampler = VectorSampler(f"ALE/{game}-v5", env_kwargs=dict(max_start_noops=0, repeat_action_probability=0.0),
                            batch_T=100, batch_B=2, backend=backend)
    sampler.initialize(ScheduleAgent(n_actions=4), seed=7)
    try:
        out, trajs = [], []
        for itr in range(batches):
            samples, t = sampler.obtain_samples(itr)
            out.append([np.copy(x) for x in leaves(samples)])
            trajs += [(t_.Length, t_.Return, t_.GameScore) for t_ in t]
        names = [name for name, _ in leaf_names(samples)]
        return {name: np.concatenate([b[i] for b in out]) for i, name in enumerate(names)}, trajs
    finally:
        sampler.shutdown()


def leaf_names(samples, prefix=""):
    for name, value in zip(samples._fields, samples, strict=True):
        if value is None:
            continue
        if hasattr(value, "_fields"):
            yield from leaf_names(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


@pytest.mark.parametrize("game", ["Pong", "Breakout"])
def test_atari_matches_the_ale_backend_step_for_step(game):
    # Same emulator, same actions: rewards, flags and episodes are identical (Pong: one whole
    # game of 764 steps; Breakout: episodes end at lost lives). EnvPool's resize rounds a few
    # pixels differently: at most 1% of an observation's pixels may differ, and the frames from
    # before an episode's first step are zeros as in AtariEnv.
    ale, ale_trajs = atari_run("ale", game, 10)
    pool, pool_trajs = atari_run("envpool", game, 10)
    assert pool_trajs == ale_trajs and len(ale_trajs) >= 2
    for name in ale:
        # agent_info is the agent's function of the observation; the observations are below.
        if name != "env.observation" and not name.startswith("agent.agent_info"):
            np.testing.assert_array_equal(pool[name], ale[name], err_msg=name)
    obs_ale, obs_pool = ale["env.observation"], pool["env.observation"]
    differing = (obs_ale != obs_pool).reshape(*obs_ale.shape[:2], -1).mean(-1)
    assert differing.max() <= 0.01, differing.max()
    assert (obs_pool[0, :, :3] == 0).all() and (obs_pool[0, :, 3] > 0).any()


def test_cartpole_transitions_follow_gymnasium_cartpole_with_no_reset_rows():
    # Every reported transition is gymnasium CartPole's from the same state; after a done the
    # next row is a fresh episode (|s| <= 0.05), never EnvPool's own reset step.
    sampler = VectorSampler("CartPole-v1", batch_T=64, batch_B=4, backend="envpool")
    sampler.initialize(ObsAgent(n_actions=2), seed=3)
    try:
        checked, ends = check_cartpole_transitions(sampler, atol=1e-4)
        assert checked > 900 and ends > 10
    finally:
        sampler.shutdown()


def test_mujoco_episodes_are_truncated_at_the_time_limit_and_restart_from_the_initial_state():
    # HalfCheetah-v5: 1000-step episodes end truncated (not terminated); the row after the end is
    # a fresh episode, near gymnasium's initial pose (reset noise: qpos uniform within 0.1, qvel
    # 0.1 x standard normal), which a state 1000 random steps later is not.
    sampler = VectorSampler("HalfCheetah-v5", batch_T=250, batch_B=2, backend="envpool")
    sampler.initialize(GaussianPgAgent(hidden_sizes=[8]), seed=0)
    try:
        done, truncated, obs, trajs = [], [], [], []
        for itr in range(5):  # the sampler refills one buffer: copy each batch
            samples, t = sampler.obtain_samples(itr)
            done.append(np.copy(samples.env.done))
            truncated.append(np.copy(samples.env.truncated))
            obs.append(np.copy(samples.env.observation))
            trajs += t
        done, truncated, obs = np.concatenate(done), np.concatenate(truncated), np.concatenate(obs)
        assert [t.Length for t in trajs] == [1000, 1000]
        np.testing.assert_array_equal(np.flatnonzero(done[:, 0]), [999])
        assert truncated[999].all() and truncated.sum() == 2
        # obs = qpos[1:] (8, uniform noise within 0.1 of zero at reset) and qvel (9, 0.1 x normal).
        assert np.abs(obs[1000, :, :8]).max() <= 0.1 + 1e-6 and np.abs(obs[1000, :, 8:]).max() < 0.6
        assert np.abs(obs[999, :, 8:]).max() > 1.0  # an episode's end is no reset state
        assert np.isfinite([t.Return for t in trajs]).all()
    finally:
        sampler.shutdown()


def test_bad_arguments_name_the_problem(monkeypatch):
    # gymnasium has Taxi-v4, EnvPool only Taxi-v3.
    with pytest.raises(ValueError, match="EnvPool has no task 'Taxi-v4'"):
        VectorSampler("Taxi-v4", backend="envpool", batch_B=2).initialize(ObsAgent(n_actions=6), seed=0)
    with pytest.raises(ValueError, match="needs an env id EnvPool knows"):
        VectorSampler(lambda: gymnasium.make("CartPole-v1"), backend="envpool")
    with pytest.raises(ValueError, match="autoreset_mode"):
        VectorSampler("CartPole-v1", backend="envpool", autoreset_mode="same_step")
    with pytest.raises(ValueError, match="AtariEnv does not take"):
        VectorSampler("ALE/Pong-v5", backend="envpool", env_kwargs={"frameskip": 4})
    monkeypatch.setitem(sys.modules, "envpool", None)
    sampler = VectorSampler("CartPole-v1", backend="envpool", batch_B=2)
    with pytest.raises(ImportError, match=r"pip install -e \"\.\[bench\]\""):
        sampler.initialize(ObsAgent(n_actions=2), seed=0)
