"""The environment interface every sampler steps (rlpyt section 1.2, gymnasium 1.x semantics).

Environments take and return numpy values. ``step`` returns an :class:`EnvStep` whose ``done`` is
``terminated or truncated`` and whose ``env_info`` is a namedtuple with a fixed set of fields
(always including ``truncated``: True when the episode ended by truncation rather than
termination), so samplers can preallocate buffers for it. An env does not reset itself: the
collector calls :meth:`Env.reset` after a done step.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

from lightning_rl.data.namedarraytuple import NamedArrayTupleBase


class EnvStep(NamedArrayTupleBase):
    """One env transition: ``observation`` after the step, ``reward``, ``done``, ``env_info``."""

    observation: Any
    reward: Any
    done: Any
    env_info: Any


class EnvSpaces(NamedTuple):
    """Observation and action spaces of an env (``lightning_rl.spaces`` objects)."""

    observation: Any
    action: Any


class Env(abc.ABC):
    """Base class of lightning_rl environments."""

    @abc.abstractmethod
    def step(self, action: Any) -> EnvStep:
        """Advance one step with ``action`` (an element of :attr:`action_space`)."""

    @abc.abstractmethod
    def reset(self) -> Any:
        """Start a new episode and return its first observation."""

    @property
    @abc.abstractmethod
    def observation_space(self) -> Any:
        """The observation space (a ``lightning_rl.spaces`` object)."""

    @property
    @abc.abstractmethod
    def action_space(self) -> Any:
        """The action space (a ``lightning_rl.spaces`` object)."""

    @property
    def spaces(self) -> EnvSpaces:
        """Both spaces, as agents' ``initialize`` expects them."""
        return EnvSpaces(observation=self.observation_space, action=self.action_space)

    @property
    def horizon(self) -> int | None:
        """Maximum episode length, if the env has one."""
        return None

    @property
    def frame_stack(self) -> int | dict[str, int] | None:
        """How many frames each observation stacks, when the replay may store each frame once.

        An env declares ``C`` only if its observation is a uint8 stack ``[C, H, W]`` of the last
        ``C`` frames, oldest first, that shifts in exactly one new frame per step and holds
        ``C - 1`` zero frames and the first frame after a reset (:class:`AtariEnv` in grayscale).
        A dict or tuple observation declares ``{dotted field path: C}`` for such fields
        (``{"pixels": 4}``, nested ``{"camera.left": 4}``); its other fields are stored whole. None (the default): no
        frame is shared between observations, and the replay stores them whole. Declaring a
        stack that the observations do not follow would make the replay rebuild wrong ones.
        """
        return None

    def seed(self, seed: int | None) -> None:  # noqa: B027 - optional hook, a no-op unless overridden
        """Seed the env; the next :meth:`reset` starts the seeded stream."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op unless overridden
        """Release resources (emulators, viewers)."""
