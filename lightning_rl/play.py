"""Watch an agent of a module built from a config: ``lightning-rl play --config FILE [--ckpt_path FILE]``.

``lightning-rl play <run>`` (a run, a group of runs or a checkpoint) needs no module and goes through
:func:`lightning_rl.load_policy` instead; both play their episodes with
:func:`lightning_rl.policy.run_episodes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lightning_rl.policy import Policy, quiet_sdl

if TYPE_CHECKING:
    from lightning_rl.algos.base import RLModule

__all__ = ["play_episodes", "quiet_sdl"]


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
    """Play ``episodes`` with the module's agent on one env built like the sampler's
    (:meth:`lightning_rl.policy.Policy.play`), after loading ``ckpt_path``'s weights if given.

    Returns:
        ``{"return", "length"}`` per episode.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    sampler = module.sampler
    agent = module.agent
    if not agent.initialized:
        from lightning_rl.envs import make_env

        env = make_env(sampler.env_id, **dict(sampler.env_kwargs or {}))
        try:
            agent.initialize(env.spaces)
        finally:
            env.close()
    if ckpt_path is not None:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module.load_state_dict(checkpoint["state_dict"])
    agent.to_device("cpu")
    policy: Any = Policy(agent=agent, env_id=sampler.env_id, env_kwargs=dict(sampler.env_kwargs or {}))
    return policy.play(episodes, deterministic, video_folder, seed, max_steps_per_episode, name_prefix)
