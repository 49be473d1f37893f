"""``lightning-rl export``: the written TorchScript and ONNX policies act as the agent does.

The parity tests are CI's export tests: for MLP and Atari-CNN agents with discrete and continuous
actions, the ONNX file run in onnxruntime and the TorchScript file run in torch give the agent's own
deterministic actions (``agent.step`` in eval mode, computed here) on 100 observations sampled from
the observation space: exactly for discrete actions, within 1e-5 for continuous ones.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from lightning_rl.agents import (
    CatDqnAgent,
    CategoricalPgAgent,
    DqnAgent,
    GaussianPgAgent,
    R2d1Agent,
    SacAgent,
    Td3Agent,
)
from lightning_rl.agents.base import BaseAgent
from lightning_rl.cli import main
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.export import export_agent, policy_of
from lightning_rl.spaces import FloatBox, IntBox

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
pytest.importorskip("safetensors")

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")

VECTOR = FloatBox(-np.inf, np.inf, shape=(5,))
FRAMES = IntBox(0, 256, shape=(4, 84, 84), dtype=np.uint8)  # Atari's stack of four 84x84 grey frames
# Asymmetric bounds: scale (high - low) / 2 = [2, 0.25], bias (high + low) / 2 = [1, 0.25].
BOUNDED = FloatBox(np.array([-1.0, 0.0]), np.array([3.0, 0.5]))


def make_agent(name: str) -> tuple[BaseAgent, bool]:
    """An initialized agent with random weights, and whether its actions are discrete."""
    agents = {
        "categorical_pg_mlp": (lambda: CategoricalPgAgent(hidden_sizes=(16, 16), normalize_observation=True),
                               VECTOR, IntBox(0, 3)),
        "gaussian_pg_mlp": (lambda: GaussianPgAgent(hidden_sizes=(16, 16), normalize_observation=True),
                            VECTOR, FloatBox(-1.0, 1.0, shape=(3,))),
        "dqn_mlp": (lambda: DqnAgent(hidden_sizes=(16,), dueling=True, eps_eval=0.0), VECTOR, IntBox(0, 4)),
        "c51_mlp": (lambda: CatDqnAgent(hidden_sizes=(16,), n_atoms=11, V_min=-2.0, V_max=3.0, eps_eval=0.0),
                    VECTOR, IntBox(0, 3)),
        "td3_mlp": (lambda: Td3Agent(hidden_sizes=(16, 16), q_hidden_sizes=(8,)), VECTOR, BOUNDED),
        "sac_mlp": (lambda: SacAgent(hidden_sizes=(16, 16), q_hidden_sizes=(8,)), VECTOR, BOUNDED),
        "categorical_pg_atari_cnn": (lambda: CategoricalPgAgent(), FRAMES, IntBox(0, 6)),
        "dqn_atari_cnn": (lambda: DqnAgent(eps_eval=0.0), FRAMES, IntBox(0, 6)),
    }
    build, observation, action = agents[name]
    torch.manual_seed(0)
    agent = build()
    agent.initialize(EnvSpaces(observation, action))
    rms = getattr(getattr(agent.model, "encoder", None), "obs_rms", None)
    if rms is not None:
        # Statistics far from (0, 1), so a graph without the normalisation acts differently.
        rms.mean.copy_(torch.linspace(-2.0, 3.0, rms.mean.numel()))
        rms.var.copy_(torch.linspace(0.1, 9.0, rms.var.numel()))
    with torch.no_grad():
        for p in agent.model.parameters():  # larger weights than the init: means well away from 0
            p.mul_(3.0)
    return agent, isinstance(action, IntBox)


def sample(space, n: int = 100, seed: int = 123) -> np.ndarray:
    space.seed(seed)
    return np.stack([np.asarray(space.sample()) for _ in range(n)])


def agent_actions(agent: BaseAgent, observation: np.ndarray) -> np.ndarray:
    """The agent's own deterministic evaluation actions (exploration off)."""
    agent.eval_mode(0)
    agent.eval_deterministic = True
    B = observation.shape[0]
    null = np.asarray(agent.env_spaces.action.null_value())
    prev_action = np.broadcast_to(null, (B, *null.shape)).copy()
    return agent.step(observation, prev_action, np.zeros(B, dtype=np.float32)).action.numpy()


def assert_actions(got: np.ndarray, expected: np.ndarray, discrete: bool) -> None:
    assert got.shape == expected.shape
    if discrete:
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
    else:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=0.0, atol=1e-5)


AGENTS = ["categorical_pg_mlp", "gaussian_pg_mlp", "dqn_mlp", "c51_mlp", "td3_mlp", "sac_mlp",
          "categorical_pg_atari_cnn", "dqn_atari_cnn"]


@pytest.mark.parametrize("name", AGENTS)
def test_onnx_and_torchscript_files_act_as_the_agent_on_100_observations(name, tmp_path):
    agent, discrete = make_agent(name)
    written = export_agent(agent, tmp_path, ["torchscript", "onnx"])
    observation = sample(agent.env_spaces.observation)
    expected = agent_actions(agent, observation)

    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    (onnx_actions,) = session.run(["action"], {"observation": observation})
    assert_actions(onnx_actions, expected, discrete)

    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    assert_actions(scripted(torch.from_numpy(observation)).numpy(), expected, discrete)
    assert set(written) == {"torchscript", "onnx", "safetensors", "spaces"}


def test_discrete_actions_are_not_all_one_action():
    """The parity above means something only if the policies' actions vary with the observation."""
    for name in ("categorical_pg_mlp", "dqn_mlp", "c51_mlp", "categorical_pg_atari_cnn"):
        agent, _ = make_agent(name)
        assert len(np.unique(agent_actions(agent, sample(agent.env_spaces.observation)))) > 1, name


def test_observation_normalisation_is_inside_the_graph(tmp_path):
    agent, _ = make_agent("gaussian_pg_mlp")
    export_agent(agent, tmp_path, ["onnx"])
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    observation = sample(agent.env_spaces.observation, 5)
    before = session.run(["action"], {"observation": observation})[0]
    # x = mean exactly gives 0 after normalisation: the first layer sees zeros, the output is the
    # mean head's bias path alone, the same for every row.
    rms = agent.model.encoder.obs_rms
    at_mean = np.broadcast_to(rms.mean.numpy(), observation.shape).copy()
    out = session.run(["action"], {"observation": at_mean})[0]
    np.testing.assert_allclose(out, np.broadcast_to(out[0], out.shape), atol=1e-6)
    assert not np.allclose(before, out[0], atol=1e-3)
    assert yaml.safe_load((tmp_path / "spaces.yaml").read_text())["policy"]["observation_normalization"] is True


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


@pytest.mark.parametrize(
    ("agent", "action", "match"),
    [
        (lambda: R2d1Agent(hidden_sizes=(8,), lstm_size=8, head_size=8), IntBox(0, 2), "R2d1Agent is recurrent"),
        (lambda: CategoricalPgAgent(hidden_sizes=(8,), lstm_size=8), IntBox(0, 2), "CategoricalPgAgent is recurrent"),
        (lambda: CategoricalPgAgent(hidden_sizes=(8,)), IntBox(0, 3, shape=(2,)), "only a Discrete action space"),
    ],
)
def test_unsupported_agents_are_refused_with_the_reason(agent, action, match, tmp_path):
    built = agent()
    built.initialize(EnvSpaces(VECTOR, action))
    with pytest.raises(ValueError, match=match):
        export_agent(built, tmp_path, ["onnx"])
    assert not list(tmp_path.iterdir())  # refused before writing anything


def test_an_agent_family_without_a_known_deterministic_policy_is_refused():
    class OwnAgent(BaseAgent):
        def make_model(self, env_spaces):
            return torch.nn.Linear(5, 2)

    agent = OwnAgent()
    agent.initialize(EnvSpaces(VECTOR, IntBox(0, 2)))
    with pytest.raises(ValueError, match="no deterministic policy known for the agent OwnAgent"):
        policy_of(agent)
    with pytest.raises(ValueError, match="not initialized"):
        policy_of(DqnAgent())


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
    assert "no checkpoint in" in error_of([str(tmp_path), "--format", "onnx"], capsys)


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
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    err = error_of([str(tiny_run), "--format", "onnx"], capsys)
    assert "onnxruntime is not installed: pip install 'lightning-rl[export]'" in err
    assert not (tiny_run / "export").exists()  # nothing written
