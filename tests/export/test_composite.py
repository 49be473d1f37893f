"""Dict and tuple observations export as one input per leaf; MultiDiscrete and MultiBinary actions
as one integer array.

Hand-built policies route each leaf to a known part of the action (a dict's ``goal.row`` picks the
first action dim, its ``goal.col`` the second; a tuple's fields set given bits), so a file that
feeds a leaf to the wrong place acts differently; an LSTM policy on a dict with an image, a
discrete field and a vector reproduces the agent's own actions over a rollout.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch
import yaml
from gymnasium import spaces

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.export import export_agent
from lightning_rl.spaces import from_gymnasium
from tests.export.agents import agent_rollout

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

GOAL_AND_NOISE = spaces.Dict({
    "goal": spaces.Dict({"row": spaces.Box(0.0, 1.0, (3,), np.float32), "col": spaces.Discrete(4)}),
    "noise": spaces.Box(-1.0, 1.0, (5,), np.float64),
})
PICK = spaces.MultiDiscrete([3, 4], start=[1, -2])


def hand_built(observation: spaces.Space, action: spaces.Space, pi_weight: np.ndarray) -> CategoricalPgAgent:
    """A categorical agent without hidden layers whose policy logits are ``pi_weight @ features``."""
    agent = CategoricalPgAgent(hidden_sizes=())
    agent.initialize(EnvSpaces(from_gymnasium(observation), from_gymnasium(action)))
    with torch.no_grad():
        for p in agent.model.head.pi.parameters():
            p.zero_()
        agent.model.head.pi.model[0].weight.copy_(torch.as_tensor(pi_weight))
    return agent


def run_both(directory, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The action of ``policy.onnx`` (inputs by name) and ``policy.pt`` (in the given order)."""
    session = onnxruntime.InferenceSession(str(directory / "policy.onnx"), providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(str(directory / "policy.pt"))
    return {
        "onnx": session.run(["action"], inputs)[0],
        "torchscript": scripted(*(torch.from_numpy(x) for x in inputs.values())).numpy(),
    }


def test_dict_leaves_are_named_inputs_routed_as_the_agent_routes_them(tmp_path):
    # Features: one-hot goal.col (4) | goal.row (3) | noise (5), gymnasium's sorted key order.
    weight = np.zeros((7, 12), dtype=np.float32)
    weight[0:3, 4:7] = 5.0 * np.eye(3)  # action dim 0 (3 choices): the largest of goal.row
    weight[3:7, 0:4] = 5.0 * np.eye(4)  # action dim 1 (4 choices): goal.col
    agent = hand_built(GOAL_AND_NOISE, PICK, weight)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])

    rng = np.random.default_rng(0)
    row = rng.uniform(0.0, 1.0, (20, 3)).astype(np.float32)
    col = rng.integers(0, 4, 20)
    noise = rng.uniform(-1.0, 1.0, (20, 5)).astype(np.float32)
    # By hand: each dim's choice plus its start (1 and -2).
    expected = np.stack([row.argmax(axis=1) + 1, col - 2], axis=1)
    observation = agent.env_spaces.observation.NamedTupleCls(
        agent.env_spaces.observation.spaces[0].NamedTupleCls(col, row), noise
    )
    np.testing.assert_array_equal(agent_rollout(agent, [observation], np.zeros((1, 20)))[0], expected)
    for fmt, got in run_both(tmp_path, {"goal.col": col, "goal.row": row, "noise": noise}).items():
        assert got.dtype == np.int64, fmt
        np.testing.assert_array_equal(got, expected, err_msg=fmt)

    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    assert [(io["name"], io["shape"], io["dtype"]) for io in info["policy"]["inputs"]] == [
        ("goal.col", ["batch"], "int64"), ("goal.row", ["batch", 3], "float32"), ("noise", ["batch", 5], "float32"),
    ]
    assert info["policy"]["outputs"] == [{"name": "action", "shape": ["batch", 2], "dtype": "int64"}]
    assert info["action"] == {"type": "MultiDiscrete", "nvec": [3, 4], "start": [1, -2], "dtype": "int64"}
    assert info["observation"]["type"] == "Dict"
    assert info["observation"]["spaces"]["goal"]["spaces"]["col"] == {"type": "Discrete", "n": 4, "start": 0,
                                                                       "dtype": "int64"}


def test_tuple_fields_are_inputs_by_position_and_multibinary_actions_bits(tmp_path):
    observation = spaces.Tuple((spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Box(-1.0, 1.0, (2,), np.float32)))
    # Features: field 0 (3) | field 1 (2). The policy gives each bit a softmax over (0, 1): row 2d+1
    # is bit d's logit of 1. Bits: field0[0] > 0, field1[1] > 0, field0[2] > 0.
    weight = np.zeros((6, 5), dtype=np.float32)
    weight[1, 0] = weight[3, 4] = weight[5, 2] = 1.0
    agent = hand_built(observation, spaces.MultiBinary(3), weight)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])

    rng = np.random.default_rng(1)
    first = rng.uniform(-1.0, 1.0, (20, 3)).astype(np.float32)
    second = rng.uniform(-1.0, 1.0, (20, 2)).astype(np.float32)
    expected = np.stack([first[:, 0] > 0, second[:, 1] > 0, first[:, 2] > 0], axis=1).astype(np.int64)
    obs_space = agent.env_spaces.observation
    own = agent_rollout(agent, [obs_space.NamedTupleCls(first, second)], np.zeros((1, 20)))[0]
    np.testing.assert_array_equal(own, expected)
    for fmt, got in run_both(tmp_path, {"0": first, "1": second}).items():
        np.testing.assert_array_equal(got, expected, err_msg=fmt)
    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())
    assert [io["name"] for io in info["policy"]["inputs"]] == ["0", "1"]
    assert info["action"] == {"type": "MultiBinary", "n": 3, "dtype": "int8"}
    assert info["observation"]["type"] == "Tuple"


def test_an_lstm_policy_on_a_dict_with_an_image_reproduces_the_agent_over_a_rollout(tmp_path):
    observation = spaces.Dict({
        "camera": spaces.Box(0, 255, (8, 8, 3), np.uint8),  # channels last
        "goal": spaces.Discrete(5),
        "speed": spaces.Box(-2.0, 2.0, (2,), np.float32),
    })
    torch.manual_seed(0)
    agent = CategoricalPgAgent(hidden_sizes=(16,), lstm_size=8)
    agent.initialize(EnvSpaces(from_gymnasium(observation), from_gymnasium(PICK)))
    with torch.no_grad():
        for p in agent.model.parameters():
            p.mul_(3.0)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])

    T, B = 5, 3
    space = agent.env_spaces.observation
    space.seed(4)
    steps = [[space.sample() for _ in range(B)] for _ in range(T)]
    observations = [space.NamedTupleCls(*(np.stack([s[i] for s in step]) for i in range(3))) for step in steps]
    rewards = np.random.default_rng(5).normal(size=(T, B)).astype(np.float32)
    rewards[0] = 0.0
    expected = agent_rollout(agent, observations, rewards)
    assert len(np.unique(np.concatenate(expected), axis=0)) > 1

    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    names = ["camera", "goal", "speed", "prev_action", "prev_reward", "rnn_state_h", "rnn_state_c"]
    for fmt in ("onnx", "torchscript"):
        h = c = np.zeros((1, B, 8), dtype=np.float32)
        prev_action = np.zeros((B, 2), dtype=np.int64)
        for t in range(T):
            inputs = [*observations[t], prev_action, rewards[t], h, c]
            if fmt == "onnx":
                assert inputs[0].dtype == np.uint8
                prev_action, h, c = session.run(None, dict(zip(names, inputs, strict=True)))
            else:
                prev_action, h, c = (x.numpy() for x in scripted(*(torch.from_numpy(x) for x in inputs)))
            np.testing.assert_array_equal(prev_action, expected[t], err_msg=f"{fmt} at step {t}")
