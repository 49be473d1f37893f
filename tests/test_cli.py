"""The `lightning-rl` command: fit, resume, validate, play, print_config, DDP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
QUIET = ["--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
         "--trainer.enable_progress_bar", "false"]
SMALL = ["--model.init_args.total_env_steps", "512", *QUIET]


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_fit_resume_validate_and_play(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL])
    ckpt_dir = in_tmp / "lightning_logs" / "ppo_cartpole" / "checkpoints"
    last = ckpt_dir / "last.ckpt"
    assert last.exists()
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 512
    assert (in_tmp / "lightning_logs").is_dir()

    # Resume with a larger budget: continues from 512 env steps.
    main(["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", "1024", *QUIET, "--ckpt_path", "last"])
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1024

    main(["validate", "--config", CARTPOLE, "--ckpt_path", str(last),
          "--model.init_args.sampler.init_args.eval_n_envs", "2",
          "--model.init_args.sampler.init_args.eval_max_trajectories", "2",
          "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "eval/return_mean" in out

    videos = in_tmp / "videos"
    main(["play", "--config", CARTPOLE, "--ckpt_path", str(last), "--episodes", "1", "--video_folder", str(videos)])
    out = capsys.readouterr().out
    assert "episode 0: return" in out
    assert list(videos.glob("*.mp4"))

    # The run's own saved config.yaml plays as it is (it records fit's weights_only option).
    saved = sorted((in_tmp / "lightning_logs").glob("version_*/config.yaml"))[-1]
    main(["play", "--config", str(saved), "--ckpt_path", str(last), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


def test_print_config_shows_the_resolved_module(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, "--print_config"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "lightning_rl.algos.PPO" in out
    assert "CartPole-v1" in out


def test_bad_config_value_is_reported(in_tmp, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", CARTPOLE, "--model.init_args.epochs", "not-a-number"])
    assert "epochs" in capsys.readouterr().err


def test_negative_batch_size_is_rejected(in_tmp):
    with pytest.raises((ValueError, SystemExit)):
        main(["fit", "--config", CARTPOLE, "--model.init_args.sampler.init_args.batch_B", "-4", *SMALL])


def test_ddp_on_cpu_two_ranks(in_tmp):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable, "-m", "lightning_rl.cli", "fit", "--config", CARTPOLE, *SMALL,
        "--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu",
        "--trainer.callbacks+=lightning_rl.callbacks.ThroughputCallback",
        "--model.init_args.agent.init_args.normalize_observation", "true",
    ]
    proc = subprocess.run(cmd, cwd=in_tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = torch.load(in_tmp / "lightning_logs" / "ppo_cartpole" / "checkpoints" / "last.ckpt", weights_only=True)
    # Each rank collected its share: 2 ranks x 256 env steps per rank reach the 512 budget.
    assert state["lightning_rl"]["train_state"]["env_steps"] == 256
    # Observation statistics merged across ranks: both ranks' 256 observations each.
    assert float(state["state_dict"]["agent.model.encoder.obs_rms.count"]) == 512


def test_play_multiagent_env_without_checkpoint(in_tmp, capsys):
    config = str(ROOT / "configs" / "ppo" / "multiagent_coopgrid.yaml")
    main(["play", "--config", config, "--episodes", "2"])
    out = capsys.readouterr().out
    assert "episode 1: return" in out
    assert "length 20" in out  # CoopGrid episodes last 20 steps

