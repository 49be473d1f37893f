"""DDPG on Lightning: n-step targets at episode ends, the update schedule, resume, errors, learning."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import DdpgAgent, SacAgent
from lightning_rl.algos import DDPG
from lightning_rl.algos.qpg_common import split_updates
from lightning_rl.envs import make_env
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import assert_same, make_trainer, params_vector
from tests.algos.test_sac import end_of_episode_batch

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(hidden_sizes=[16], q_hidden_sizes=[16])


def pendulum_ddpg(agent: DdpgAgent | None = None, batch_T: int = 16, batch_B: int = 2, **kwargs) -> DDPG:
    settings = dict(batch_size=32, replay_size=50_000, replay_ratio=64, min_steps_learn=64, total_env_steps=256,
                    log_interval_steps=64)
    settings.update(kwargs)
    return DDPG(agent or DdpgAgent(**SMALL), SerialSampler(env_id="Pendulum-v1", batch_T=batch_T, batch_B=batch_B),
                **settings)


@pytest.mark.parametrize("bootstrap_timelimit", [True, False])
def test_timeouts_bootstrap_and_terminations_do_not(bootstrap_timelimit):
    torch.manual_seed(0)
    module = pendulum_ddpg(reward_scale=2.0, bootstrap_timelimit=bootstrap_timelimit)
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), module.reward_scale, module.bootstrap_timelimit)
    y = module.q_loss(mb)["target"]
    next_q = module.agent.target_q_at_mu(*mb.next_inputs)  # Q'(s', mu'(s')), deterministic
    assert float(y[0]) == pytest.approx(2.0 + 0.9 * float(next_q[0]), rel=1e-6)
    assert float(y[1]) == pytest.approx(2.0 + 0.9 * float(next_q[1]) if bootstrap_timelimit else 2.0, rel=1e-6)
    assert float(y[2]) == 2.0
    # Clipped targets (rlpyt's q_target_clip).
    module.q_target_clip = 1.5
    assert float(module.q_loss(mb)["target"].max()) <= 1.5


def test_critic_and_policy_losses_train_only_their_network():
    torch.manual_seed(0)
    module = pendulum_ddpg()
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    mu_params, q_params = module.agent.parameters_for("model"), module.agent.parameters_for("q")
    mu_loss = module.mu_loss(mb)["mu_loss"]
    assert all(g is None for g in torch.autograd.grad(mu_loss, q_params, retain_graph=True, allow_unused=True))
    assert all(g is not None for g in torch.autograd.grad(mu_loss, mu_params))
    q_loss = module.q_loss(mb)["q_loss"]
    assert all(g is None for g in torch.autograd.grad(q_loss, mu_params, retain_graph=True, allow_unused=True))


def test_fit_updates_critic_each_batch_and_policy_every_interval():
    pl.seed_everything(0)
    module = pendulum_ddpg(policy_update_interval=3)
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = params_vector(pl_module.agent.target_model)

    make_trainer(callbacks=[Snapshot()]).fit(module)
    assert module.train_state.updates == 64 * 7
    mu_optimizer, q_optimizer = module.optimizers()
    assert int(q_optimizer.state_dict()["state"][0]["step"]) == 64 * 7
    assert int(mu_optimizer.state_dict()["state"][0]["step"]) == 64 * 7 // 3
    assert not torch.equal(before, params_vector(module.agent.target_model))
    assert {"train/q_loss", "train/mu_loss", "train/q_mean"} <= set(module.trainer.callback_metrics)


def test_exact_resume_restores_both_optimizers(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> DDPG:
        pl.seed_everything(3)
        module = pendulum_ddpg(total_env_steps=10**6, n_step_return=2, clip_grad_norm=1.0, policy_update_interval=2)
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
        (dict(target_update_tau=0.0), "target_update_tau"),
        (dict(target_update_interval=0), "target_update_interval"),
        (dict(policy_update_interval=1.5), "policy_update_interval"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(q_learning_rate=-1.0), "q_learning_rate"),
        (dict(reward_scale=-1.0), "reward_scale"),
        (dict(clip_grad_norm=0.0), "clip_grad_norm"),
        (dict(q_target_clip=0.0), "q_target_clip"),
        (dict(min_steps_learn=-1), "min_steps_learn"),
        (dict(n_step_return=0), "n_step_return"),
        (dict(agent=SacAgent()), "DdpgAgent"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pendulum_ddpg(**kwargs)


@pytest.mark.slow
def test_ddpg_solves_pendulum():
    pl.seed_everything(1)
    # configs/ddpg/pendulum.yaml's settings, with a budget.
    module = pendulum_ddpg(
        DdpgAgent(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]), batch_T=25, batch_B=8, batch_size=128,
        replay_ratio=64, min_steps_learn=1000, n_step_return=2, learning_rate=1e-3, q_learning_rate=1e-3,
        target_update_tau=0.005, total_env_steps=50_000, log_interval_steps=1000, torch_threads=1,
    )
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=-250.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[stop]).fit(module)
    assert float(module.trainer.callback_metrics["train/return_mean"]) >= -250.0, module.train_state
