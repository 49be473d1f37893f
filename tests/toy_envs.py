"""Tiny deterministic gymnasium envs whose returns can be computed by hand.

Each class builds without registration (pass the class, or a ``make_*`` function, to
``make_env``; that also works in ``spawn`` workers, where registrations are not inherited).
:func:`register_toy_envs` registers them under ``lightning_rl_test/<Name>-v0``.

* :class:`LastStepRewardEnv`: reward 1 only on the last step of a fixed-length episode.
* :class:`ConstantRewardEnv`: reward 1 every step, never terminates; under a ``TimeLimit`` it
  truncates, and its discounted value with bootstrapping is ``1 / (1 - gamma)``.
* :class:`TwoStateChainEnv`: action 1 moves to (or keeps) the good state; staying there pays 1.
* :class:`IdentityEnv`: reward 1 when the action equals the target shown in the observation.
* :class:`BoxIdentityEnv`: continuous version, reward ``-(action - target)**2``.
* :class:`MultiDiscreteTargetEnv`: ``MultiDiscrete`` actions, reward = dims matching a target.
* :class:`MultiBinaryMatchEnv`: ``MultiBinary`` actions, reward = share of bits matching.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

__all__ = [
    "BoxIdentityEnv",
    "ConstantRewardEnv",
    "IdentityEnv",
    "LastStepRewardEnv",
    "MultiBinaryMatchEnv",
    "MultiDiscreteTargetEnv",
    "TOY_ENV_IDS",
    "TwoStateChainEnv",
    "make_constant_reward_env",
    "register_toy_envs",
]


class LastStepRewardEnv(gymnasium.Env):
    """Fixed-length episodes; reward 1 on the last step (terminated), 0 before.

    Observation: float32 ``[1]``, the fraction of the episode elapsed (``t / episode_length``).
    Action: ``Discrete(2)``, ignored. Discounted return from the first step: ``gamma**(L-1)``.

    Args:
        episode_length: Steps per episode.
    """

    def __init__(self, episode_length: int = 5) -> None:
        if episode_length < 1:
            raise ValueError(f"LastStepRewardEnv: episode_length must be >= 1, got {episode_length}")
        self.episode_length = episode_length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._t / self.episode_length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any):
        self._t += 1
        terminated = self._t >= self.episode_length
        return self._obs(), float(terminated), terminated, False, {}


class ConstantRewardEnv(gymnasium.Env):
    """Reward 1 on every step; never terminates (wrap it in a ``TimeLimit`` to end episodes).

    Observation: float32 ``[1]``, always 0. Action: ``Discrete(2)``, ignored.
    """

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any):
        return np.zeros(1, dtype=np.float32), 1.0, False, False, {}


def make_constant_reward_env(max_episode_steps: int = 10) -> gymnasium.Env:
    """:class:`ConstantRewardEnv` under ``TimeLimit(max_episode_steps)``: it truncates at that step."""
    return TimeLimit(ConstantRewardEnv(), max_episode_steps=max_episode_steps)


class TwoStateChainEnv(gymnasium.Env):
    """Two states, 0 (start) and 1; the action picks the next state: ``s' = a``.

    Reward 1 when in state 1 and choosing to stay there (``s == 1 and a == 1``), else 0.
    Terminated after ``episode_length`` steps. Observation: float32 one-hot ``[2]`` of the state.
    Always choosing 1 earns ``episode_length - 1`` (discounted: ``sum_{t=1}^{L-1} gamma**t``).

    Args:
        episode_length: Steps per episode.
    """

    def __init__(self, episode_length: int = 10) -> None:
        if episode_length < 1:
            raise ValueError(f"TwoStateChainEnv: episode_length must be >= 1, got {episode_length}")
        self.episode_length = episode_length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._state = 0
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.eye(2, dtype=np.float32)[self._state]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._state, self._t = 0, 0
        return self._obs(), {"state": self._state}

    def step(self, action: Any):
        action = int(action)
        reward = float(self._state == 1 and action == 1)
        self._state = action
        self._t += 1
        return self._obs(), reward, self._t >= self.episode_length, False, {"state": self._state}


class IdentityEnv(gymnasium.Env):
    """Reward 1 when the action equals the target in the observation; a new random target each step.

    Observation: float32 one-hot ``[n]`` of the target. Action: ``Discrete(n)``. Terminated after
    ``episode_length`` steps. Targets come from the env's seeded ``np_random``, so an episode's
    targets repeat exactly for the same seed.

    Args:
        n: Number of targets/actions.
        episode_length: Steps per episode.
    """

    def __init__(self, n: int = 4, episode_length: int = 20) -> None:
        if n < 2:
            raise ValueError(f"IdentityEnv: n must be >= 2, got {n}")
        self.n = n
        self.episode_length = episode_length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)
        self.action_space = spaces.Discrete(n)
        self._target = 0
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.eye(self.n, dtype=np.float32)[self._target]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._target = int(self.np_random.integers(self.n))
        return self._obs(), {}

    def step(self, action: Any):
        reward = float(int(action) == self._target)
        self._t += 1
        self._target = int(self.np_random.integers(self.n))
        return self._obs(), reward, self._t >= self.episode_length, False, {}


class BoxIdentityEnv(gymnasium.Env):
    """Continuous identity: observation a target in ``[-1, 1]^dim``, reward ``-sum((a - target)**2)``.

    Action: ``Box(-1, 1, (dim,))`` float32. Terminated after ``episode_length`` steps; the best
    return is 0 (action = target).

    Args:
        dim: Size of target and action.
        episode_length: Steps per episode.
    """

    def __init__(self, dim: int = 1, episode_length: int = 20) -> None:
        self.dim = dim
        self.episode_length = episode_length
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float32)
        self._target = np.zeros(dim, dtype=np.float32)
        self._t = 0

    def _new_target(self) -> None:
        self._target = self.np_random.uniform(-1.0, 1.0, size=self.dim).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._new_target()
        return self._target.copy(), {}

    def step(self, action: Any):
        a = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
        reward = -float(np.sum((a - self._target) ** 2))
        self._t += 1
        self._new_target()
        return self._target.copy(), reward, self._t >= self.episode_length, False, {}


TOY_ENV_IDS = {
    "lightning_rl_test/LastStepReward-v0": (LastStepRewardEnv, None),
    "lightning_rl_test/ConstantReward-v0": (ConstantRewardEnv, 10),
    "lightning_rl_test/TwoStateChain-v0": (TwoStateChainEnv, None),
    "lightning_rl_test/Identity-v0": (IdentityEnv, None),
    "lightning_rl_test/BoxIdentity-v0": (BoxIdentityEnv, None),
}


def register_toy_envs() -> list[str]:
    """Register the toy envs with gymnasium (idempotent); return their ids.

    ``lightning_rl_test/ConstantReward-v0`` has ``max_episode_steps=10`` (override it with
    ``gymnasium.make(id, max_episode_steps=...)``).
    """
    for env_id, (cls, max_steps) in TOY_ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=cls, max_episode_steps=max_steps)
    return list(TOY_ENV_IDS)


class RandomLengthEnv(gymnasium.Env):
    """Episodes of seeded random length and reward: terminations, and truncations under a ``TimeLimit``.

    ``reset`` draws the episode's length from ``1..max_length`` and a start value from ``0..99``;
    ``step`` draws a reward ``0..9`` and adds the action to it. Every draw comes from the env's
    ``np_random``, so a seed fixes the whole stream of episodes for a given action sequence.
    Observation: float32 ``[3]``, ``[start, t, previous action]`` (``t`` after the step).
    Action: ``Discrete(3)``. Terminated when ``t`` reaches the episode's length; under
    :func:`make_random_length_env`'s ``TimeLimit`` longer episodes are truncated, and an
    episode whose length equals the limit ends with both flags set (gymnasium's rule).

    Args:
        max_length: Longest episode drawn.
    """

    def __init__(self, max_length: int = 6) -> None:
        if max_length < 1:
            raise ValueError(f"RandomLengthEnv: max_length must be >= 1, got {max_length}")
        self.max_length = max_length
        self.observation_space = spaces.Box(0.0, 100.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)
        self._start, self._t, self._length, self._action = 0, 0, 1, 0

    def _obs(self) -> np.ndarray:
        return np.array([self._start, self._t, self._action], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._length = int(self.np_random.integers(1, self.max_length + 1))
        self._start = int(self.np_random.integers(100))
        self._t, self._action = 0, 0
        return self._obs(), {}

    def step(self, action: Any):
        self._action = int(action)
        self._t += 1
        reward = float(self.np_random.integers(10) + self._action)
        return self._obs(), reward, self._t >= self._length, False, {}


def make_random_length_env(max_length: int = 6, max_episode_steps: int = 4) -> gymnasium.Env:
    """:class:`RandomLengthEnv` under ``TimeLimit(max_episode_steps)``."""
    return TimeLimit(RandomLengthEnv(max_length), max_episode_steps=max_episode_steps)


class DictTargetEnv(gymnasium.Env):
    """A ``Dict`` observation ``{"target", "noise"}`` whose reward depends on ``"target"`` only.

    Discrete (default): ``"target"`` is the float32 one-hot ``[n]`` of a random target, the action
    ``Discrete(n)``, reward 1 when the action is the target (best mean reward 1, uniform random
    ``1/n``). Continuous: ``"target"`` is uniform in ``[-1, 1]^n``, the action ``Box(-1, 1, (n,))``,
    reward ``-mean(|action - target|)`` (best 0, uniform random ``-2/3``). ``"noise"`` is
    float32 ``[noise_size]``, uniform in ``[-noise_scale, noise_scale]`` and unrelated to the
    reward: a model must learn to ignore it. New draws every step, all from the seeded
    ``np_random``; terminated after ``episode_length`` steps.

    Args:
        n: Size of the target (number of actions if discrete).
        noise_size: Size of the distractor.
        noise_scale: Bound of the distractor's values.
        continuous: Box actions instead of discrete ones.
        episode_length: Steps per episode.
    """

    def __init__(
        self,
        n: int = 4,
        noise_size: int = 3,
        noise_scale: float = 5.0,
        continuous: bool = False,
        episode_length: int = 1,
    ) -> None:
        if n < 1 or (n < 2 and not continuous):
            raise ValueError(f"DictTargetEnv: n must be >= 2 (>= 1 if continuous), got {n}")
        self.n, self.noise_size, self.noise_scale = n, noise_size, noise_scale
        self.continuous = continuous
        self.episode_length = episode_length
        low = -1.0 if continuous else 0.0
        self.observation_space = spaces.Dict(
            {
                "target": spaces.Box(low, 1.0, shape=(n,), dtype=np.float32),
                "noise": spaces.Box(-noise_scale, noise_scale, shape=(noise_size,), dtype=np.float32),
            }
        )
        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float32) if continuous else spaces.Discrete(n)
        )
        self._target = np.zeros(n, dtype=np.float32)
        self._t = 0

    def _draw(self) -> dict[str, np.ndarray]:
        if self.continuous:
            self._target = self.np_random.uniform(-1.0, 1.0, size=self.n).astype(np.float32)
        else:
            self._target = np.eye(self.n, dtype=np.float32)[int(self.np_random.integers(self.n))]
        noise = self.np_random.uniform(-self.noise_scale, self.noise_scale, size=self.noise_size)
        return {"target": self._target.copy(), "noise": noise.astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: Any):
        if self.continuous:
            a = np.clip(np.asarray(action, dtype=np.float32), -1.0, 1.0)
            reward = -float(np.mean(np.abs(a - self._target)))
        else:
            reward = float(int(action) == int(np.argmax(self._target)))
        self._t += 1
        return self._draw(), reward, self._t >= self.episode_length, False, {}


class MultiDiscreteTargetEnv(gymnasium.Env):
    """One-step episodes: reward = how many action dims equal the targets shown in the observation.

    Observation: float32 ``[sum(nvec)]``, each dim's target one-hot, side by side. Action:
    ``MultiDiscrete(nvec, start)``; target ``d`` is drawn from ``start[d] + range(nvec[d])``.
    Every episode terminates after one step; the best reward is ``len(nvec)``, a uniformly
    random policy gets ``sum(1 / nvec)``.

    Args:
        nvec: Choices of each action dim.
        start: Smallest value of each action dim (gymnasium's ``MultiDiscrete.start``).
    """

    def __init__(self, nvec: tuple[int, ...] = (3, 4), start: tuple[int, ...] = (0, 0)) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self.start = np.asarray(start, dtype=np.int64)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(int(self.nvec.sum()),), dtype=np.float32)
        self.action_space = spaces.MultiDiscrete(self.nvec, start=self.start)
        self._target = self.start.copy()

    def _obs(self) -> np.ndarray:
        index = self._target - self.start
        return np.concatenate([np.eye(n, dtype=np.float32)[t] for n, t in zip(self.nvec, index, strict=True)])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._target = self.start + self.np_random.integers(self.nvec)
        return self._obs(), {}

    def step(self, action: Any):
        reward = float(np.sum(np.asarray(action) == self._target))
        return self._obs(), reward, True, False, {}


class MultiBinaryMatchEnv(gymnasium.Env):
    """One-step episodes: reward = the fraction of action bits equal to the observation's bits.

    Observation: float32 ``[n]`` of random bits. Action: ``MultiBinary(n)``. Every episode
    terminates after one step; the best reward is 1, a uniformly random policy gets 0.5.

    Args:
        n: Number of bits.
    """

    def __init__(self, n: int = 4) -> None:
        self.n = n
        self.observation_space = spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)
        self.action_space = spaces.MultiBinary(n)
        self._bits = np.zeros(n, dtype=np.int8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._bits = self.np_random.integers(2, size=self.n).astype(np.int8)
        return self._bits.astype(np.float32), {}

    def step(self, action: Any):
        reward = float(np.mean(np.asarray(action) == self._bits))
        return self._bits.astype(np.float32), reward, True, False, {}


class BrightHalfImageEnv(gymnasium.Env):
    """One-step episodes on a channels-last uint8 image: name the half holding the bright pixel.

    Observation: uint8 ``[size, size, channels]`` (``[H, W, C]``), zero but for one pixel of 255
    in a random row and column. Action: ``Discrete(2)``, 0 for the left half (columns
    ``< size // 2``), 1 for the right. Reward 1 if right, else 0; every episode terminates after
    one step. A uniformly random policy gets 0.5.

    Args:
        size: Image height and width.
        channels: Image channels (all set at the bright pixel).
    """

    def __init__(self, size: int = 8, channels: int = 3) -> None:
        self.size = size
        self.observation_space = spaces.Box(0, 255, shape=(size, size, channels), dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self._image = np.zeros((size, size, channels), dtype=np.uint8)
        self._side = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        row, col = self.np_random.integers(self.size, size=2)
        self._image[:] = 0
        self._image[row, col] = 255
        self._side = int(col >= self.size // 2)
        return self._image.copy(), {}

    def step(self, action: Any):
        reward = float(int(action) == self._side)
        return self._image.copy(), reward, True, False, {}


class BrightColumnImageEnv(gymnasium.Env):
    """One-step episodes on a channels-last uint8 image: point a continuous action at the column
    of the bright pixel.

    Observation: uint8 ``[size, size, 3]``, zero but for one pixel of 255 in a random row and a
    column that is 0 or ``size - 1``. Action: ``Box(-1, 1, (1,))``. Reward ``-|a - x|`` with
    ``x = -0.5`` for column 0 and ``+0.5`` for the last column (inside the bounds, so a
    tanh-squashed policy need not saturate). A uniformly random action expects ``-0.625``
    (``(1.5**2 + 0.5**2) / 4``) and the best constant action (0) gets ``-0.5``.

    Args:
        size: Image height and width.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.observation_space = spaces.Box(0, 255, shape=(size, size, 3), dtype=np.uint8)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self._image = np.zeros((size, size, 3), dtype=np.uint8)
        self._x = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        row = int(self.np_random.integers(self.size))
        right = bool(self.np_random.integers(2))
        self._image[:] = 0
        self._image[row, self.size - 1 if right else 0] = 255
        self._x = 0.5 if right else -0.5
        return self._image.copy(), {}

    def step(self, action: Any):
        reward = -abs(float(np.clip(np.asarray(action, dtype=np.float64)[0], -1, 1)) - self._x)
        return self._image.copy(), reward, True, False, {}


class DiscreteFieldEnv(gymnasium.Env):
    """One-step episodes whose reward depends on a ``Discrete`` field of a ``Dict`` observation.

    Observation ``{"cell": Discrete(8), "noise": Box(-1, 1, (3,))}``; action ``Discrete(2)``.
    Reward 1 if the action equals ``TABLE[cell]``, a fixed 0/1 table with no order in it (not
    monotone in the cell index), else 0. A uniformly random policy gets 0.5.
    """

    TABLE = (1, 0, 0, 1, 1, 1, 0, 0)

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {"cell": spaces.Discrete(8), "noise": spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)}
        )
        self.action_space = spaces.Discrete(2)
        self._cell = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._cell = int(self.np_random.integers(8))
        noise = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return {"cell": self._cell, "noise": noise}, {}

    def step(self, action: Any):
        reward = float(int(action) == self.TABLE[self._cell])
        return {"cell": self._cell, "noise": np.zeros(3, np.float32)}, reward, True, False, {}


def greedy_mean_reward(agent: Any, make_env: Any, episodes: int = 200, seed: int = 12345) -> float:
    """Mean reward of ``agent``'s greedy actions over one-step episodes of ``make_env()``, stepped
    here with gymnasium directly (a reference independent of the samplers).

    Observations and actions are converted as lightning_rl's env adapter does, so the helper
    serves any space: arrays, Dicts, multi-discrete and binary actions. Each episode starts as
    the samplers start one: the null previous action, reward 0 and, for a recurrent agent, a
    zero state (``agent.reset()``).
    """
    import torch

    from lightning_rl.data.buffers import buffer_func
    from lightning_rl.spaces import from_gymnasium, from_gymnasium_value, to_gymnasium_value

    env = make_env()
    observation_space = from_gymnasium(env.observation_space, "obs")
    action_space = from_gymnasium(env.action_space, "act")
    agent.eval_mode(0)
    agent.eval_deterministic = True
    prev_action = buffer_func(action_space.null_value(), lambda v: torch.as_tensor(np.asarray(v))[None])
    total = 0.0
    observation, _ = env.reset(seed=seed)
    for _ in range(episodes):
        agent.reset()
        inputs = buffer_func(from_gymnasium_value(observation_space, observation),
                             lambda v: torch.as_tensor(np.asarray(v))[None])
        action = agent.step(inputs, prev_action, torch.zeros(1)).action[0]
        _, reward, terminated, truncated, _ = env.step(to_gymnasium_value(action_space, action.numpy()))
        assert terminated and not truncated  # one-step episodes
        total += float(reward)
        observation, _ = env.reset()
    return total / episodes


class FrameStackDictEnv(gymnasium.Env):
    """A ``Dict`` observation with a frame-stacked image key, as a frame-stacking wrapper makes it.

    ``"frames"``: uint8 ``[frame_stack, size, size]``, oldest frame first; the frame shown at
    step ``t`` of an episode (``t = 0`` after reset) is filled with ``t + 1``, and after a reset
    the older frames are zero, so the stack at step ``t`` is frame ``k`` = ``max(0, t + 2 -
    frame_stack + k)`` (never-zero frames except before the episode). ``"step"``: float32
    ``[1]`` holding ``t``, from which a test rebuilds the stack. Reward 1 when the action equals
    ``t % 2``; terminated after ``episode_length`` steps. It declares ``frame_stack = {"frames":
    frame_stack}`` (:attr:`lightning_rl.envs.Env.frame_stack`), so the replay stores each frame once.

    Args:
        frame_stack: Frames per stack.
        size: Frame height and width.
        episode_length: Steps per episode.
    """

    def __init__(self, frame_stack: int = 3, size: int = 8, episode_length: int = 5) -> None:
        self.size, self.episode_length = size, episode_length
        self.frame_stack = {"frames": frame_stack}
        self.observation_space = spaces.Dict(
            {
                "frames": spaces.Box(0, 255, shape=(frame_stack, size, size), dtype=np.uint8),
                "step": spaces.Box(0.0, float(episode_length), shape=(1,), dtype=np.float32),
            }
        )
        self.action_space = spaces.Discrete(2)
        self._stack = np.zeros((frame_stack, size, size), dtype=np.uint8)
        self._t = 0

    def _observe(self) -> dict[str, np.ndarray]:
        self._stack = np.roll(self._stack, -1, axis=0)
        self._stack[-1] = self._t + 1
        return {"frames": self._stack.copy(), "step": np.array([self._t], dtype=np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._stack[:] = 0
        return self._observe(), {}

    def step(self, action: Any):
        reward = float(int(action) == self._t % 2)
        self._t += 1
        return self._observe(), reward, self._t >= self.episode_length, False, {}
