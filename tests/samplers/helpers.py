"""Test envs and agents for the sampler tests: tiny, deterministic, and easy to reason about."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium
import numpy as np
import psutil
import torch
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit
from torch import nn

from lightning_rl.agents.base import AgentStep, BaseAgent
from lightning_rl.data.buffers import buffer_func
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.envs.base import Env, EnvStep
from lightning_rl.spaces import FloatBox, IntBox


class CounterEnv(gymnasium.Env):
    """Observation ``[seed, episode, t]``; reward ``t + action / 10`` (``t`` after the step).

    Episode ``k`` terminates when ``t`` reaches ``episode_lengths[k % len(episode_lengths)]``;
    ``fail_at`` (with ``fail_seed``) raises a ``ValueError`` at that step of the env seeded
    ``fail_seed``; ``fail_reset_at`` raises one in that (1-based) ``reset()`` instead.
    ``fail_type`` picks the exception (see :func:`make_error`).
    """

    def __init__(
        self,
        episode_lengths: tuple[int, ...] = (3,),
        fail_at: int | None = None,
        fail_seed: int | None = None,
        fail_reset_at: int | None = None,
        fail_type: str = "ValueError",
    ) -> None:
        self.observation_space = spaces.Box(0.0, 1e6, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.episode_lengths = tuple(episode_lengths)
        self.fail_at = fail_at
        self.fail_seed = fail_seed
        self.fail_reset_at = fail_reset_at
        self.fail_type = fail_type
        self.n_resets = 0
        self.seed_value = -1
        self.episode = -1
        self.t = 0
        self.total_steps = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.seed_value, self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.seed_value = seed
        self.n_resets += 1
        if self.fail_reset_at is not None and self.n_resets >= self.fail_reset_at and self.seed_value == self.fail_seed:
            raise make_error(self.fail_type, f"boom at reset {self.n_resets}")
        self.episode += 1
        self.t = 0
        return self._obs(), {"t": self.t}

    def step(self, action: Any):
        self.total_steps += 1
        if self.fail_at is not None and self.total_steps >= self.fail_at and self.seed_value == self.fail_seed:
            raise make_error(self.fail_type, f"boom at step {self.total_steps}")
        self.t += 1
        terminated = self.t >= self.episode_lengths[self.episode % len(self.episode_lengths)]
        return self._obs(), self.t + int(action) / 10, terminated, False, {"t": self.t}


class TwoArgError(Exception):
    """An exception that cannot be built from a message alone."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(code, detail)


def make_error(fail_type: str, message: str) -> Exception:
    """``ValueError(message)``, ``TwoArgError(7, message)`` or an instance of a class that
    only exists inside this function (``"LocalError"``: it cannot be pickled by name)."""
    if fail_type == "ValueError":
        return ValueError(message)
    if fail_type == "TwoArgError":
        return TwoArgError(7, message)

    class LocalError(Exception):
        pass

    return LocalError(message)


def make_counter_env(
    episode_lengths: tuple[int, ...] = (3,),
    max_episode_steps: int | None = None,
    fail_at: int | None = None,
    fail_seed: int | None = None,
    fail_reset_at: int | None = None,
    fail_type: str = "ValueError",
) -> gymnasium.Env:
    """:class:`CounterEnv`, under a ``TimeLimit`` (truncation) if ``max_episode_steps`` is set."""
    env = CounterEnv(episode_lengths, fail_at, fail_seed, fail_reset_at, fail_type)
    return env if max_episode_steps is None else TimeLimit(env, max_episode_steps)


class HangingEnv(CounterEnv):
    """:class:`CounterEnv` whose ``hang_at``-th ``step()`` never returns, in the env seeded
    ``hang_seed`` (every env if None), when it runs in a sampler worker process.

    Before hanging it creates ``marker_dir/<pid>-<seed>``, so a test knows that the worker is
    inside ``step()``. In the main process (where ``initialize()`` resets, steps and checks a
    probe env) it never hangs.
    """

    def __init__(self, hang_at: int = 2, hang_seed: int | None = None, marker_dir: str | None = None) -> None:
        super().__init__()
        self.hang_at = hang_at
        self.hang_seed = hang_seed
        self.marker_dir = marker_dir

    def step(self, action: Any):
        in_worker = multiprocessing.parent_process() is not None
        if in_worker and self.total_steps + 1 >= self.hang_at and self.hang_seed in (None, self.seed_value):
            if self.marker_dir is not None:
                Path(self.marker_dir, f"{os.getpid()}-{self.seed_value}").touch()
            while True:
                time.sleep(60)
        return super().step(action)


def make_hanging_env(hang_at: int = 2, hang_seed: int | None = None, marker_dir: str | None = None) -> gymnasium.Env:
    """:class:`HangingEnv` (a module-level factory, so worker processes can build it)."""
    return HangingEnv(hang_at, hang_seed, marker_dir)


def wait_for_markers(marker_dir: str | Path, n: int, timeout: float = 30.0) -> list[str]:
    """Wait until ``marker_dir`` holds ``n`` :class:`HangingEnv` markers; return their names."""
    deadline = time.monotonic() + timeout
    while True:
        names = sorted(os.listdir(marker_dir))
        if len(names) >= n:
            return names
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(names)} of {n} envs reached their hanging step: {names}")
        time.sleep(0.02)


@contextlib.contextmanager
def leak_check() -> Iterator[None]:
    """Assert that the block leaves no child processes and no new /dev/shm entries."""
    me = psutil.Process()
    children = {p.pid for p in me.children(recursive=True)}
    shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    yield
    left = [p for p in me.children(recursive=True) if p.pid not in children and alive([p.pid])]
    assert left == [], f"child processes left behind: {left}"
    if os.path.isdir("/dev/shm"):
        new = set(os.listdir("/dev/shm")) - shm
        assert new == set(), f"shared memory left behind: {new}"


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are running processes (zombies are not)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids: list[int], timeout: float) -> float:
    """Seconds until none of ``pids`` runs; raises ``AssertionError`` after ``timeout`` seconds."""
    start = time.monotonic()
    while alive(pids):
        if time.monotonic() - start > timeout:
            raise AssertionError(f"processes still running {timeout} s later: {alive(pids)}")
        time.sleep(0.02)
    return time.monotonic() - start


class SpyInfo(NamedArrayTupleBase):
    value: Any
    steps: Any


class ObsAgent(BaseAgent):
    """Deterministic agent: ``action = sum(observation) mod n``.

    ``agent_info.steps`` is a recurrent-like state: steps since the env's last ``reset_one`` (or
    ``reset``). With ``alternating=True`` it keeps one state per half, as
    ``AlternatingRecurrentAgentMixin`` does. ``reset_one`` calls are recorded in
    ``reset_one_calls`` (in the process that makes them).
    """

    def __init__(self, n_actions: int = 3, alternating: bool = False) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.alternating = alternating
        self.reset_one_calls: list[int] = []
        self.reset()

    def make_model(self, env_spaces: Any) -> nn.Module:
        return nn.Linear(int(np.prod(env_spaces.observation.shape)), 1)

    def reset(self) -> None:
        self.counters: list[torch.Tensor | None] = [None, None]
        self.alt = 0

    def reset_one(self, idx: int) -> None:
        self.reset_one_calls.append(idx)
        half = next((len(c) for c in self.counters if c is not None), None)
        if half is None:
            return
        if self.alternating:
            c = self.counters[idx // half]
            if c is not None:
                c[idx % half] = 0
        else:
            self.counters[0][idx] = 0

    @torch.no_grad()
    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        obs = torch.as_tensor(np.asarray(observation), dtype=torch.float32)
        s = obs.reshape(len(obs), -1).sum(-1)
        action = s.long() % self.n_actions
        if self.counters[self.alt] is None:
            self.counters[self.alt] = torch.zeros(len(obs), dtype=torch.long)
        steps = self.counters[self.alt].clone()
        self.counters[self.alt] += 1
        if self.alternating:
            self.alt ^= 1
        return AgentStep(action, SpyInfo(value=s + 0.5, steps=steps))

    @torch.no_grad()
    def value(self, observation: Any, prev_action: Any, prev_reward: Any) -> torch.Tensor:
        obs = torch.as_tensor(np.asarray(observation), dtype=torch.float32)
        return obs.reshape(len(obs), -1).sum(-1) + 0.5


def leaves(buffer_: Any) -> list[np.ndarray]:
    """The array leaves of a (nested) buffer, in field order."""
    out: list[np.ndarray] = []
    buffer_func(buffer_, out.append)
    return out


def run_sampler(sampler_cls: type, n_batches: int = 3, alternating: bool = False, seed: int = 5, **kwargs: Any):
    """Initialize ``sampler_cls`` with an :class:`ObsAgent`, collect ``n_batches`` and evaluate once.

    Returns:
        ``(batches, traj_infos, eval_traj_infos)``: private copies of each batch, the TrajInfos
        of each batch, and those of one evaluation (if the sampler has eval envs).
    """
    sampler = sampler_cls(make_counter_env, **kwargs)
    try:
        sampler.initialize(ObsAgent(alternating=alternating), seed=seed, bootstrap_value=True)
        batches, trajs = [], []
        for itr in range(n_batches):
            samples, traj_infos = sampler.obtain_samples(itr)
            batches.append(buffer_func(samples, np.copy))
            trajs.append(traj_infos)
        eval_trajs = sampler.evaluate_agent(n_batches) if sampler.eval_n_envs else []
    finally:
        sampler.shutdown()
    return batches, trajs, eval_trajs


def traj_key(traj_infos: list[Any]) -> list[tuple[int, float]]:
    """Order-free summary of TrajInfos (workers report in their own order)."""
    return sorted((int(t.Length), round(float(t.Return), 5)) for t in traj_infos)


def assert_same_runs(a: Any, b: Any) -> None:
    """Two :func:`run_sampler` results hold identical batches and episodes."""
    batches_a, trajs_a, eval_a = a
    batches_b, trajs_b, eval_b = b
    for x, y in zip(batches_a, batches_b, strict=False):
        for u, v in zip(leaves(x), leaves(y), strict=False):
            np.testing.assert_array_equal(u, v)
    assert [traj_key(t) for t in trajs_a] == [traj_key(t) for t in trajs_b]
    assert traj_key(eval_a) == traj_key(eval_b)


class LivesInfo(NamedTuple):
    truncated: bool
    terminated: bool
    game_score: float
    traj_done: bool


class LivesEnv(Env):
    """A game of ``lives`` lives, each lasting 2 steps: like Atari with ``episodic_lives``.

    Losing a life is ``done`` (``terminated``) with ``traj_done`` False; the game continues from
    where it is unless :meth:`reset` is needed after game over (``traj_done``). Observation
    ``[games, lives_left, t]`` (``t`` counts steps in the game); reward 1 per step, game score 10.
    ``fail_at``: raise a ``ValueError`` at that step of the env's life, in sampler worker processes
    only. Being a lightning_rl env, it skips the gymnasium env checker at ``initialize()``.
    """

    def __init__(self, lives: int = 3, fail_at: int | None = None) -> None:
        self.lives = lives
        self.fail_at = fail_at
        self.total_steps = 0
        self.games = -1
        self.n_resets = 0
        self._observation_space = FloatBox(0.0, 1e6, shape=(3,))
        self._action_space = IntBox(0, 2)

    @property
    def observation_space(self) -> FloatBox:
        return self._observation_space

    @property
    def action_space(self) -> IntBox:
        return self._action_space

    def _obs(self) -> np.ndarray:
        return np.array([self.games, self.lives_left, self.t], dtype=np.float32)

    def reset(self) -> np.ndarray:
        self.n_resets += 1
        self.games += 1
        self.lives_left, self.t = self.lives, 0
        return self._obs()

    def step(self, action: Any) -> EnvStep:
        self.total_steps += 1
        if self.fail_at is not None and self.total_steps >= self.fail_at and multiprocessing.parent_process():
            raise ValueError(f"boom at step {self.total_steps}")
        self.t += 1
        lost_life = self.t % 2 == 0
        self.lives_left -= lost_life
        game_over = self.lives_left == 0
        info = LivesInfo(truncated=False, terminated=bool(lost_life), game_score=10.0, traj_done=bool(game_over))
        return EnvStep(self._obs(), 1.0, bool(lost_life), info)


def parallel_ppo_fit_command(root: Path) -> list[str]:
    """``lightning-rl fit`` of the PPO CartPole config on a two-worker CPU sampler, one rollout per
    epoch (the first checkpoint comes soon), as a subprocess command."""
    return [
        sys.executable, "-m", "lightning_rl.cli", "fit", "--config", str(root / "configs" / "ppo" / "cartpole.yaml"),
        "--model.init_args.sampler.class_path", "lightning_rl.samplers.CpuSampler",
        "--model.init_args.sampler.init_args.n_workers", "2",
        "--trainer.enable_progress_bar", "false",
        "--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
    ]  # fmt: skip


def check_cartpole_transitions(sampler: Any, batches: int = 4, atol: float = 1e-5) -> tuple[int, int]:
    """Check every transition of ``batches`` batches against gymnasium's single-env CartPole from
    the same state: ``s'`` (up to ``atol``), reward 1 and ``terminated``; after a done the next row
    is a fresh episode (``|s| <= 0.05``), never a reset step. Also each finished episode's length
    (the run of rows up to its done) is among the batch's TrajInfos.

    Returns:
        ``(transitions checked, episode ends seen)``.
    """
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    checked = ends = 0
    for itr in range(batches):
        samples, trajs = sampler.obtain_samples(itr)
        obs, act = np.asarray(samples.env.observation), np.asarray(samples.agent.action)
        done, rew = np.asarray(samples.env.done), np.asarray(samples.env.reward)
        for t in range(len(obs) - 1):
            for b in range(obs.shape[1]):
                env.state = obs[t, b].astype(np.float64)
                env.steps_beyond_terminated = None
                next_obs, r, terminated, _, _ = env.step(int(act[t, b]))
                assert r == rew[t, b] == 1.0
                assert bool(terminated) == bool(done[t, b])
                if done[t, b]:
                    ends += 1  # the next row is a fresh episode, drawn from [-0.05, 0.05]
                    assert np.abs(obs[t + 1, b]).max() <= 0.05
                else:
                    np.testing.assert_allclose(obs[t + 1, b], next_obs, atol=atol)
                checked += 1
        for b in range(obs.shape[1]):
            lengths = np.diff(np.flatnonzero(done[:, b]))
            assert set(lengths) <= {int(t.Length) for t in trajs}
    return checked, ends


def assert_state_round_trip_continues(sampler_cls: type, env_id: Any, tmp_path: Path, n_batches: int = 3,
                                      evaluate: bool = False, **kwargs: Any) -> tuple[list[Any], list[dict]]:
    """A sampler's ``state_dict`` after ``n_batches`` goes through a checkpoint file as the module
    writes it (``torch.save``, read back with ``weights_only=True``) into a fresh sampler (another
    seed, the agent's weights copied); its next batch, finished episodes, unfinished TrajInfos
    and (``evaluate``) eval episodes must equal those of the first sampler simply going on.

    Returns:
        The expected next batch's completed TrajInfos and eval episodes (for the caller's checks
        that the comparison covered something).
    """
    from lightning_rl.agents import CategoricalPgAgent

    first = sampler_cls(env_id, **kwargs)
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    first.initialize(agent, seed=2)
    torch.manual_seed(0)
    for itr in range(n_batches):
        first.obtain_samples(itr)
    if evaluate:
        first.evaluate_agent(n_batches)
    torch.save({"sampler": first.state_dict()}, tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt", weights_only=True)["sampler"]
    rng = torch.get_rng_state()
    expected, expected_trajs = first.obtain_samples(n_batches)
    expected = buffer_func(expected, np.copy)
    unfinished = [dict(t) for t in first.train_collector.traj_infos]
    expected_eval = [dict(t) for t in first.evaluate_agent(n_batches + 1)] if evaluate else []

    second = sampler_cls(env_id, **kwargs)
    agent2 = CategoricalPgAgent(hidden_sizes=(8,))
    second.initialize(agent2, seed=99)
    agent2.load_state_dict(agent.state_dict())
    second.load_state_dict(state)
    assert second.env_steps == n_batches * first.batch_spec.size
    torch.set_rng_state(rng)
    got, got_trajs = second.obtain_samples(n_batches)
    for a, b in zip(leaves(got), leaves(expected), strict=True):
        np.testing.assert_array_equal(a, b)
    assert [dict(t) for t in got_trajs] == [dict(t) for t in expected_trajs]
    assert [dict(t) for t in second.train_collector.traj_infos] == unfinished
    if evaluate:
        assert [dict(t) for t in second.evaluate_agent(n_batches + 1)] == expected_eval
    first.shutdown()
    second.shutdown()
    return expected_trajs, expected_eval
