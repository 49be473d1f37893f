"""TD3 on Lightning: twin-critic targets, delayed policy and target updates, resume, errors, learning."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import nn

from lightning_rl.agents import DdpgAgent, Td3Agent
from lightning_rl.algos import TD3
from lightning_rl.algos.qpg_common import split_updates
from lightning_rl.envs import make_env
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import assert_same, make_trainer, params_vector
from tests.algos.test_sac import end_of_episode_batch

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(hidden_sizes=[16], q_hidden_sizes=[16])


def pendulum_td3(agent: Td3Agent | None = None, batch_T: int = 16, batch_B: int = 2, **kwargs) -> TD3:
    settings = dict(batch_size=32, replay_size=50_000, replay_ratio=64, min_steps_learn=64, total_env_steps=256,
                    log_interval_steps=64)
    settings.update(kwargs)
    return TD3(agent or Td3Agent(**SMALL), SerialSampler(env_id="Pendulum-v1", batch_T=batch_T, batch_B=batch_B),
               **settings)


def constant_output(model: nn.Module, value: float) -> None:
    last = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(value)


@pytest.mark.parametrize("bootstrap_timelimit", [True, False])
def test_target_takes_the_smaller_target_critic_and_respects_episode_ends(bootstrap_timelimit):
    torch.manual_seed(0)
    module = pendulum_td3(bootstrap_timelimit=bootstrap_timelimit)
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, module.bootstrap_timelimit)
    for first, second in ((3.0, 5.0), (5.0, -2.0)):
        constant_output(module.agent.target_q_model, first)
        constant_output(module.agent.target_q2_model, second)
        low = min(first, second)
        y = module.q_loss(mb)["target"]
        torch.testing.assert_close(y, torch.tensor([1 + 0.9 * low, 1 + 0.9 * low if bootstrap_timelimit else 1, 1]))


def test_target_policy_smoothing_perturbs_the_target_action():
    torch.manual_seed(0)
    module = pendulum_td3(Td3Agent(target_noise_std=0.3, target_noise_clip=0.5, **SMALL))
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    # Rows 0 and 1 share s' (the same mu'(s')), so their targets differ only by the noise.
    targets = torch.stack([module.q_loss(mb)["target"] for _ in range(50)])
    assert float((targets[:, 0] - targets[:, 1]).abs().max()) > 0
    # Without noise (std tiny) the two rows agree.
    module.agent.target_distribution.set_std(1e-8)
    y = module.q_loss(mb)["target"]
    assert float(y[0]) == pytest.approx(float(y[1]), abs=1e-5)


def test_policy_and_targets_move_every_interval():
    pl.seed_everything(0)
    # tau=1 and an interval of 2: after an even number of updates the targets equal the networks.
    module = pendulum_td3(target_update_tau=1.0)
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = params_vector(pl_module.agent.model)

    make_trainer(callbacks=[Snapshot()]).fit(module)
    updates = module.train_state.updates
    assert updates == 64 * 7
    mu_optimizer, q_optimizer = module.optimizers()
    assert int(q_optimizer.state_dict()["state"][0]["step"]) == updates
    assert int(mu_optimizer.state_dict()["state"][0]["step"]) == updates // 2
    agent = module.agent
    for target, online in ((agent.target_model, agent.model), (agent.target_q_model, agent.q_model),
                           (agent.target_q2_model, agent.q2_model)):
        assert torch.equal(params_vector(target), params_vector(online))
    assert not torch.equal(before, params_vector(agent.model))


def test_exact_resume_restores_both_optimizers(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> TD3:
        pl.seed_everything(3)
        module = pendulum_td3(total_env_steps=10**6, n_step_return=3)
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    run(2, tmp_path / "part")
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.updates == full.train_state.updates > 0
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    for i, (a, b) in enumerate(zip(full.optimizers(), resumed.optimizers(), strict=False)):
        assert_same(a.state_dict(), b.state_dict(), f"optimizer {i}")
    assert_same(full.replay.state_dict(), resumed.replay.state_dict(), "replay")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target_update_tau=2.0), "target_update_tau"),
        (dict(target_update_interval=-1), "target_update_interval"),
        (dict(policy_update_interval=0), "policy_update_interval"),
        (dict(learning_rate=float("inf")), "learning_rate"),
        (dict(q_target_clip=-5.0), "q_target_clip"),
        (dict(discount=-0.1), "discount"),
        (dict(agent=DdpgAgent()), "Td3Agent"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pendulum_td3(**kwargs)


@pytest.mark.slow
def test_td3_solves_pendulum():
    pl.seed_everything(1)
    module = pendulum_td3(
        Td3Agent(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]), batch_T=25, batch_B=8, batch_size=128,
        replay_ratio=64, min_steps_learn=1000, n_step_return=2, learning_rate=1e-3, q_learning_rate=1e-3,
        total_env_steps=50_000, log_interval_steps=1000, torch_threads=1,
    )
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=-250.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[stop]).fit(module)
    assert float(module.trainer.callback_metrics["train/return_mean"]) >= -250.0, module.train_state
