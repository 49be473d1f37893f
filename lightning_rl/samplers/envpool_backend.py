"""EnvPool as a :class:`~lightning_rl.samplers.vector.VectorSampler` backend.

EnvPool steps a pool of copies in C++ threads behind one call. :class:`EnvPoolVectorEnv` gives it
the gymnasium ``VectorEnv`` calls the sampler makes:

* NEXT_STEP autoreset with partial resets: ``reset(options={"reset_mask": m})`` resets the copies in
  ``m`` at once (EnvPool's ``reset(env_id)``), so EnvPool's own reset step (the step after an
  episode's end, whose action it ignores) never happens and never becomes a sample; the returned
  observation and info are full ``[num_envs]`` arrays, the other copies' rows being their last;
* seeds: EnvPool seeds its copies when the pool is built (copy ``b`` with ``seed + b``), so a
  ``reset(seed=s)`` rebuilds the pool with ``s`` (``s`` a list: its first element);
* Atari ids (``ALE/<Game>-v5``, ``<Game>NoFrameskip-v4``) take :class:`~lightning_rl.envs.atari.AtariEnv`'s
  ``env_kwargs``, mapped by :func:`envpool_atari_kwargs`; any other id (``CartPole-v1``,
  ``HalfCheetah-v5``, ...) takes EnvPool's own keyword arguments.

EnvPool is an optional dependency (the ``bench`` extra: ``pip install -e ".[bench]"``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lightning_rl.envs.make import is_atari_id, vector_atari_settings

__all__ = ["EnvPoolVectorEnv", "envpool_atari_kwargs", "envpool_task_id"]


def envpool_task_id(env_id: str) -> str:
    """EnvPool's id for a gymnasium id: ``ALE/Pong-v5`` and ``PongNoFrameskip-v4`` are ``Pong-v5``."""
    if is_atari_id(env_id):
        name = env_id.split("/")[-1].split("-")[0]
        return f"{name.removesuffix('NoFrameskip').removesuffix('Deterministic')}-v5"
    return env_id


def envpool_atari_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map :class:`~lightning_rl.envs.atari.AtariEnv` arguments onto EnvPool's Atari options.

    ``make_env``'s defaults apply (``AtariEnv``'s, plus sticky actions 0.25 for ``ALE/...-v5``
    ids), as for the ``ale`` backend. Mapped: ``frame_skip``, ``num_img_obs`` -> ``stack_num``,
    ``max_start_noops`` -> ``noop_max = max_start_noops + 1`` (EnvPool draws ``0 .. noop_max - 1``),
    ``repeat_action_probability``, ``horizon`` ->
    ``max_episode_steps`` (agent steps), ``fire_on_reset`` -> ``use_fire_reset``;
    ``episodic_lives`` is the adapter's ``life_loss_info`` (a lost life ends the episode, the
    game goes on).
    Rewards stay unclipped (the sampler clips them and keeps the raw score).

    Returns:
        ``(EnvPool keyword arguments, the AtariEnv settings used)``.

    Raises:
        ValueError: On an unknown key or ``obs_type`` other than grayscale.
    """
    settings = vector_atari_settings(env_id, env_kwargs, "envpool")
    kwargs = dict(
        frame_skip=int(settings["frame_skip"]),
        stack_num=int(settings["num_img_obs"]),
        noop_max=int(settings["max_start_noops"]) + 1,  # no-ops drawn from 0 .. noop_max - 1 (0 crashes EnvPool)
        repeat_action_probability=float(settings["repeat_action_probability"]),
        max_episode_steps=2**31 - 1 if settings["horizon"] is None else int(settings["horizon"]),
        use_fire_reset=bool(settings["fire_on_reset"]),
        # EnvPool's own episodic life ends the episode at a lost life and then spends the next
        # step (ignoring its action) on a soft reset: a dummy transition. The adapter flags a
        # lost life as terminated instead and the game plays on (``life_loss_info``).
        episodic_life=False,
        reward_clip=False,
        gray_scale=True,
        img_height=84,
        img_width=84,
    )
    return kwargs, settings


def _import_envpool() -> Any:
    try:
        import envpool
    except ImportError as e:
        raise ImportError(
            "backend='envpool' needs EnvPool, an optional dependency: "
            "pip install -e \".[bench]\" (or pip install envpool)"
        ) from e
    return envpool


class EnvPoolVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies of an EnvPool task as a gymnasium ``VectorEnv`` (see the module docstring).

    Args:
        env_id: A gymnasium id EnvPool knows (Atari ids are mapped, see :func:`envpool_task_id`).
        num_envs: Copies.
        num_threads: EnvPool's threads (0: its default).
        life_loss_info: Atari: a lost life (``info["lives"]`` down, lives left) is reported as
            ``terminated`` while the game plays on, as ale-py's ``life_loss_info`` does.
        **kwargs: EnvPool's task options.

    Raises:
        ValueError: If EnvPool has no such task.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int, num_threads: int = 0, life_loss_info: bool = False,
                 **kwargs: Any) -> None:
        envpool = _import_envpool()
        task_id = self.task_id = envpool_task_id(env_id)
        if task_id not in envpool.list_all_envs():
            raise ValueError(f"backend='envpool': EnvPool has no task {task_id!r} (for env_id={env_id!r})")
        # No reference back to self: the adapter must not sit in a reference cycle, so that closing
        # it destroys the pool here; a pool left to the garbage collector may be collected in a
        # forked child (a CpuSampler worker), whose C++ destructor then aborts on threads the
        # child does not have.
        self._make = lambda seed: envpool.make_gymnasium(
            task_id, num_envs=num_envs, num_threads=num_threads, seed=seed, **kwargs)
        self._pool: Any = self._make(0)
        self.num_envs = num_envs
        self.single_observation_space = self._pool.observation_space
        self.single_action_space = self._pool.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs: np.ndarray | None = None
        self.life_loss_info = life_loss_info
        self._lives: np.ndarray | None = None
        #: Frames per observation (Atari's frame stack; 1 for other tasks) and steps since reset.
        self.stack = int(kwargs.get("stack_num", 1)) if "stack_num" in kwargs else 1
        self._since_reset = np.zeros(num_envs, dtype=np.int64)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            if seed is not None:
                first = int(seed[0] if isinstance(seed, (list, tuple, np.ndarray)) else seed)
                self._pool.close()
                self._pool = self._make(first)
            ids = np.arange(self.num_envs)
            obs, info = self._pool.reset()
            self._obs = np.array(obs)
        else:
            assert self._obs is not None, "reset() before a partial reset"
            ids = np.flatnonzero(np.asarray(mask, dtype=bool))
            obs, partial = self._pool.reset(ids.astype(np.int32))
            self._obs = np.array(self._obs)  # the last step's array may still be the caller's
            self._obs[ids] = obs
            info = {}
            for key, value in partial.items():
                value = np.asarray(value)
                if value.ndim >= 1 and len(value) == len(ids):
                    # Per-copy values: the reset copies' rows, zeros elsewhere (callers read the mask).
                    full = np.zeros((self.num_envs, *value.shape[1:]), dtype=value.dtype)
                    full[ids] = value
                    info[key] = full
        if "lives" in info:
            if self._lives is None:
                self._lives = np.zeros(self.num_envs, dtype=np.int64)
            self._lives[ids] = np.asarray(info["lives"])[ids]
        self._since_reset[ids] = 0
        self._blank_stack(ids)
        return self._obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._pool.step(np.asarray(actions))
        self._obs = obs  # no copy: only the first steps after a reset are written (below)
        self._since_reset += 1
        self._blank_stack(np.flatnonzero(self._since_reset < self.stack - 1))
        if self._lives is not None:
            lives = np.asarray(info["lives"])
            if self.life_loss_info:
                terminated = np.asarray(terminated) | ((lives < self._lives) & (lives > 0))
            self._lives = np.array(lives)
        return self._obs, reward, terminated, truncated, info

    def _blank_stack(self, ids: np.ndarray) -> None:
        """Zero the stacked frames from before the episode's first (EnvPool repeats the first
        frame there; AtariEnv and ale-py start the stack with zeros)."""
        if self.stack <= 1 or self._obs is None or not len(ids):
            return
        self._obs = np.array(self._obs)  # a copy of EnvPool's array before writing into it
        for b in ids:
            older = self.stack - 1 - int(self._since_reset[b])
            if older > 0:
                self._obs[b, :older] = 0

    def close_extras(self, **kwargs: Any) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None  # destroyed now, in this process (see __init__)
