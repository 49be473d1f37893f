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

from lightning_rl.algos.checkpointing import migrate_hyperparameters
from lightning_rl.cli import main
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


@pytest.mark.parametrize("name", ["ppo_cartpole", "dqn_cartpole"])
def test_a_checkpoint_of_version_0_1_0_loads_from_python(name):
    from lightning_rl.agents import CategoricalPgAgent, DqnAgent
    from lightning_rl.algos import DQN, PPO
    from lightning_rl.samplers import SerialSampler

    path = FIXTURES / f"{name}.ckpt"
    old = torch.load(path, weights_only=True)
    # 0.1 named the optimizer ("adam") where today takes a class path; its checkpoints carry no
    # config, so the agent and sampler are given, as the config had them.
    if name == "ppo_cartpole":
        module = PPO.load_from_checkpoint(path, agent=CategoricalPgAgent(hidden_sizes=[64, 64]),
                                          sampler=SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=8))
    else:
        module = DQN.load_from_checkpoint(path, agent=DqnAgent(hidden_sizes=[64, 64]),
                                          sampler=SerialSampler(env_id="CartPole-v1", batch_T=256, batch_B=1))
    assert module.optimizer is None  # "adam": today's default Adam
    assert module.train_state.env_steps == 512
    for key, value in old["state_dict"].items():
        if torch.is_tensor(value):
            assert torch.equal(module.state_dict()[key], value), key


def test_migrate_config_turns_class_text_into_import_paths_and_names_callables():
    from lightning_rl.algos.checkpointing import migrate_config

    old = {"class_path": "lightning_rl.algos.PPO", "init_args": {
        "optimizer": "adam", "agent": {"class_path": "lightning_rl.agents.GaussianPgAgent", "init_args": {
            "model": {"class_path": "lightning_rl.models.GaussianPgMlpModel",
                      "init_args": {"hidden_nonlinearity": "<class 'torch.nn.modules.activation.Tanh'>",
                                    "hidden_sizes": [64, 64]}}}}}}
    new = migrate_config(old)
    model_args = new["init_args"]["agent"]["init_args"]["model"]["init_args"]
    assert model_args == {"hidden_nonlinearity": "torch.nn.modules.activation.Tanh", "hidden_sizes": [64, 64]}
    assert new["init_args"]["optimizer"] is None
    assert old["init_args"]["optimizer"] == "adam"  # a copy: the stored config is left alone
    with pytest.raises(ValueError, match=r"holds a callable as text \('<function f at 0x7f>'\)"):
        migrate_config({"init_args": {"noise": "<function f at 0x7f>"}})


def test_a_checkpoint_whose_config_holds_class_text_loads_with_nothing_but_its_path(tmp_path, monkeypatch):
    # What lightning_rl wrote before class-valued arguments were stored as import paths: the text
    # of the class object. load_from_checkpoint reads it as the class it names.
    from lightning_rl.algos import PPO

    monkeypatch.chdir(tmp_path)
    ckpt_dir = tmp_path / "ckpt"
    main(["fit", "--config", str(ROOT / "configs" / "ppo" / "halfcheetah.yaml"),
          "--model.sampler.init_args.batch_T", "8", "--model.sampler.init_args.batch_B", "2",
          "--model.sampler.init_args.max_decorrelation_steps", "0", "--model.minibatches", "1",
          "--model.epochs", "1", "--model.total_env_steps", "16", "--model.log_interval_steps", "16",
          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
          "--trainer.callbacks", f'[{{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", '
                                 f'"init_args": {{"dirpath": "{ckpt_dir}", "save_last": true}}}}]'])
    data = torch.load(ckpt_dir / "last.ckpt", weights_only=True)
    model_args = data["lightning_rl"]["config"]["init_args"]["agent"]["init_args"]["model"]["init_args"]
    assert model_args["hidden_nonlinearity"] == "torch.nn.Tanh"  # written as data today
    model_args["hidden_nonlinearity"] = "<class 'torch.nn.modules.activation.Tanh'>"
    torch.save(data, tmp_path / "old.ckpt")
    module = PPO.load_from_checkpoint(tmp_path / "old.ckpt")
    assert any(isinstance(m, torch.nn.Tanh) for m in module.agent.model.modules())
    for key, value in data["state_dict"].items():
        if torch.is_tensor(value):
            assert torch.equal(module.state_dict()[key], value), key
