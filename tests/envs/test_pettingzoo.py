"""PettingZoo envs: the adapter, agents that leave early (masked rows), heterogeneous spaces, an
AECEnv, import paths, check-env, exact resume, and learning a coordination game through the CLI."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
import torch
import yaml
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import AgentSelector
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent, MultiAgent
from lightning_rl.algos import MultiAgentPPO
from lightning_rl.cli import check_env_command, main
from lightning_rl.envs import MultiAgentTrajInfo, PettingZooEnv, make_env
from lightning_rl.envs.check import EnvCheckError, check_env
from lightning_rl.envs.pettingzoo import is_pettingzoo_id
from lightning_rl.samplers import SerialSampler, VectorSampler
from tests.algos.test_on_policy import assert_same, make_trainer

HERE = "tests.envs.test_pettingzoo"


class Coordination(ParallelEnv):
    """Two agents each pick one of ``n_actions`` every step; both earn 1 when they picked the
    same action, else 0. ``length`` steps per episode. Observations: the step count scaled to
    [0, 1] and each agent's own id, so a policy can only score by agreeing on a convention.

    A random pair matches with probability ``1 / n_actions``: ``2 * length / n_actions`` team
    return per episode; a coordinated pair earns ``2 * length``.
    """

    metadata = {"name": "coordination_v0", "render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, n_actions: int = 3, length: int = 8, render_mode: str | None = None) -> None:
        self.possible_agents = ["agent_0", "agent_1"]
        self.agents: list[str] = []
        self.n_actions, self.length, self.render_mode = n_actions, length, render_mode
        self.t = 0
        self.last = np.zeros(2, dtype=np.int64)

    @functools.cache  # noqa: B019 - PettingZoo's API test wants the same space object every call
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.n_actions)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.t / self.length, i == 0, i == 1], dtype=np.float32)
                for i, a in enumerate(self.possible_agents) if a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        match = float(actions["agent_0"] == actions["agent_1"])
        self.last = np.array([actions["agent_0"], actions["agent_1"]])
        rewards = {a: match for a in self.agents}
        truncations = {a: self.t >= self.length for a in self.agents}
        terminations = {a: False for a in self.agents}
        obs = self._obs()
        if self.t >= self.length:
            self.agents = []
        return obs, rewards, terminations, truncations, {a: {} for a in rewards}

    def render(self):
        image = np.zeros((16, 16, 3), dtype=np.uint8)
        image[:, :8, 0] = 80 * self.last[0]
        image[:, 8:, 1] = 80 * self.last[1]
        return image


def coordination(**kwargs) -> Coordination:
    return Coordination(**kwargs)


class LeavesEarly(ParallelEnv):
    """``runner`` lives 6 steps, ``quitter`` terminates after 2; each earns 1 per step it acts.
    Heterogeneous: ``runner`` observes 2 values and picks one of 2 actions, ``quitter`` 3 and 3.
    Raises if it is given an action for an agent that is gone (PettingZoo's rule)."""

    metadata = {"name": "leaves_early_v0"}
    lives = {"runner": 6, "quitter": 2}

    def __init__(self) -> None:
        self.possible_agents = ["runner", "quitter"]
        self.agents: list[str] = []
        self.t = 0
        self.received: list[set[str]] = []

    def observation_space(self, agent):
        return spaces.Box(-10.0, 10.0, shape=(2 if agent == "runner" else 3,), dtype=np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2 if agent == "runner" else 3)

    def _obs(self):
        return {a: np.full(self.observation_space(a).shape, self.t + 1, dtype=np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        if set(actions) != set(self.agents):
            raise AssertionError(f"actions for {sorted(actions)}, live agents {self.agents}")
        self.received.append(set(actions))
        self.t += 1
        acting = list(self.agents)
        terminations = {a: self.t >= self.lives[a] for a in acting}
        self.agents = [a for a in acting if not terminations[a]]
        obs = {a: np.full(self.observation_space(a).shape, self.t + 1, dtype=np.float32) for a in acting}
        return obs, {a: 1.0 for a in acting}, terminations, dict.fromkeys(acting, False), {a: {} for a in acting}


class TakeTurns(AECEnv):
    """A turn-based AECEnv: ``first`` then ``second`` pick 0 or 1; each earns 1 when its pick equals
    the other's last pick. 4 turns each, then both are truncated."""

    metadata = {"name": "take_turns_v0", "is_parallelizable": True}

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["first", "second"]
        self.observation_spaces = {a: spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def observe(self, agent):
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        return np.array([self.picks[other], self.turns / 8], dtype=np.float32)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.picks = {a: 0 for a in self.agents}
        self.turns = 0
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.next()

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        self.rewards = {a: 0.0 for a in self.agents}
        self.rewards[agent] = float(int(action) == self.picks[other])
        self.picks[agent] = int(action)
        self.turns += 1
        if self.turns >= 8:
            self.truncations = {a: True for a in self.agents}
        self._accumulate_rewards()
        self.agent_selection = self._selector.next()


def test_import_paths_are_told_from_gymnasium_ids():
    assert is_pettingzoo_id("mpe2.simple_spread_v3")
    assert is_pettingzoo_id(f"{HERE}:coordination")
    for gym_id in ("CartPole-v1", "ALE/Pong-v5", "lightning_rl/CoopGrid-v0", "Pong", 3):
        assert not is_pettingzoo_id(gym_id)


def test_parallel_env_becomes_the_multi_agent_convention():
    env = make_env(f"{HERE}:coordination", seed=0, n_actions=4)
    assert env.action_space.names == ("agent_0", "agent_1")
    assert env.observation_space.names == ("agent_0", "agent_1", "agent_mask")  # no state(): no state field
    observation = env.reset()
    np.testing.assert_array_equal(observation.agent_mask, [1, 1])
    np.testing.assert_array_equal(observation.agent_1, [0, 0, 1])
    step = env.step(env.action_space.null_value())  # both pick 0: a match, 1 each
    assert step.reward == 2.0 and not step.done
    assert (step.env_info.agent_rewards.agent_0, step.env_info.agent_rewards.agent_1) == (1.0, 1.0)
    for _ in range(7):
        step = env.step(env.action_space.null_value())
    assert step.done and step.env_info.truncated and not step.env_info.terminated
    assert step.env_info.agent_truncated.agent_0 and not step.env_info.agent_terminated.agent_0


def test_global_state_is_an_observation_field():
    env = make_env("mpe2.simple_spread_v3", seed=0, N=2)
    observation = env.reset()
    inner = env.env.parallel_env
    np.testing.assert_array_equal(observation.state, inner.state())
    assert observation.state.shape == (2 * 12,)  # simple_spread: N agents' 4 + 2N + 2(N-1) + ... (state_space)


def test_agents_that_leave_early_are_masked_and_not_stepped():
    env = make_env(LeavesEarly, seed=0)
    inner = env.env.parallel_env
    shapes = dict(zip(env.observation_space.names, (s.shape for s in env.observation_space.spaces), strict=True))
    assert shapes["runner"] == (2,) and shapes["quitter"] == (3,)
    observation = env.reset()
    masks, quitter_obs, terminated = [observation.agent_mask], [observation.quitter], []
    for _ in range(6):
        step = env.step(env.action_space.null_value())
        masks.append(step.observation.agent_mask)
        quitter_obs.append(step.observation.quitter)
        terminated.append((step.env_info.agent_terminated.runner, step.env_info.agent_terminated.quitter))
    assert step.done and step.env_info.terminated
    # Worked out from the env's rules: the quitter acts at steps 0 and 1 only.
    np.testing.assert_array_equal(np.array(masks)[:, 1], [1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(np.array(masks)[:, 0], [1, 1, 1, 1, 1, 1, 0])
    assert inner.received == [{"runner", "quitter"}] * 2 + [{"runner"}] * 4
    assert terminated == [(False, False), (False, True)] + [(False, False)] * 3 + [(True, False)]
    np.testing.assert_array_equal(quitter_obs[3], np.zeros(3))  # gone: a zero observation


def test_masked_rows_count_in_no_loss_and_in_no_advantage():
    pl.seed_everything(0)
    module = MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[8])),  # heterogeneous spaces: one policy each
        SerialSampler(env_id=LeavesEarly, batch_T=12, batch_B=2),
        agent_rewards_key="agent_rewards", discount=1.0, gae_lambda=1.0, normalize_advantage=False,
        epochs=1, minibatches=1, total_env_steps=48, log_interval_steps=24,
    )
    module.setup("fit")
    with torch.no_grad():  # every value nonzero, also of the zero observation of an agent that left
        for p in module.agent.parameters():
            p.fill_(0.05)
    batch = module.make_dataset().collect()
    # Episodes of 6 steps: the quitter acts at steps 0, 1 of each; the runner at all 6.
    quitter = np.tile([1, 1, 0, 0, 0, 0], 2)[:, None].repeat(2, axis=1)
    np.testing.assert_array_equal(batch.quitter.valid.numpy(), quitter)
    np.testing.assert_array_equal(batch.runner.valid.numpy(), np.ones((12, 2)))
    # Discount 1, lambda 1: the return is the rewards left in the agent's own episode (it ends
    # when the agent leaves): the quitter's 2, 1; the runner's 6, 5, ..., 1.
    # (rows t = 0, 1 of both envs, then t = 6, 7: row-major order)
    np.testing.assert_allclose(batch.quitter.return_.numpy()[quitter > 0], np.tile([2.0, 2.0, 1.0, 1.0], 2))
    np.testing.assert_allclose(batch.runner.return_.numpy()[:, 0], np.tile(np.arange(6.0, 0.0, -1.0), 2), rtol=1e-6)
    # Lambda 0: the return is r + V(next) unless the agent is done; the quitter is done at the
    # step it leaves (t = 1, 7), so its return there is its reward alone, no value of an empty row.
    dataset = module.make_dataset()
    dataset.gae_lambda = 0.0
    one_step = dataset.process_samples(module.sampler.samples)
    np.testing.assert_allclose(one_step.quitter.return_.numpy()[[1, 7]], np.ones((2, 2)))
    # A loss on the masked rows alone is zero: scaling their advantages changes nothing.
    scrambled = batch._replace(quitter=batch.quitter._replace(
        advantage=batch.quitter.advantage + 100.0 * torch.from_numpy(1.0 - quitter).float()))
    a, b = module.loss(batch, 0.2), module.loss(scrambled, 0.2)
    torch.testing.assert_close(a["quitter/pi_loss"], b["quitter/pi_loss"])


def test_per_agent_returns_are_recorded_per_episode():
    sampler = SerialSampler(env_id=LeavesEarly, batch_T=12, batch_B=1, traj_info_cls=MultiAgentTrajInfo)
    sampler.initialize(MultiAgent(CategoricalPgAgent(hidden_sizes=[8])), seed=0)
    _, infos = sampler.obtain_samples(0)
    assert [info.AgentReturns for info in infos] == [{"runner": 6.0, "quitter": 2.0}] * 2
    assert [info.Return for info in infos] == [8.0, 8.0]


def test_shared_policy_needs_alike_agents():
    with pytest.raises(ValueError, match="same observation and action spaces"):
        MultiAgent(CategoricalPgAgent(), share_parameters=True).initialize(make_env(LeavesEarly).spaces)


def test_aec_env_goes_through_pettingzoos_conversion():
    env = make_env(TakeTurns, seed=0)
    assert isinstance(env.env, PettingZooEnv)
    assert env.action_space.names == ("first", "second")
    observation = env.reset()
    np.testing.assert_array_equal(observation.agent_mask, [1, 1])
    total, steps = 0.0, 0
    while True:
        action = env.action_space.null_value()
        step = env.step(action)
        total, steps = total + step.reward, steps + 1
        if step.done:
            break
    # aec_to_parallel: one parallel step = one turn of each agent; both always pick 0, so each
    # matches the other's last pick (0 at the start): 4 parallel steps, 1 + 1 each.
    assert steps == 4 and total == 8.0


def test_bad_envs_and_agent_sets_get_clear_errors():
    with pytest.raises(ValueError, match="cannot import module 'no_such_pkg.envs'"):
        make_env("no_such_pkg.envs")
    with pytest.raises(ValueError, match="has no callable parallel_env or env"):
        make_env("json.decoder")
    with pytest.raises(ValueError, match="neither a PettingZoo ParallelEnv or AECEnv nor a gymnasium.Env"):
        make_env("json:dumps", obj=1)
    with pytest.raises(ValueError, match="must be a PettingZoo ParallelEnv or AECEnv"):
        PettingZooEnv(gymnasium.make("CartPole-v1"))
    bad = Coordination()
    bad.possible_agents = ["agent-0", "state"]
    with pytest.raises(ValueError, match=r"agent ids \['agent-0', 'state'\] cannot be field names"):
        PettingZooEnv(bad)
    empty = Coordination()
    empty.possible_agents = []
    with pytest.raises(ValueError, match="no possible_agents"):
        PettingZooEnv(empty)


def test_check_env_runs_pettingzoos_api_test_and_the_package_rules(capsys):
    assert check_env_command([f"{HERE}:coordination"]) == 0
    assert "passes the env contract checks" in capsys.readouterr().out
    check_env(TakeTurns)  # AEC: api_test, then parallel_api_test on the conversion

    class Broken(Coordination):
        def reset(self, seed=None, options=None):  # observations without the agents' infos
            obs, _ = super().reset(seed, options)
            return obs, {}

    with pytest.raises(EnvCheckError, match="PettingZoo's API test"):
        check_env(Broken)


def test_vector_sampler_steps_copies_like_the_serial_sampler():
    batches = []
    for cls, kwargs in ((SerialSampler, {}), (VectorSampler, {"backend": "sync"})):
        torch.manual_seed(0)
        sampler = cls("mpe2.simple_spread_v3", env_kwargs={"N": 2, "max_cycles": 5}, batch_T=12, batch_B=2, **kwargs)
        sampler.initialize(MultiAgent(CategoricalPgAgent(hidden_sizes=[8]), share_parameters=True), seed=0)
        samples, infos = sampler.obtain_samples(0)
        batches.append((samples.env.observation.agent_1.copy(), samples.env.observation.state.copy(),
                        samples.env.done.copy(), samples.env.env_info.agent_rewards.agent_0.copy()))
        assert len(infos) == 4 and set(infos[0].AgentReturns) == {"agent_0", "agent_1"}
        sampler.shutdown()
    for serial, vector in zip(*batches, strict=True):
        np.testing.assert_allclose(serial, vector, rtol=1e-6)


def simple_spread_ppo(critic: str = "centralized", total_env_steps: int = 10**6) -> MultiAgentPPO:
    return MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[16]), share_parameters=True, critic=critic),
        SerialSampler(env_id="mpe2.simple_spread_v3", env_kwargs={"N": 2, "max_cycles": 10}, batch_T=20, batch_B=2),
        agent_rewards_key="agent_rewards", epochs=2, minibatches=2, total_env_steps=total_env_steps,
        log_interval_steps=40, seed=5,
    )


def test_pettingzoo_run_resumes_bit_for_bit(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> MultiAgentPPO:
        pl.seed_everything(3)
        module = simple_spread_ppo()
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    part = run(2, tmp_path / "part")
    assert "envs" in part.sampler.state_dict()  # MPE's state is stored as data: nothing restarts
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 4 * 40
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    for a, b in zip(full.trainer.optimizers, resumed.trainer.optimizers, strict=True):
        assert_same(a.state_dict(), b.state_dict(), "optimizer")
    # The envs went on from the same positions and velocities as the uninterrupted run's.
    assert_same(full.sampler.state_dict()["envs"], resumed.sampler.state_dict()["envs"], "envs")
    np.testing.assert_array_equal(full.sampler.samples.env.observation.state,
                                  resumed.sampler.samples.env.observation.state)


def last_return(run_dir: Path, tag: str = "train/return_mean") -> float:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next(run_dir.rglob("events.out.tfevents.*"))))
    events.Reload()
    return events.Scalars(tag)[-1].value


@pytest.mark.parametrize("share", [True, False])
def test_two_agents_learn_to_coordinate_through_the_cli(tmp_path, monkeypatch, share):
    monkeypatch.chdir(tmp_path)
    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs/ppo/simple_spread.yaml").read_text())
    init = config["model"]["init_args"]
    init["agent"]["init_args"].update(share_parameters=share, critic="local")
    init["agent"]["init_args"]["agents"]["init_args"]["hidden_sizes"] = [32]
    init["sampler"]["init_args"].update(env_id=f"{HERE}:coordination", env_kwargs={"n_actions": 3}, batch_T=32,
                                        batch_B=4)
    init.update(total_env_steps=3072, log_interval_steps=512, epochs=4, minibatches=2, learning_rate=0.01,
                discount=0.9, entropy_loss_coeff=0.0)
    path = tmp_path / "coordination.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(path), "--trainer.enable_progress_bar", "false"])
    run_dir = next((tmp_path / "runs").iterdir())
    # Random play: 2 * 8 / 3 = 5.3 per episode; coordinated play: 16.
    assert last_return(run_dir) > 12.0
    assert last_return(run_dir, "train/return_mean/agent_0") > 6.0


def test_play_records_a_video_of_the_team(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {
        "model": {"class_path": "lightning_rl.algos.MultiAgentPPO", "init_args": {
            "agent": {"class_path": "lightning_rl.agents.MultiAgent", "init_args": {
                "agents": {"class_path": "lightning_rl.agents.CategoricalPgAgent", "init_args": {"hidden_sizes": [8]}},
                "share_parameters": True}},
            "sampler": {"class_path": "lightning_rl.samplers.SerialSampler", "init_args": {
                "env_id": "mpe2.simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 5}, "batch_T": 8,
                "batch_B": 1}},
            "total_env_steps": 8, "log_interval_steps": 8}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(json.dumps(config))
    main(["fit", "--config", str(path), "--trainer.enable_progress_bar", "false"])
    last = next((tmp_path / "runs").rglob("*.ckpt"))
    main(["play", "--config", str(path), "--ckpt_path", str(last), "--episodes", "1", "--video_folder", "videos"])
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert videos and videos[0].stat().st_size > 1000


def test_per_agent_return_windows_are_checkpoint_state():
    from lightning_rl.algos.episode_stats import EpisodeStatsCallback

    callback = EpisodeStatsCallback(window=3)
    callback.agent_return_mean = {"runner": callback.return_mean.__class__(3)}
    callback.agent_return_mean["runner"].update(torch.tensor([6.0, 4.0, 2.0, 1.0]))  # the last 3: mean 7 / 3
    restored = EpisodeStatsCallback(window=3)
    restored.load_state_dict(torch.load(_saved(callback.state_dict()), weights_only=True))
    assert float(restored.agent_return_mean["runner"].compute()) == pytest.approx(7.0 / 3.0)


def _saved(state):
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer
