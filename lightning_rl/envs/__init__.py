"""Environments: the Env interface, the gymnasium adapter, AtariEnv, TrajInfo and make_env."""

from lightning_rl.envs.atari import AtariEnv, AtariEnvInfo, atari_games
from lightning_rl.envs.base import Env, EnvSpaces, EnvStep
from lightning_rl.envs.gymnasium import GymEnvWrapper, InfoFilter
from lightning_rl.envs.make import atari_game_from_id, default_traj_info_cls, is_atari_id, make_env
from lightning_rl.envs.multiagent import COOP_GRID_ID, CoopGridEnv
from lightning_rl.envs.traj_info import AtariTrajInfo, TrajInfo
from lightning_rl.envs.wrappers import CARTPOLE_NO_VELOCITY_ID, MaskVelocityWrapper

__all__ = [
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
    "TrajInfo",
    "atari_game_from_id",
    "atari_games",
    "default_traj_info_cls",
    "is_atari_id",
    "make_env",
]
