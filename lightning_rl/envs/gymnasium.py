"""Adapter from gymnasium 1.x environments to the lightning_rl :class:`~lightning_rl.envs.base.Env`.

gymnasium's ``terminated`` and ``truncated`` stay apart: ``done = terminated or truncated`` and
``env_info.truncated`` is True when the episode was cut by a time limit rather than ended by the
MDP, so returns can bootstrap through time limits. ``info`` dicts are turned into named tuples
with one fixed structure per env (samplers preallocate buffers for them), built from the keys
seen at the first reset and the first step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import gymnasium
import numpy as np
from gymnasium.utils import EzPickle

from lightning_rl.data.namedarraytuple import NamedTupleSchema
from lightning_rl.envs.base import Env, EnvStep
from lightning_rl.spaces import Space, from_gymnasium, from_gymnasium_value, to_field_names, to_gymnasium_value

if TYPE_CHECKING:
    from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

__all__ = ["GymEnvWrapper", "InfoFilter"]



def _is_numeric_leaf(value: Any) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, (np.generic, np.ndarray)) and value.dtype.kind in "biuf"


def _zero_like(example: Any) -> Any:
    if isinstance(example, np.ndarray):
        return np.zeros_like(example)
    if isinstance(example, np.generic):
        return example.dtype.type(0)
    return type(example)(0)


class InfoFilter:
    """Maps gymnasium ``info`` dicts onto one fixed named-tuple structure.

    Kept are numeric leaves (bool, int, float, numpy scalars and non-object arrays) and nested
    dicts of them; field names are the keys made valid identifiers (``ale.lives`` ->
    ``ale_lives``). Later infos are filtered to this structure: missing keys (or ``None``) give
    zeros of the example's type, new keys are dropped, values are cast to the example's type.

    Args:
        example: The example info dict.
        name: Type name of the named tuple.
        leading: Fields placed first, filled by the caller (e.g. ``truncated``, ``terminated``).
    """

    keys: tuple[Any, ...]

    def __init__(self, example: Mapping[str, Any], name: str = "EnvInfo", leading: tuple[str, ...] = ()) -> None:
        keys: list[Any] = []
        parts: list[Any] = []
        for key, value in example.items():
            if isinstance(value, Mapping):
                sub = InfoFilter(value, name=f"{name}_{key}")
                if sub.keys:
                    keys.append(key)
                    parts.append(sub)
            elif _is_numeric_leaf(value):
                keys.append(key)
                parts.append(value.copy() if isinstance(value, np.ndarray) else value)
        self.keys = tuple(keys)
        self._parts = parts
        self.leading = tuple(leading)
        fields = list(leading) + to_field_names(keys, reserved=leading)
        self.schema = NamedTupleSchema(name, fields)

    def __call__(self, info: Mapping[str, Any], *leading_values: Any) -> Any:
        """Named tuple of ``leading_values`` followed by the filtered values of ``info``."""
        values = list(leading_values)
        for key, part in zip(self.keys, self._parts, strict=True):
            v = info.get(key)
            if isinstance(part, InfoFilter):
                values.append(part(v if isinstance(v, Mapping) else {}))
            elif v is None:
                values.append(_zero_like(part))
            else:
                values.append(self._cast(key, part, v))
        return self.schema(*values)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Envs pickled (in checkpoints) before the ``timeout`` field was renamed ``truncated``
        # keep filling the same buffer fields after a resume.
        self.__dict__.update(state)
        if "timeout" in self.leading:
            self.leading = tuple("truncated" if f == "timeout" else f for f in self.leading)
            fields = list(self.schema._fields)
            fields[fields.index("timeout")] = "truncated"
            self.schema = NamedTupleSchema(self.schema._typename, fields)

    @staticmethod
    def _cast(key: Any, example: Any, value: Any) -> Any:
        try:
            if isinstance(example, np.ndarray):
                a = np.asarray(value, dtype=example.dtype)
                if a.shape != example.shape:
                    raise ValueError(f"shape {a.shape} differs from the first info's {example.shape}")
                return a
            if isinstance(example, np.generic):
                return example.dtype.type(value)
            return type(example)(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"GymEnvWrapper: info[{key!r}]={value!r} does not fit the first info's value: {e}") from e


def _is_mujoco(env: gymnasium.Env) -> TypeGuard[MujocoEnv]:
    return any(c.__name__ == "MujocoEnv" for c in type(env).__mro__)


def _find_time_limit(env: gymnasium.Env) -> int | None:
    e = env
    while True:
        if isinstance(e, gymnasium.wrappers.TimeLimit):
            return int(e._max_episode_steps)
        if not isinstance(e, gymnasium.Wrapper):
            return None
        e = e.env


def _box_bounds(space: gymnasium.Space) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high)`` of a ``Box`` space with any finite bound (what ``step`` clips to), else None."""
    if not isinstance(space, gymnasium.spaces.Box):
        return None
    if not (np.isfinite(space.low).any() or np.isfinite(space.high).any()):
        return None
    return space.low.copy(), space.high.copy()


class GymEnvWrapper(Env):
    """Wrap a gymnasium env as a lightning_rl :class:`Env` (rlpyt ``GymEnvWrapper``).

    Observations and actions are converted with :mod:`lightning_rl.spaces.gymnasium` (dicts and
    tuples become named tuples). ``step`` returns ``EnvStep(observation, reward: float, done:
    bool, env_info)`` with ``env_info`` a named tuple ``EnvInfo(truncated, terminated, <info
    keys>...)``.

    Args:
        env: The gymnasium env (with its wrappers, e.g. ``TimeLimit``).
        force_float32: Present float observations and actions as float32.

    Examples:
        >>> env = GymEnvWrapper(gymnasium.make("CartPole-v1", max_episode_steps=5))
        >>> env.seed(0)
        >>> obs = env.reset()
        >>> step = env.step(env.action_space.sample())
        >>> step.env_info.truncated
        False
    """

    def __init__(self, env: gymnasium.Env, force_float32: bool = True) -> None:
        if not isinstance(env, gymnasium.Env):
            raise ValueError(f"GymEnvWrapper: env must be a gymnasium.Env, got {env!r}")
        self.env = env
        self._observation_space = from_gymnasium(env.observation_space, "obs", force_float32)
        self._action_space = from_gymnasium(env.action_space, "act", force_float32)
        self._action_bounds = _box_bounds(env.action_space)
        self._horizon = _find_time_limit(env)
        self._info_filter: InfoFilter | None = None
        self._reset_info: Mapping[str, Any] = {}
        self._next_seed: int | None = None
        self._seed_pending = False

    @property
    def observation_space(self) -> Space:
        """The converted observation space."""
        return self._observation_space

    @property
    def action_space(self) -> Space:
        """The converted action space."""
        return self._action_space

    @property
    def horizon(self) -> int | None:
        """``max_episode_steps`` of the ``TimeLimit`` wrapper, if the env has one."""
        return self._horizon

    @property
    def frame_stack(self) -> int | dict[str, int] | None:
        """A ``frame_stack`` attribute of the gymnasium env or any of its wrappers (see
        :attr:`Env.frame_stack` for what declaring one promises), else None.

        gymnasium's ``FrameStackObservation`` declares none: it pads a reset with copies of the
        first frame by default, not with the zero frames the frame replay rebuilds.
        """
        try:
            return self.env.get_wrapper_attr("frame_stack")
        except AttributeError:
            return None

    def seed(self, seed: int | None) -> None:
        """Make the next :meth:`reset` call ``env.reset(seed=seed)``; seed the action and
        observation spaces (so two runs of one seed hold the same space generators)."""
        self._next_seed = seed
        self._seed_pending = True
        self.env.action_space.seed(seed)
        self._action_space.seed(seed)
        self.env.observation_space.seed(seed)
        self._observation_space.seed(seed)

    def reset(self) -> Any:
        """Reset the gymnasium env and return the converted first observation."""
        if self._seed_pending:
            obs, info = self.env.reset(seed=self._next_seed)
            self._seed_pending = False
        else:
            obs, info = self.env.reset()
        if self._info_filter is None:
            self._reset_info = info
        return from_gymnasium_value(self._observation_space, obs)

    def step(self, action: Any) -> EnvStep:
        """Step with ``action`` (an element of :attr:`action_space`, numpy or torch).

        A ``Box`` action is clipped to the space's bounds before the env sees it (as
        Stable-Baselines3 does): Gaussian policies sample outside them, keep the raw sample for
        its exact log-likelihood, and the env (its dynamics and any control cost in its reward)
        gets the action it can apply.
        """
        value = to_gymnasium_value(self._action_space, action)
        if self._action_bounds is not None:
            value = np.clip(value, *self._action_bounds)
        obs, reward, terminated, truncated, info = self.env.step(value)
        terminated, truncated = bool(terminated), bool(truncated)
        if self._info_filter is None:
            self._info_filter = InfoFilter({**self._reset_info, **info}, "EnvInfo", ("truncated", "terminated"))
            self._reset_info = {}
        env_info = self._info_filter(info, truncated and not terminated, terminated)
        return EnvStep(
            from_gymnasium_value(self._observation_space, obs), float(reward), terminated or truncated, env_info
        )

    @property
    def info_fields(self) -> tuple[str, ...] | None:
        """Field names of ``env_info`` (``None`` until the first step fixes them)."""
        return None if self._info_filter is None else self._info_filter.schema._fields

    def render(self) -> Any:
        """The gymnasium env's ``render()`` (as its ``render_mode`` says)."""
        return self.env.render()

    def close(self) -> None:
        """Close the gymnasium env."""
        self.env.close()

    def __getstate__(self) -> dict[str, Any]:
        # gymnasium's EzPickle envs (MuJoCo, Box2D) unpickle as freshly constructed envs. Keep
        # their random generator and, for MuJoCo, the full integration state, so a pickled env
        # continues exactly where it was (samplers' exact resume).
        state = dict(self.__dict__)
        inner = self.env.unwrapped
        if isinstance(inner, EzPickle):
            state["_inner_random"] = (inner._np_random, getattr(inner, "_np_random_seed", None))
            if _is_mujoco(inner):
                import mujoco

                spec = mujoco.mjtState.mjSTATE_INTEGRATION
                buf = np.empty(mujoco.mj_stateSize(inner.model, spec))
                mujoco.mj_getState(inner.model, inner.data, buf, spec)
                state["_mujoco_state"] = buf
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        random_state = state.pop("_inner_random", None)
        mujoco_state = state.pop("_mujoco_state", None)
        self.__dict__.update(state)
        inner = self.env.unwrapped
        if random_state is not None:
            inner._np_random, inner._np_random_seed = random_state
        if mujoco_state is not None:
            import mujoco

            sim = cast("MujocoEnv", inner)  # only MuJoCo envs pickle a _mujoco_state
            mujoco.mj_setState(sim.model, sim.data, mujoco_state, mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_forward(sim.model, sim.data)
