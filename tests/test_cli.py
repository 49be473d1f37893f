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


EVAL = ["--model.init_args.sampler.init_args.eval_n_envs", "2",
        "--model.init_args.sampler.init_args.eval_max_trajectories", "3"]


def only_run_dir(root: Path, group: str = "ppo_cartpole") -> Path:
    (run_dir,) = (root / "runs" / group).iterdir()
    return run_dir


def test_fit_resume_validate_and_play(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL])
    run_dir = only_run_dir(in_tmp)
    last = run_dir / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 512
    assert (run_dir / "config.yaml").is_file() and (run_dir / "run_info.yaml").is_file()
    assert list(run_dir.glob("events.out.tfevents.*"))  # TensorBoard, in the run directory

    # Resume with a larger budget: continues from 512 env steps, in the same run directory.
    main(["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", "1024", *QUIET, "--ckpt_path", "last"])
    assert only_run_dir(in_tmp) == run_dir
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1024

    main(["validate", "--config", CARTPOLE, "--ckpt_path", str(last), *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "eval/return_mean" in out

    videos = in_tmp / "videos"
    main(["play", "--config", CARTPOLE, "--ckpt_path", str(last), "--episodes", "1", "--video_folder", str(videos)])
    out = capsys.readouterr().out
    assert "episode 0: return" in out
    assert list(videos.glob("*.mp4"))

    # The run's own saved config.yaml plays as it is (it records fit's weights_only option).
    main(["play", "--config", str(run_dir / "config.yaml"), "--ckpt_path", str(last), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


@pytest.fixture()
def fresh_run(in_tmp, capsys) -> Path:
    """A fresh run directory of 512 env steps (PPO CartPole, written in a new cwd)."""
    main(["fit", "--config", CARTPOLE, *SMALL])
    capsys.readouterr()
    return only_run_dir(in_tmp)


def episode_rows(out: str) -> dict[int, float]:
    """``{episode: return}`` of the table that validate/test print."""
    import re

    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"│\s+(\d+) │\s+([-\d.]+) │", out)}


def test_validate_prints_a_table_of_eval_episode_returns(fresh_run, capsys):
    main(["validate", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "validate: 3 eval episodes" in out
    rows = episode_rows(out)
    assert sorted(rows) == [0, 1, 2]
    assert f"{sum(rows.values()) / 3:.2f}" in out  # the mean row


def test_test_evaluates_on_held_out_seeds(fresh_run, capsys):
    main(["validate", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    validated = episode_rows(capsys.readouterr().out)
    main(["test", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "test (held-out seeds): 3 eval episodes" in out
    tested = episode_rows(out)
    assert sorted(tested) == [0, 1, 2]
    # Other env seeds: other episodes (validate twice gives the same ones, the seeds being fixed).
    assert tested != validated


def test_predict_is_not_a_command(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--config", CARTPOLE])
    assert exit_info.value.code == 2


def test_play_a_run_directory_without_restating_the_config(fresh_run, capsys):
    main(["play", str(fresh_run), "--episodes", "2"])
    out = capsys.readouterr().out
    assert "episode 1: return" in out and "mean return" in out
    # The group directory plays its newest run.
    main(["play", str(fresh_run.parent), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


def test_play_a_checkpoint_alone_with_the_config_it_carries(fresh_run, in_tmp, capsys):
    elsewhere = in_tmp / "copied.ckpt"
    elsewhere.write_bytes((fresh_run / "checkpoints" / "last.ckpt").read_bytes())
    main(["play", str(elsewhere), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


def test_load_from_checkpoint_needs_only_the_path(fresh_run):
    from lightning_rl.algos import PPO

    path = fresh_run / "checkpoints" / "last.ckpt"
    module = PPO.load_from_checkpoint(path)
    state = torch.load(path, weights_only=True)
    assert module.train_state.env_steps == 512
    assert module.sampler.env_id == "CartPole-v1"
    for key, value in state["state_dict"].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(module.state_dict()[key], value), key


def test_optimizer_and_lr_scheduler_flags_reach_the_module(in_tmp):
    from lightning_rl.algos.base import RLModule
    from lightning_rl.cli import RLCLI, RLTrainer

    args = ["--config", CARTPOLE, *SMALL, "--model.init_args.linear_lr_schedule", "false",
            "--optimizer", "RMSprop", "--optimizer.alpha", "0.9",
            "--lr_scheduler", "StepLR", "--lr_scheduler.step_size", "1", "--lr_scheduler.gamma", "0.5"]
    cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, args=["fit", *args])
    module = cli.model
    (optimizer,) = [o.optimizer for o in [module.optimizers()]]
    assert isinstance(optimizer, torch.optim.RMSprop)
    assert optimizer.defaults["alpha"] == 0.9
    # The module's learning_rate is the lr; StepLR halved it once per sampler iteration (2 iterations).
    assert optimizer.param_groups[0]["lr"] == pytest.approx(module.learning_rate * 0.25)


def test_help_lists_the_parameter_file_route(in_tmp, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--params FILE" in out and "--cpanel JSON" in out
    assert "{fit,validate,test,play}" in out


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
    state = torch.load(only_run_dir(in_tmp) / "checkpoints" / "last.ckpt", weights_only=True)
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

