"""Environments: the Env interface, the gymnasium and PettingZoo adapters, AtariEnv, TrajInfo and make_env.

Each name is imported on first use (``from lightning_rl.envs import X`` works as before), so importing one
submodule does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_rl.lazy import lazy_attributes

if TYPE_CHECKING:
    from lightning_rl.envs.atari import AtariEnv, AtariEnvInfo, atari_games
    from lightning_rl.envs.base import Env, EnvSpaces, EnvStep
    from lightning_rl.envs.gymnasium import GymEnvWrapper, InfoFilter
    from lightning_rl.envs.make import (
        atari_game_from_id,
        default_traj_info_cls,
        is_atari_id,
        make_env,
        make_gymnasium_env,
    )
    from lightning_rl.envs.multiagent import AGENT_MASK_KEY, COOP_GRID_ID, STATE_KEY, CoopGridEnv
    from lightning_rl.envs.pettingzoo import PettingZooEnv
    from lightning_rl.envs.traj_info import AtariTrajInfo, MultiAgentTrajInfo, TrajInfo
    from lightning_rl.envs.wrappers import CARTPOLE_NO_VELOCITY_ID, MaskVelocityWrapper

# Registered with gymnasium on import (lightning_rl/CoopGrid-v0, the CartPole without velocities): an env id
# in a config resolves once anything of lightning_rl.envs is imported. Both need gymnasium only.
import lightning_rl.envs.multiagent
import lightning_rl.envs.wrappers  # noqa: F401

#: Each public name and the module that defines it (imported on first use).
_LAZY: dict[str, str] = {
    "AGENT_MASK_KEY": "lightning_rl.envs.multiagent",
    "STATE_KEY": "lightning_rl.envs.multiagent",
    "MultiAgentTrajInfo": "lightning_rl.envs.traj_info",
    "PettingZooEnv": "lightning_rl.envs.pettingzoo",
    "make_gymnasium_env": "lightning_rl.envs.make",
    "AtariEnv": "lightning_rl.envs.atari",
    "AtariEnvInfo": "lightning_rl.envs.atari",
    "AtariTrajInfo": "lightning_rl.envs.traj_info",
    "CARTPOLE_NO_VELOCITY_ID": "lightning_rl.envs.wrappers",
    "COOP_GRID_ID": "lightning_rl.envs.multiagent",
    "CoopGridEnv": "lightning_rl.envs.multiagent",
    "Env": "lightning_rl.envs.base",
    "EnvSpaces": "lightning_rl.envs.base",
    "EnvStep": "lightning_rl.envs.base",
    "GymEnvWrapper": "lightning_rl.envs.gymnasium",
    "InfoFilter": "lightning_rl.envs.gymnasium",
    "MaskVelocityWrapper": "lightning_rl.envs.wrappers",
    "TrajInfo": "lightning_rl.envs.traj_info",
    "atari_game_from_id": "lightning_rl.envs.make",
    "atari_games": "lightning_rl.envs.atari",
    "default_traj_info_cls": "lightning_rl.envs.make",
    "is_atari_id": "lightning_rl.envs.make",
    "make_env": "lightning_rl.envs.make",
}

__all__ = [
    "AGENT_MASK_KEY", "STATE_KEY", "AtariEnv", "AtariEnvInfo", "AtariTrajInfo", "CARTPOLE_NO_VELOCITY_ID",
    "COOP_GRID_ID", "CoopGridEnv", "Env", "EnvSpaces", "EnvStep", "GymEnvWrapper", "InfoFilter",
    "MaskVelocityWrapper", "MultiAgentTrajInfo", "PettingZooEnv", "TrajInfo", "atari_game_from_id", "atari_games",
    "default_traj_info_cls", "is_atari_id", "make_env", "make_gymnasium_env",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
