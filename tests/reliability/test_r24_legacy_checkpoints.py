"""Checkpoints written by lightning_rl 0.1.0 (before pure losses, optimizers by class path and the
``timeout`` -> ``truncated`` rename) keep loading and resume training.

``tests/fixtures/v0_1_0/`` holds the ``last.ckpt`` of 512-env-step runs of the shipped PPO and
DQN CartPole configs made with that version (the DQN one with its replay side file).
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import torch

from lightning_rl.cli import main, migrate_hyperparameters
from lightning_rl.envs.gymnasium import InfoFilter

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "v0_1_0"


@pytest.mark.parametrize("name", ["ppo_cartpole", "dqn_cartpole"])
def test_a_checkpoint_of_version_0_1_0_resumes_to_a_larger_budget(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for f in FIXTURES.glob(f"{name}.ckpt*"):
        shutil.copy(f, tmp_path / f.name)
    old = torch.load(tmp_path / f"{name}.ckpt", weights_only=True)
    assert old["lightning_rl"]["train_state"]["env_steps"] == 512
    algo, env = name.split("_")
    extra = []
    if algo == "dqn":
        extra = ["--model.init_args.min_steps_learn", "256", "--model.init_args.replay_size", "2048"]
    ckpt_dir = tmp_path / "ckpt"
    main(["fit", "--config", str(ROOT / "configs" / algo / f"{env}.yaml"), *extra,
          "--model.init_args.total_env_steps", "1024", "--model.init_args.log_interval_steps", "256",
          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
          "--trainer.callbacks", f'[{{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", '
                                 f'"init_args": {{"dirpath": "{ckpt_dir}", "save_last": true}}}}]',
          "--ckpt_path", str(tmp_path / f"{name}.ckpt")])
    new = torch.load(ckpt_dir / "last.ckpt", weights_only=True)
    # The command line's larger budget wins over the checkpoint's saved one (and says so): two
    # more sampler iterations of 256 env steps after the restored 512, the counters going on.
    assert "with the config's total_env_steps=1024 (checkpoint: 512)" in capsys.readouterr().err
    assert new["lightning_rl"]["train_state"]["env_steps"] == 1024
    assert new["lightning_rl"]["train_state"]["itr"] == old["lightning_rl"]["train_state"]["itr"] + 2
    if algo == "dqn":
        # The replay came back from the old side file (its "timeout" arrays) and grew by 512 rows.
        [side] = ckpt_dir.glob("last.ckpt.replay-*")
        replay = torch.load(side, weights_only=True)["replay"]
        assert "samples.truncated" in replay["storage"]
        old_replay = torch.load(tmp_path / f"{name}.ckpt.replay", weights_only=True)
        assert torch.equal(replay["storage"]["samples.observation"][:512],
                           old_replay["storage"]["samples.observation"][:512])


def test_old_optimizer_names_become_todays_optimizer_argument():
    assert migrate_hyperparameters({"optimizer": "adam", "learning_rate": 1e-3})["optimizer"] is None
    rmsprop = migrate_hyperparameters({"optimizer": "rmsprop", "optimizer_eps": 1e-5})["optimizer"]
    assert rmsprop == {"class_path": "torch.optim.RMSprop", "init_args": {"alpha": 0.99, "eps": 1e-5}}
    assert migrate_hyperparameters({"discount": 0.9}) == {"discount": 0.9}


def test_envs_pickled_with_a_timeout_info_field_fill_the_truncated_field_after_loading():
    legacy = InfoFilter({"lives": 3}, "EnvInfo", ("timeout", "terminated"))
    restored = pickle.loads(pickle.dumps(legacy))
    assert restored.leading == ("truncated", "terminated")
    info = restored({"lives": 2}, True, False)
    assert info.truncated is True and info.terminated is False and info.lives == 2
