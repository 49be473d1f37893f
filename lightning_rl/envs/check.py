"""The env contract, checked before training: gymnasium's env checker plus lightning_rl's rules.

Samplers run :func:`check_gymnasium_env` on a probe env when they are built, and
``lightning-rl check-env <id>`` runs :func:`check_env` on its own, so a malformed env fails with a
message naming the env and the rule it breaks instead of a shape error inside a model or a
silently wrong return.

lightning_rl's rules, on top of gymnasium's ``check_env`` (which only warns about some of them):

* ``reset(seed=..., options=...)`` returns ``(observation, info)`` with ``info`` a dict;
* ``step(action)`` returns five values ``(observation, reward, terminated, truncated, info)``;
  ``terminated`` and ``truncated`` are bools (Python or numpy), the reward a real scalar and
  ``info`` a dict;
* observations lie in the observation space (shape, dtype kind, bounds), at reset and at every
  checked step.

A PettingZoo env (an import path such as ``mpe2.simple_spread_v3``, or a factory returning a
``ParallelEnv`` or ``AECEnv``) first gets PettingZoo's own API test (``parallel_api_test``, and
``api_test`` for an ``AECEnv``), then the rules above on its
:class:`~lightning_rl.envs.pettingzoo.PettingZooEnv` adapter (what training steps).
"""

from __future__ import annotations

import numbers
import re
import warnings
from typing import Any

import gymnasium
import numpy as np

__all__ = ["EnvCheckError", "check_env", "check_gymnasium_env", "check_pettingzoo_api"]

_STEPS = 10
# gymnasium env-checker failures that samplers report as warnings (see ``strict``).
_ADVISORY = ("deterministic", "share an object")


class EnvCheckError(ValueError):
    """An env breaks a rule of the env contract (the message names the env and the rule)."""


def _fail(env_id: Any, rule: str) -> EnvCheckError:
    return EnvCheckError(f"env {env_id!r} breaks the env contract: {rule}")


def _check_step_result(result: Any, env_id: Any, t: int) -> None:
    if not isinstance(result, tuple) or len(result) != 5:
        length = len(result) if isinstance(result, tuple) else "-"
        raise _fail(env_id, f"step() must return (observation, reward, terminated, truncated, info); step {t} "
                            f"returned {type(result).__name__} of length {length}")
    _, reward, terminated, truncated, info = result
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, (bool, np.bool_)):
            raise _fail(env_id, f"step() must return {name} as a bool; step {t} returned "
                                f"{type(flag).__name__} {flag!r}")
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (numbers.Real, np.number)):
        raise _fail(env_id, f"step() must return the reward as a real scalar; step {t} returned "
                            f"{type(reward).__name__} {reward!r}")
    if not isinstance(info, dict):
        raise _fail(env_id, f"step() must return info as a dict; step {t} returned {type(info).__name__}")


def check_gymnasium_env(env: gymnasium.Env, env_id: Any, steps: int = _STEPS, strict: bool = True) -> list[str]:
    """Check a gymnasium env against lightning_rl's rules, then gymnasium's ``check_env``.

    Resets and steps ``env`` (a probe: build another one to train on).

    Args:
        env: The env, as ``gymnasium.make`` or the user's factory returns it.
        env_id: Its id or factory, for messages.
        steps: Random-action steps to check after the reset.
        strict: gymnasium's rules that training does not depend on break the contract too: the
            same observations for the same seed and actions (determinism), and a new observation
            object per call (lightning_rl copies observations into its buffers at once). False
            reports them as warnings (samplers: such an env trains, perhaps not reproducibly).

    Returns:
        gymnasium's warnings (advice that breaks no rule here), one line each.

    Raises:
        EnvCheckError: Naming the env and the first rule it breaks.
    """
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    try:
        result = env.reset(seed=0, options=None)
    except TypeError as error:
        raise _fail(env_id, f"reset() must accept the keywords seed and options (gymnasium 1.x): {error}") from None
    if not isinstance(result, tuple) or len(result) != 2 or not isinstance(result[1], dict):
        raise _fail(env_id, "reset() must return (observation, info) with info a dict")
    _check_in_space(env.observation_space, result[0], env_id, "reset()")
    env.action_space.seed(0)
    for t in range(steps):
        step = env.step(env.action_space.sample())
        _check_step_result(step, env_id, t)
        _check_in_space(env.observation_space, step[0], env_id, f"step() {t}")
        if step[2] or step[3]:
            env.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gymnasium_check_env(env, skip_render_check=True, skip_close_check=True)
        except (AssertionError, gymnasium.error.Error) as error:
            if strict or not any(rule in str(error).lower() for rule in _ADVISORY):
                raise _fail(env_id, f"gymnasium's env checker: {error}") from None
            caught.append(warnings.WarningMessage(f"gymnasium's env checker: {error}", UserWarning, "", 0))
    advice = {_plain(str(w.message)) for w in caught} - {""}
    if _ships_with_gymnasium(env):
        # The spaces of gymnasium's own envs are its design (CartPole's velocities are unbounded,
        # Pendulum's torque is [-2, 2]): advice about them is nothing a user of the env can act on.
        advice = {line for line in advice if not _about_space_bounds(line)}
    return sorted(advice)


def _about_space_bounds(line: str) -> bool:
    return ("observation space m" in line and "infinity" in line) or "symmetric and normalized space" in line


def _ships_with_gymnasium(env: gymnasium.Env) -> bool:
    """Whether ``env`` is one of gymnasium's own registered envs (classic control, Box2D, MuJoCo, toy text)."""
    entry_point = getattr(getattr(env, "spec", None), "entry_point", None)
    return isinstance(entry_point, str) and entry_point.startswith("gymnasium.envs.")


def _plain(message: str) -> str:
    """gymnasium's warning without its colour codes and ``WARN:`` prefix; empty for the advice
    to check the unwrapped env (lightning_rl checks the wrapper stack it trains on, on purpose)."""
    message = re.sub(r"\x1b\[[0-9;]*m", "", message).removeprefix("WARN: ").strip()
    return "" if "different from the unwrapped version" in message else message


def _check_in_space(space: gymnasium.Space, observation: Any, env_id: Any, where: str) -> None:
    if space.contains(observation):
        return
    rule = f"is not in the observation space {space}"
    shape = getattr(observation, "shape", None)
    if isinstance(space, gymnasium.spaces.Box):
        if shape != space.shape:
            rule = f"has shape {shape}, but the observation space {space} has shape {space.shape}"
        elif np.issubdtype(np.asarray(observation).dtype, np.number):
            a = np.asarray(observation)
            rule = f"lies outside the observation space {space} (values from {a.min()} to {a.max()})"
    raise _fail(env_id, f"the observation returned by {where} {rule}")


def check_pettingzoo_api(env_id: Any, cycles: int = 100, **env_kwargs: Any) -> list[str]:
    """PettingZoo's API tests on fresh envs of ``env_id`` (an import path or a factory):
    ``parallel_api_test`` on the ``ParallelEnv`` (for an ``AECEnv``: ``api_test`` on it, then
    ``parallel_api_test`` on its ``aec_to_parallel`` conversion, what training steps).

    Returns:
        The tests' warnings, one line each.

    Raises:
        EnvCheckError: Naming the env and the failed assertion of PettingZoo's test.
    """
    import contextlib
    import io

    from pettingzoo.test import api_test, parallel_api_test
    from pettingzoo.utils.conversions import aec_to_parallel
    from pettingzoo.utils.env import AECEnv

    from lightning_rl.envs.pettingzoo import pettingzoo_factory

    factory = pettingzoo_factory(env_id) if isinstance(env_id, str) else env_id
    env = factory(**env_kwargs)
    printed = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(printed):
        warnings.simplefilter("always")
        try:
            if isinstance(env, AECEnv):
                api_test(env, num_cycles=cycles)
                env = aec_to_parallel(factory(**env_kwargs))
            parallel_api_test(env, num_cycles=cycles)
        except AssertionError as error:
            raise _fail(env_id, f"PettingZoo's API test: {error or 'an assertion failed'}") from None
        finally:
            env.close()
    return sorted({_plain(str(w.message)) for w in caught} - {""})


def check_env(env_id: Any, steps: int = _STEPS, **env_kwargs: Any) -> list[str]:
    """Check the env ``lightning_rl.envs.make_env(env_id, **env_kwargs)`` would build.

    gymnasium ids and factories returning gymnasium envs get :func:`check_gymnasium_env`; Atari
    ids and lightning_rl envs get the same rules through lightning_rl's env API (observations in
    the space, bool ``done``, real rewards); PettingZoo envs get :func:`check_pettingzoo_api`
    first, then :func:`check_gymnasium_env` on their adapter.

    Returns:
        Warnings (advice, not errors), one line each.

    Raises:
        EnvCheckError: Naming the env and the first rule it breaks.
        ValueError: If the id is unknown.
    """
    from lightning_rl.envs.gymnasium import GymEnvWrapper
    from lightning_rl.envs.make import make_env
    from lightning_rl.envs.pettingzoo import PettingZooEnv

    env = make_env(env_id, **env_kwargs)
    try:
        if isinstance(env, GymEnvWrapper):
            advice: list[str] = []
            if isinstance(env.env, PettingZooEnv):
                advice = check_pettingzoo_api(env_id, **env_kwargs)
            return sorted(set(advice) | set(check_gymnasium_env(env.env, env_id, steps)))
        observation = env.reset()
        if not env.observation_space.contains(observation):
            raise _fail(env_id, f"the observation returned by reset() is not in {env.observation_space!r}")
        for t in range(steps):
            step = env.step(env.action_space.sample())
            if not env.observation_space.contains(step.observation):
                raise _fail(env_id, f"the observation returned by step() {t} is not in {env.observation_space!r}")
            if not isinstance(step.done, (bool, np.bool_)) or not isinstance(step.reward, (numbers.Real, np.number)):
                raise _fail(env_id, f"step() {t} must return a bool done and a real reward")
            if step.done:
                env.reset()
        return []
    finally:
        env.close()
