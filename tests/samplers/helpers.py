"""Test envs and agents for the sampler tests: tiny, deterministic, and easy to reason about."""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium
import numpy as np
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
    ``fail_seed``.
    """

    def __init__(
        self, episode_lengths: tuple[int, ...] = (3,), fail_at: int | None = None, fail_seed: int | None = None
    ) -> None:
        self.observation_space = spaces.Box(0.0, 1e6, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self.episode_lengths = tuple(episode_lengths)
        self.fail_at = fail_at
        self.fail_seed = fail_seed
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
        self.episode += 1
        self.t = 0
        return self._obs(), {"t": self.t}

    def step(self, action: Any):
        self.total_steps += 1
        if self.fail_at is not None and self.total_steps >= self.fail_at and self.seed_value == self.fail_seed:
            raise ValueError(f"boom at step {self.total_steps}")
        self.t += 1
        terminated = self.t >= self.episode_lengths[self.episode % len(self.episode_lengths)]
        return self._obs(), self.t + int(action) / 10, terminated, False, {"t": self.t}


def make_counter_env(
    episode_lengths: tuple[int, ...] = (3,),
    max_episode_steps: int | None = None,
    fail_at: int | None = None,
    fail_seed: int | None = None,
) -> gymnasium.Env:
    """:class:`CounterEnv`, under a ``TimeLimit`` (truncation) if ``max_episode_steps`` is set."""
    env = CounterEnv(episode_lengths, fail_at, fail_seed)
    return env if max_episode_steps is None else TimeLimit(env, max_episode_steps)


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
    for x, y in zip(batches_a, batches_b):
        for u, v in zip(leaves(x), leaves(y)):
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
    """

    def __init__(self, lives: int = 3) -> None:
        self.lives = lives
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
        self.t += 1
        lost_life = self.t % 2 == 0
        self.lives_left -= lost_life
        game_over = self.lives_left == 0
        info = LivesInfo(truncated=False, terminated=bool(lost_life), game_score=10.0, traj_done=bool(game_over))
        return EnvStep(self._obs(), 1.0, bool(lost_life), info)
