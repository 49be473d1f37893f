"""Environments: the Env interface, the gymnasium and PettingZoo adapters, AtariEnv, TrajInfo and make_env."""

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

__all__ = [
    "AGENT_MASK_KEY",
    "STATE_KEY",
    "AtariEnv",
    "AtariEnvInfo",
    "AtariTrajInfo",
    "CARTPOLE_NO_VELOCITY_ID",
    "COOP_GRID_ID",
    "CoopGridEnv",
    "Env",
    "EnvSpaces",
    "EnvStep",
    "GymEnvWrapper",
    "InfoFilter",
    "MaskVelocityWrapper",
    "MultiAgentTrajInfo",
    "PettingZooEnv",
    "TrajInfo",
    "atari_game_from_id",
    "atari_games",
    "default_traj_info_cls",
    "is_atari_id",
    "make_env",
    "make_gymnasium_env",
]
