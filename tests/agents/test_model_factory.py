"""Agents' ``model`` / ``q_model`` arguments: networks named by class path in the config, built
with the env-dependent leading arguments, and checked against the agent's recurrence."""

from __future__ import annotations

import functools
import json
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lightning_rl.agents import (
    AgentInfoRnn,
    CatDqnAgent,
    CategoricalPgAgent,
    DdpgAgent,
    DqnAgent,
    GaussianPgAgent,
    MultiAgent,
    R2d1Agent,
    SacAgent,
    Td3Agent,
)
from lightning_rl.algos.base import RLModule
from lightning_rl.cli import RLCLI, RLTrainer
from lightning_rl.envs import COOP_GRID_ID, EnvSpaces, make_env
from lightning_rl.models import (
    AtariDqnModel,
    AtariFfModel,
    CatDqnMlpModel,
    CategoricalPgLstmModel,
    CategoricalPgMlpModel,
    DqnMlpModel,
    GaussianPgMlpModel,
    MuMlpModel,
    QofMuMlpModel,
    R2d1MlpModel,
)
from lightning_rl.spaces import FloatBox

from .conftest import batch

ROOT = Path(__file__).resolve().parents[2]


def shapes(module: nn.Module) -> list[tuple[int, ...]]:
    """Every parameter's shape, in registration order."""
    return [tuple(p.shape) for p in module.parameters()]


def build_agent(config: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **agent_args: dict) -> nn.Module:
    """The agent of ``configs/<config>`` as LightningCLI builds it, with ``agent_args`` overridden."""
    monkeypatch.chdir(tmp_path)
    prefix = "--model.init_args.agent.init_args."
    overrides = [arg for name, value in agent_args.items() for arg in (prefix + name, json.dumps(value))]
    cli = RLCLI(
        RLModule,
        trainer_class=RLTrainer,
        subclass_mode_model=True,
        run=False,
        args=["--config", str(ROOT / "configs" / config), *overrides, "--trainer.logger", "false"],
    )
    return cli.model.agent


# ----- built from a config -----


def test_ppo_config_builds_the_configured_network(monkeypatch, tmp_path, cartpole_spaces):
    model = {"class_path": "lightning_rl.models.CategoricalPgMlpModel",
             "init_args": {"hidden_sizes": [8], "hidden_nonlinearity": "torch.nn.ReLU"}}
    agent = build_agent("ppo/cartpole.yaml", monkeypatch, tmp_path, model=model)
    agent.initialize(cartpole_spaces)
    assert isinstance(agent.model, CategoricalPgMlpModel)
    # CartPole: 4 observations, 2 actions; policy MLP 4 -> 8 -> 2, value MLP 4 -> 8 -> 1.
    assert shapes(agent.model) == [(8, 4), (8,), (2, 8), (2,), (8, 4), (8,), (1, 8), (1,)]
    assert isinstance(agent.model.head.pi.model[1], nn.ReLU)
    assert agent.step(*batch(cartpole_spaces, 3)).action.shape == (3,)


def test_dqn_config_builds_the_configured_network(monkeypatch, tmp_path, cartpole_spaces):
    model = {"class_path": "lightning_rl.models.DqnMlpModel", "init_args": {"hidden_sizes": [16, 8]}}
    agent = build_agent("dqn/cartpole.yaml", monkeypatch, tmp_path, model=model)
    agent.initialize(cartpole_spaces)
    assert isinstance(agent.model, DqnMlpModel)
    # Q MLP 4 -> 16 -> 8 -> 2 (one Q-value per action); the target network is a copy.
    expected = [(16, 4), (16,), (8, 16), (8,), (2, 8), (2,)]
    assert shapes(agent.model) == expected
    assert shapes(agent.target_model) == expected


def test_sac_config_builds_the_configured_policy_and_critics(monkeypatch, tmp_path, pendulum_spaces):
    model = {"class_path": "lightning_rl.models.PiMlpModel", "init_args": {"hidden_sizes": [32]}}
    q_model = {"class_path": "lightning_rl.models.QofMuMlpModel", "init_args": {"hidden_sizes": [16, 16]}}
    agent = build_agent("sac/pendulum.yaml", monkeypatch, tmp_path, model=model, q_model=q_model)
    agent.initialize(pendulum_spaces)
    # Pendulum: 3 observations, 1 action. pi: 3 -> 32 -> 2 (mean and log std of the action).
    assert shapes(agent.model) == [(32, 3), (32,), (2, 32), (2,)]
    # Each critic: (observation, action) = 4 inputs -> 16 -> 16 -> 1.
    q_shapes = [(16, 4), (16,), (16, 16), (16,), (1, 16), (1,)]
    for critic in (agent.q1_model, agent.q2_model, agent.target_q1_model, agent.target_q2_model):
        assert isinstance(critic, QofMuMlpModel)
        assert shapes(critic) == q_shapes
    # One factory call per critic: independent initializations.
    assert not torch.equal(agent.q1_model.mlp.model[0].weight, agent.q2_model.mlp.model[0].weight)


def test_shipped_halfcheetah_config_names_its_network(monkeypatch, tmp_path):
    # HalfCheetah-v5: 17 observations, 6 actions (spaces written out, no MuJoCo needed).
    spaces = EnvSpaces(FloatBox(-np.inf, np.inf, shape=(17,)), FloatBox(-1.0, 1.0, shape=(6,)))
    agent = build_agent("ppo/halfcheetah.yaml", monkeypatch, tmp_path)
    torch.manual_seed(0)
    agent.initialize(spaces)
    assert isinstance(agent.model, GaussianPgMlpModel)
    # Running mean, var, count of 17 observations; log std [6]; mean MLP 17 -> 64 -> 64 -> 6;
    # value MLP 17 -> 64 -> 64 -> 1.
    assert [tuple(b.shape) for b in agent.model.buffers()] == [(17,), (17,), ()]
    assert shapes(agent.model) == [
        (6,), (64, 17), (64,), (64, 64), (64,), (6, 64), (6,), (64, 17), (64,), (64, 64), (64,), (1, 64), (1,)
    ]
    # The automatic choice's network but for the tanh on the mean (mu_nonlinearity: null in the
    # config), initialized the same way.
    assert isinstance(list(agent.model.head.mu.modules())[-1], nn.Linear)  # the mean ends in a Linear
    implicit = GaussianPgAgent(
        model=functools.partial(GaussianPgMlpModel, hidden_sizes=(64, 64), normalize_observation=True,
                                mu_nonlinearity=None)
    )
    torch.manual_seed(0)
    implicit.initialize(spaces)
    for (name, value), (implicit_name, implicit_value) in zip(
        agent.model.state_dict().items(), implicit.model.state_dict().items(), strict=True
    ):
        assert name == implicit_name and torch.equal(value, implicit_value), name


# ----- the leading arguments -----


def test_frames_give_an_atari_model_its_image_shape_and_action_count(image_spaces):
    agent = CategoricalPgAgent(model=partial(AtariFfModel, fc_sizes=32))
    agent.initialize(image_spaces)
    # Frames [2, 36, 36], 4 actions; small convs: 8x8 stride 4 -> 16 x 8 x 8, 4x4 stride 2
    # pad 1 -> 32 x 4 x 4 = 512 features; fc 512 -> 32; policy 32 -> 4, value 32 -> 1.
    assert shapes(agent.model) == [
        (16, 2, 8, 8), (16,), (32, 16, 4, 4), (32,), (32, 512), (32,), (4, 32), (4,), (1, 32), (1,)
    ]
    dqn = DqnAgent(model=partial(AtariDqnModel, fc_sizes=16, conv="small"))
    dqn.initialize(image_spaces)
    # The same convs, then the Q head 512 -> 16 -> 4.
    assert shapes(dqn.model)[-4:] == [(16, 512), (16,), (4, 16), (4,)]


def test_a_model_class_itself_is_a_factory(pendulum_spaces):
    agent = DdpgAgent(model=MuMlpModel, q_model=partial(QofMuMlpModel, hidden_sizes=[5]))
    agent.initialize(pendulum_spaces)
    # MuMlpModel's default (400, 300): 3 -> 400 -> 300 -> 1; critic 4 -> 5 -> 1.
    assert shapes(agent.model) == [(400, 3), (400,), (300, 400), (300,), (1, 300), (1,)]
    assert shapes(agent.q_model) == [(5, 4), (5,), (1, 5), (1,)]


def test_td3_builds_each_critic_with_its_own_call(pendulum_spaces):
    calls = []

    def q_model(observation_shape, action_size):
        calls.append((tuple(observation_shape), action_size))
        return QofMuMlpModel(observation_shape, action_size, hidden_sizes=[3])

    agent = Td3Agent(q_model=q_model)
    agent.initialize(pendulum_spaces)
    assert calls == [((3,), 1), ((3,), 1)]
    assert agent.q_model is not agent.q2_model


def test_a_template_agent_gives_every_sub_agent_its_own_network():
    agent = MultiAgent(CategoricalPgAgent(model=partial(CategoricalPgMlpModel, hidden_sizes=[4])))
    agent.initialize(make_env(COOP_GRID_ID).spaces)
    # CoopGrid: 6 observations and 5 actions per agent.
    expected = [(4, 6), (4,), (5, 4), (5,), (4, 6), (4,), (1, 4), (1,)]
    models = [agent.sub_agent(name).model for name in agent.agent_names]
    assert [shapes(m) for m in models] == [expected, expected]
    assert models[0] is not models[1]


# ----- recurrence -----


def test_a_recurrent_model_with_a_recurrent_agent(cartpole_spaces):
    agent = CategoricalPgAgent(lstm_size=6, model=partial(CategoricalPgLstmModel, hidden_sizes=[8], lstm_size=6))
    agent.initialize(cartpole_spaces)
    agent.sample_mode(0)
    step = agent.step(*batch(cartpole_spaces, 2))
    assert isinstance(step.agent_info, AgentInfoRnn)
    # [B, N, H] = 2 envs, 1 layer, 6 units.
    assert step.agent_info.prev_rnn_state.h.shape == (2, 1, 6)


@pytest.mark.parametrize(
    "agent, match",
    [
        (CategoricalPgAgent(model=partial(CategoricalPgLstmModel, lstm_size=6)),
         "recurrent CategoricalPgLstmModel .* the agent is feed-forward"),
        (CategoricalPgAgent(lstm_size=6, model=CategoricalPgMlpModel),
         r"feed-forward CategoricalPgMlpModel, but the agent is recurrent \(lstm_size=6\)"),
        (CategoricalPgAgent(lstm_size=16, model=partial(CategoricalPgLstmModel, lstm_size=6)),
         "LSTM size 6, but the agent has lstm_size=16"),
        (DqnAgent(model=partial(R2d1MlpModel, lstm_size=6)), "recurrent R2d1MlpModel"),
        (R2d1Agent(model=DqnMlpModel), "feed-forward DqnMlpModel, but the agent is recurrent"),
        (R2d1Agent(lstm_size=128, model=partial(R2d1MlpModel, lstm_size=6)), "lstm_size=128"),
        (CatDqnAgent(n_atoms=11, model=partial(CatDqnMlpModel, n_atoms=51)),
         "n_atoms=51, but the agent has n_atoms=11"),
    ],
)
def test_a_model_that_does_not_fit_the_agent_raises(cartpole_spaces, agent, match):
    with pytest.raises(ValueError, match=match):
        agent.initialize(cartpole_spaces)


def test_r2d1_builds_the_configured_recurrent_network(cartpole_spaces):
    agent = R2d1Agent(lstm_size=6, model=partial(R2d1MlpModel, hidden_sizes=[8], lstm_size=6, head_size=4))
    agent.initialize(cartpole_spaces)
    # MLP 4 -> 8; LSTM input 8 features + 2 one-hot actions + 1 reward = 11, gates 4 x 6 = 24;
    # Q head 6 -> 4 -> 2.
    assert shapes(agent.model) == [(8, 4), (8,), (24, 11), (24, 6), (24,), (24,), (4, 6), (4,), (2, 4), (2,)]


# ----- bad arguments -----


@pytest.mark.parametrize("model", [DqnMlpModel((4,), 2), "DqnMlpModel", 3])
def test_a_model_argument_that_builds_nothing_raises(model):
    with pytest.raises(ValueError, match="model must build the network"):
        DqnAgent(model=model)
    with pytest.raises(ValueError, match="q_model must build the network"):
        SacAgent(q_model=model)


def test_a_factory_that_returns_no_module_raises(cartpole_spaces):
    agent = DqnAgent(model=lambda observation_shape, action_size: "not a network")
    with pytest.raises(ValueError, match="model must build an nn.Module, got str"):
        agent.initialize(cartpole_spaces)
