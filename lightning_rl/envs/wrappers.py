"""Partially observed variants of classic-control tasks: memory tests for recurrent agents.

:class:`MaskVelocityWrapper` drops the velocity entries of an observation vector, so a policy
must infer them from consecutive observations (the R2D1 paper's motivation; the usual
"velocities hidden" POMDP benchmark). Importing :mod:`lightning_rl.envs` registers
``CartPoleNoVelocity-v1`` with gymnasium: CartPole-v1 observing only the cart position and the
pole angle, with CartPole-v1's 500-step time limit, so ``make_env("CartPoleNoVelocity-v1")`` and
configs name it like any gymnasium id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

__all__ = ["CARTPOLE_NO_VELOCITY_ID", "MaskVelocityWrapper", "make_cartpole_no_velocity"]

CARTPOLE_NO_VELOCITY_ID = "CartPoleNoVelocity-v1"

#: Observation entries that are not velocities, by gymnasium env name (without version).
POSITION_ENTRIES: dict[str, tuple[int, ...]] = {
    "CartPole": (0, 2),  # x, x_dot, theta, theta_dot
    "Pendulum": (0, 1),  # cos(theta), sin(theta), theta_dot
    "MountainCar": (0,),  # position, velocity
    "MountainCarContinuous": (0,),
    "Acrobot": (0, 1, 2, 3),  # cos/sin of both joint angles, then both angular velocities
}


class MaskVelocityWrapper(gymnasium.ObservationWrapper):
    """Keep only the position entries of a vector observation.

    Args:
        env: A gymnasium env with a 1-D ``Box`` observation space.
        keep: Indexes of the entries to keep; default: the positions of a known classic-control
            env (:data:`POSITION_ENTRIES`, looked up by the env's spec name).

    Raises:
        ValueError: If the observation space is not a 1-D ``Box``, ``keep`` is not given for an
            unknown env, or an index is out of range.
    """

    def __init__(self, env: gymnasium.Env, keep: Sequence[int] | None = None) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"MaskVelocityWrapper needs a 1-D Box observation space, got {space!r}")
        if keep is None:
            name = env.spec.name if env.spec is not None else type(env.unwrapped).__name__.removesuffix("Env")
            if name not in POSITION_ENTRIES:
                raise ValueError(
                    f"MaskVelocityWrapper: keep=None but env {name!r} is not one of {sorted(POSITION_ENTRIES)}; "
                    "give the indexes to keep"
                )
            keep = POSITION_ENTRIES[name]
        self.keep = np.asarray(keep, dtype=np.int64)
        if self.keep.ndim != 1 or self.keep.size == 0 or self.keep.min() < 0 or self.keep.max() >= space.shape[0]:
            raise ValueError(
                f"MaskVelocityWrapper: keep={list(keep)} must index the {space.shape[0]} observation entries"
            )
        self.observation_space = gymnasium.spaces.Box(space.low[self.keep], space.high[self.keep], dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.keep]


def make_cartpole_no_velocity(**kwargs: Any) -> gymnasium.Env:
    """CartPole (no time limit of its own) observing ``[x, theta]``; gymnasium adds the limit."""
    return MaskVelocityWrapper(CartPoleEnv(**kwargs), keep=POSITION_ENTRIES["CartPole"])


if CARTPOLE_NO_VELOCITY_ID not in gymnasium.registry:
    gymnasium.register(
        id=CARTPOLE_NO_VELOCITY_ID,
        entry_point=make_cartpole_no_velocity,
        max_episode_steps=500,
        reward_threshold=475.0,
    )
