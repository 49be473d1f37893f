"""Build a lightning_rl env from a gymnasium id, an Atari id or a callable."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium

from lightning_rl.envs.atari import AtariEnv, atari_games
from lightning_rl.envs.base import Env
from lightning_rl.envs.gymnasium import GymEnvWrapper
from lightning_rl.envs.multiagent import COOP_GRID_ID
from lightning_rl.envs.pettingzoo import PettingZooEnv, is_pettingzoo_env, is_pettingzoo_id, make_pettingzoo_env
from lightning_rl.envs.traj_info import AtariTrajInfo, MultiAgentTrajInfo, TrajInfo

__all__ = [
    "atari_game_from_id", "default_traj_info_cls", "is_atari_id", "make_env", "make_gymnasium_env",
    "route_mujoco_warnings",
]

_ATARI_ID = re.compile(
    r"^(?:ALE/(?P<v5>[A-Za-z0-9]+)(?P<rest>(?:-[A-Za-z]+)*)-v\d+|(?P<v4>[A-Za-z0-9]+)NoFrameskip-v4)$"
)


#: gymnasium's (and ale-py's) default sticky-action probability for ``ALE/<Game>-v5`` ids
#: (Machado et al. 2018).
ALE_V5_REPEAT_ACTION_PROBABILITY = 0.25


def is_atari_id(env_id: Any) -> bool:
    """True for ids that :func:`make_env` maps to :class:`AtariEnv`: ``ALE/...`` and ``...NoFrameskip-v4``."""
    return isinstance(env_id, str) and (env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4"))


def atari_game_from_id(env_id: str) -> str:
    """The ale-py game name of an Atari id: ``"ALE/SpaceInvaders-v5"`` -> ``"space_invaders"``.

    Raises:
        ValueError: If the id is malformed, asks for RAM observations, or names no known game.
    """
    m = _ATARI_ID.match(env_id)
    if m is None:
        raise ValueError(
            f"make_env: env_id={env_id!r} is not an Atari id of the form 'ALE/<Game>-v5' or '<Game>NoFrameskip-v4'"
        )
    if m.group("rest"):
        raise ValueError(f"make_env: env_id={env_id!r}: only image observations are supported (no '-ram')")
    camel = m.group("v5") or m.group("v4")
    # Compare case-insensitively without underscores: "TicTacToe3D" matches "tic_tac_toe_3d".
    by_key = {g.replace("_", ""): g for g in atari_games()}
    game = by_key.get(camel.lower())
    if game is None:
        raise ValueError(f"make_env: env_id={env_id!r} names no game known to ale-py (game {camel!r})")
    return game


def vector_atari_settings(env_id: str, env_kwargs: dict[str, Any], backend: str) -> dict[str, Any]:
    """:class:`~lightning_rl.envs.atari.AtariEnv`'s settings for a vector backend that maps them
    onto its own options: ``make_env``'s defaults (``AtariEnv``'s, plus sticky actions 0.25 for
    ``ALE/...-v5`` ids) updated by ``env_kwargs``.

    Raises:
        ValueError: Naming ``backend``, on a key ``AtariEnv`` does not take or ``obs_type`` other
            than grayscale (the vector backends make grayscale frames only).
    """
    settings: dict[str, Any] = dict(
        frame_skip=4, num_img_obs=4, clip_reward=True, episodic_lives=True, fire_on_reset=False,
        max_start_noops=30, repeat_action_probability=0.0, horizon=27000, obs_type="grayscale",
    )
    if env_id.startswith("ALE/"):
        settings["repeat_action_probability"] = ALE_V5_REPEAT_ACTION_PROBABILITY
    unknown = sorted(set(env_kwargs) - set(settings))
    if unknown:
        raise ValueError(f"backend={backend!r}: env_kwargs has keys AtariEnv does not take: {unknown}")
    settings.update(env_kwargs)
    if settings["obs_type"] != "grayscale":
        raise ValueError(
            f"backend={backend!r} supports obs_type='grayscale' only, got env_kwargs obs_type={settings['obs_type']!r}"
        )
    return settings


#: Starts of MuJoCo warnings about gymnasium's own model files, which a user cannot change
#: (``half_cheetah.xml`` sets ``settotalmass``, deprecated in MuJoCo 3.3): not shown.
MUJOCO_WARNINGS_DROPPED = ("compiler attribute 'settotalmass' is deprecated",)


def route_mujoco_warnings(env_id: Any) -> None:
    """For a gymnasium MuJoCo id, send MuJoCo's warnings to Python's ``warnings`` (once per process).

    MuJoCo's C library prints its warnings to stderr, where no filter reaches them; a
    ``RuntimeWarning("MuJoCo: ...")`` can be filtered, recorded or turned into an error, and
    Python shows each once. Those in :data:`MUJOCO_WARNINGS_DROPPED` are dropped. A handler set
    before (``mujoco.set_mju_user_warning``, by the user or an earlier call) is left in place;
    forked sampler workers inherit it.
    """
    if not isinstance(env_id, str):
        return
    try:
        entry_point = gymnasium.spec(env_id).entry_point
    except gymnasium.error.Error:
        return  # not registered: gymnasium.make names the problem
    if "gymnasium.envs.mujoco" not in str(entry_point):
        return
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_mujoco_warning)


def _mujoco_warning(message: str) -> None:
    if not message.startswith(MUJOCO_WARNINGS_DROPPED):
        warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)


def make_gymnasium_env(env_id: str | Callable[..., Any], **kwargs: Any) -> gymnasium.Env:
    """The gymnasium env behind a non-Atari ``env_id`` (what :func:`make_env` wraps, and what the
    vector sampler's ``sync``/``async`` backends and ``play``'s recorder step).

    A PettingZoo import path, or a callable returning a PettingZoo env, gives a
    :class:`~lightning_rl.envs.pettingzoo.PettingZooEnv`; another string ``gymnasium.make``'s env.

    Raises:
        ValueError: If the id is unknown, or a callable returns neither a gymnasium nor a PettingZoo env.
    """
    if isinstance(env_id, str) and is_pettingzoo_id(env_id):
        return make_pettingzoo_env(env_id, **kwargs)
    if isinstance(env_id, str):
        route_mujoco_warnings(env_id)
        try:
            return gymnasium.make(env_id, **kwargs)
        except gymnasium.error.Error as e:
            raise ValueError(f"make_env: gymnasium cannot make env_id={env_id!r}: {e}") from e
    env = env_id(**kwargs)
    if is_pettingzoo_env(env):
        return PettingZooEnv(env)
    if not isinstance(env, gymnasium.Env):
        raise ValueError(f"make_env: env_id={env_id!r} returned {type(env).__name__}, not a gymnasium.Env")
    return env


def make_env(env_id: str | Callable[..., Env | gymnasium.Env], seed: int | None = None, **kwargs: Any) -> Env:
    """Make a lightning_rl env.

    * ``ALE/<Game>-v5`` and ``<Game>NoFrameskip-v4`` -> ``AtariEnv(game=<game>, **kwargs)``: our
      preprocessing with :class:`AtariEnv`'s defaults, except that ``ALE/...-v5`` ids keep
      gymnasium's v5 sticky actions (``repeat_action_probability=0.25``) unless ``kwargs`` say
      otherwise; ``NoFrameskip-v4`` ids have none (0.0), as in gymnasium.
    * any other registered gymnasium id (classic control, MuJoCo v5, ...) ->
      ``GymEnvWrapper(gymnasium.make(env_id, **kwargs))``;
    * a PettingZoo import path (``mpe2.simple_spread_v3``: a module with ``parallel_env()`` or
      ``env()``; ``module:factory``: any factory) -> ``GymEnvWrapper(PettingZooEnv(...))``, the
      package's multi-agent convention (:mod:`lightning_rl.envs.pettingzoo`);
    * a callable -> ``env_id(**kwargs)``; a gymnasium env result is wrapped in :class:`GymEnvWrapper`,
      a PettingZoo ``ParallelEnv`` or ``AECEnv`` in :class:`PettingZooEnv` first.

    Args:
        env_id: Env id or factory.
        seed: Passed to the env's ``seed`` (the next reset is seeded) if not ``None``.
        **kwargs: Constructor arguments of the env.

    Returns:
        The env.

    Raises:
        ValueError: If the id is unknown to gymnasium and ale-py, or the callable returns
            something that is not an env.

    Examples:
        >>> env = make_env("CartPole-v1", seed=0, max_episode_steps=100)
        >>> env.horizon
        100
    """
    if callable(env_id):
        env = env_id(**kwargs)
        if is_pettingzoo_env(env):
            env = PettingZooEnv(env)
        if isinstance(env, gymnasium.Env):
            env = GymEnvWrapper(env)
        elif not isinstance(env, Env):
            raise ValueError(f"make_env: env_id={env_id!r} returned {type(env).__name__}, not an Env or gymnasium.Env")
    elif isinstance(env_id, str) and is_atari_id(env_id):
        if env_id.startswith("ALE/"):
            kwargs.setdefault("repeat_action_probability", ALE_V5_REPEAT_ACTION_PROBABILITY)
        env = AtariEnv(game=atari_game_from_id(env_id), **kwargs)
    elif isinstance(env_id, str):
        env = GymEnvWrapper(make_gymnasium_env(env_id, **kwargs))
    else:
        raise ValueError(f"make_env: env_id must be a string or a callable, got {env_id!r}")
    if seed is not None:
        env.seed(seed)
    return env


def default_traj_info_cls(env_id: str | Callable[..., Any]) -> type[TrajInfo]:
    """:class:`AtariTrajInfo` for Atari ids and :class:`AtariEnv` (subclasses),
    :class:`MultiAgentTrajInfo` (each agent's return too) for PettingZoo import paths and
    ``lightning_rl/CoopGrid-v0``, else :class:`TrajInfo`."""
    if is_atari_id(env_id) or (isinstance(env_id, type) and issubclass(env_id, AtariEnv)):
        return AtariTrajInfo
    if env_id == COOP_GRID_ID or is_pettingzoo_id(env_id):
        return MultiAgentTrajInfo
    return TrajInfo
