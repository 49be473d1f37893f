"""Multi-agent agents export one policy per sub-agent, or one shared policy every agent calls.

Hand-built independent policies (agent_0 moves by the largest of its first five observed values,
agent_1 by the smallest) show that ``policy.agent_0.*`` is agent_0's network fed agent_0's
observation; a shared recurrent policy, called by each agent with its own state, reproduces the
multi-agent agent's own actions over a rollout.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch
import yaml

from lightning_rl.agents import CategoricalPgAgent, MultiAgent
from lightning_rl.envs import CoopGridEnv
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.export import export_agent, policy_of
from lightning_rl.spaces import from_gymnasium
from tests.export.agents import agent_rollout

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

NAMES = ("agent_0", "agent_1")


def coop_grid_spaces(observation_mode: str) -> EnvSpaces:
    env = CoopGridEnv(observation_mode=observation_mode)
    return EnvSpaces(from_gymnasium(env.observation_space), from_gymnasium(env.action_space))


def observations(spaces: EnvSpaces, n: int, seed: int) -> object:
    space = spaces.observation
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    if spaces.observation.__class__.__name__ != "Composite":
        return np.stack(samples).astype(np.float32)
    return space.NamedTupleCls(*(np.stack([s[i] for s in samples]) for i in range(len(NAMES))))


def run_file(path, observation: np.ndarray) -> np.ndarray:
    if path.suffix == ".onnx":
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return session.run(["action"], {"observation": observation})[0]
    return torch.jit.load(str(path))(torch.from_numpy(observation)).numpy()


@pytest.mark.parametrize("observation_mode", ["per_agent", "shared"])
def test_independent_policies_are_one_file_per_agent_fed_its_own_observation(observation_mode, tmp_path):
    spaces = coop_grid_spaces(observation_mode)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=()))
    agent.initialize(spaces)
    size = 6 if observation_mode == "per_agent" else 8
    for name, sign in zip(NAMES, (1.0, -1.0), strict=True):
        weight = np.zeros((5, size), dtype=np.float32)
        weight[:, :5] = 10.0 * sign * np.eye(5)  # agent_0: argmax of values 0..4; agent_1: argmin
        with torch.no_grad():
            pi = agent.agents[name].model.head.pi.model[0]
            pi.weight.copy_(torch.as_tensor(weight))
            pi.bias.zero_()
    written = export_agent(agent, tmp_path, ["torchscript", "onnx"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "policy.agent_0.onnx", "policy.agent_0.pt", "policy.agent_0.safetensors",
        "policy.agent_1.onnx", "policy.agent_1.pt", "policy.agent_1.safetensors", "spaces.yaml",
    ]
    assert written["torchscript.agent_1"] == tmp_path / "policy.agent_1.pt"

    observation = observations(spaces, 40, seed=3)
    own = {n: getattr(observation, n) if observation_mode == "per_agent" else observation for n in NAMES}
    expected = {"agent_0": own["agent_0"][:, :5].argmax(axis=1), "agent_1": own["agent_1"][:, :5].argmin(axis=1)}
    step = agent_rollout(agent, [observation], np.zeros((1, 40)))[0]
    for name in NAMES:
        np.testing.assert_array_equal(getattr(step, name), expected[name])  # the construction, by hand
        for suffix in ("pt", "onnx"):
            got = run_file(tmp_path / f"policy.{name}.{suffix}", own[name])
            np.testing.assert_array_equal(got, expected[name], err_msg=f"{name}.{suffix}")

    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    assert info["policy"] == {"agent": "lightning_rl.agents.multiagent.MultiAgent", "share_parameters": False}
    assert list(info["agents"]) == list(NAMES)
    for name in NAMES:
        entry = info["agents"][name]
        assert entry["action"] == {"type": "Discrete", "n": 5, "start": 0, "dtype": "int64"}
        assert entry["observation"]["shape"] == [size]
        assert entry["policy"]["acts_for"] == [name]
        assert entry["policy"]["files"] == {"torchscript": f"policy.{name}.pt", "onnx": f"policy.{name}.onnx",
                                            "safetensors": f"policy.{name}.safetensors"}
        assert entry["policy"]["input"] == {"name": "observation", "shape": ["batch", size], "dtype": "float32"}
    assert info["action"]["type"] == "Dict" and list(info["action"]["spaces"]) == list(NAMES)


def test_a_shared_recurrent_policy_reproduces_every_agent_with_its_own_state(tmp_path):
    spaces = coop_grid_spaces("per_agent")
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,), lstm_size=8), share_parameters=True)
    agent.initialize(spaces)
    with torch.no_grad():
        for p in agent.parameters():
            p.mul_(3.0)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "policy.shared.onnx", "policy.shared.pt", "policy.shared.safetensors", "spaces.yaml"
    ]
    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    assert info["policy"]["share_parameters"] is True
    for name in NAMES:
        assert info["agents"][name]["policy"]["files"]["onnx"] == "policy.shared.onnx"
        assert info["agents"][name]["policy"]["acts_for"] == list(NAMES)
        assert info["agents"][name]["policy"]["recurrent"]["hidden_size"] == 8

    T, B = 5, 3
    steps = [observations(spaces, B, seed=10 + t) for t in range(T)]
    rewards = np.random.default_rng(6).normal(size=(T, B)).astype(np.float32)
    rewards[0] = 0.0
    expected = agent_rollout(agent, steps, rewards)
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.shared.onnx"), providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(str(tmp_path / "policy.shared.pt"))
    names = ["observation", "prev_action", "prev_reward", "rnn_state_h", "rnn_state_c"]
    runs = {
        "onnx": lambda *x: session.run(None, dict(zip(names, x, strict=True))),
        "torchscript": lambda *x: [t.numpy() for t in scripted(*(torch.from_numpy(a) for a in x))],
    }
    for fmt, run in runs.items():
        for name in NAMES:  # each agent its own calls, its own state and its own previous action
            h = c = np.zeros((1, B, 8), dtype=np.float32)
            prev_action = np.zeros(B, dtype=np.int64)
            actions = []
            for t in range(T):
                prev_action, h, c = run(getattr(steps[t], name), prev_action, rewards[t], h, c)
                actions.append(prev_action)
            np.testing.assert_array_equal(np.stack(actions), np.stack([getattr(a, name) for a in expected]),
                                          err_msg=f"{fmt} {name}")
    assert not np.array_equal(*(np.stack([getattr(a, n) for a in expected]) for n in NAMES))


def test_policy_of_a_multi_agent_agent_points_to_export_agent():
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)))
    agent.initialize(coop_grid_spaces("per_agent"))
    with pytest.raises(ValueError, match="MultiAgent is a multi-agent agent .* export_agent writes one per sub-agent"):
        policy_of(agent)
