from __future__ import annotations

import pickle

import numpy as np
import pytest

from lightning_rl.envs import AtariEnvInfo, AtariTrajInfo, TrajInfo


def test_traj_info_hand_computed():
    info = TrajInfo(discount=0.5)
    for r in [1.0, 0.0, -2.0, 3.0]:
        info.step(None, None, r, False, None, None)
    assert info.terminate(None) is info
    assert info.Length == 4
    assert info.Return == 2.0
    assert info.NonzeroRewards == 3
    # 1 + 0.5 * 0 + 0.25 * -2 + 0.125 * 3
    assert info.DiscountedReturn == pytest.approx(0.875)
    assert info["Length"] == 4


def test_traj_info_defaults_and_reward_types():
    torch = pytest.importorskip("torch")
    info = TrajInfo()
    assert (info.Length, info.Return, info.NonzeroRewards, info.DiscountedReturn) == (0, 0.0, 0, 0.0)
    info.step(None, None, np.float32(1.0), False, None, None)
    info.step(None, None, torch.tensor(1.0), False, None, None)
    assert info.DiscountedReturn == pytest.approx(1.99)
    public = {k for k in info if not k.startswith("_")}
    assert public == {"Length", "Return", "NonzeroRewards", "DiscountedReturn"}


def test_atari_traj_info_game_score():
    info = AtariTrajInfo(discount=1.0)
    for clipped, raw in [(1.0, 1.0), (0.0, 0.0), (1.0, 4.0), (1.0, 7.0)]:
        info.step(None, None, clipped, False, None, AtariEnvInfo(False, False, raw, False))
    assert info.Return == 3.0
    assert info.GameScore == 12.0
    assert info.DiscountedReturn == 3.0


def test_pickle_and_copy_keep_state():
    info = AtariTrajInfo(discount=0.9)
    info.step(None, None, 2.0, False, None, AtariEnvInfo(False, False, 20.0, False))
    for other in (pickle.loads(pickle.dumps(info)), info.copy()):
        assert type(other) is AtariTrajInfo
        assert other == info
        other.step(None, None, 1.0, False, None, AtariEnvInfo(False, False, 10.0, False))
        assert other.DiscountedReturn == pytest.approx(2.9)
        assert other.GameScore == 30.0 and other.Length == 2
    assert info.Length == 1
