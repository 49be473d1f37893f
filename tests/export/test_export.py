"""``lightning-rl export``: the files it writes, the command from a real checkpoint, and its errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
import yaml

from lightning_rl.cli import main
from lightning_rl.export import export_agent
from tests.export.agents import agent_actions, assert_actions, make_agent, sample

# torch 2.13 marks torch.jit deprecated; the TorchScript files are still loaded with it here.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")


def test_weights_file_and_spaces_yaml(tmp_path):
    from safetensors.torch import load_file

    agent, _ = make_agent("sac_mlp")
    export_agent(agent, tmp_path, ["torchscript"], name="pi")
    weights = load_file(str(tmp_path / "pi.safetensors"))
    np.testing.assert_allclose(weights["action_scale"].numpy(), [2.0, 0.25])
    np.testing.assert_allclose(weights["action_bias"].numpy(), [1.0, 0.25])
    for key, value in agent.model.state_dict().items():
        assert torch.equal(weights[f"model.{key}"], value), key
    assert not any("q1" in k or "target" in k for k in weights)  # the policy only, no critics

    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    assert info["action"] == {"type": "Box", "shape": [2], "dtype": "float32", "low": [-1.0, 0.0], "high": [3.0, 0.5]}
    assert info["observation"] == {"type": "Box", "shape": [5], "dtype": "float32", "low": -np.inf, "high": np.inf}
    assert info["policy"]["input"] == {"name": "observation", "shape": ["batch", 5], "dtype": "float32"}
    assert info["policy"]["output"] == {"name": "action", "shape": ["batch", 2], "dtype": "float32"}
    assert info["policy"]["files"] == {"torchscript": "pi.pt", "safetensors": "pi.safetensors"}


def test_spaces_yaml_of_atari_frames_and_discrete_actions(tmp_path):
    agent, _ = make_agent("dqn_atari_cnn")
    export_agent(agent, tmp_path, ["torchscript"])
    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    # IntBox(0, 256) is gymnasium's Box(0, 255): IntBox's high is exclusive.
    assert info["observation"] == {"type": "Box", "shape": [4, 84, 84], "dtype": "uint8", "low": 0, "high": 255}
    assert info["action"] == {"type": "Discrete", "n": 6, "start": 0, "dtype": "int64"}
    assert info["policy"]["input"]["dtype"] == "uint8"
    assert info["policy"]["output"] == {"name": "action", "shape": ["batch"], "dtype": "int64"}


def test_bad_format_and_name(tmp_path):
    agent, _ = make_agent("dqn_mlp")
    with pytest.raises(ValueError, match=r"format \['tflite'\] is not one of \['onnx', 'torchscript'\]"):
        export_agent(agent, tmp_path, ["tflite"])
    with pytest.raises(ValueError, match="name='a/b' must be a plain file stem"):
        export_agent(agent, tmp_path, ["onnx"], name="a/b")


# -- the command, from a real checkpoint ------------------------------------------------------------------


@pytest.fixture()
def tiny_run(tmp_path, monkeypatch, capsys) -> Path:
    """A PPO CartPole run of 512 env steps (no evaluation, so its checkpoint is last.ckpt)."""
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", "512",
          "--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
          "--trainer.enable_progress_bar", "false"])
    capsys.readouterr()
    (run_dir,) = (tmp_path / "runs" / "ppo_cartpole").iterdir()
    return run_dir


def run_export(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(["export", *args])
    return int(exit_info.value.code or 0)


def test_export_command_from_a_fit_checkpoint(tiny_run, capsys):
    from lightning_rl.algos import PPO

    assert run_export([str(tiny_run), "--format", "onnx", "torchscript"]) == 0
    out_dir = tiny_run / "export" / "last"  # a run directory means its best.ckpt, else last.ckpt
    out = capsys.readouterr().out
    assert f"exported {tiny_run / 'checkpoints' / 'last.ckpt'} (lightning_rl.algos.ppo.PPO, CartPole-v1, 512 env" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["policy.onnx", "policy.pt", "policy.safetensors",
                                                         "spaces.yaml"]
    agent = PPO.load_from_checkpoint(tiny_run / "checkpoints" / "last.ckpt").agent
    observation = sample(agent.env_spaces.observation).astype(np.float32)
    expected = agent_actions(agent, observation)
    session = onnxruntime.InferenceSession(str(out_dir / "policy.onnx"), providers=["CPUExecutionProvider"])
    assert_actions(session.run(["action"], {"observation": observation})[0], expected, discrete=True)
    scripted = torch.jit.load(str(out_dir / "policy.pt"))
    assert_actions(scripted(torch.from_numpy(observation)).numpy(), expected, discrete=True)
    info = yaml.safe_load((out_dir / "spaces.yaml").read_text())
    assert info["action"] == {"type": "Discrete", "n": 2, "start": 0, "dtype": "int64"}
    assert info["source"]["env_steps"] == 512 and info["source"]["env_id"] == "CartPole-v1"


def test_export_command_with_out_and_a_checkpoint_path(tiny_run, tmp_path, capsys):
    ckpt = tiny_run / "checkpoints" / "last.ckpt"
    assert run_export([str(ckpt), "--format", "torchscript", "--out", str(tmp_path / "out"), "--name", "cartpole"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["cartpole.pt", "cartpole.safetensors",
                                                                    "spaces.yaml"]


def error_of(args: list[str], capsys) -> str:
    assert run_export(args) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("lightning-rl export: error: ")  # argparse prints its usage first
    return err


def test_missing_file_is_an_error(tmp_path, capsys):
    err = error_of([str(tmp_path / "nope.ckpt"), "--format", "onnx"], capsys)
    assert "nope.ckpt does not exist" in err


def test_directory_without_a_run_is_an_error(tmp_path, capsys):
    assert "neither a run directory (config.yaml) nor a group of runs" in error_of(
        [str(tmp_path), "--format", "onnx"], capsys)


def test_checkpoint_from_elsewhere_is_an_error(tmp_path, capsys):
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {"layer.weight": torch.zeros(2, 2)}, "epoch": 3}, path)
    assert "was not written by a lightning_rl run" in error_of([str(path), "--format", "onnx"], capsys)


def test_checkpoint_that_needs_unpickling_is_refused(tmp_path, capsys):
    path = tmp_path / "pickled.ckpt"
    torch.save({"state_dict": {}, "args": argparse.Namespace(lr=1.0)}, path)
    assert "refusing to load" in error_of([str(path), "--format", "onnx"], capsys)


def test_file_that_is_no_checkpoint_is_an_error(tmp_path, capsys):
    path = tmp_path / "notes.ckpt"
    path.write_text("not a checkpoint")
    assert "notes.ckpt is not a checkpoint" in error_of([str(path), "--format", "onnx"], capsys)


def test_unknown_format_is_a_usage_error(tmp_path, capsys):
    err = error_of([str(tmp_path), "--format", "tflite"], capsys)
    assert "invalid choice: 'tflite'" in err


def test_missing_package_names_the_extra(tiny_run, monkeypatch, capsys):

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    err = error_of([str(tiny_run), "--format", "onnx"], capsys)
    assert "onnxruntime is not installed: pip install 'lightning-rl[export]'" in err
    assert not (tiny_run / "export").exists()  # nothing written
