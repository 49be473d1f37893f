"""Which envs declare a frame stack, and how the off-policy replay reads the declaration.

Frame storage keeps one frame per step and rebuilds stacks from the previous rows, which is only
right for observations that really are zero-padded stacks shifting one frame per step. It is
switched on by the env's :attr:`~lightning_rl.envs.Env.frame_stack`, never guessed from a uint8
array's shape (a channels-first RGB image ``[3, H, W]`` looks like a 3-frame stack).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces as gs

from lightning_rl.algos.off_policy import frame_stack_of
from lightning_rl.envs import AtariEnv, GymEnvWrapper
from lightning_rl.samplers import SerialSampler
from tests.toy_envs import BrightHalfImageEnv


class StackedEnv(gymnasium.Env):
    """A zero-padded stack of 3 frames ``[3, 6, 6]`` that shifts one frame per step, and says so."""

    frame_stack = 3

    def __init__(self) -> None:
        self.observation_space = gs.Box(0, 255, shape=(3, 6, 6), dtype=np.uint8)
        self.action_space = gs.Discrete(2)
        self._stack = np.zeros((3, 6, 6), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._stack[:] = 0
        self._stack[-1] = 1
        return self._stack.copy(), {}

    def step(self, action):
        self._t += 1
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = self._t + 1
        return self._stack.copy(), 0.0, self._t == 5, False, {}


def test_atari_declares_its_grayscale_stack_and_not_rgb():
    assert AtariEnv("pong").frame_stack == 4
    assert AtariEnv("pong", num_img_obs=2).frame_stack == 2
    # Each rgb frame is three channels: storing one channel per step would lose two.
    assert AtariEnv("pong", obs_type="rgb").frame_stack is None


def test_gymnasium_envs_declare_through_any_wrapper():
    assert GymEnvWrapper(gymnasium.make("CartPole-v1")).frame_stack is None
    assert GymEnvWrapper(BrightHalfImageEnv()).frame_stack is None
    wrapped = gymnasium.wrappers.TimeLimit(StackedEnv(), max_episode_steps=3)
    assert GymEnvWrapper(wrapped).frame_stack == 3
    # gymnasium's FrameStackObservation pads resets with copies of the first frame: no declaration.
    pixels = gymnasium.wrappers.FrameStackObservation(
        gymnasium.wrappers.TransformObservation(
            BrightHalfImageEnv(), lambda o: o[..., 0], gs.Box(0, 255, (8, 8), np.uint8)
        ),
        stack_size=4,
    )
    assert GymEnvWrapper(pixels).frame_stack is None


def test_sampler_records_the_probe_envs_declaration():
    from lightning_rl.agents import DqnAgent

    for env_id, expected in ((StackedEnv, 3), (BrightHalfImageEnv, None)):
        sampler = SerialSampler(env_id=env_id, batch_T=2, batch_B=2)
        sampler.initialize(DqnAgent(), seed=0)
        try:
            assert sampler.frame_stack == expected
        finally:
            sampler.shutdown()


def test_frame_stack_of_trusts_only_a_declaration_that_fits():
    stacks = np.zeros((2, 3, 4, 84, 84), dtype=np.uint8)  # [T, B, 4 frames, H, W]
    rgb = np.zeros((2, 3, 3, 16, 16), dtype=np.uint8)  # [T, B, C, H, W] image, channels first
    assert frame_stack_of(stacks, 4) == 4
    assert frame_stack_of(stacks, None) is None
    assert frame_stack_of(rgb, None) is None  # the shape alone never switches frame storage on
    with pytest.raises(ValueError, match=r"declares 3 frames, but its observations are uint8 \[4, 84, 84\]"):
        frame_stack_of(stacks, 3)
    with pytest.raises(ValueError, match=r"declares 4 frames, but its observations are float32"):
        frame_stack_of(stacks.astype(np.float32), 4)
    with pytest.raises(ValueError, match="for an array observation, which takes an int frame count"):
        frame_stack_of(stacks, {"pixels": 4})
