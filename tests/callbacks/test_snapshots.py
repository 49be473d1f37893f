"""rlpyt's snapshot modes as ModelCheckpoint settings: the files each mode leaves after six epochs."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.callbacks import snapshot_callbacks
from lightning_rl.cli import main
from lightning_rl.samplers import SerialSampler

ROOT = Path(__file__).resolve().parents[2]


def fit_six_epochs(tmp_path: Path, callbacks: list[pl.Callback]) -> set[str]:
    """Six epochs of 64 env steps (two iterations of 16 x 2 each); the checkpoint files written."""
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[8]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
        epochs=1, minibatches=1, total_env_steps=6 * 64, log_interval_steps=64,
    )
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=False, callbacks=callbacks,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module)
    return {p.name for p in (tmp_path / "ckpt").glob("*")}


@pytest.mark.parametrize(("mode", "gap", "files"), [
    ("last", 1, {"last.ckpt"}),
    ("all", 1, {f"epoch_{n}.ckpt" for n in range(6)} | {"last.ckpt"}),
    # Epochs 1, 3 and 5 (0-based) close every second epoch: 128, 256 and 384 env steps.
    ("gap", 2, {"epoch_1.ckpt", "epoch_3.ckpt", "epoch_5.ckpt", "last.ckpt"}),
])
def test_each_snapshot_mode_leaves_rlpyts_files(tmp_path: Path, mode: str, gap: int, files: set[str]) -> None:
    assert fit_six_epochs(tmp_path, snapshot_callbacks(mode, gap, dirpath=str(tmp_path / "ckpt"))) == files


def test_gap_mode_writes_last_every_epoch_so_a_kill_loses_at_most_one_epoch(tmp_path: Path) -> None:
    class StopAfterThirdEpoch(pl.Callback):
        def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            if trainer.current_epoch == 3:
                raise KeyboardInterrupt  # a kill after three epochs, before any end-of-training save

    callbacks = [*snapshot_callbacks("gap", 5, dirpath=str(tmp_path / "ckpt")), StopAfterThirdEpoch()]
    with pytest.raises(SystemExit):  # Lightning turns the interrupt into an exit
        fit_six_epochs(tmp_path, callbacks)
    # No gap snapshot yet (the first is epoch 4), but last.ckpt holds all three epochs.
    assert {p.name for p in (tmp_path / "ckpt").glob("*")} == {"last.ckpt"}
    state = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 3 * 64


def test_none_mode_has_no_checkpoint_callback_and_bad_modes_are_refused() -> None:
    assert snapshot_callbacks("none") == []
    with pytest.raises(ValueError, match="snapshot mode must be one of"):
        snapshot_callbacks("every")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gap must be at least 1"):
        snapshot_callbacks("gap", 0)


def test_shipped_snapshot_config_keeps_every_fifth_epoch_and_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    prefix = "--model.init_args."
    main(["fit", "--config", str(ROOT / "configs" / "ppo" / "cartpole_snapshots.yaml"),
          f"{prefix}sampler.init_args.batch_T", "16", f"{prefix}sampler.init_args.batch_B", "2",
          f"{prefix}total_env_steps", str(6 * 64), f"{prefix}log_interval_steps", "64", f"{prefix}epochs", "1",
          "--trainer.enable_progress_bar", "false"])
    # Grouped by what was trained (PPO on CartPole), not by the config file's name.
    (checkpoints,) = list(tmp_path.glob("runs/ppo_cartpole/*/checkpoints"))
    # Six epochs: epoch 4 is the fifth (every_n_epochs: 5); last.ckpt from its own callback.
    assert {p.name for p in checkpoints.glob("*")} == {"epoch_4.ckpt", "last.ckpt"}
