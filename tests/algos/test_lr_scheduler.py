"""Any torch LR scheduler plugs in by class path: one per optimizer, stepped once per sampler
iteration, saved in checkpoints and resumed where it stopped."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent, SacAgent
from lightning_rl.algos import PPO, SAC
from lightning_rl.cli import main
from lightning_rl.envs import make_env
from lightning_rl.samplers import SerialSampler

ROOT = Path(__file__).resolve().parents[2]
STEP_LR = json.dumps({"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 1, "gamma": 0.5}})


def fit(tmp_path: Path, total_env_steps: int, *extra: str) -> dict:
    ckpt_dir = tmp_path / "ckpt"
    main(["fit", "--config", str(ROOT / "configs" / "ppo" / "cartpole.yaml"),
          "--model.init_args.linear_lr_schedule", "false", "--model.init_args.lr_scheduler", STEP_LR,
          "--model.init_args.total_env_steps", str(total_env_steps), "--model.init_args.log_interval_steps", "256",
          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
          "--trainer.callbacks", json.dumps([{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                                              "init_args": {"dirpath": str(ckpt_dir), "save_last": True}}]),
          *extra])
    return torch.load(ckpt_dir / "last.ckpt", weights_only=True)


def test_a_scheduler_from_the_config_steps_once_per_iteration_and_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Three iterations of 256 env steps: StepLR(step_size=1, gamma=0.5) halved lr 1e-3 three times.
    state = fit(tmp_path, 768)
    assert state["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(1e-3 * 0.5**3)
    assert state["lr_schedulers"][0]["last_epoch"] == 3
    # Resumed to five iterations: two more halvings, continuing from the saved scheduler.
    state = fit(tmp_path, 1280, "--ckpt_path", str(tmp_path / "ckpt" / "last.ckpt"))
    assert state["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(1e-3 * 0.5**5)
    assert state["lr_schedulers"][0]["last_epoch"] == 5


def test_linear_schedule_and_a_scheduler_together_are_refused():
    with pytest.raises(ValueError, match="linear_lr_schedule=True and an lr_scheduler both set the learning rate"):
        PPO(CategoricalPgAgent(), SerialSampler(env_id="CartPole-v1", batch_T=8, batch_B=2), minibatches=1,
            total_env_steps=64, lr_scheduler=functools.partial(torch.optim.lr_scheduler.StepLR, step_size=1))


def test_every_optimizer_gets_its_own_scheduler():
    module = SAC(SacAgent(hidden_sizes=[8], q_hidden_sizes=[8]), SerialSampler(env_id="Pendulum-v1"),
                 lr_scheduler=functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.9))
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    configs = module.configure_optimizers()
    assert len(configs) == 3  # policy, critics, alpha
    for config in configs:
        scheduler = config["lr_scheduler"]["scheduler"]
        assert isinstance(scheduler, torch.optim.lr_scheduler.ExponentialLR)
        assert scheduler.optimizer is config["optimizer"]
