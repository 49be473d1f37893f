"""Row 5: ``--ckpt_path last`` never silently starts from step 0."""

from __future__ import annotations

from pathlib import Path

import pytest

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
