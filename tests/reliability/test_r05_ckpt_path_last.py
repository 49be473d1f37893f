"""Row 5: ``--ckpt_path last`` never silently starts from step 0.

With run directories a new run can no longer write beside an earlier run's checkpoints:
it gets its own ``runs/<algo>_<env>/<date-time>/``. The refusal of a new run into a checkpoint
directory that holds an earlier run's checkpoints stays for a config that fixes the directory
(``ModelCheckpoint(dirpath=...)``); the last test checks both rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lightning_rl.cli import main
from lightning_rl.runs import newest_checkpoint

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
    assert "--ckpt_path last: no last checkpoint in runs/ppo_cartpole/*/checkpoints;" in err
    assert not list(in_tmp.rglob("*.ckpt"))


def test_a_rerun_of_a_killed_versioned_run_resumes_its_last_checkpoint(in_tmp, capsys):
    # A logger of the config's own: checkpoints under its versioned directory; run 2 gets
    # version_1, whose checkpoint directory is empty; 'last' must still find run 1's.
    logged = [*SMALL, "--trainer.logger", "pytorch_lightning.loggers.TensorBoardLogger",
              "--trainer.logger.save_dir", str(in_tmp), "--trainer.logger.name", "tb"]
    main(["fit", "--config", CARTPOLE, *logged])
    first = in_tmp / "tb" / "version_0" / "checkpoints" / "last.ckpt"
    assert first.exists()
    steps = torch.load(first, weights_only=True)["lightning_rl"]["train_state"]["env_steps"]
    assert steps == 512
    capsys.readouterr()
    main(["fit", "--config", CARTPOLE, *logged, "--model.init_args.total_env_steps", "1024", "--ckpt_path", "last"])
    assert f"--ckpt_path last: resuming {first}" in capsys.readouterr().err
    second = in_tmp / "tb" / "version_1" / "checkpoints" / "last.ckpt"
    assert torch.load(second, weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 1024


def test_a_new_run_gets_a_new_run_directory_and_last_resumes_the_newest(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL])
    (first,) = (in_tmp / "runs" / "ppo_cartpole").iterdir()
    before = sorted(p.name for p in (first / "checkpoints").iterdir())
    main(["fit", "--config", CARTPOLE, *SMALL[:1], "256", *SMALL[2:]])
    second = next(p for p in (in_tmp / "runs" / "ppo_cartpole").iterdir() if p != first)
    # Nothing written beside the first run's files (no last-v1.ckpt).
    assert sorted(p.name for p in (first / "checkpoints").iterdir()) == before
    assert newest_checkpoint(in_tmp / "runs" / "ppo_cartpole") == second / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    main(["fit", "--config", CARTPOLE, *SMALL[2:], "--model.init_args.total_env_steps", "768", "--ckpt_path", "last"])
    assert f"resuming {(second / 'checkpoints' / 'last.ckpt').relative_to(in_tmp)}" in capsys.readouterr().err
    state = torch.load(second / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 768


def test_a_new_run_into_a_fixed_directory_with_an_earlier_runs_checkpoints_exits_2(in_tmp, capsys):
    fixed = ["--trainer.callbacks", json.dumps([{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                                                "init_args": {"dirpath": "ckpts", "save_last": True}}])]
    main(["fit", "--config", CARTPOLE, *SMALL, *fixed])
    ckpt_dir = in_tmp / "ckpts"
    before = sorted(p.name for p in ckpt_dir.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *SMALL, *fixed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"the checkpoint directory {ckpt_dir} already holds an earlier run's checkpoints" in err
    assert "--ckpt_path last" in err
    assert sorted(p.name for p in ckpt_dir.iterdir()) == before
    main(["fit", "--config", CARTPOLE, *SMALL[2:], *fixed, "--model.init_args.total_env_steps", "768",
          "--ckpt_path", "last"])
    assert torch.load(ckpt_dir / "last.ckpt", weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 768
