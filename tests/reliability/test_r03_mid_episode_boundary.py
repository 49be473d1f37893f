"""A save in the middle of episodes resumes either with the envs exactly where they were (the serial
sampler and the parallel samplers' workers store their state as data) or, when that is impossible
(an env holding state that is not data), with an explicit boundary: the replay's last pre-save row
of every env is ``done`` and ``truncated``, and every n-step target that would reach past it is
cut there, so no n-step window, bootstrap, frame stack or sequence links a pre-save observation to
a post-resume one, and no episode statistic merges two episodes."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from gymnasium import spaces
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import SacAgent
from lightning_rl.algos import SAC
from lightning_rl.replays import ReplayBuffer
from lightning_rl.samplers import CpuSampler, SerialSampler
from tests.algos.test_on_policy import make_trainer

EPISODE = 50


class ClockEnv(gymnasium.Env):
    """Observation ``[t / 100]``, reward 1, terminated after ``EPISODE`` steps; with ``lock`` it also
    holds a ``threading.Lock`` (state that cannot be stored as data)."""

    def __init__(self, lock: bool = False) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.t = 0
        if lock:
            self.lock = threading.Lock()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any):
        self.t += 1
        return np.array([self.t / 100], np.float32), 1.0, self.t >= EPISODE, False, {}


def clock_env() -> gymnasium.Env:
    return ClockEnv()


def locked_clock_env() -> gymnasium.Env:
    return ClockEnv(lock=True)


#: n of the n-step targets: windows of three rows, so targets computed before the save reach it.
N_STEP = 3


def sac(sampler_cls: type, env_fn: Any) -> SAC:
    workers = {"n_workers": 1} if sampler_cls is CpuSampler else {}
    sampler = sampler_cls(env_id=env_fn, batch_T=8, batch_B=2, **workers)
    agent = SacAgent(hidden_sizes=[16], q_hidden_sizes=[16])
    return SAC(agent, sampler, batch_size=16, replay_size=1000, replay_ratio=8, min_steps_learn=16,
               n_step_return=N_STEP, total_env_steps=10_000, log_interval_steps=16)


def observations(module: SAC) -> np.ndarray:
    """Stored observations ``[rows, B]`` (t / 100 of each step) in ring order."""
    storage = module.replay.storage
    return np.asarray(storage.arrays()["samples.observation"])[: storage.filled, :, 0]


def run_and_resume(tmp_path, sampler_cls: type, env_fn: Any) -> tuple[SAC, SAC]:
    pl.seed_everything(0)
    first = sac(sampler_cls, env_fn)
    # 3 epochs of 16 env steps: 24 steps per env, mid-episode (episodes last 50).
    make_trainer(max_epochs=3, callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)]).fit(first)
    resumed = sac(sampler_cls, env_fn)
    make_trainer(max_epochs=5).fit(resumed, ckpt_path=str(tmp_path / "last.ckpt"))
    return first, resumed


@pytest.mark.parametrize("sampler_cls", [SerialSampler, CpuSampler])
def test_samplers_continue_the_episodes(tmp_path, sampler_cls):
    _, resumed = run_and_resume(tmp_path, sampler_cls, clock_env)
    obs = observations(resumed)
    # 40 steps per env, one unbroken episode: t = 0..39, no boundary at the save (row 24).
    np.testing.assert_allclose(obs[:, 0], np.arange(40) / 100, atol=1e-6)
    assert not np.asarray(resumed.replay.storage.arrays()["samples.done"]).any()


@pytest.mark.parametrize("sampler_cls", [SerialSampler, CpuSampler])
def test_restarted_envs_start_after_an_explicit_boundary(tmp_path, sampler_cls):
    name = sampler_cls.__name__
    with pytest.warns(UserWarning, match=rf"{name}: the checkpoint holds no env state \(ClockEnv.lock \(lock\)"):
        first, resumed = run_and_resume(tmp_path, sampler_cls, locked_clock_env)
    arrays = resumed.replay.storage.arrays()
    obs = observations(resumed)
    done, truncated = np.asarray(arrays["samples.done"]), np.asarray(arrays["samples.truncated"])
    # Rows 0..23 before the save (t = 0..23), then new episodes from t = 0 after the resume.
    np.testing.assert_allclose(obs[:24, 0], np.arange(24) / 100, atol=1e-6)
    np.testing.assert_allclose(obs[24:, 0], np.arange(16) / 100, atol=1e-6)
    # The boundary: the last pre-save row ends every env's stream, as a time limit would.
    assert done[23].all() and truncated[23].all()
    assert not done[:23].any() and not done[24:].any()
    # The 3-step targets, by hand (reward 1 per step, discount 0.99): rows 0..20 sum three rewards
    # and bootstrap three rows on, inside the pre-save rows; row 21's window ends at the boundary
    # row, whose step is cut (its reward is not counted): two rewards, bootstrapping from row 23's
    # observation; row 22: one reward; row 23 is the cut step itself (never replayed).
    n_steps, return_ = np.asarray(arrays["n_steps"]), np.asarray(arrays["return_"])
    done_n, truncated_n = np.asarray(arrays["done_n"]), np.asarray(arrays["truncated_n"])
    assert (n_steps[:21] == 3).all() and not truncated_n[:21].any()
    np.testing.assert_allclose(return_[:21], 1 + 0.99 + 0.99**2, rtol=1e-6)
    assert (n_steps[21:24].T == [2, 1, 0]).all(), n_steps[21:24]
    assert truncated_n[21:24].all() and not done_n[:24].any()
    np.testing.assert_allclose(return_[21:24].T, [[1.99, 1.0, 0.0]] * 2, rtol=1e-6)
    # No bootstrap row past the boundary.
    assert (np.arange(24)[:, None] + n_steps[:24] <= 23).all()


def test_sampled_transitions_never_pair_a_pre_save_observation_with_a_post_resume_one(tmp_path):
    _, resumed = run_and_resume(tmp_path, SerialSampler, locked_clock_env)
    torch.manual_seed(0)
    for _ in range(20):
        batch = resumed.replay.sample_batch(64)
        obs = batch.agent_inputs.observation[:, 0]
        nxt = batch.target_inputs.observation[:, 0]
        # In a clock env the bootstrap observation is later in the same episode: never earlier.
        assert (nxt >= obs - 1e-6).all()


class _Row(NamedTuple):
    """One step of a transition replay: an observation ``t / 100`` of the step's row ``t``."""

    observation: Any
    action: Any
    reward: Any
    done: Any
    truncated: Any


def _rows(first: int, n: int, B: int = 2) -> _Row:
    t = np.arange(first, first + n, dtype=np.float32)[:, None, None] / 100
    return _Row(observation=np.broadcast_to(t, (n, B, 1)).copy(), action=np.zeros((n, B, 1), np.float32),
                reward=np.ones((n, B), np.float32), done=np.zeros((n, B), bool), truncated=np.zeros((n, B), bool))


@pytest.mark.parametrize("kind", ["uniform", "prioritized", "sequence"])
def test_every_replay_cuts_its_n_step_targets_at_the_boundary(kind):
    # 10 rows before the boundary, 6 after: with n = 3 the targets of rows 7, 8, 9 are cut by hand
    # to 2, 1 and 0 steps (row 9's own step is the cut one), the rows before keep 3, and nothing
    # drawn from the replay bootstraps from a row past the boundary.
    kwargs: dict[str, Any] = {"prioritized": kind == "prioritized"}
    if kind == "sequence":
        kwargs.update(sequence_T=2, rnn_state_interval=1)
    example = _Row(*(x[0, 0] for x in _rows(0, 1)))
    replay = ReplayBuffer(example, size=64, B=2, discount=0.5, n_step_return=3, seed=0, **kwargs)
    replay.append_samples(_rows(0, 10))
    replay.mark_boundary()
    replay.append_samples(_rows(100, 6))
    storage = replay.storage
    n_steps, truncated_n = storage.n_steps[:10, 0], storage.truncated_n[:10, 0]
    assert n_steps.tolist() == [3] * 7 + [2, 1, 0]
    assert truncated_n.tolist() == [False] * 7 + [True] * 3
    np.testing.assert_allclose(storage.return_[7:10, 0], [1.5, 1.0, 0.0])
    torch.manual_seed(0)
    for _ in range(20):
        batch = replay.sample_batch(8)
        obs = batch.agent_inputs.observation[..., 0]
        if kind == "sequence":
            # Observations [sequence_T + n, N]; training row t < sequence_T bootstraps from
            # observation row t + n_steps of the same sequence.
            rows = torch.arange(batch.n_steps.shape[0])[:, None] + batch.n_steps.long()
            nxt = obs.gather(0, rows)
            before = obs[: rows.shape[0]] < 1.0
        else:
            nxt = batch.target_inputs.observation[..., 0]
            before = obs < 1.0  # rows written before the boundary (t / 100 < 1)
        assert before.any()
        assert (nxt[before] < 1.0).all(), "a target bootstraps across the boundary"
