from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lightning_rl.envs import (
    AtariEnv,
    AtariTrajInfo,
    GymEnvWrapper,
    TrajInfo,
    atari_game_from_id,
    default_traj_info_cls,
    make_env,
)
from lightning_rl.spaces import FloatBox, IntBox
from tests.toy_envs import TwoStateChainEnv, register_toy_envs


def test_classic_control_id_with_kwargs_and_seed():
    env = make_env("CartPole-v1", seed=3, max_episode_steps=50)
    assert isinstance(env, GymEnvWrapper) and env.horizon == 50
    expected, _ = gymnasium.make("CartPole-v1").reset(seed=3)
    np.testing.assert_array_equal(env.reset(), expected.astype(np.float32))


def test_mujoco_v5_id():
    env = make_env("InvertedPendulum-v5", seed=0)
    assert env.observation_space == FloatBox(-np.inf, np.inf, shape=(4,))
    assert env.action_space == FloatBox(-3.0, 3.0, shape=(1,))
    assert env.horizon == 1000
    obs = env.reset()
    step = env.step(np.zeros(1, np.float32))
    assert obs.dtype == np.float32 and step.observation.shape == (4,) and not step.done


@pytest.mark.parametrize(
    "env_id, game", [("ALE/Pong-v5", "pong"), ("BreakoutNoFrameskip-v4", "breakout")]
)
def test_atari_ids_map_to_atari_env(env_id, game):
    env = make_env(env_id, seed=0, frame_skip=2)
    assert isinstance(env, AtariEnv)
    assert env.game == game and env.frame_skip == 2
    assert env.reset().shape == (4, 84, 84)
    assert default_traj_info_cls(env_id) is AtariTrajInfo


def test_atari_game_names():
    assert atari_game_from_id("ALE/SpaceInvaders-v5") == "space_invaders"
    assert atari_game_from_id("ALE/TicTacToe3D-v5") == "tic_tac_toe_3d"
    assert atari_game_from_id("MsPacmanNoFrameskip-v4") == "ms_pacman"
    with pytest.raises(ValueError, match="-ram"):
        make_env("ALE/Pong-ram-v5")
    with pytest.raises(ValueError, match="ALE/NoSuchGame-v5"):
        make_env("ALE/NoSuchGame-v5")


def test_callables():
    env = make_env(TwoStateChainEnv, seed=0, episode_length=3)
    assert isinstance(env, GymEnvWrapper) and isinstance(env.action_space, IntBox)
    env.reset()
    assert [env.step(1).reward for _ in range(3)] == [0.0, 1.0, 1.0]
    atari = make_env(AtariEnv, game="pong", max_start_noops=0)
    assert isinstance(atari, AtariEnv)
    assert default_traj_info_cls(AtariEnv) is AtariTrajInfo
    assert default_traj_info_cls(TwoStateChainEnv) is TrajInfo
    with pytest.raises(ValueError, match="not an Env"):
        make_env(lambda: "not an env")


def test_registered_toy_id():
    ids = register_toy_envs()
    assert register_toy_envs() == ids
    env = make_env("lightning_rl_test/ConstantReward-v0", max_episode_steps=3)
    assert env.horizon == 3 and default_traj_info_cls(ids[0]) is TrajInfo


def test_unknown_id_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="NoSuchEnv-v0"):
        make_env("NoSuchEnv-v0")
    with pytest.raises(ValueError, match="CartPole-v9"):
        make_env("CartPole-v9")
    with pytest.raises(ValueError, match="env_id"):
        make_env(42)


def test_ale_v5_ids_keep_gymnasiums_sticky_actions_unless_told_otherwise():
    assert make_env("ALE/Pong-v5").repeat_action_probability == 0.25  # gymnasium's v5 default
    assert make_env("PongNoFrameskip-v4").repeat_action_probability == 0.0  # and v4's
    assert make_env("ALE/Pong-v5", repeat_action_probability=0.0).repeat_action_probability == 0.0


def test_every_shipped_atari_config_says_which_sticky_actions_it_uses():

    import yaml

    from tests.shipped import shipped_configs

    configs = shipped_configs()
    atari = 0
    for path in configs:
        sampler = yaml.safe_load(path.read_text())["model"]["init_args"]["sampler"]["init_args"]
        if str(sampler["env_id"]).startswith("ALE/"):
            atari += 1
            assert "repeat_action_probability" in (sampler.get("env_kwargs") or {}), path.name
    assert atari == 5


def test_mujoco_warnings_go_through_python_and_gymnasiums_own_asset_warning_is_dropped(capfd):
    import warnings

    import mujoco

    from lightning_rl.envs.make import _mujoco_warning

    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(None)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = make_env("HalfCheetah-v5")  # gymnasium's half_cheetah.xml sets the deprecated settotalmass
            env.close()
            assert mujoco.get_mju_user_warning() is _mujoco_warning
            mujoco.get_mju_user_warning()("Nan, Inf or huge value in QACC at DOF 0")  # any other warning
        out, err = capfd.readouterr()
        assert "settotalmass" not in out + err  # nothing printed by MuJoCo's C library
        assert [str(w.message) for w in caught] == ["MuJoCo: Nan, Inf or huge value in QACC at DOF 0"]
        assert caught[0].category is RuntimeWarning
        # A handler the user set stays.
        mine = []
        mujoco.set_mju_user_warning(mine.append)
        make_env("HalfCheetah-v5").close()
        assert mujoco.get_mju_user_warning() is not _mujoco_warning
        assert mine and mine[0].startswith("compiler attribute 'settotalmass'")
    finally:
        mujoco.set_mju_user_warning(previous)
