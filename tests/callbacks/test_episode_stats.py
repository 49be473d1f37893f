"""Episode statistics: the windowed mean against a brute-force reference, batched updates."""

from __future__ import annotations

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.algos.episode_stats import WindowMean


def test_window_mean_matches_the_mean_of_the_last_values():
    rng = np.random.default_rng(0)
    metric, seen = WindowMean(7), []
    for step in range(60):
        values = rng.normal(size=int(rng.integers(0, 12))).tolist()  # batches larger than the window too
        seen += values
        if values:
            metric.update(torch.tensor(values))
        if seen:
            expected = np.mean(seen[-7:])
            assert float(metric.compute()) == pytest.approx(expected, rel=1e-6), step


def test_window_mean_rejects_an_empty_window():
    with pytest.raises(ValueError, match="window must be >= 1"):
        WindowMean(0)


def test_window_mean_is_nan_before_any_value():
    assert torch.isnan(WindowMean(3).compute())


def _gather_window_means(rank: int, init_file: str, results) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        metric = WindowMean(3)
        if rank == 0:
            metric.update(torch.tensor([1.0, 2.0, 3.0, 4.0]))  # window keeps 2, 3, 4
        else:
            metric.update(torch.tensor([10.0]))  # one value of three slots
        results[rank] = float(metric.compute())
        empty = WindowMean(3)
        results[rank + 2] = float(empty.compute())  # no rank has a value: NaN, no hang
    finally:
        dist.destroy_process_group()


def test_window_mean_averages_every_ranks_window_under_ddp(tmp_path):
    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Manager().dict()
    procs = [ctx.Process(target=_gather_window_means, args=(r, str(tmp_path / "init"), results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert results[0] == results[1] == pytest.approx((2 + 3 + 4 + 10) / 4)
    assert np.isnan(results[2]) and np.isnan(results[3])


def test_the_callback_logs_the_window_means_and_computes_them_again_only_after_new_episodes(monkeypatch):
    from types import SimpleNamespace

    from lightning_rl.algos.episode_stats import EpisodeStatsCallback
    from lightning_rl.envs.traj_info import TrajInfo

    def episode(ret: float) -> TrajInfo:
        info = TrajInfo()
        info.Return, info.Length = ret, int(2 * ret)
        return info

    computes = []
    original = WindowMean.compute
    monkeypatch.setattr(WindowMean, "compute", lambda self: computes.append(1) or original(self))
    batches = [[10.0, 20.0], [], [60.0]]  # episode returns finished in three sampler iterations
    logged: list[dict] = []
    module = SimpleNamespace(
        train_state=SimpleNamespace(pop_traj_infos=lambda: [episode(r) for r in batches.pop(0)]),
        logging_due=lambda: True,
        log_step_metrics=lambda metrics, reduce: logged.append(dict(metrics)),
    )
    trainer = SimpleNamespace(world_size=1)
    callback = EpisodeStatsCallback(window=100)
    for _ in range(3):
        callback.on_train_batch_end(trainer, module, None, None, 0)
    # Means by hand: (10 + 20) / 2 = 15, unchanged without new episodes, then (10 + 20 + 60) / 3 = 30.
    assert [m["train/return_mean"] for m in logged] == [15.0, 15.0, 30.0]
    assert [m["train/length_mean"] for m in logged] == [30.0, 30.0, 60.0]
    assert len(computes) == 4  # return and length means, at the first and the third iteration only


class ReadsReturnMean(pl.Callback):
    """What a trainer callback (the progress display, a user's) reads at each batch end."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float | None]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        value = trainer.callback_metrics.get("train/return_mean")
        self.seen.append((int(pl_module.train_state.itr), None if value is None else float(value)))


def tiny_cartpole_fit(tmp_path, total_env_steps: int, ckpt_path=None) -> ReadsReturnMean:
    from pytorch_lightning.callbacks import ModelCheckpoint

    from lightning_rl.agents import CategoricalPgAgent
    from lightning_rl.algos import PPO
    from lightning_rl.samplers import SerialSampler

    pl.seed_everything(0)
    sampler = SerialSampler("CartPole-v1", batch_T=32, batch_B=2)
    module = PPO(CategoricalPgAgent(hidden_sizes=[16]), sampler, epochs=1, minibatches=1,
                 total_env_steps=total_env_steps, log_interval_steps=128, linear_lr_schedule=False)
    reader = ReadsReturnMean()
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path,
                         callbacks=[reader, ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)])
    trainer.fit(module, ckpt_path=ckpt_path)
    return reader


def test_a_resumed_run_shows_the_restored_return_window_from_its_first_iteration(tmp_path):
    # Two epochs of 2 iterations unbroken, against one epoch, then a resume at that epoch's end.
    unbroken = tiny_cartpole_fit(tmp_path / "a", 256).seen
    tiny_cartpole_fit(tmp_path / "b", 128)
    resumed = tiny_cartpole_fit(tmp_path / "b", 256, ckpt_path=tmp_path / "b" / "ckpt" / "last.ckpt").seen
    assert [itr for itr, _ in resumed] == [3, 4]
    # Callbacks see the mean logged by the iteration before (episodes finished by the save): there from
    # the first iteration after the resume, as in the unbroken run.
    assert resumed[0][1] is not None
    assert resumed == unbroken[2:]
