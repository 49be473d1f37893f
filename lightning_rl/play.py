"""Watch a trained agent: load a checkpoint, play episodes in one env, optionally save videos."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import torch

from lightning_rl.algos.base import RLModule
from lightning_rl.data.buffers import buffer_func
from lightning_rl.envs import make_env
from lightning_rl.envs.atari import AtariEnv
from lightning_rl.envs.make import make_gymnasium_env, route_mujoco_warnings
from lightning_rl.envs.pettingzoo import PettingZooEnv, is_pettingzoo_env


def quiet_sdl(environ: dict[str, str] | Any = None) -> None:
    """SDL's dummy drivers where nothing else was chosen: audio always (an agent plays no sound), video
    on a machine without a display. pygame, which draws gymnasium's classic-control envs, otherwise
    prints ``XDG_RUNTIME_DIR is invalid`` and ALSA errors on stderr when it starts.

    Args:
        environ: The environment to read and update; default ``os.environ``.
    """
    env = os.environ if environ is None else environ
    env.setdefault("SDL_AUDIODRIVER", "dummy")
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("SDL_VIDEODRIVER", "dummy")


def play_episodes(
    module: RLModule,
    ckpt_path: str | None,
    episodes: int,
    deterministic: bool,
    video_folder: str | None,
    seed: int,
    max_steps_per_episode: int,
    name_prefix: str = "play",
) -> list[dict[str, float]]:
    """Play ``episodes`` with the module's agent on one env built like the sampler's.

    Videos (``video_folder``) are named ``<name_prefix>-episode-<i>.mp4`` and replace files of the same
    name there; on a machine without a display MuJoCo renders through EGL or OSMesa
    (:func:`lightning_rl.envs.rendering.choose_gl_backend`) and pygame through SDL's dummy driver.

    Returns:
        ``{"return", "length"}`` per episode.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    sampler = module.sampler
    env_kwargs = dict(sampler.env_kwargs or {})
    if video_folder is not None:
        from lightning_rl.envs.rendering import choose_gl_backend

        choose_gl_backend()
        quiet_sdl()
    env = _make_recording_env(sampler.env_id, env_kwargs, video_folder, name_prefix)
    env.seed(seed)
    agent = module.agent
    if not agent.initialized:
        agent.initialize(env.spaces)
    if ckpt_path is not None:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module.load_state_dict(checkpoint["state_dict"])
    agent.to_device("cpu")
    agent.eval_mode(0)
    agent.eval_deterministic = deterministic
    results = []
    frames: list[np.ndarray] = []
    for episode in range(episodes):
        observation = env.reset()
        agent.reset()
        prev_action = env.action_space.null_value()
        prev_reward = 0.0
        total, length = 0.0, 0
        for _ in range(max_steps_per_episode):
            # A batch of one env; actions may be structures (one field per agent).
            step = agent.step(
                buffer_func(observation, _batch_of_one),
                buffer_func(prev_action, _batch_of_one),
                np.array([prev_reward], dtype=np.float32),
            )
            action = buffer_func(step.action, lambda a: a[0].numpy())
            env_step = env.step(action)
            if isinstance(env, AtariEnv) and video_folder is not None:
                frames.append(env.render())
            observation, prev_action, prev_reward = env_step.observation, action, float(env_step.reward)
            total += float(env_step.reward)
            length += 1
            traj_done = getattr(env_step.env_info, "traj_done", env_step.done)
            if env_step.done and traj_done:
                break
        results.append({"return": total, "length": float(length)})
        if frames:
            assert video_folder is not None  # frames are kept only for a video
            _save_frames(frames, video_folder, episode, name_prefix)
            frames = []
    env.close()
    return results


def _batch_of_one(x: Any) -> np.ndarray:
    return np.asarray(x)[None]


def _make_recording_env(
    env_id: Any, env_kwargs: dict[str, Any], video_folder: str | None, name_prefix: str = "play"
) -> Any:
    """The sampler's env; gymnasium envs get ``RecordVideo`` inside the adapter when recording."""
    if video_folder is None:
        return make_env(env_id, **env_kwargs)
    os.makedirs(video_folder, exist_ok=True)
    env = make_env(env_id, **env_kwargs) if _is_atari(env_id) else None
    if env is not None:
        return env
    import gymnasium as gym

    from lightning_rl.envs.gymnasium import GymEnvWrapper

    route_mujoco_warnings(env_id)

    def build(**kwargs: Any) -> Any:
        if isinstance(env_id, str):
            inner = make_gymnasium_env(env_id, render_mode="rgb_array", **kwargs)
        else:
            inner = env_id(**kwargs)
            inner = PettingZooEnv(inner) if is_pettingzoo_env(inner) else inner
        with warnings.catch_warnings():
            # The folder exists (made above, or the user's): <name_prefix>-episode-<i>.mp4 replace
            # earlier files of the same name, as play documents.
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos.*")
            recorder = gym.wrappers.RecordVideo(
                inner, video_folder, episode_trigger=lambda e: True, name_prefix=name_prefix, disable_logger=True
            )
        return GymEnvWrapper(recorder)

    return build(**env_kwargs)


def _is_atari(env_id: Any) -> bool:
    return isinstance(env_id, str) and (env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4"))


def _save_frames(frames: list[np.ndarray], video_folder: str, episode: int, name_prefix: str = "play") -> None:
    from gymnasium.utils.save_video import save_video

    save_video(
        frames, video_folder, fps=30, name_prefix=name_prefix, episode_index=episode, episode_trigger=lambda e: True
    )
