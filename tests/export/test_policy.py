"""The exported policy acts as the agent does: CI's export parity tests.

For MLP and Atari-CNN agents with discrete and continuous actions, the ONNX file run in onnxruntime
and the TorchScript file run in torch give the agent's own deterministic actions (``agent.step`` in
eval mode, computed here) on 100 observations sampled from the observation space: exactly for
discrete actions, within 1e-5 for continuous ones.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch
import yaml

from lightning_rl.agents import CategoricalPgAgent, DqnAgent, R2d1Agent
from lightning_rl.agents.base import BaseAgent
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.export import export_agent, policy_of
from lightning_rl.spaces import IntBox, from_gymnasium
from tests.export.agents import AGENTS, VECTOR, agent_actions, assert_actions, make_agent, sample

# torch 2.13 marks torch.jit deprecated; the TorchScript files are still loaded with it here.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")


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


def test_dict_observations_are_refused(tmp_path):
    from gymnasium import spaces

    observation = from_gymnasium(spaces.Dict({"position": spaces.Box(-1.0, 1.0, (2,)), "goal": spaces.Discrete(3)}))
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    agent.initialize(EnvSpaces(observation, IntBox(0, 2)))
    with pytest.raises(ValueError, match="CategoricalPgAgent has dict/tuple observations"):
        export_agent(agent, tmp_path, ["onnx"])


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
