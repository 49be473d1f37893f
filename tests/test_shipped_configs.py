"""Every shipped config trains through the CLI: finite losses, the env-step budget reached, a
checkpoint that loads into a fresh module built from the same config and, with nothing but its
path, through ``<Algorithm>.load_from_checkpoint``, and a policy that ``lightning-rl export`` writes.

Each run shrinks the config to a few sampler iterations (small batches, a small replay, learning
from the second iteration on) but keeps its algorithm, agent, model, sampler class and env.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
import yaml

from lightning_rl.algos.base import RLModule
from lightning_rl.cli import RLCLI, RLTrainer, main
from lightning_rl.export import main as export_main
from tests.shipped import shipped_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [str(p.relative_to(ROOT / "configs")) for p in shipped_configs()]
#: Env steps of the shrunk runs: four sampler iterations of 16 x 2.
BUDGET = 128

#: What :class:`RecordLosses` saw in the current test (the CLI builds the callback itself).
RECORDED: dict[str, list[float]] = {}


class RecordLosses(pl.Callback):
    """Keeps every logged metric whose name contains ``loss`` after each training batch."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        for name, value in trainer.callback_metrics.items():
            if "loss" in name:
                RECORDED.setdefault(name, []).append(float(value))


def shrink(config: str) -> list[str]:
    """CLI overrides that keep ``config``'s parts but make it a few-iteration run."""
    cfg = yaml.safe_load((ROOT / "configs" / config).read_text())
    model = cfg["model"]
    algo = model["class_path"].rsplit(".", 1)[1]
    sampler_args = model["init_args"]["sampler"].get("init_args", {})
    prefix = "--model.init_args."
    args = [f"{prefix}sampler.init_args.batch_T", "16", f"{prefix}sampler.init_args.batch_B", "2",
            f"{prefix}total_env_steps", str(BUDGET), f"{prefix}log_interval_steps", "32"]
    if "max_decorrelation_steps" in sampler_args:
        args += [f"{prefix}sampler.init_args.max_decorrelation_steps", "0"]
    if "Alternating" in model["init_args"]["sampler"]["class_path"]:
        args += [f"{prefix}sampler.init_args.batch_B", "4"]  # two halves of two envs
    if "eval_n_envs" in sampler_args:
        args += [f"{prefix}sampler.init_args.eval_n_envs", "2"]
    if algo in ("PPO", "MultiAgentPPO"):
        args += [f"{prefix}minibatches", "2", f"{prefix}epochs", "2"]
    elif algo == "A2C":
        pass
    elif algo == "R2D1":
        # Sequences of 2 burn-in + 4 training rows; the first whole sequence exists after
        # (2 + 4 + 2 n) rows of batch_B envs (up to 4).
        args += [f"{prefix}batch_T", "4", f"{prefix}warmup_T", "2", f"{prefix}rnn_state_interval", "2",
                 f"{prefix}n_step_return", "2", f"{prefix}batch_size", "4", f"{prefix}replay_size", "1024",
                 f"{prefix}min_steps_learn", "64", f"{prefix}replay_ratio", "1"]
    else:
        args += [f"{prefix}batch_size", "8", f"{prefix}replay_size", "1024", f"{prefix}min_steps_learn", "32",
                 f"{prefix}replay_ratio", "1"]
    return args


@pytest.mark.parametrize("config", CONFIGS)
def test_shipped_config_trains_to_its_budget_with_finite_losses_and_a_loadable_checkpoint(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train_shrunk_and_reload(config, tmp_path, monkeypatch, [])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a GPU machine)")
@pytest.mark.parametrize("config", CONFIGS)
def test_shipped_config_trains_on_a_cuda_device(config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run with the trainer on the GPU: the models train there, the sampler acts with them
    (GPU inference in the main process, CPU copies in CpuSampler workers), and the checkpoint
    written from CUDA tensors loads into a fresh module on the CPU."""
    train_shrunk_and_reload(config, tmp_path, monkeypatch, ["--trainer.accelerator", "gpu", "--trainer.devices", "1"])


def train_shrunk_and_reload(config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trainer_args: list[str]
                            ) -> None:
    monkeypatch.chdir(tmp_path)
    RECORDED.clear()
    callbacks = [
        {"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
         "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True}},
        {"class_path": f"{__name__}.RecordLosses"},
    ]
    args = ["--config", str(ROOT / "configs" / config), *shrink(config)]
    main(["fit", *args, *trainer_args, "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
          "--trainer.callbacks", json.dumps(callbacks)])

    # Updates happened and every loss they logged is a number.
    assert RECORDED, f"{config}: no loss was logged"
    for name, values in RECORDED.items():
        assert all(math.isfinite(v) for v in values), f"{config}: {name} = {values}"

    # The budget was reached, and the checkpoint holds it.
    last = tmp_path / "ckpt" / "last.ckpt"
    state = torch.load(last, weights_only=True, map_location="cpu")
    assert state["lightning_rl"]["train_state"]["env_steps"] == BUDGET

    # A fresh module from the same config takes the checkpoint: the same weights, the same counters.
    cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, run=False,
                args=[*args, "--trainer.logger", "false", "--trainer.enable_progress_bar", "false"])
    fresh = cli.model
    fresh.on_load_checkpoint(state)
    fresh.load_state_dict(state["state_dict"])
    assert fresh.train_state.env_steps == BUDGET
    loaded = fresh.state_dict()
    assert loaded.keys() == state["state_dict"].keys()
    for key, value in state["state_dict"].items():
        if not isinstance(value, torch.Tensor):  # a module's extra state (plain data)
            assert_same_data(loaded[key], value, key)
            continue
        assert torch.isfinite(value.float()).all(), f"{config}: non-finite {key} in the checkpoint"
        assert torch.equal(loaded[key], value), key

    # Python alone rebuilds the module from the checkpoint, which carries its config as data (class
    # paths such as torch.nn.Tanh included), and the policy exports from it.
    rebuilt = type(fresh).load_from_checkpoint(last, map_location="cpu")
    for key, value in state["state_dict"].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(rebuilt.state_dict()[key], value), f"{config}: load_from_checkpoint {key}"
    assert rebuilt.train_state.env_steps == BUDGET
    # Every policy exports: recurrent ones with their LSTM state, multi-agent ones one file per agent.
    assert export_main([str(last), "--format", "torchscript", "--out", str(tmp_path / "export")]) == 0, config


def assert_same_data(a: Any, b: Any, where: str) -> None:
    """``a`` and ``b`` hold the same containers, numbers and tensors (tensors equal bit for bit)."""
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_data(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            assert_same_data(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_a_default_fit_of_a_shipped_config_prints_no_warning(config: str, tmp_path: Path) -> None:
    # As a user runs it: the entry point in a new process with the default trainer (progress
    # display, logger, run directory), only the budget and batch shrunk; every line of both
    # streams is read, MuJoCo's C library's included.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "CI")}
    result = subprocess.run(
        [sys.executable, "-m", "lightning_rl.cli", "fit", "--config", str(ROOT / "configs" / config), *shrink(config)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert f"stopped: budget: total_env_steps={BUDGET} reached" in output, output[-3000:]  # the end summary
    assert [line for line in output.splitlines() if re.search("warn", line, re.IGNORECASE)] == []


@pytest.mark.slow
def test_every_command_prints_no_warning_in_a_default_run(tmp_path: Path) -> None:
    # The commands of a first hour, each as a user runs it (a new process, default options, both streams
    # read): fit, a resume, validate and test (the main config has no eval envs: the defaults), play,
    # play --video_folder into a new folder, export, launch of a small grid, results, tune.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "CI")}
    config = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
    small = ["--model.total_env_steps", "512", "--model.log_interval_steps", "256", "--model.epochs", "2"]
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({
        "base": config,
        "overrides": {"model.init_args.total_env_steps": 512, "model.init_args.log_interval_steps": 256},
        "levels": [{"seed_everything": [0, 1]}],
    }))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({
        "params": {"model.init_args.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
        "fixed": {"model.init_args.total_env_steps": 512, "model.init_args.log_interval_steps": 256,
                  "model.init_args.sampler.init_args.eval_n_envs": 2,
                  "model.init_args.sampler.init_args.eval_max_trajectories": 2},
    }))
    commands = [
        ["fit", "--config", config, *small],
        ["fit", "--config", config, *small[2:], "--model.total_env_steps", "768", "--ckpt_path", "last"],
        ["validate", "--config", config, "--ckpt_path", "last"],
        ["test", "--config", config, "--ckpt_path", "last"],
        ["play", "runs/ppo_cartpole", "--episodes", "1"],
        ["play", "runs/ppo_cartpole", "--episodes", "1", "--video_folder", "videos"],
        ["export", "runs/ppo_cartpole", "--format", "onnx", "torchscript"],
        ["launch", "grid.yaml", "--grid_dir", "grid"],
        ["results", "grid"],
        ["tune", config, "space.yaml", "--n_trials", "1", "--study_dir", "study"],
    ]
    for command in commands:
        result = subprocess.run([sys.executable, "-m", "lightning_rl", *command], cwd=tmp_path, capture_output=True,
                                text=True, timeout=600, env=env)
        output = result.stdout + result.stderr
        assert result.returncode == 0, (command, output[-3000:])
        warned = [line for line in output.splitlines() if re.search("warn", line, re.IGNORECASE)]
        assert warned == [], (command, warned)
        noise = [line for line in output.splitlines() if "XDG_RUNTIME_DIR" in line or "litlogger" in line]
        assert noise == [], (command, noise)
    assert list((tmp_path / "videos").glob("*.mp4"))
    assert not (tmp_path / "config.yaml").exists()  # validate/test wrote nothing into the working directory
