"""Atari 2600 games on the Arcade Learning Environment, with the DQN-paper preprocessing.

One :meth:`AtariEnv.step` repeats the action ``frame_skip`` times (rewards summed), max-pools the
last two raw frames (sprites that flicker between frames stay visible), converts to grayscale,
resizes to 84x84 with ``cv2.INTER_AREA`` and pushes the frame onto a stack of ``num_img_obs``
frames (newest last). Mnih et al. 2015, "Human-level control through deep reinforcement
learning", Methods; Machado et al. 2018 for sticky actions (``repeat_action_probability``).

With ``episodic_lives`` a lost life ends the *episode* (``done=True``, ``terminated=True``) but
not the *trajectory* (``traj_done=False``): the next :meth:`AtariEnv.reset` continues the same
game. Only game over or the ``horizon`` end the trajectory, and only then does ``reset`` start a
new game.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ale_py
import cv2
import numpy as np
from ale_py import roms

from lightning_rl.envs.base import Env, EnvStep
from lightning_rl.envs.traj_info import AtariTrajInfo
from lightning_rl.spaces import IntBox

__all__ = ["AtariEnv", "AtariEnvInfo", "AtariTrajInfo", "atari_games"]

_H = _W = 84
_OBS_TYPES = ("grayscale", "rgb")


class AtariEnvInfo(NamedTuple):
    """``env_info`` of :class:`AtariEnv`.

    Attributes:
        truncated: The step hit the ``horizon`` (truncation) without a termination.
        terminated: Game over, or a lost life under ``episodic_lives``.
        game_score: Raw (unclipped) game score of the step, summed over skipped frames.
        traj_done: The game is over or hit the ``horizon``: the next reset starts a new game.
    """

    truncated: bool
    terminated: bool
    game_score: float
    traj_done: bool


def atari_games() -> list[str]:
    """Snake-case names of the games whose ROMs ship with ale-py (e.g. ``"space_invaders"``)."""
    return sorted(roms.get_all_rom_ids())


class AtariEnv(Env):
    """An Atari game on ``ale_py.ALEInterface`` (rlpyt ``AtariEnv`` with 84x84 frames).

    Observations are uint8 ``[num_img_obs, 84, 84]`` (``obs_type="rgb"``: ``[3 * num_img_obs,
    84, 84]``, each frame's R, G, B planes in turn); actions index the game's minimal action set.

    Args:
        game: Snake-case game name (``"pong"``, ``"space_invaders"``; see :func:`atari_games`).
        frame_skip: Emulator frames per step, the action repeated on each (>= 1).
        num_img_obs: Frames stacked in an observation (>= 1).
        clip_reward: Reward is the sign of the step's game score.
        episodic_lives: A lost life gives ``done=True`` with ``traj_done=False``.
        fire_on_reset: Press FIRE for one step after each reset (games that wait for it).
        max_start_noops: A new game starts with a uniform random 0..max_start_noops no-op frames.
        repeat_action_probability: Sticky actions: the probability that the emulator repeats the
            previous action instead of the new one on each frame.
        horizon: Steps per game before a timeout (``None``: no limit).
        obs_type: ``"grayscale"`` or ``"rgb"``.

    Raises:
        ValueError: On an unknown game or an out-of-range argument.
    """

    def __init__(
        self,
        game: str = "pong",
        frame_skip: int = 4,
        num_img_obs: int = 4,
        clip_reward: bool = True,
        episodic_lives: bool = True,
        fire_on_reset: bool = False,
        max_start_noops: int = 30,
        repeat_action_probability: float = 0.0,
        horizon: int | None = 27000,
        obs_type: str = "grayscale",
    ) -> None:
        if game not in roms.get_all_rom_ids():
            raise ValueError(f"AtariEnv: unknown game={game!r}; see lightning_rl.envs.atari_games()")
        if frame_skip < 1:
            raise ValueError(f"AtariEnv: frame_skip must be >= 1, got frame_skip={frame_skip}")
        if num_img_obs < 1:
            raise ValueError(f"AtariEnv: num_img_obs must be >= 1, got num_img_obs={num_img_obs}")
        if max_start_noops < 0:
            raise ValueError(f"AtariEnv: max_start_noops must be >= 0, got max_start_noops={max_start_noops}")
        if not 0.0 <= repeat_action_probability <= 1.0:
            raise ValueError(
                f"AtariEnv: repeat_action_probability must be in [0, 1], got {repeat_action_probability}"
            )
        if horizon is not None and horizon < 1:
            raise ValueError(f"AtariEnv: horizon must be >= 1 or None, got horizon={horizon}")
        if obs_type not in _OBS_TYPES:
            raise ValueError(f"AtariEnv: obs_type must be one of {_OBS_TYPES}, got obs_type={obs_type!r}")
        self._kwargs: dict[str, Any] = dict(
            game=game,
            frame_skip=frame_skip,
            num_img_obs=num_img_obs,
            clip_reward=clip_reward,
            episodic_lives=episodic_lives,
            fire_on_reset=fire_on_reset,
            max_start_noops=max_start_noops,
            repeat_action_probability=repeat_action_probability,
            horizon=horizon,
            obs_type=obs_type,
        )
        self._init(np.random.SeedSequence().generate_state(1)[0] & 0x7FFFFFFF, np.random.default_rng())

    def _init(self, ale_seed: int, rng: np.random.Generator) -> None:
        k = self._kwargs
        self.game: str = k["game"]
        self.frame_skip: int = k["frame_skip"]
        self.num_img_obs: int = k["num_img_obs"]
        self.clip_reward: bool = k["clip_reward"]
        self.episodic_lives: bool = k["episodic_lives"]
        self.fire_on_reset: bool = k["fire_on_reset"]
        self.max_start_noops: int = k["max_start_noops"]
        self.repeat_action_probability: float = k["repeat_action_probability"]
        self.obs_type: str = k["obs_type"]
        self._horizon: int | None = k["horizon"]
        self._rgb = self.obs_type == "rgb"
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        self._ale = ale_py.ALEInterface()
        self._load(ale_seed)
        self._rng = rng
        self._action_set = list(self._ale.getMinimalActionSet())
        if self.fire_on_reset and ale_py.Action.FIRE not in self._action_set:
            raise ValueError(f"AtariEnv: fire_on_reset=True but game={self.game!r} has no FIRE action")
        channels = 3 * self.num_img_obs if self._rgb else self.num_img_obs
        self._observation_space = IntBox(0, 256, shape=(channels, _H, _W), dtype=np.uint8)
        self._action_space = IntBox(0, len(self._action_set))
        h, w = self._ale.getScreenDims()
        self._raw = np.zeros((2, h, w, 3) if self._rgb else (2, h, w), dtype=np.uint8)
        self._pooled = np.zeros_like(self._raw[0])
        self._obs = np.zeros((channels, _H, _W), dtype=np.uint8)
        self._lives = self._ale.lives()
        self._steps = 0
        self._continue_game = False
        self._needs_reset = True

    def _load(self, ale_seed: int) -> None:
        # Settings take effect at loadROM, so a new seed means loading the ROM again.
        self._ale_seed = int(ale_seed)
        self._ale.setInt("random_seed", self._ale_seed)
        self._ale.setFloat("repeat_action_probability", float(self.repeat_action_probability))
        self._ale.setInt("frame_skip", 1)
        self._ale.setBool("color_averaging", False)
        rom = roms.get_rom_path(self.game)
        assert rom is not None  # the game was checked against roms.get_all_rom_ids()
        self._ale.loadROM(rom)

    @property
    def observation_space(self) -> IntBox:
        """uint8 frames ``[num_img_obs, 84, 84]`` (rgb: ``[3 * num_img_obs, 84, 84]``)."""
        return self._observation_space

    @property
    def action_space(self) -> IntBox:
        """Indexes into the game's minimal action set."""
        return self._action_space

    @property
    def horizon(self) -> int | None:
        """Steps per game before a timeout."""
        return self._horizon

    @property
    def frame_stack(self) -> int | None:
        """``num_img_obs`` in grayscale, where each step shifts in one frame and a reset starts
        from zero frames; None for ``obs_type="rgb"``, whose frames are three channels each."""
        return None if self._rgb else self.num_img_obs

    @property
    def ale(self) -> ale_py.ALEInterface:
        """The underlying emulator interface (read lives, clone states)."""
        return self._ale

    @property
    def lives(self) -> int:
        """Lives left in the current game."""
        return self._ale.lives()

    @property
    def action_meanings(self) -> list[str]:
        """Names of the actions, in action-index order (``["NOOP", "FIRE", ...]``)."""
        return [a.name for a in self._action_set]

    def seed(self, seed: int | None) -> None:
        """Seed the emulator (reloads the ROM), the no-op generator and ``action_space.sample``.

        The emulator's ``random_seed`` is ``seed`` itself (reduced to 31 bits). The next
        :meth:`reset` starts a new game.
        """
        if seed is not None and seed < 0:
            raise ValueError(f"AtariEnv: seed must be >= 0 or None, got seed={seed}")
        ss = np.random.SeedSequence(seed)
        ale_seed = (seed if seed is not None else int(ss.generate_state(1)[0])) & 0x7FFFFFFF
        self._load(ale_seed)
        # Separate streams, so the no-op count and sampled actions are not correlated.
        noop_ss, action_ss = ss.spawn(2)
        self._rng = np.random.default_rng(noop_ss)
        self._action_space.seed(int(action_ss.generate_state(1)[0]))
        self._continue_game = False
        self._needs_reset = True

    def _repeat(self, action: ale_py.Action, n: int) -> float:
        """Act ``n`` frames; keep the frames before and after the last act for max-pooling."""
        score = 0
        for _ in range(n - 1):
            score += self._ale.act(action)
        self._grab(0)
        score += self._ale.act(action)
        self._grab(1)
        return float(score)

    def _grab(self, slot: int) -> None:
        if self._rgb:
            self._ale.getScreenRGB(self._raw[slot])
        else:
            self._ale.getScreenGrayscale(self._raw[slot])

    def _push_frame(self) -> None:
        np.maximum(self._raw[0], self._raw[1], out=self._pooled)
        frame = cv2.resize(self._pooled, (_W, _H), interpolation=cv2.INTER_AREA)
        c = 3 if self._rgb else 1
        self._obs[:-c] = self._obs[c:]
        self._obs[-c:] = frame.transpose(2, 0, 1) if self._rgb else frame

    def reset(self) -> np.ndarray:
        """Start a new episode: a new game, or after a lost life (``episodic_lives``) the same one.

        A new game gets 0..``max_start_noops`` random no-op frames; either kind of start presses
        FIRE for one step if ``fire_on_reset``. The frame stack restarts from zeros.

        Returns:
            The first observation, uint8 ``[num_img_obs, 84, 84]``.
        """
        self._obs[:] = 0
        if not self._continue_game:
            self._ale.reset_game()
            self._steps = 0
            n_noops = int(self._rng.integers(0, self.max_start_noops + 1)) if self.max_start_noops else 0
            if n_noops:
                self._repeat(ale_py.Action.NOOP, n_noops)
            if not n_noops or self._ale.game_over():
                if self._ale.game_over():
                    self._ale.reset_game()
                self._grab(0)
                self._grab(1)
        if self.fire_on_reset:
            self._repeat(ale_py.Action.FIRE, self.frame_skip)
        self._lives = self._ale.lives()
        self._continue_game = False
        self._needs_reset = False
        self._push_frame()
        return self._obs.copy()

    def step(self, action: Any) -> EnvStep:
        """Play one step: ``frame_skip`` frames of ``action`` (an index into the action set).

        Returns:
            ``EnvStep(observation [num_img_obs, 84, 84] uint8, reward: float, done: bool,
            AtariEnvInfo)``; ``reward`` is clipped to its sign if ``clip_reward``.
        """
        if self._needs_reset:
            raise RuntimeError("AtariEnv: call reset() before step() (after construction or seed())")
        game_score = self._repeat(self._action_set[int(action)], self.frame_skip)
        self._push_frame()
        self._steps += 1
        game_over = self._ale.game_over()
        lives = self._ale.lives()
        lost_life = lives < self._lives
        self._lives = lives
        terminated = game_over or (self.episodic_lives and lost_life)
        at_horizon = self._horizon is not None and self._steps >= self._horizon
        truncated = at_horizon and not terminated
        traj_done = game_over or at_horizon
        self._continue_game = terminated and not traj_done
        reward = float(np.sign(game_score)) if self.clip_reward else game_score
        env_info = AtariEnvInfo(truncated=truncated, terminated=terminated, game_score=game_score, traj_done=traj_done)
        return EnvStep(self._obs.copy(), reward, terminated or truncated, env_info)

    def render(self) -> np.ndarray:
        """The current screen as RGB, uint8 ``[210, 160, 3]``."""
        return self._ale.getScreenRGB()

    def close(self) -> None:
        """Nothing to release: the emulator is freed with the object."""

    def get_state(self) -> dict[str, Any]:
        """The env's full state (emulator with its RNG, frames, counters) as plain data.

        Checkpoints store it as data (:mod:`lightning_rl.safe_state`); :meth:`set_state` puts it
        back into an env built with the same arguments.
        """
        return dict(
            ale_seed=self._ale_seed,
            ale_state=self._ale.cloneState(include_rng=True).serialize(),
            rng=self._rng,
            action_space_rng=self._action_space._rng,
            raw=self._raw.copy(),
            obs=self._obs.copy(),
            lives=self._lives,
            steps=self._steps,
            continue_game=self._continue_game,
            needs_reset=self._needs_reset,
        )

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (the emulator is rebuilt with the stored seed first)."""
        self._init(int(state["ale_seed"]), state["rng"])
        self._ale.restoreState(ale_py.ALEState(state["ale_state"]))
        self._action_space._rng = state["action_space_rng"]
        self._raw[:] = state["raw"]
        self._obs[:] = state["obs"]
        self._lives = int(state["lives"])
        self._steps = int(state["steps"])
        self._continue_game = bool(state["continue_game"])
        self._needs_reset = bool(state["needs_reset"])

    def __getstate__(self) -> dict[str, Any]:
        # The emulator itself does not pickle; its state does.
        return dict(kwargs=self._kwargs, state=self.get_state())

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._kwargs = state["kwargs"]
        self.set_state(state["state"])
