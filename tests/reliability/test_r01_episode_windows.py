"""The episode statistics are checkpoint state: the 100-episode return and length windows, the
running epoch's return mean/max/min and the episode count come back from a checkpoint, so the
metrics a resumed run logs (``train/return_mean``, which the shipped configs' EarlyStopping
watches) are the uninterrupted run's. The whole-run comparison is in
``test_r01_resume_mid_epoch.py``; here the callback's own state, by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lightning_rl.callbacks import EpisodeStatsCallback
from lightning_rl.envs.traj_info import TrajInfo


class _Module:
    """What the callback reads from a module: finished episodes, the logging rule, the log sink."""

    def __init__(self) -> None:
        self.pending: list = []
        self.logged: dict[str, float] = {}
        self.train_state = SimpleNamespace(pop_traj_infos=self._pop)
        self.global_env_steps = 0

    def _pop(self) -> list:
        out, self.pending = self.pending, []
        return out

    def logging_due(self) -> bool:
        return True

    def log_step_metrics(self, metrics: dict[str, float], reduce: bool = True) -> None:
        self.logged.update(metrics)

    def log_dict(self, metrics: dict, **kwargs) -> None:
        self.logged.update({k: float(v) for k, v in metrics.items()})


def episodes(returns: list[float]) -> list[TrajInfo]:
    out = []
    for r in returns:
        info = TrajInfo()
        info.Return, info.Length = r, 2 * r
        out.append(info)
    return out


def feed(callback: EpisodeStatsCallback, module: _Module, returns: list[float]) -> dict[str, float]:
    module.pending = episodes(returns)
    callback.on_train_batch_end(SimpleNamespace(world_size=1), module, None, None, 0)
    return dict(module.logged)


def test_the_windows_and_the_epoch_statistics_survive_a_checkpoint():
    first, module = EpisodeStatsCallback(window=100), _Module()
    feed(first, module, [float(r) for r in range(1, 121)])  # 120 episodes: the window holds 21..120
    state = torch.load(_roundtrip(first.state_dict()), weights_only=True)  # as data, through a file
    resumed, module2 = EpisodeStatsCallback(window=100), _Module()
    resumed.load_state_dict(state)
    for callback, mod in ((first, module), (resumed, module2)):
        logged = feed(callback, mod, [200.0, 300.0])  # the window now holds 23..120, 200, 300
        assert logged["train/return_mean"] == pytest.approx((sum(range(23, 121)) + 500) / 100)
        assert logged["train/length_mean"] == pytest.approx(2 * (sum(range(23, 121)) + 500) / 100)
        callback.on_train_epoch_end(SimpleNamespace(world_size=1), mod)
        # The epoch saw all 122 episodes: the ones before the checkpoint count too.
        assert mod.logged["train/episodes"] == 122
        assert mod.logged["train/epoch_return_max"] == 300.0
        assert mod.logged["train/epoch_return_min"] == 1.0
        assert mod.logged["train/epoch_return_mean"] == pytest.approx((sum(range(1, 121)) + 500) / 122)


def test_a_fresh_callback_without_episodes_logs_no_return():
    callback, module = EpisodeStatsCallback(), _Module()
    callback.load_state_dict(torch.load(_roundtrip(callback.state_dict()), weights_only=True))
    assert "train/return_mean" not in feed(callback, module, [])


def _roundtrip(state: dict) -> object:
    import io

    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer
