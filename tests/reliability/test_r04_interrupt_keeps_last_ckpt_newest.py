"""After any interrupt and resume, ``last.ckpt`` is the newest state and no ``last-vN.ckpt`` appears.

Ctrl-C (SIGINT) makes :class:`~lightning_rl.callbacks.RunDirectoryCallback` save ``last.ckpt`` at the end
of the batch; the trainer then ends the epoch, where the config's ``ModelCheckpoint`` saves too. Before,
a ``ModelCheckpoint`` that had not yet written ``last.ckpt`` itself in that process (an interrupt in the
first epoch, or the first save after a resume) took the file for someone else's and wrote
``last-v1.ckpt`` beside it; ``--ckpt_path last`` then resumed that, finished into ``last-v2.ckpt`` and
left ``last.ckpt`` holding the interrupted state for ``play`` and ``export``. Both the main config's
checkpointing (one file, ``last.ckpt``) and a ``save_last`` one with epoch snapshots are checked, with
the interrupt in the first epoch and right after an epoch's checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.cli import main
from tests.signals import default_sigint

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
# 256 env steps per sampler iteration and per epoch; 4 epochs.
RUN = ["--model.total_env_steps", "1024", "--model.log_interval_steps", "256", "--model.epochs", "1",
       "--trainer.enable_progress_bar", "false"]
SNAPSHOTS = json.dumps([{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                         "init_args": {"save_last": True, "save_top_k": -1, "filename": "epoch_{epoch}"}}])


class InterruptAt(pl.Callback):
    """Sends SIGINT to this process as epoch ``epoch`` starts (its first batch then ends the fit)."""

    def __init__(self, epoch: int = 0) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.current_epoch == self.epoch:
            os.kill(os.getpid(), signal.SIGINT)


def env_steps(path: Path) -> int:
    return int(torch.load(path, weights_only=True)["lightning_rl"]["train_state"]["env_steps"])


@pytest.mark.parametrize("checkpointing", ["main_config", "save_last_with_snapshots"])
@pytest.mark.parametrize("epoch", [0, 1], ids=["in_the_first_epoch", "right_after_an_epoch_checkpoint"])
def test_interrupt_and_resume_keep_last_ckpt_the_newest_state(epoch, checkpointing, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = ["--trainer.callbacks", SNAPSHOTS] if checkpointing == "save_last_with_snapshots" else []
    interrupt = [f"--trainer.callbacks+={__name__}.InterruptAt", f"--trainer.callbacks.epoch={epoch}"]
    with default_sigint(), pytest.raises(SystemExit) as exit_info:  # default_sigint: also in a background run
        main(["fit", "--config", CARTPOLE, *RUN, *own, *interrupt])
    assert exit_info.value.code == 1  # Ctrl-C's status, after saving
    (checkpoints,) = tmp_path.glob("runs/ppo_cartpole/*/checkpoints")
    last = checkpoints / "last.ckpt"
    assert not list(checkpoints.glob("last-v*.ckpt"))
    assert env_steps(last) == 256 * (epoch + 1)  # the batch the interrupt ended

    main(["fit", "--config", CARTPOLE, *RUN, *own, "--ckpt_path", "last"])
    assert not list(checkpoints.glob("last-v*.ckpt"))
    assert env_steps(last) == 1024
    newest = max(checkpoints.glob("*.ckpt"), key=lambda p: p.stat().st_mtime_ns)
    assert env_steps(newest) == 1024
    if checkpointing == "main_config":
        assert sorted(p.name for p in checkpoints.iterdir()) == ["last.ckpt"]  # no byte-identical epoch twin


def test_a_resume_from_a_checkpoint_whose_model_checkpoint_state_names_no_last_file(tmp_path, monkeypatch):
    # A checkpoint written by an older lightning_rl (or saved outside the ModelCheckpoint) records no
    # last_model_path: the resumed ModelCheckpoint must still write over last.ckpt.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["fit", "--config", CARTPOLE, *RUN, "--trainer.callbacks", SNAPSHOTS,
              f"--trainer.callbacks+={__name__}.InterruptAt", "--trainer.callbacks.epoch=1"])
    (checkpoints,) = tmp_path.glob("runs/ppo_cartpole/*/checkpoints")
    last = checkpoints / "last.ckpt"
    state = torch.load(last, weights_only=True)
    for key, value in state["callbacks"].items():
        if key.startswith("ModelCheckpoint"):
            value["last_model_path"] = ""
    torch.save(state, last)
    main(["fit", "--config", CARTPOLE, *RUN, "--trainer.callbacks", SNAPSHOTS, "--ckpt_path", "last"])
    assert not list(checkpoints.glob("last-v*.ckpt"))
    assert env_steps(last) == 1024
