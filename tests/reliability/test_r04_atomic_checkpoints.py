"""Checkpoint writes are atomic and paired: the ``.ckpt`` and its replay side file go to temporary
names and are renamed into place, the ``.ckpt`` names its side file and the pair token inside it,
a write that fails (an exception, or SIGKILL in the middle) leaves the previous pair loadable and
prunes nothing, and the side file holds only the filled part of the replay, written once per
step even when two checkpoints are saved at that step."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.algos.checkpointing import RLCheckpointIO
from tests.algos.test_on_policy import make_trainer
from tests.algos.test_sac import pendulum_sac

ROOT = Path(__file__).resolve().parents[2]


def fit(dirpath: Path, max_epochs: int, ckpt_path: str | None = None, **kwargs) -> pl.LightningModule:
    pl.seed_everything(0)
    module = pendulum_sac(total_env_steps=10_000, replay_size=100_000, **kwargs)
    callback = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=1)
    make_trainer(max_epochs=max_epochs, callbacks=[callback]).fit(module, ckpt_path=ckpt_path)
    return module


def global_step(path: Path) -> int:
    return int(RLCheckpointIO().load_checkpoint(path)["global_step"])


def listing(dirpath: Path) -> list[str]:
    return sorted(p.name for p in dirpath.iterdir())


def half_then_fail(path: str) -> None:
    """A writer that dies halfway: some bytes under the name it was given, then an error."""
    Path(path).write_bytes(b"PK\x03\x04 partial")
    raise OSError("disk full (simulated)")


@pytest.mark.parametrize("target", ["lightning_fabric.plugins.io.torch_io._atomic_save",
                                    "lightning_rl.algos.checkpointing.torch.save"])
def test_a_failed_write_keeps_the_previous_pair_and_prunes_nothing(tmp_path, monkeypatch, target):
    fit(tmp_path, max_epochs=2)
    before = listing(tmp_path)
    step = global_step(tmp_path / "last.ckpt")
    assert step > 0 and any(name.startswith("epoch=1") for name in before)
    if target.endswith("_atomic_save"):
        monkeypatch.setattr(target, lambda checkpoint, path: half_then_fail(path))
    else:
        monkeypatch.setattr(target, lambda obj, path, *args, **kwargs: half_then_fail(path))
    with pytest.raises(OSError, match="disk full"):
        fit(tmp_path, max_epochs=3, ckpt_path=str(tmp_path / "last.ckpt"))
    monkeypatch.undo()
    # The same files as before the failed save (no temporary or partial file left, the epoch=1
    # checkpoint not pruned), and last.ckpt still loads, with its old step and its own replay.
    assert listing(tmp_path) == before
    assert global_step(tmp_path / "last.ckpt") == step
    assert "lightning_rl_replay" in RLCheckpointIO().load_checkpoint(tmp_path / "last.ckpt")


def test_sigkill_in_the_middle_of_a_save_leaves_the_previous_pair(tmp_path):
    fit(tmp_path, max_epochs=2)
    before = listing(tmp_path)
    step = global_step(tmp_path / "last.ckpt")
    marker = tmp_path.parent / f"{tmp_path.name}.writing"
    child = textwrap.dedent(f"""
        import time
        from pathlib import Path
        import lightning_rl.algos.checkpointing as checkpointing
        from tests.reliability.test_r04_atomic_checkpoints import fit

        def slow_save(obj, path, *args, **kwargs):
            Path(path).write_bytes(b"PK\\x03\\x04 partial")
            Path({str(marker)!r}).touch()
            time.sleep(120)

        checkpointing.torch.save = slow_save
        fit(Path({str(tmp_path)!r}), max_epochs=3, ckpt_path={str(tmp_path / "last.ckpt")!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "the child ended before it started saving"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # A killed process cannot clean up: its temporary file may stay, under a temporary name only.
    leftovers = set(listing(tmp_path)) - set(before)
    assert all(".tmp" in name for name in leftovers), leftovers
    assert global_step(tmp_path / "last.ckpt") == step
    # The next save of a run in this directory goes through, and the last.ckpt it writes loads.
    fit(tmp_path, max_epochs=3, ckpt_path=str(tmp_path / "last.ckpt"))
    assert global_step(tmp_path / "last.ckpt") > step


def test_a_checkpoint_never_loads_another_saves_replay(tmp_path):
    pl.seed_everything(0)
    module = pendulum_sac(total_env_steps=10_000)
    make_trainer(max_epochs=2, callbacks=[ModelCheckpoint(dirpath=tmp_path, save_top_k=-1)]).fit(module)
    first, second = sorted(tmp_path.glob("epoch=*.ckpt"))
    [first_side] = tmp_path.glob(f"{first.name}.replay-*")
    [second_side] = tmp_path.glob(f"{second.name}.replay-*")
    shutil.copyfile(first_side, second_side)  # e.g. files mixed up by a copy
    with pytest.raises(ValueError, match="belongs to another save"):
        RLCheckpointIO().load_checkpoint(second)
    second_side.unlink()
    with pytest.raises(ValueError, match="replay side file .* is missing"):
        RLCheckpointIO().load_checkpoint(second)


def test_the_side_file_holds_the_filled_rows_once_per_step(tmp_path):
    module = fit(tmp_path, max_epochs=2)
    storage = module.replay.storage
    arrays = {k: np.asarray(v) for k, v in storage.arrays().items() if k != "counters"}
    # 2 epochs x 64 env steps over B=2 envs: 64 rows filled of the 50,000.
    assert storage.filled == 64 and storage.T == 50_000
    filled_bytes = sum(a[0].nbytes for a in arrays.values()) * 64
    full_bytes = sum(a.nbytes for a in arrays.values())
    [side] = tmp_path.glob("last.ckpt.replay-*")
    size = side.stat().st_size
    assert size <= 1.1 * filled_bytes + 16_384  # plus the zip container's fixed overhead
    assert size < full_bytes / 100
    # last.ckpt and epoch=1 were saved at the same step: one file, linked under both names.
    [epoch_side] = tmp_path.glob("epoch=1*.ckpt.replay-*")
    assert os.path.samefile(side, epoch_side)
    assert torch.equal(torch.load(side, weights_only=True)["replay"]["storage"]["samples.reward"],
                       torch.from_numpy(arrays["samples.reward"][:64]))


def test_remote_paths_go_through_the_wrapped_io():
    # fsspec paths (s3://, memory://) have no atomic rename: the wrapped CheckpointIO writes them,
    # and a replay side file, which needs a local directory, is refused with a clear error.
    io = RLCheckpointIO()
    io.save_checkpoint({"global_step": 3, "state_dict": {}}, "memory://r04/last.ckpt")
    assert io.load_checkpoint("memory://r04/last.ckpt")["global_step"] == 3
    with pytest.raises(ValueError, match="side file needs a local checkpoint directory"):
        io.save_checkpoint({"global_step": 4, "lightning_rl_replay": {}}, "memory://r04/last.ckpt")
