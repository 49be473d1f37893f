"""DDPG, TD3 and SAC agents: action scaling to env bounds, exploration, critics, targets, log-probs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lightning_rl.agents import DdpgAgent, SacAgent, Td3Agent
from lightning_rl.distributions import DistInfoStd
from lightning_rl.envs import EnvSpaces
from lightning_rl.spaces import FloatBox

from .conftest import batch

B = 16
SMALL = dict(hidden_sizes=(16,), q_hidden_sizes=(16,))


def _last_linear(module: nn.Module) -> nn.Linear:
    return [m for m in module.modules() if isinstance(m, nn.Linear)][-1]


def _within(action: torch.Tensor, space: FloatBox) -> bool:
    return bool((action >= torch.as_tensor(space.low)).all() and (action <= torch.as_tensor(space.high)).all())


@pytest.mark.parametrize("cls", [DdpgAgent, Td3Agent])
def test_ddpg_step_explores_within_pendulum_bounds(pendulum_spaces, cls):
    agent = cls(action_std=5.0, **SMALL)
    agent.initialize(pendulum_spaces)
    agent.sample_mode(0)
    step = agent.step(*batch(pendulum_spaces, B))
    assert step.action.shape == (B, 1) and step.action.dtype == torch.float32
    # Noise of 5 half-ranges pushes most actions to the clipped bounds, none beyond.
    assert _within(step.action, pendulum_spaces.action)
    assert bool((step.action.abs() == 2.0).any())
    assert _within(step.agent_info.mu, pendulum_spaces.action)
    agent.eval_mode(0)
    evaluation = agent.step(*batch(pendulum_spaces, B))
    torch.testing.assert_close(evaluation.action, evaluation.agent_info.mu)


def test_actions_scale_to_asymmetric_bounds(asymmetric_box_spaces):
    agent = DdpgAgent(**SMALL)
    agent.initialize(asymmetric_box_spaces)
    torch.testing.assert_close(agent.action_scale, torch.tensor([2.0, 2.0]))
    torch.testing.assert_close(agent.action_bias, torch.tensor([2.0, 1.0]))
    with torch.no_grad():
        last = _last_linear(agent.model)
        last.weight.zero_()
        last.bias.copy_(torch.tensor([50.0, -50.0]))  # tanh -> (+1, -1)
    agent.eval_mode(0)
    torch.testing.assert_close(agent.step(*batch(asymmetric_box_spaces, 2)).action, torch.tensor([[4.0, -1.0]] * 2))
    # The critic sees network-scale actions: env (4, -1) is (1, -1) and env (2, 1) is (0, 0).
    obs = torch.as_tensor(batch(asymmetric_box_spaces, 2)[0])
    env_actions = torch.tensor([[4.0, -1.0], [2.0, 1.0]])
    torch.testing.assert_close(
        agent.q(obs, None, None, env_actions), agent.q_model(obs, None, None, torch.tensor([[1.0, -1.0], [0.0, 0.0]]))
    )


def test_ddpg_critic_targets_and_groups(pendulum_spaces):
    agent = DdpgAgent(**SMALL)
    agent.initialize(pendulum_spaces)
    obs = torch.as_tensor(batch(pendulum_spaces, B)[0])
    q_at_mu = agent.q_at_mu(obs, None, None)
    assert q_at_mu.shape == (B,) and q_at_mu.requires_grad
    torch.testing.assert_close(q_at_mu, agent.q(obs, None, None, agent(obs, None, None)))
    torch.testing.assert_close(agent.target_q_at_mu(obs, None, None), q_at_mu.detach())
    assert {id(p) for p in agent.parameters_for("model")} == {id(p) for p in agent.model.parameters()}
    assert {id(p) for p in agent.parameters_for("q")} == {id(p) for p in agent.q_model.parameters()}
    targets = list(agent.target_model.parameters()) + list(agent.target_q_model.parameters())
    assert all(not p.requires_grad for p in targets)
    with torch.no_grad():
        for p in agent.parameters_for():
            p.add_(1.0)
    before = [p.clone() for p in targets]
    agent.update_target(tau=0.1)
    for p, old in zip(targets, before, strict=False):
        torch.testing.assert_close(p, old + 0.1)


def test_pretrain_noise_before_min_itr_learn(pendulum_spaces):
    agent = DdpgAgent(action_std=1e-6, pretrain_std=0.5, **SMALL)
    agent.initialize(pendulum_spaces)
    agent.set_min_itr_learn(5)
    inputs = batch(pendulum_spaces, B)
    agent.sample_mode(4)
    early = agent.step(*inputs)
    assert (early.action - early.agent_info.mu).abs().max() > 0.1
    agent.sample_mode(5)
    late = agent.step(*inputs)
    torch.testing.assert_close(late.action, late.agent_info.mu, atol=1e-4, rtol=0)


def test_td3_twin_critics_and_target_smoothing(pendulum_spaces):
    agent = Td3Agent(target_noise_std=0.2, target_noise_clip=1e-6, **SMALL)
    agent.initialize(pendulum_spaces)
    obs = torch.as_tensor(batch(pendulum_spaces, B)[0])
    action = torch.as_tensor(batch(pendulum_spaces, B)[1])
    q1, q2 = agent.q(obs, None, None, action)
    assert q1.shape == q2.shape == (B,) and not torch.allclose(q1, q2)
    assert len(agent.parameters_for("q")) == 2 * len(list(agent.q_model.parameters()))
    # With the smoothing noise clipped to ~0, the target action is the target mu.
    target_mu = agent.target_model(obs)
    t1, t2 = agent.target_q_at_mu(obs, None, None)
    torch.testing.assert_close(t1, agent.target_q_model(obs, None, None, target_mu), atol=1e-4, rtol=0)
    torch.testing.assert_close(t2, agent.target_q2_model(obs, None, None, target_mu), atol=1e-4, rtol=0)
    noisy = Td3Agent(target_noise_std=0.2, target_noise_clip=0.5, **SMALL)
    noisy.initialize(pendulum_spaces)
    smooth = noisy.target_distribution.sample(DistInfoStd(mean=torch.zeros(1000, 1), log_std=None))
    assert smooth.abs().max() <= 0.5 and smooth.std() > 0.1


def test_sac_pi_log_prob_by_hand(pendulum_spaces):
    agent = SacAgent(**SMALL)
    agent.initialize(pendulum_spaces)
    with torch.no_grad():
        last = _last_linear(agent.model)
        last.weight.zero_()
        last.bias.zero_()  # mean 0, log_std 0: u ~ N(0, 1), action = 2 tanh(u)
    obs = torch.as_tensor(batch(pendulum_spaces, 256)[0])
    action, log_pi, dist_info = agent.pi(obs, None, None)
    assert action.shape == (256, 1) and log_pi.shape == (256,) and log_pi.requires_grad
    assert _within(action, pendulum_spaces.action)
    u = torch.atanh(action.double() / 2.0).squeeze(-1)
    # log N(u; 0, 1) - log(1 - tanh(u)^2), density of tanh(u) in [-1, 1] (SB3 convention).
    expected = -0.5 * u**2 - 0.5 * math.log(2 * math.pi) - torch.log(1 - torch.tanh(u) ** 2)
    torch.testing.assert_close(log_pi.double(), expected, atol=1e-3, rtol=1e-4)


def test_sac_extreme_means_stay_in_bounds_with_finite_log_prob(asymmetric_box_spaces):
    agent = SacAgent(**SMALL)
    agent.initialize(asymmetric_box_spaces)
    with torch.no_grad():
        last = _last_linear(agent.model)
        last.weight.zero_()
        last.bias.copy_(torch.tensor([80.0, -80.0, 5.0, 5.0]))  # means (80, -80), log_std 5 (clamped to 2)
    obs = torch.as_tensor(batch(asymmetric_box_spaces, B)[0])
    action, log_pi, _ = agent.pi(obs, None, None)
    assert _within(action, asymmetric_box_spaces.action)
    assert bool(torch.isfinite(log_pi).all())
    agent.sample_mode(0)
    assert _within(agent.step(obs, None, None).action, asymmetric_box_spaces.action)


def test_sac_step_eval_critics_and_targets(pendulum_spaces):
    agent = SacAgent(**SMALL)
    agent.initialize(pendulum_spaces)
    inputs = batch(pendulum_spaces, B)
    agent.sample_mode(0)
    step = agent.step(*inputs)
    assert step.action.shape == (B, 1) and step.agent_info.dist_info.mean.shape == (B, 1)
    agent.eval_mode(0)
    evaluation = agent.step(*inputs)
    torch.testing.assert_close(evaluation.action, 2.0 * torch.tanh(evaluation.agent_info.dist_info.mean))
    obs, action = torch.as_tensor(inputs[0]), torch.as_tensor(inputs[1])
    q1, q2 = agent.q(obs, None, None, action)
    t1, t2 = agent.target_q(obs, None, None, action)
    torch.testing.assert_close((t1, t2), (q1.detach(), q2.detach()))
    assert not t1.requires_grad
    groups = agent.trainable_modules()
    assert groups["q"] == [agent.q1_model, agent.q2_model] and groups["model"] == [agent.model]
    agent.update_target(tau=0.5)


def test_sac_pretraining_samples_with_the_fixed_std_but_pi_uses_the_policy(pendulum_spaces):
    agent = SacAgent(pretrain_std=0.75, **SMALL)
    agent.initialize(pendulum_spaces)
    agent.set_min_itr_learn(3)
    with torch.no_grad():
        last = _last_linear(agent.model)
        last.weight.zero_()
        last.bias.copy_(torch.tensor([0.0, -20.0]))  # mean 0, std e^-20
    obs = np.zeros((256, 3), np.float32)
    agent.sample_mode(0)
    assert agent.step(obs, None, None).action.std() > 0.5
    action, _, _ = agent.pi(obs, None, None)
    assert action.abs().max() < 1e-6
    agent.sample_mode(3)
    assert agent.step(obs, None, None).action.abs().max() < 1e-6


@pytest.mark.parametrize("cls", [DdpgAgent, Td3Agent, SacAgent])
def test_qpg_agents_reject_discrete_and_unbounded_action_spaces(cartpole_spaces, cls):
    with pytest.raises(ValueError, match=f"{cls.__name__} needs a continuous action space.*IntBox"):
        cls(**SMALL).initialize(cartpole_spaces)
    unbounded = EnvSpaces(FloatBox(-1.0, 1.0, shape=(3,)), FloatBox(-np.inf, np.inf, shape=(2,)))
    with pytest.raises(ValueError, match="finite action bounds"):
        cls(**SMALL).initialize(unbounded)


@pytest.mark.parametrize("cls", [DdpgAgent, Td3Agent, SacAgent])
def test_uniform_pretraining_skips_the_policy_and_draws_the_uniform_stream(pendulum_spaces, cls):
    agent = cls(**SMALL)
    agent.initialize(pendulum_spaces)
    agent.set_min_itr_learn(2, uniform=True)
    agent.sample_mode(0)

    def no_forward(*args):
        raise AssertionError("the policy ran while acting uniformly")

    handle = agent.model.register_forward_pre_hook(no_forward)
    torch.manual_seed(7)
    step = agent.step(*batch(pendulum_spaces, B))
    torch.manual_seed(7)
    expected = torch.rand(B, 1) * 2 - 1  # network scale; Pendulum's bounds are +-2
    torch.testing.assert_close(step.action, 2.0 * expected, rtol=0, atol=1e-6)
    assert _within(step.action, pendulum_spaces.action) and step.action.std() > 0.5
    handle.remove()
    agent.sample_mode(2)  # learning: the policy acts again
    calls = []
    agent.model.register_forward_pre_hook(lambda *args: calls.append(1))
    agent.step(*batch(pendulum_spaces, B))
    agent.eval_mode(0)
    agent.step(*batch(pendulum_spaces, B))
    assert len(calls) == 2
