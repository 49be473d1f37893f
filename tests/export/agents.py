"""Agents with random weights for the export tests, and their own deterministic actions."""

from __future__ import annotations

import numpy as np
import torch

from lightning_rl.agents import CatDqnAgent, CategoricalPgAgent, DqnAgent, GaussianPgAgent, SacAgent, Td3Agent
from lightning_rl.agents.base import BaseAgent
from lightning_rl.envs.base import EnvSpaces
from lightning_rl.spaces import Composite, FloatBox, IntBox

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


def zero_action(space, B: int):
    """``B`` zero actions (named tuples of them for a dict action space), as an episode starts."""
    if isinstance(space, Composite):
        return space.NamedTupleCls(*(zero_action(sub, B) for sub in space.spaces))
    integer = np.issubdtype(np.dtype(space.dtype), np.integer)
    return np.zeros((B, *space.shape), dtype=np.int64 if integer else np.float32)


def agent_rollout(agent: BaseAgent, observations: list, rewards: np.ndarray) -> list:
    """The agent's own deterministic actions over ``len(observations)`` steps from an episode's
    start (zero state and previous action), its previous action fed back each step."""
    agent.eval_mode(0)
    agent.eval_deterministic = True
    agent.reset()
    prev_action = zero_action(agent.env_spaces.action, rewards.shape[1])
    actions = []
    for observation, reward in zip(observations, rewards, strict=True):
        action = agent.step(observation, prev_action, reward).action
        prev_action = action.numpy() if isinstance(action, torch.Tensor) else action._make(a.numpy() for a in action)
        actions.append(prev_action)
    return actions
