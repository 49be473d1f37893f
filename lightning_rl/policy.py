"""A trained agent without its training: loaded from a run, played in one env, with neither the
Trainer nor Lightning imported.

:func:`load_policy` takes a run directory, a group of runs (``runs/ppo_cartpole``) or a checkpoint,
chooses the checkpoint as ``play`` does (:func:`lightning_rl.runs.choose_checkpoint`), reads it as
data only and builds the agent from the config the checkpoint carries. ``lightning-rl play`` of a run
is this module: it starts in about the time ``import torch`` takes.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lightning_rl.checkpoint_format import CHECKPOINT_KEY, checkpoint_env_steps, migrate_config, read_checkpoint
from lightning_rl.data.buffers import buffer_func
from lightning_rl.runs import RunChoice, choose_checkpoint

__all__ = ["Policy", "build_agent", "load_policy", "make_play_env", "quiet_sdl", "run_episodes"]


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


def build_agent(agent_config: dict[str, Any]) -> Any:
    """The agent of a model config's ``agent`` entry (``{class_path, init_args}``), not initialized.

    Raises:
        ValueError: If the entry does not build an agent here (an unknown class, a bad argument).
    """
    from jsonargparse import ArgumentParser

    from lightning_rl.agents.base import BaseAgent

    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(BaseAgent, "agent")
    try:
        return parser.instantiate_classes(parser.parse_object({"agent": agent_config})).agent
    except Exception as error:  # jsonargparse reports a bad config entry with several exception types
        lines = " ".join(line.strip() for line in str(error).strip().splitlines()[:4])
        raise ValueError(f"the checkpoint's agent config does not build an agent here: {lines}") from None


@dataclass
class Policy:
    """A trained agent and the env it was trained on.

    Attributes:
        agent: The agent (an ``nn.Module``), in eval mode, its models built for the env's spaces.
        env_id: The sampler's env id (or callable).
        env_kwargs: The training envs' ``make_env`` arguments (``play`` uses them).
        eval_env_kwargs: The eval envs' arguments (``validate`` uses them).
        checkpoint: The checkpoint it was loaded from (None for an agent handed over directly).
        run_dir: The run directory of that checkpoint, if any.
        env_steps: The env steps its run had collected.
        algorithm: The algorithm's import path.
        rule: How the checkpoint was chosen, in words.
    """

    agent: Any
    env_id: Any
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_env_kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoint: Path | None = None
    run_dir: Path | None = None
    env_steps: int | None = None
    algorithm: str | None = None
    rule: str = ""

    def choice_line(self, verb: str = "play") -> str:
        """The line saying which checkpoint this is (:func:`lightning_rl.runs.choice_line`)."""
        from lightning_rl.runs import choice_line

        if self.checkpoint is None:
            return f"{verb}: the untrained agent"
        return choice_line(verb, self.checkpoint, self.env_steps, self.rule)

    def play(
        self,
        episodes: int = 3,
        deterministic: bool = True,
        video_folder: str | None = None,
        seed: int = 0,
        max_steps_per_episode: int = 100_000,
        name_prefix: str = "play",
    ) -> list[dict[str, float]]:
        """Play ``episodes`` in one env built as the sampler's training envs (``env_kwargs``).

        Videos (``video_folder``) are named ``<name_prefix>-episode-<i>.mp4`` and replace files of the
        same name there; on a machine without a display MuJoCo renders through EGL or OSMesa and
        pygame through SDL's dummy driver.

        Returns:
            ``{"return", "length"}`` per episode.

        Raises:
            ValueError: If ``episodes`` is below 1.
        """
        if episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        if video_folder is not None:
            from lightning_rl.envs.rendering import choose_gl_backend

            choose_gl_backend()
            quiet_sdl()
        env = make_play_env(self.env_id, dict(self.env_kwargs), video_folder, name_prefix)
        try:
            env.seed(seed)
            save = None
            if video_folder is not None and _is_atari(self.env_id):
                def save(frames: list[np.ndarray], episode: int) -> None:
                    _save_frames(frames, video_folder, episode, name_prefix)
            return run_episodes(self.agent, env, episodes, deterministic, max_steps_per_episode, save)
        finally:
            env.close()


def load_policy(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Policy:
    """The trained agent of a run directory, a group of runs or a checkpoint.

    Example::

        import lightning_rl

        policy = lightning_rl.load_policy("runs/ppo_cartpole")   # the newest finished run's best.ckpt
        print(policy.choice_line())
        policy.play(episodes=2)

    Args:
        path: A run directory (its ``best.ckpt``, else ``last.ckpt``), a group directory (its newest
            finished run, else its newest run with a checkpoint) or a ``.ckpt`` file.
        device: Where the agent's models go.

    Raises:
        ValueError: If ``path`` holds no checkpoint, the file is not a lightning_rl checkpoint or needs
            unpickling (nothing in it runs), or its config does not build an agent here.
    """
    choice = choose_checkpoint(path)
    return policy_from_checkpoint(choice, device)


def policy_from_checkpoint(choice: RunChoice, device: str | torch.device = "cpu") -> Policy:
    """:func:`load_policy` of a checkpoint already chosen."""
    from lightning_rl.envs import make_env

    data = read_checkpoint(choice.checkpoint)
    ours = data[CHECKPOINT_KEY]
    config = migrate_config(ours["config"])
    init_args = config.get("init_args") or {}
    sampler = (init_args.get("sampler") or {}).get("init_args") or {}
    env_id = sampler.get("env_id")
    if env_id is None or "agent" not in init_args:
        raise ValueError(f"{choice.checkpoint}: its config names no agent or env_id")
    env_kwargs = dict(sampler.get("env_kwargs") or {})
    eval_kwargs = sampler.get("eval_env_kwargs")
    agent = build_agent(init_args["agent"])
    env = make_env(env_id, **env_kwargs)
    try:
        # As the run built it: agents that pair envs (alternating samplers) need the run's env count.
        B = int(sampler.get("batch_B") or 1)
        agent.initialize(env.spaces, global_B=B, env_ranks=list(range(B)))
    finally:
        env.close()
    weights = {k[len("agent."):]: v for k, v in data["state_dict"].items() if k.startswith("agent.")}
    try:
        agent.load_state_dict(weights)
    except RuntimeError as error:
        first = str(error).strip().splitlines()[0]
        raise ValueError(f"{choice.checkpoint}: its weights do not fit the agent its config builds: {first}") from None
    agent.to_device(device)
    agent.eval_mode(0)
    return Policy(
        agent=agent, env_id=env_id, env_kwargs=env_kwargs,
        eval_env_kwargs=dict(env_kwargs if eval_kwargs is None else eval_kwargs),
        checkpoint=choice.checkpoint, run_dir=choice.run_dir, env_steps=checkpoint_env_steps(data),
        algorithm=(ours.get("run") or {}).get("algorithm") or config.get("class_path"), rule=choice.rule,
    )


def run_episodes(
    agent: Any, env: Any, episodes: int, deterministic: bool, max_steps_per_episode: int,
    save_frames: Callable[[list[np.ndarray], int], None] | None = None,
) -> list[dict[str, float]]:
    """Play ``episodes`` with ``agent`` in ``env`` (a lightning_rl env), one step at a time.

    The agent acts in eval mode on a batch of one env, with the previous action and reward as its
    inputs and its recurrent state reset at each episode start. ``save_frames(frames, episode)``
    receives each episode's rendered frames (Atari's emulator frames for a video).

    Returns:
        ``{"return", "length"}`` per episode.
    """
    agent.eval_mode(0)
    previous = getattr(agent, "eval_deterministic", False)
    agent.eval_deterministic = deterministic
    results = []
    try:
        for episode in range(episodes):
            frames: list[np.ndarray] = []
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
                if save_frames is not None:
                    frames.append(env.render())
                observation, prev_action, prev_reward = env_step.observation, action, float(env_step.reward)
                total += float(env_step.reward)
                length += 1
                traj_done = getattr(env_step.env_info, "traj_done", env_step.done)
                if env_step.done and traj_done:
                    break
            results.append({"return": total, "length": float(length)})
            if save_frames is not None and frames:
                save_frames(frames, episode)
    finally:
        agent.eval_deterministic = previous
    return results


def _batch_of_one(x: Any) -> np.ndarray:
    return np.asarray(x)[None]


def make_play_env(
    env_id: Any, env_kwargs: dict[str, Any], video_folder: str | None = None, name_prefix: str = "play"
) -> Any:
    """The sampler's env; gymnasium envs get ``RecordVideo`` inside the adapter when recording."""
    from lightning_rl.envs import make_env

    if video_folder is None:
        return make_env(env_id, **env_kwargs)
    os.makedirs(video_folder, exist_ok=True)
    if _is_atari(env_id):
        return make_env(env_id, **env_kwargs)
    import gymnasium as gym

    from lightning_rl.envs.gymnasium import GymEnvWrapper
    from lightning_rl.envs.make import make_gymnasium_env, route_mujoco_warnings
    from lightning_rl.envs.pettingzoo import PettingZooEnv, is_pettingzoo_env

    route_mujoco_warnings(env_id)
    if isinstance(env_id, str):
        inner = make_gymnasium_env(env_id, render_mode="rgb_array", **env_kwargs)
    else:
        inner = env_id(**env_kwargs)
        inner = PettingZooEnv(inner) if is_pettingzoo_env(inner) else inner
    with warnings.catch_warnings():
        # The folder exists (made above, or the user's): <name_prefix>-episode-<i>.mp4 replace
        # earlier files of the same name, as play documents.
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos.*")
        recorder = gym.wrappers.RecordVideo(
            inner, video_folder, episode_trigger=lambda e: True, name_prefix=name_prefix, disable_logger=True
        )
    return GymEnvWrapper(recorder)


def _is_atari(env_id: Any) -> bool:
    return isinstance(env_id, str) and (env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4"))


def _save_frames(frames: list[np.ndarray], video_folder: str, episode: int, name_prefix: str = "play") -> None:
    from gymnasium.utils.save_video import save_video

    save_video(
        frames, video_folder, fps=30, name_prefix=name_prefix, episode_index=episode, episode_trigger=lambda e: True
    )
