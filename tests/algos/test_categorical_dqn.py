"""Categorical DQN (C51): the projection and loss by hand, the training pipeline, learning."""

from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch
from torch import nn

from lightning_rl.agents import AgentInputs, CatDqnAgent, DqnAgent
from lightning_rl.algos import CategoricalDQN
from lightning_rl.algos.categorical_dqn import project_distribution
from lightning_rl.envs import make_env
from lightning_rl.replays import FrameReplayStorage, SamplesFromReplay
from lightning_rl.samplers import SerialSampler
from tests.algos.test_dqn import CARTPOLE_SAMPLER, FAST_CARTPOLE, solve_cartpole
from tests.algos.test_on_policy import make_trainer, params_vector

Z3 = torch.tensor([-1.0, 0.0, 1.0])


def test_projection_by_hand():
    # Atoms -1, 0, 1 (dz = 1). Row 0: R = 0.5, bootstrap 0.5 shifts the atoms to 0, 0.5, 1:
    # 0.2 stays on 0, 0.3 at 0.5 splits evenly between 0 and 1, 0.5 stays on 1.
    # Row 1: terminated, R = 0.25 puts all mass at 0.25: 0.75 on atom 0, 0.25 on atom 1.
    # Row 2: R = -3 with bootstrap 1 shifts to -4, -3, -2: all clipped to V_min = -1.
    # Row 3: R = 0.2, bootstrap 0.9: 0.2 + 0.9 * (-1, 0, 1) = (-0.7, 0.2, 1.1 -> 1).
    p_next = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.5, 0.25, 0.25]])
    m = project_distribution(p_next, torch.tensor([0.5, 0.25, -3.0, 0.2]), torch.tensor([0.5, 0.0, 1.0, 0.9]), Z3)
    expected = torch.tensor([
        [0.0, 0.35, 0.65],
        [0.0, 0.75, 0.25],
        [1.0, 0.0, 0.0],
        [0.5 * 0.7, 0.5 * 0.3 + 0.25 * 0.8, 0.25 * 0.2 + 0.25],
    ])
    torch.testing.assert_close(m, expected)
    torch.testing.assert_close(m.sum(-1), torch.ones(4))


def test_projection_keeps_mass_on_many_atoms():
    g = torch.Generator().manual_seed(0)
    z = torch.linspace(-10, 10, 51)
    p = torch.softmax(torch.randn(64, 51, generator=g), -1)
    m = project_distribution(p, torch.randn(64, generator=g) * 5, torch.rand(64, generator=g), z)
    torch.testing.assert_close(m.sum(-1), torch.ones(64))
    assert (m >= 0).all()
    # With bootstrap 1 and zero return the distribution is unchanged.
    torch.testing.assert_close(project_distribution(p, torch.zeros(64), torch.ones(64), z), p)


def uniform_c51(**kwargs) -> CategoricalDQN:
    """A C51 whose online and target networks predict uniform distributions (zero weights)."""
    agent = CatDqnAgent(hidden_sizes=[], n_atoms=3, V_min=-1.0, V_max=1.0)
    module = CategoricalDQN(agent, SerialSampler(env_id="CartPole-v1", batch_T=4, batch_B=1), min_steps_learn=0,
                            **kwargs)
    agent.initialize(make_env("CartPole-v1").spaces)
    for model in (agent.model, agent.target_model):
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.weight)
                nn.init.zeros_(m.bias)
    return module


def test_loss_and_priority_by_hand():
    module = uniform_c51()
    obs = torch.zeros(2, 4)
    batch = SamplesFromReplay(
        agent_inputs=AgentInputs(obs, torch.zeros(2).long(), torch.zeros(2)),
        action=torch.tensor([0, 1]),
        return_=torch.tensor([0.25, 0.0]),
        done=torch.tensor([True, False]),
        done_n=torch.tensor([True, False]),
        truncated_n=torch.tensor([False, False]),
        discount_n=torch.tensor([0.9, 1.0]),
        target_inputs=AgentInputs(obs, torch.zeros(2).long(), torch.zeros(2)),
        idxs=torch.arange(2),
        is_weights=torch.ones(2),
    )
    terms = module.loss(batch)
    # p = (1/3, 1/3, 1/3): the cross-entropy of any target is log 3.
    assert float(terms["loss"].detach()) == pytest.approx(math.log(3), rel=1e-6)
    # Row 0 targets (0, 0.75, 0.25): KL = log 3 - H; row 1 (bootstrap 1, R = 0) targets uniform: KL = 0.
    entropy = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    torch.testing.assert_close(terms["kl"], torch.tensor([math.log(3) - entropy, 0.0]))
    torch.testing.assert_close(terms["q"], torch.zeros(2))
    terms["loss"].backward()
    assert all(p.grad is not None for p in module.agent.parameters_for("model"))


def test_needs_a_categorical_agent():
    with pytest.raises(ValueError, match="CatDqnAgent"):
        CategoricalDQN(DqnAgent(), SerialSampler(env_id="CartPole-v1", batch_T=4, batch_B=1))


@pytest.mark.parametrize("options", [dict(), dict(double_dqn=True, n_step_return=3, prioritized_replay=True)])
def test_training_changes_the_weights(options):
    pl.seed_everything(0)
    module = CategoricalDQN(
        CatDqnAgent(hidden_sizes=[16], n_atoms=11, V_min=0.0, V_max=50.0, dueling=bool(options)),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4), batch_size=32, replay_ratio=4,
        min_steps_learn=128, replay_size=1000, learning_rate=1e-3, target_update_interval=4, total_env_steps=256,
        log_interval_steps=128, **options,
    )
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = params_vector(pl_module.agent.model)

    make_trainer(callbacks=[Snapshot()]).fit(module)
    assert module.train_state.updates == 3 * 8
    assert not torch.equal(before, params_vector(module.agent.model))
    assert "train/kl_mean" in module.trainer.callback_metrics


def test_tiny_atari_run():
    pl.seed_everything(0)
    module = CategoricalDQN(
        CatDqnAgent(n_atoms=11, eps_steps_min=0, eps_steps_max=320),
        SerialSampler(env_id="ALE/Pong-v5", batch_T=16, batch_B=2),
        batch_size=8, replay_size=400, replay_ratio=0.5, min_steps_learn=96, n_step_return=3,
        target_update_interval=4, total_env_steps=160, log_interval_steps=96,
    )
    make_trainer().fit(module)
    assert isinstance(module.replay.storage, FrameReplayStorage)
    assert module.train_state.updates == 3 * 2


@pytest.mark.slow
def test_c51_solves_cartpole():
    pl.seed_everything(1)
    module = CategoricalDQN(
        CatDqnAgent(hidden_sizes=[64, 64], n_atoms=51, V_min=0.0, V_max=100.0, eps_steps_min=0, eps_steps_max=5120,
                    eps_final=0.02),
        SerialSampler(**CARTPOLE_SAMPLER), **FAST_CARTPOLE,
    )
    assert solve_cartpole(module) >= 475.0, module.train_state
