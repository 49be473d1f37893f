"""Recurrent policies export with their LSTM state as an input and an output.

A hand-built one-unit LSTM agent whose action is the sign of a running sum shows that the files
reproduce its actions over 5 steps when the state is carried, and not when it is reset every step
or the previous reward is left out; a hand-built LSTM that repeats its previous action shows that a
MultiDiscrete previous action enters in the space's own values. R2D1 and a Gaussian LSTM policy
with random weights reproduce the agent's own actions and next state over a rollout. The export's
own check catches a policy that drops its state or hands on a wrong one, and its reference for an
alternating agent (two halves of envs acting in turn) is the plain agent's.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import torch
import yaml
from gymnasium import spaces

from lightning_rl.agents import AlternatingR2d1Agent, CategoricalPgAgent, GaussianPgAgent, R2d1Agent
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.export import export_agent
from lightning_rl.spaces import FloatBox, IntBox, from_gymnasium
from tests.export.agents import VECTOR, agent_rollout, assert_actions, sample

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")

# Two envs: env 1 sees the negated observations and rewards of env 0.
OBSERVATIONS = np.array([1.0, -0.4, -1.0, 0.3, -0.2], dtype=np.float32)
REWARDS = np.array([0.0, 0.0, 0.0, 0.0, 0.5], dtype=np.float32)  # the previous step's reward; 0 at the start


def running_sum_agent() -> CategoricalPgAgent:
    """A one-unit LSTM whose cell adds ``tanh(x_t + r_{t-1})`` every step (input and forget gates
    and the output gate saturated at 1), and whose action is 1 exactly when the cell is positive."""
    agent = CategoricalPgAgent(hidden_sizes=(), lstm_size=1)
    agent.initialize(EnvSpaces(FloatBox(-10.0, 10.0, shape=(1,)), IntBox(0, 2)))
    state = {k: torch.zeros_like(v) for k, v in agent.model.state_dict().items()}
    # LSTM input [observation, one-hot previous action (2), previous reward]; gates i, f, g, o.
    state["lstm.lstm.weight_ih_l0"][2] = torch.tensor([1.0, 0.0, 0.0, 1.0])
    state["lstm.lstm.bias_ih_l0"][[0, 1, 3]] = 30.0
    state["head.pi.model.0.weight"][1, 0] = 1.0  # logits (0, h)
    agent.model.load_state_dict(state)
    return agent


def hand_actions(carry: bool, rewards: np.ndarray = REWARDS) -> np.ndarray:
    """``[5, 2]``: action 1 where ``c_t = sum_{s<=t} tanh(x_s + r_{s-1})`` (only the last term
    when the state is reset every step) is positive."""
    terms = np.tanh(OBSERVATIONS + rewards)
    cell = np.cumsum(terms) if carry else terms
    return np.stack([cell > 0, -cell > 0], axis=1).astype(np.int64)


def test_the_running_sum_agent_acts_as_computed_by_hand():
    # Cell 0.76, 0.38, -0.38, -0.09, 0.20 carried; 0.76, -0.38, -0.76, 0.29, 0.29 reset; without the
    # last previous reward (0.5) the last term is tanh(-0.2) and the carried cell -0.29.
    np.testing.assert_array_equal(hand_actions(carry=True)[:, 0], [1, 1, 0, 0, 1])
    np.testing.assert_array_equal(hand_actions(carry=False)[:, 0], [1, 0, 0, 1, 1])
    np.testing.assert_array_equal(hand_actions(carry=True, rewards=0 * REWARDS)[:, 0], [1, 1, 0, 0, 0])
    agent = running_sum_agent()
    observations = [np.array([[x], [-x]], dtype=np.float32) for x in OBSERVATIONS]
    rewards = np.stack([REWARDS, -REWARDS], axis=1)
    np.testing.assert_array_equal(np.stack(agent_rollout(agent, observations, rewards)), hand_actions(carry=True))


def run_files(tmp_path, reset_state: bool, rewards: np.ndarray = REWARDS) -> dict[str, np.ndarray]:
    """Each file's actions ``[5, 2]`` over the two envs' steps, the state carried or reset to zeros."""
    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])

    def onnx_step(*inputs):
        names = ["observation", "prev_action", "prev_reward", "rnn_state_h", "rnn_state_c"]
        return session.run(["action", "next_rnn_state_h", "next_rnn_state_c"], dict(zip(names, inputs, strict=True)))

    def torch_step(*inputs):
        return [t.numpy() for t in scripted(*(torch.from_numpy(x) for x in inputs))]

    out = {}
    for name, step in (("onnx", onnx_step), ("torchscript", torch_step)):
        h = c = np.zeros((1, 2, 1), dtype=np.float32)
        prev_action = np.zeros(2, dtype=np.int64)
        actions = []
        for x, r in zip(OBSERVATIONS, rewards, strict=True):
            if reset_state:
                h = c = np.zeros((1, 2, 1), dtype=np.float32)
            observation = np.array([[x], [-x]], dtype=np.float32)
            action, h, c = step(observation, prev_action, np.array([r, -r], dtype=np.float32), h, c)
            actions.append(action)
            prev_action = action
        out[name] = np.stack(actions)
    return out


def test_the_files_reproduce_the_actions_only_with_the_state_carried(tmp_path):
    export_agent(running_sum_agent(), tmp_path, ["torchscript", "onnx"])
    for fmt, actions in run_files(tmp_path, reset_state=False).items():
        np.testing.assert_array_equal(actions, hand_actions(carry=True), err_msg=fmt)
    for fmt, actions in run_files(tmp_path, reset_state=True).items():
        np.testing.assert_array_equal(actions, hand_actions(carry=False), err_msg=fmt)
        assert not np.array_equal(actions, hand_actions(carry=True)), fmt  # the state input matters
    for fmt, actions in run_files(tmp_path, reset_state=False, rewards=0 * REWARDS).items():
        np.testing.assert_array_equal(actions, hand_actions(carry=True, rewards=0 * REWARDS), err_msg=fmt)

    info = yaml.safe_load((tmp_path / "spaces.yaml").read_text())["policy"]
    assert [(io["name"], io["shape"], io["dtype"]) for io in info["inputs"]] == [
        ("observation", ["batch", 1], "float32"), ("prev_action", ["batch"], "int64"),
        ("prev_reward", ["batch"], "float32"), ("rnn_state_h", [1, "batch", 1], "float32"),
        ("rnn_state_c", [1, "batch", 1], "float32"),
    ]
    assert [io["name"] for io in info["outputs"]] == ["action", "next_rnn_state_h", "next_rnn_state_c"]
    assert info["recurrent"]["episode_start"] == {"rnn_state_h": 0.0, "rnn_state_c": 0.0, "prev_action": 0,
                                                  "prev_reward": 0.0}
    assert "input" not in info and "output" not in info


@pytest.mark.parametrize(
    ("build", "action", "discrete"),
    [
        (lambda: R2d1Agent(hidden_sizes=(16,), lstm_size=8, head_size=16, dueling=True, eps_eval=0.0),
         IntBox(0, 4), True),
        (lambda: GaussianPgAgent(hidden_sizes=(16,), lstm_size=8, normalize_observation=True),
         FloatBox(-1.0, 1.0, shape=(3,)), False),
    ],
    ids=["r2d1", "gaussian_pg_lstm"],
)
def test_random_lstm_policies_reproduce_the_agents_actions_and_state_over_a_rollout(build, action, discrete, tmp_path):
    torch.manual_seed(0)
    agent = build()
    agent.initialize(EnvSpaces(VECTOR, action))
    with torch.no_grad():
        for p in agent.model.parameters():  # larger weights than the init: a state that matters
            p.mul_(3.0)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])

    T, B = 6, 3
    flat = sample(VECTOR, T * B, seed=7).astype(np.float32)
    observations = [flat[t * B : (t + 1) * B] for t in range(T)]
    rewards = np.random.default_rng(8).normal(size=(T, B)).astype(np.float32)
    rewards[0] = 0.0
    # The agent's own actions and, after each step, its state [N, B, H].
    agent.eval_mode(0)
    agent.eval_deterministic = True
    agent.reset()
    prev_action = np.zeros((B, *action.shape), dtype=np.int64 if discrete else np.float32)
    expected, states = [], []
    for observation, reward in zip(observations, rewards, strict=True):
        prev_action = agent.step(observation, prev_action, reward).action.numpy()
        expected.append(prev_action)
        states.append(tuple(t.numpy().copy() for t in agent.prev_rnn_state))
    assert len(np.unique(np.stack(expected)[:, 0], axis=0)) > 1  # actions change along the rollout

    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    names = ["observation", "prev_action", "prev_reward", "rnn_state_h", "rnn_state_c"]
    runs = {
        "torchscript": lambda *x: [t.numpy() for t in scripted(*(torch.from_numpy(a) for a in x))],
        "onnx": lambda *x: session.run(None, dict(zip(names, x, strict=True))),
    }
    for fmt, run in runs.items():
        h = c = np.zeros((1, B, 8), dtype=np.float32)
        prev_action = np.zeros_like(expected[0])
        for t in range(T):
            prev_action, h, c = run(observations[t], prev_action, rewards[t], h, c)
            assert_actions(prev_action, expected[t], discrete)
            np.testing.assert_allclose(h, states[t][0], atol=1e-5, err_msg=f"{fmt} h at step {t}")
            np.testing.assert_allclose(c, states[t][1], atol=1e-5, err_msg=f"{fmt} c at step {t}")


def test_an_alternating_agents_reference_is_one_half_of_its_envs_acting_every_step():
    """The check's reference for AlternatingSampler's agent (two halves of envs acting in turn, one
    state each) is the plain agent's: the same weights, the state carried every step."""
    from lightning_rl.export import reference_rollout

    torch.manual_seed(0)
    plain = R2d1Agent(hidden_sizes=(16,), lstm_size=8, head_size=16, eps_eval=0.0)
    plain.initialize(EnvSpaces(VECTOR, IntBox(0, 4)))
    with torch.no_grad():
        for p in plain.model.parameters():
            p.mul_(3.0)
    alternating = AlternatingR2d1Agent(hidden_sizes=(16,), lstm_size=8, head_size=16, eps_eval=0.0)
    alternating.initialize(EnvSpaces(VECTOR, IntBox(0, 4)))
    alternating.load_state_dict(plain.state_dict())
    T, B = 6, 3
    flat = sample(VECTOR, T * B, seed=7).astype(np.float32)
    observations = [flat[t * B : (t + 1) * B] for t in range(T)]
    rewards = np.zeros((T, B), dtype=np.float32)
    expected = np.stack(agent_rollout(plain, observations, rewards))
    reset_every_step = np.stack([agent_rollout(plain, [o], rewards[:1])[0] for o in observations])
    assert not np.array_equal(expected, reset_every_step)  # the state changes these actions
    np.testing.assert_array_equal(np.stack(reference_rollout(alternating, observations, rewards)), expected)


def test_a_multidiscrete_lstm_policy_takes_its_previous_action_in_the_spaces_own_values(tmp_path):
    """An LSTM policy that repeats its previous action, over MultiDiscrete([3, 4], start=[1, -2])."""
    agent = CategoricalPgAgent(hidden_sizes=(), lstm_size=7)
    agent.initialize(EnvSpaces(VECTOR, from_gymnasium(spaces.MultiDiscrete([3, 4], start=[1, -2]))))
    state = {k: torch.zeros_like(v) for k, v in agent.model.state_dict().items()}
    # LSTM input [observation (5), one-hot previous action (3 + 4, zero-based), previous reward];
    # gates i, f, g, o of 7 units: each unit holds one one-hot entry (input and output gates open,
    # forget gate shut), and the policy's logits are the units.
    state["lstm.lstm.weight_ih_l0"][14:21, 5:12] = 5.0 * torch.eye(7)
    state["lstm.lstm.bias_ih_l0"][0:7] = 30.0
    state["lstm.lstm.bias_ih_l0"][7:14] = -30.0
    state["lstm.lstm.bias_ih_l0"][21:28] = 30.0
    state["head.pi.model.0.weight"] = 10.0 * torch.eye(7)
    agent.model.load_state_dict(state)
    export_agent(agent, tmp_path, ["torchscript", "onnx"])

    # Every action of the space as the previous one, and the episode start's 0 (no previous action),
    # which the agent clips into the space: dim 0 to 1, dim 1 stays 0.
    previous = np.array([[a, b] for a in (1, 2, 3) for b in (-2, -1, 0, 1)] + [[0, 0]], dtype=np.int64)
    expected = previous.copy()
    expected[-1] = [1, 0]
    B = len(previous)
    inputs = [sample(VECTOR, B, seed=2).astype(np.float32), previous, np.zeros(B, np.float32),
              np.zeros((1, B, 7), np.float32), np.zeros((1, B, 7), np.float32)]
    names = ["observation", "prev_action", "prev_reward", "rnn_state_h", "rnn_state_c"]
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["action"], dict(zip(names, inputs, strict=True)))[0], expected)
    scripted = torch.jit.load(str(tmp_path / "policy.pt"))
    np.testing.assert_array_equal(scripted(*(torch.from_numpy(x) for x in inputs))[0].numpy(), expected)


def test_a_policy_that_drops_the_state_is_caught_before_anything_is_written(tmp_path, monkeypatch):
    from lightning_rl.export.policy import DeterministicPolicy

    step = DeterministicPolicy.recurrent_network

    def forgetful(self, observation, prev_action, prev_reward, h, c):
        return step(self, observation, prev_action, prev_reward, torch.zeros_like(h), torch.zeros_like(c))

    monkeypatch.setattr(DeterministicPolicy, "recurrent_network", forgetful)
    # The running-sum agent's actions first differ from a forgetful policy's at step 1.
    with pytest.raises(RuntimeError, match="the exported module does not reproduce the agent's actions at step 1 of "
                                           "a 5-step rollout of 1 env"):
        export_agent(running_sum_agent(), tmp_path, ["torchscript"])
    assert not list(tmp_path.iterdir())


def test_a_policy_whose_next_state_drifts_is_caught_at_the_first_step(tmp_path, monkeypatch):
    from lightning_rl.export.policy import DeterministicPolicy

    step = DeterministicPolicy.recurrent_network

    def drifting(self, observation, prev_action, prev_reward, h, c):
        out, next_h, next_c = step(self, observation, prev_action, prev_reward, h, c)
        return out, next_h + 1e-3, next_c  # this step's action unchanged; the state handed on is not

    monkeypatch.setattr(DeterministicPolicy, "recurrent_network", drifting)
    with pytest.raises(RuntimeError, match=r"the exported module does not reproduce the agent's next LSTM state \(h\) "
                                           "at step 0 of a 5-step rollout of 1 env"):
        export_agent(running_sum_agent(), tmp_path, ["torchscript"])
