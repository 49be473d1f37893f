"""Resuming from a checkpoint of another run is refused before any env worker starts, with a
``ValueError`` (the CLI: exit 2) naming every field that differs: env id, number of envs,
observation or action space, algorithm."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import A2C, PPO
from lightning_rl.algos.checkpointing import check_resume
from lightning_rl.cli import main
from lightning_rl.runs import newest_checkpoint
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")


def ppo(env_id: str = "CartPole-v1", batch_B: int = 2, cls: type = PPO, **env_kwargs) -> PPO:
    sampler = SerialSampler(env_id=env_id, batch_T=32, batch_B=batch_B, env_kwargs=env_kwargs or None)
    kwargs = dict(minibatches=1, epochs=1) if cls is PPO else {}
    return cls(CategoricalPgAgent(hidden_sizes=[8]), sampler, log_interval_steps=64, linear_lr_schedule=False, **kwargs)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("r06")
    pl.seed_everything(0)
    make_trainer(max_epochs=1, callbacks=[ModelCheckpoint(dirpath=tmp, save_last=True)]).fit(ppo())
    return tmp / "last.ckpt"


@pytest.mark.parametrize(
    "other, fields",
    [
        (lambda: ppo("Acrobot-v1"), ["env_id", "observation_space", "action_space"]),
        (lambda: ppo(batch_B=4), ["batch_B"]),
        (lambda: ppo(cls=A2C), ["algorithm"]),
    ],
)
def test_another_run_is_refused_naming_the_fields(saved, other, fields):
    with pytest.raises(ValueError, match="cannot resume") as error:
        check_resume(other(), saved)
    message = str(error.value)
    for field in fields:
        assert f"{field}: checkpoint has" in message
    named = {line.split(":")[0].strip() for line in message.splitlines()[1:]}
    assert named == set(fields)


def test_a_changed_space_alone_is_named(tmp_path):
    # FrozenLake's observation space grows with the map size, the env id staying the same.
    pl.seed_everything(0)
    small = ppo("FrozenLake-v1", map_name="4x4", is_slippery=False)
    make_trainer(max_epochs=1, callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)]).fit(small)
    with pytest.raises(ValueError) as error:
        check_resume(ppo("FrozenLake-v1", map_name="8x8", is_slippery=False), tmp_path / "last.ckpt")
    assert [line.split(":")[0].strip() for line in str(error.value).splitlines()[1:]] == ["observation_space"]


def test_the_same_run_resumes(saved):
    check_resume(ppo(), saved)
    make_trainer(max_epochs=2).fit(ppo(), ckpt_path=str(saved))


def test_python_api_refuses_in_on_load_checkpoint(saved):
    with pytest.raises(ValueError, match="env_id: checkpoint has 'CartPole-v1', this run has 'Acrobot-v1'"):
        make_trainer(max_epochs=2).fit(ppo("Acrobot-v1"), ckpt_path=str(saved))


def test_cli_exits_2_naming_the_field_before_workers_start(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    quiet = ["--trainer.enable_progress_bar", "false", "--model.init_args.total_env_steps", "512",
             "--model.init_args.log_interval_steps", "256"]
    main(["fit", "--config", CARTPOLE, *quiet])
    ckpt = newest_checkpoint(tmp_path / "runs" / "ppo_cartpole")
    assert torch.load(ckpt, weights_only=True)["lightning_rl"]["run"]["batch_B"] == 8
    # A parallel sampler would start its workers in setup: the refusal comes before it.
    started = []
    monkeypatch.setattr("lightning_rl.samplers.base.BaseSampler.initialize", lambda *a, **k: started.append(1))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *quiet, "--model.init_args.sampler.init_args.batch_B", "4",
              "--ckpt_path", "last"])
    assert exit_info.value.code == 2 and not started
    assert "batch_B: checkpoint has 8, this run has 4" in capsys.readouterr().err
