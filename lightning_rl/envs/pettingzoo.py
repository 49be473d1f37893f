"""PettingZoo environments as lightning_rl multi-agent envs (``ParallelEnv``, and ``AECEnv`` through
PettingZoo's own ``aec_to_parallel``).

:class:`PettingZooEnv` is a gymnasium env in the package's multi-agent convention (see
:mod:`lightning_rl.envs.multiagent`): a ``Dict`` action space keyed by agent id and a ``Dict``
observation space with each agent's own observation under its id, plus

* ``agent_mask``: float32 ``[n_agents]``, 1 for the agents that act on this observation (in
  ``possible_agents`` order). An agent that finished before the episode ends, or has not joined
  yet, gets 0, a zero observation, and its action is not passed to the env (it is not stepped);
  its rows count in no loss, return or advantage;
* ``state``: the env's global ``state()`` (``state_space``) when it has one, for a centralised
  critic.

Every step's ``info`` holds ``agent_rewards``, ``agent_terminated`` and ``agent_truncated``: one
entry per agent id (0 and False for agents that did not act). The env's reward is the sum of the
agents' rewards (the team return); the episode ends when no agent is left, ``terminated`` when the
last agents to leave all terminated, else ``truncated``.

In a config, a PettingZoo env is named by import path (see :func:`make_pettingzoo_env`)::

    sampler:
      class_path: lightning_rl.samplers.SerialSampler
      init_args:
        env_id: mpe2.simple_spread_v3      # a module with parallel_env() (or env())
        env_kwargs: {N: 3, max_cycles: 25}

or ``module:factory`` for any callable returning a ``ParallelEnv``, an ``AECEnv`` or a gymnasium env.
"""

from __future__ import annotations

import collections
import functools
import importlib
import importlib.util
import keyword
import re
import types
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from lightning_rl.envs.multiagent import AGENT_MASK_KEY, STATE_KEY
from lightning_rl.safe_state import UnsafeStateError, encode

__all__ = [
    "PettingZooEnv",
    "is_pettingzoo_env",
    "load_object_state",
    "object_state",
    "is_pettingzoo_id",
    "make_pettingzoo_env",
    "pettingzoo_factory",
]

#: ``module.path`` or ``module.path:factory``: Python identifiers joined by dots, at least one dot
#: or a ``:factory`` part (``CartPole-v1`` and ``ALE/Pong-v5`` are no import paths).
_IMPORT_PATH = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::(?P<factory>[A-Za-z_]\w*))?$")
_RESERVED = (AGENT_MASK_KEY, STATE_KEY, "get", "items")


def is_pettingzoo_id(env_id: Any) -> bool:
    """True for env ids that name a Python module or factory (``mpe2.simple_spread_v3``,
    ``my_pkg.envs:make_team``) rather than a registered gymnasium id.

    An id gymnasium has registered (``lightning_rl/CoopGrid-v0``) is gymnasium's, whatever its form.
    """
    if not isinstance(env_id, str):
        return False
    m = _IMPORT_PATH.match(env_id)
    if m is None or (m.group("factory") is None and "." not in env_id):
        return False
    return env_id not in gymnasium.registry


def pettingzoo_factory(env_id: str) -> Callable[..., Any]:
    """The callable an import path names: ``module:factory``, or ``module.parallel_env`` (else
    ``module.env``) for a bare module path.

    Raises:
        ValueError: If the module cannot be imported, or has no such factory.
    """
    m = _IMPORT_PATH.match(env_id)
    if m is None:
        raise ValueError(f"make_env: env_id={env_id!r} is not an import path 'package.module' or 'module:factory'")
    module_name, factory = m.group("module"), m.group("factory")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        top = module_name.split(".")[0]
        missing = top in ("mpe2", "pettingzoo") and importlib.util.find_spec(top) is None
        hint = " (pip install 'lightning-rl[pettingzoo]' installs PettingZoo and mpe2)" if missing else ""
        raise ValueError(
            f"make_env: cannot import module {module_name!r} of env_id={env_id!r}: {error}{hint}"
        ) from None
    names = [factory] if factory is not None else ["parallel_env", "env"]
    for name in names:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn
    raise ValueError(
        f"make_env: module {module_name!r} of env_id={env_id!r} has no callable {' or '.join(names)}; "
        "name a PettingZoo env module (with parallel_env() or env()) or a factory as 'module:factory'"
    )


def is_pettingzoo_env(env: Any) -> bool:
    """True for PettingZoo ``ParallelEnv`` and ``AECEnv`` objects (and their wrappers)."""
    try:
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError:
        return False
    return isinstance(env, (AECEnv, ParallelEnv))


def make_pettingzoo_env(env_id: str | Callable[..., Any], **kwargs: Any) -> gymnasium.Env:
    """The gymnasium env for a PettingZoo import path or factory (see :func:`pettingzoo_factory`).

    A factory returning a gymnasium env (not PettingZoo) is returned as it is.

    Raises:
        ValueError: On an unknown path, or a result that is neither a PettingZoo ``ParallelEnv``
            or ``AECEnv`` nor a gymnasium env.
    """
    factory = pettingzoo_factory(env_id) if isinstance(env_id, str) else env_id
    env = factory(**kwargs)
    if isinstance(env, gymnasium.Env):
        return env
    if not is_pettingzoo_env(env):
        raise ValueError(
            f"make_env: env_id={env_id!r} returned {type(env).__module__}.{type(env).__qualname__}, which is neither "
            "a PettingZoo ParallelEnv or AECEnv nor a gymnasium.Env"
        )
    return PettingZooEnv(env)


def _null_observation(space: gymnasium.Space, agent: str) -> Any:
    """The observation an inactive agent gets: zeros clipped into the space."""
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return np.int64(space.start)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=space.dtype).copy()
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    if isinstance(space, spaces.Dict):
        return {k: _null_observation(s, agent) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_null_observation(s, agent) for s in space.spaces)
    raise ValueError(f"PettingZooEnv: agent {agent!r} has an observation space lightning_rl cannot take: {space}")


def _check_agent_ids(agents: list[Any]) -> None:
    if not agents:
        raise ValueError("PettingZooEnv: the env has no possible_agents; lightning_rl needs at least one agent")
    bad = [a for a in agents if not isinstance(a, str) or not a.isidentifier() or a.startswith("_")
           or keyword.iskeyword(a) or a in _RESERVED]
    if bad:
        raise ValueError(
            f"PettingZooEnv: agent ids {bad!r} cannot be field names; lightning_rl keys per-agent data by agent id, "
            f"which must be a Python identifier without a leading underscore and none of {list(_RESERVED)} "
            "(rename them, e.g. with a PettingZoo wrapper)"
        )
    if len(set(agents)) != len(agents):
        raise ValueError(f"PettingZooEnv: possible_agents repeats an id: {agents!r}")


class PettingZooEnv(gymnasium.Env):
    """A PettingZoo ``ParallelEnv`` (or ``AECEnv``, converted by ``aec_to_parallel``) as a gymnasium
    env in lightning_rl's multi-agent convention (see the module docstring).

    Args:
        env: The PettingZoo env.
        include_state: Add the env's ``state()`` as observation field ``state``; None: when the
            env has a ``state_space`` (or its ``state()`` works after a reset).

    Raises:
        ValueError: If ``env`` is neither a ``ParallelEnv`` nor an ``AECEnv``, has no agents or
            agent ids that cannot be field names, or an observation space lightning_rl cannot take.

    Example:
        >>> from mpe2 import simple_spread_v3
        >>> env = PettingZooEnv(simple_spread_v3.parallel_env(N=2))
        >>> list(env.action_space.keys())
        ['agent_0', 'agent_1']
        >>> list(env.observation_space.keys())
        ['agent_0', 'agent_1', 'agent_mask', 'state']
    """

    def __init__(self, env: Any, include_state: bool | None = None) -> None:
        from pettingzoo.utils.conversions import aec_to_parallel
        from pettingzoo.utils.env import AECEnv, ParallelEnv

        if isinstance(env, AECEnv):
            env = aec_to_parallel(env)
        elif not isinstance(env, ParallelEnv):
            raise ValueError(
                f"PettingZooEnv: env must be a PettingZoo ParallelEnv or AECEnv, got "
                f"{type(env).__module__}.{type(env).__qualname__}"
            )
        # Not named ``env``: wrapper-chain walkers (exact-resume state) stop at this adapter,
        # whose get_state/set_state store the PettingZoo env.
        self.parallel_env = env
        agents = list(env.possible_agents)
        _check_agent_ids(agents)
        self.agent_names: tuple[str, ...] = tuple(agents)
        self._agent_index = {a: i for i, a in enumerate(agents)}
        observation_spaces = collections.OrderedDict((a, env.observation_space(a)) for a in agents)
        self._null = {a: _null_observation(s, a) for a, s in observation_spaces.items()}
        observation_spaces[AGENT_MASK_KEY] = spaces.Box(0.0, 1.0, shape=(len(agents),), dtype=np.float32)
        state_space = self._state_space(include_state)
        if state_space is not None:
            observation_spaces[STATE_KEY] = state_space
        self.include_state = state_space is not None
        self._state_dtype = None if state_space is None else state_space.dtype
        self.observation_space = spaces.Dict(observation_spaces)
        self.action_space = spaces.Dict(collections.OrderedDict((a, env.action_space(a)) for a in agents))
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._active: list[str] = []

    def _state_space(self, include_state: bool | None) -> gymnasium.Space | None:
        if include_state is False:
            return None
        space = getattr(self.parallel_env, "state_space", None)
        if isinstance(space, spaces.Box):
            return space
        try:
            self.parallel_env.reset(seed=0)
            state = np.asarray(self.parallel_env.state())
        except (NotImplementedError, AttributeError) as error:
            if include_state:
                raise ValueError(f"PettingZooEnv: include_state=True, but the env has no state(): {error}") from None
            return None
        dtype = state.dtype if state.dtype.kind == "f" else np.float32
        return spaces.Box(-np.inf, np.inf, shape=state.shape, dtype=dtype)

    def _observation(self, observations: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(observations) - set(self.agent_names), key=str)
        if unknown:
            raise ValueError(f"PettingZooEnv: the env returned observations of agents {unknown} that are not in "
                             f"possible_agents {list(self.agent_names)}")
        out: dict[str, Any] = {}
        mask = np.zeros(len(self.agent_names), dtype=np.float32)
        for a in self.agent_names:
            if a in self._active and a in observations:
                out[a] = observations[a]
                mask[self._agent_index[a]] = 1.0
            else:
                out[a] = self._null[a]
        out[AGENT_MASK_KEY] = mask
        if self.include_state:
            out[STATE_KEY] = np.asarray(self.parallel_env.state(), dtype=self._state_dtype)
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        observations, _ = self.parallel_env.reset(seed=seed, options=options)
        self._active = list(self.parallel_env.agents)
        return self._observation(observations), self._empty_info()

    def _empty_info(self) -> dict[str, Any]:
        return {
            "agent_rewards": {a: 0.0 for a in self.agent_names},
            "agent_terminated": {a: False for a in self.agent_names},
            "agent_truncated": {a: False for a in self.agent_names},
        }

    def step(self, action: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, dict) or set(action) != set(self.agent_names):
            raise ValueError(f"PettingZooEnv: action must be a dict with keys {list(self.agent_names)}, got {action!r}")
        if not self._active:
            raise ValueError("PettingZooEnv: step() after the episode ended (no agent is left); call reset()")
        acting = list(self._active)
        observations, rewards, terminations, truncations, _ = self.parallel_env.step({a: action[a] for a in acting})
        info = self._empty_info()
        for a in acting:
            info["agent_rewards"][a] = float(rewards.get(a, 0.0))
            info["agent_terminated"][a] = bool(terminations.get(a, False))
            info["agent_truncated"][a] = bool(truncations.get(a, False)) and not info["agent_terminated"][a]
        self._active = list(self.parallel_env.agents)
        done = not self._active
        ended = [a for a in acting if info["agent_terminated"][a] or info["agent_truncated"][a]]
        terminated = done and all(info["agent_terminated"][a] for a in ended) and bool(ended)
        truncated = done and not terminated
        reward = float(sum(info["agent_rewards"].values()))
        return self._observation(observations), reward, terminated, truncated, info

    def render(self) -> Any:
        """The PettingZoo env's ``render()`` (as its ``render_mode`` says)."""
        return self.parallel_env.render()

    def close(self) -> None:
        self.parallel_env.close()

    def get_state(self) -> dict[str, Any]:
        """The PettingZoo env's state as plain data, for exact resume (see :func:`object_state`).

        Raises:
            lightning_rl.safe_state.UnsafeStateError: If part of it cannot be stored as data.
        """
        return {"env": object_state(self.parallel_env, "env"), "active": list(self._active),
                "np_random": self._np_random}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` into this env, built from the same id and arguments.

        Raises:
            ValueError: If the stored state does not fit this env's objects.
        """
        load_object_state(self.parallel_env, state["env"], "env")
        self._active = list(state["active"])
        if state.get("np_random") is not None:
            self._np_random = state["np_random"]


def _is_config(value: Any) -> bool:
    """Values rebuilt with the env and never changed by stepping: callables, classes, modules,
    spaces and pygame's display objects (the renderer's screen and fonts)."""
    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                          functools.partial, gymnasium.spaces.Space)):
        return True
    return (type(value).__module__ or "").startswith("pygame")


def object_state(obj: Any, where: str = "env", _seen: set[int] | None = None) -> dict[str, Any]:
    """The state of a Python object graph as plain data: what :func:`load_object_state` writes back.

    Attributes that :func:`lightning_rl.safe_state.encode` can store (arrays, numbers, strings,
    numpy generators, lists and dicts of them) are kept as they are; lists, tuples, str-keyed dicts
    and objects holding other objects are walked; configuration (callables, classes, modules,
    spaces, pygame display objects) is skipped. An object reached twice is stored once. This
    restores envs such as MPE's (entities with position and velocity arrays, a numpy generator,
    counters) exactly, without pickling.

    Raises:
        lightning_rl.safe_state.UnsafeStateError: Naming the first value that is none of these.
    """
    seen = set() if _seen is None else _seen
    seen.add(id(obj))
    return {"kind": "object", "attrs": {a: _value_state(v, f"{where}.{a}", seen) for a, v in vars(obj).items()}}


def _value_state(value: Any, where: str, seen: set[int]) -> dict[str, Any]:
    if _is_config(value):
        return {"kind": "skip"}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # encode would give a namedtuple back as a dict
        items = [_value_state(v, f"{where}.{f}", seen) for f, v in zip(value._fields, value, strict=True)]
        return {"kind": "items", "items": items}
    try:
        encode(value, where)
        return {"kind": "data", "value": value}
    except UnsafeStateError:
        pass
    if isinstance(value, (list, tuple)):
        return {"kind": "items", "items": [_value_state(v, f"{where}[{i}]", seen) for i, v in enumerate(value)]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"kind": "dict", "items": {k: _value_state(v, f"{where}[{k!r}]", seen) for k, v in value.items()}}
    if isinstance(getattr(value, "__dict__", None), dict):
        if id(value) in seen:
            return {"kind": "skip"}
        return object_state(value, where, seen)
    raise UnsafeStateError(f"{where}: a {type(value).__module__}.{type(value).__qualname__} cannot be stored as data")


def load_object_state(obj: Any, state: dict[str, Any], where: str = "env") -> None:
    """Write :func:`object_state` back into ``obj``, a freshly built object of the same structure.

    Raises:
        ValueError: Naming the first attribute whose stored structure differs from the live one.
    """
    if state.get("kind") != "object" or not isinstance(getattr(obj, "__dict__", None), dict):
        raise ValueError(f"stored env state: {where} is not an object in this env")
    own = vars(obj)
    for attr, entry in state["attrs"].items():
        if entry["kind"] == "data":
            own[attr] = entry["value"]
        elif attr not in own:
            raise ValueError(f"stored env state: {where}.{attr} does not exist in this env")
        else:
            own[attr] = _load_value(own[attr], entry, f"{where}.{attr}")


def _load_value(live: Any, entry: dict[str, Any], where: str) -> Any:
    kind = entry["kind"]
    if kind == "skip":
        return live
    if kind == "data":
        return entry["value"]
    if kind == "object":
        load_object_state(live, entry, where)
        return live
    items = entry["items"]
    if kind == "items":
        if not isinstance(live, (list, tuple)) or len(live) != len(items):
            raise ValueError(f"stored env state: {where} holds {len(items)} items, this env has {live!r}")
        values = [_load_value(v, e, f"{where}[{i}]") for i, (v, e) in enumerate(zip(live, items, strict=True))]
        if isinstance(live, list):
            live[:] = values
            return live
        return type(live)(*values) if hasattr(live, "_fields") else type(live)(values)
    if not isinstance(live, dict) or set(live) != set(items):
        raise ValueError(f"stored env state: {where} holds keys {sorted(items)}, this env has {live!r}")
    for k, e in items.items():
        live[k] = _load_value(live[k], e, f"{where}[{k!r}]")
    return live
