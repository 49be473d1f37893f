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
from gymnasium import spaces

from lightning_rl.agents import CategoricalPgAgent, DqnAgent
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


def test_an_agent_acting_in_a_dict_action_space_is_refused_with_the_reason(tmp_path):
    class OwnAgent(BaseAgent):
        def make_model(self, env_spaces):
            return torch.nn.Linear(5, 2)

    action = from_gymnasium(spaces.Dict({"steer": spaces.Discrete(3), "speed": spaces.Box(0.0, 1.0, (1,))}))
    agent = OwnAgent()
    agent.initialize(EnvSpaces(VECTOR, action))
    with pytest.raises(ValueError, match="OwnAgent acts in the dict/tuple action space .* returns one action array"):
        export_agent(agent, tmp_path, ["onnx"])
    assert not list(tmp_path.iterdir())  # refused before writing anything


class GruModel(torch.nn.Module):
    """A recurrent network whose state is one GRU tensor, not an LSTM's (h, c)."""

    def __init__(self, observation_shape, action_size):
        super().__init__()
        self.gru = torch.nn.GRU(observation_shape[0], 4)
        self.pi = torch.nn.Linear(4, action_size)

    def forward(self, observation, prev_action, prev_reward, init_rnn_state=None):
        out, h = self.gru(observation.unsqueeze(0), init_rnn_state)
        return torch.softmax(self.pi(out[0]), -1), out[0, :, 0], h


def test_a_recurrent_state_that_is_no_lstm_pair_is_refused_with_the_reason(tmp_path):
    agent = CategoricalPgAgent(lstm_size=4, model=GruModel)
    agent.initialize(EnvSpaces(VECTOR, IntBox(0, 2)))
    with pytest.raises(ValueError, match="GruModel's recurrent state is not an LSTM \\(h, c\\) pair"):
        export_agent(agent, tmp_path, ["torchscript"])
    assert not list(tmp_path.iterdir())


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
