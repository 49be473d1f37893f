"""Policy-gradient agents: step outputs, bootstrap values, training passes, model choice, bad spaces."""

from __future__ import annotations

import pytest
import torch

from lightning_rl.agents import AgentInfo, AgentInfoRnn, CategoricalPgAgent, GaussianPgAgent
from lightning_rl.models import AtariFfModel, AtariLstmModel

from .conftest import batch

B, T = 4, 3


@pytest.mark.parametrize("lstm_size", [None, 8])
def test_categorical_step_on_cartpole(cartpole_spaces, lstm_size):
    agent = CategoricalPgAgent(hidden_sizes=(16,), lstm_size=lstm_size)
    agent.initialize(cartpole_spaces)
    agent.sample_mode(0)
    step = agent.step(*batch(cartpole_spaces, B))
    assert step.action.shape == (B,) and step.action.dtype == torch.long
    assert bool(((step.action >= 0) & (step.action < 2)).all())
    info = step.agent_info
    assert type(info) is (AgentInfo if lstm_size is None else AgentInfoRnn)
    assert info.dist_info.prob.shape == (B, 2) and info.value.shape == (B,)
    torch.testing.assert_close(info.dist_info.prob.sum(-1), torch.ones(B))
    if lstm_size is not None:
        assert info.prev_rnn_state.h.shape == (B, 1, 8) and info.prev_rnn_state.c.shape == (B, 1, 8)
    assert all(t.device.type == "cpu" and not t.requires_grad for t in (step.action, info.value, info.dist_info.prob))


@pytest.mark.parametrize("lstm_size, model_cls", [(None, AtariFfModel), (8, AtariLstmModel)])
def test_categorical_agent_picks_the_conv_model_for_frames(image_spaces, lstm_size, model_cls):
    agent = CategoricalPgAgent(lstm_size=lstm_size)
    agent.initialize(image_spaces)
    assert isinstance(agent.model, model_cls)
    step = agent.step(*batch(image_spaces, 2))
    assert step.action.shape == (2,) and step.agent_info.dist_info.prob.shape == (2, 4)


@pytest.mark.parametrize("lstm_size", [None, 8])
def test_gaussian_step_on_pendulum(pendulum_spaces, lstm_size):
    agent = GaussianPgAgent(hidden_sizes=(16,), init_log_std=-0.5, lstm_size=lstm_size)
    agent.initialize(pendulum_spaces)
    agent.sample_mode(0)
    step = agent.step(*batch(pendulum_spaces, B))
    assert step.action.shape == (B, 1) and step.action.dtype == torch.float32
    info = step.agent_info
    assert info.dist_info.mean.shape == (B, 1) and info.value.shape == (B,)
    torch.testing.assert_close(info.dist_info.log_std, torch.full((B, 1), -0.5))
    assert (type(info) is AgentInfoRnn) == (lstm_size is not None)


def test_value_matches_the_step_value_feed_forward(cartpole_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(16,))
    agent.initialize(cartpole_spaces)
    inputs = batch(cartpole_spaces, B)
    torch.testing.assert_close(agent.value(*inputs), agent.step(*inputs).agent_info.value)


def test_recurrent_value_uses_but_does_not_advance_the_state(pendulum_spaces):
    agent = GaussianPgAgent(hidden_sizes=(16,), lstm_size=8)
    agent.initialize(pendulum_spaces)
    agent.sample_mode(0)
    agent.step(*batch(pendulum_spaces, B))
    state = agent.prev_rnn_state
    inputs = batch(pendulum_spaces, B, seed=1)
    value = agent.value(*inputs)
    assert agent.prev_rnn_state is state
    torch.testing.assert_close(value, agent.step(*inputs).agent_info.value)
    assert agent.prev_rnn_state is not state


@pytest.mark.parametrize("agent_cls", [CategoricalPgAgent, GaussianPgAgent])
@pytest.mark.parametrize("lstm_size", [None, 8])
def test_training_pass_over_time_and_batch(cartpole_spaces, pendulum_spaces, agent_cls, lstm_size):
    spaces = cartpole_spaces if agent_cls is CategoricalPgAgent else pendulum_spaces
    agent = agent_cls(hidden_sizes=(16,), lstm_size=lstm_size)
    agent.initialize(spaces)
    agent.train_mode(0)
    out = agent(*batch(spaces, B, T=T))
    dist_info, value = out[:2]
    assert value.shape == (T, B) and value.requires_grad
    assert dist_info.get(0).shape[:2] == (T, B)
    if lstm_size is None:
        assert len(out) == 2
    else:
        assert out[2].h.shape == (1, B, 8)


def test_observation_normalization_statistics_update(cartpole_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(16,), normalize_observation=True)
    agent.initialize(cartpole_spaces)
    observation = batch(cartpole_spaces, B, T=T)[0]
    agent.update_obs_rms(observation)
    rms = agent.model.encoder.obs_rms
    assert float(rms.count) == T * B
    torch.testing.assert_close(rms.mean, torch.as_tensor(observation).reshape(-1, 4).mean(0))


def test_categorical_agent_rejects_a_continuous_action_space(pendulum_spaces):
    with pytest.raises(ValueError, match="CategoricalPgAgent needs a discrete action space.*FloatBox"):
        CategoricalPgAgent().initialize(pendulum_spaces)


def test_gaussian_agent_rejects_a_discrete_action_space(cartpole_spaces):
    with pytest.raises(ValueError, match="GaussianPgAgent needs a continuous action space.*IntBox"):
        GaussianPgAgent().initialize(cartpole_spaces)


def test_bad_lstm_size_raises():
    with pytest.raises(ValueError, match="lstm_size=0"):
        CategoricalPgAgent(lstm_size=0)
