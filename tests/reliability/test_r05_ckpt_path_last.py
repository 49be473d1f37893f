"""Row 5: ``--ckpt_path last`` never silently starts from step 0."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
SMALL = ["--model.init_args.total_env_steps", "512", "--model.init_args.log_interval_steps", "256",
         "--trainer.enable_progress_bar", "false"]


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_ckpt_path_last_without_a_checkpoint_exits_2_naming_where_it_looked(in_tmp, capsys):
    # Lightning would warn and start from env step 0; a resume that cannot resume is an error.
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *SMALL, "--ckpt_path", "last"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    searched = in_tmp / "lightning_logs" / "ppo_cartpole" / "checkpoints"
    assert f"--ckpt_path last: no last checkpoint in {searched};" in err
    assert not (in_tmp / "lightning_logs" / "ppo_cartpole" / "checkpoints" / "last.ckpt").exists()


def test_a_rerun_of_a_killed_versioned_run_resumes_its_last_checkpoint(in_tmp, capsys):
    # Checkpoints under the TensorBoard logger's versioned directory (no ModelCheckpoint dirpath):
    # run 2 gets version_1, whose checkpoint directory is empty; 'last' must still find run 1's.
    logged = [*SMALL, "--trainer.logger", "pytorch_lightning.loggers.TensorBoardLogger",
              "--trainer.logger.save_dir", str(in_tmp), "--trainer.logger.name", "runs",
              "--trainer.callbacks+", "pytorch_lightning.callbacks.ModelCheckpoint",
              "--trainer.callbacks.save_last", "true"]
    config = in_tmp / "no_dirpath.yaml"
    # The shipped config's ModelCheckpoint names a dirpath: drop it for this run.
    config.write_text(Path(CARTPOLE).read_text().replace(
        "    - class_path: pytorch_lightning.callbacks.ModelCheckpoint\n"
        "      init_args:\n        dirpath: lightning_logs/ppo_cartpole/checkpoints\n        save_last: true\n", ""))
    main(["fit", "--config", str(config), *logged])
    first = in_tmp / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    assert first.exists()
    steps = torch.load(first, weights_only=True)["lightning_rl"]["train_state"]["env_steps"]
    assert steps == 512
    capsys.readouterr()
    main(["fit", "--config", str(config), *logged, "--model.init_args.total_env_steps", "1024",
          "--ckpt_path", "last"])
    assert f"--ckpt_path last: resuming {first}" in capsys.readouterr().err
    second = in_tmp / "runs" / "version_1" / "checkpoints" / "last.ckpt"
    assert torch.load(second, weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 1024


def test_a_new_run_into_a_directory_with_an_earlier_runs_checkpoints_exits_2(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL])
    ckpt_dir = in_tmp / "lightning_logs" / "ppo_cartpole" / "checkpoints"
    before = sorted(p.name for p in ckpt_dir.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *SMALL])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"the checkpoint directory {ckpt_dir} already holds an earlier run's checkpoints" in err
    assert "--ckpt_path last" in err
    # Nothing written beside the first run's files (no last-v1.ckpt).
    assert sorted(p.name for p in ckpt_dir.iterdir()) == before
    main(["fit", "--config", CARTPOLE, *SMALL[:-2], "--model.init_args.total_env_steps", "768",
          "--trainer.enable_progress_bar", "false", "--ckpt_path", "last"])
    assert torch.load(ckpt_dir / "last.ckpt", weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 768
