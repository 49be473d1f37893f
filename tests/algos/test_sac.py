"""SAC on Lightning: targets, the one-backward update, alpha, pretraining, resume, errors, learning."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import AgentInputs, DdpgAgent, SacAgent
from lightning_rl.algos import SAC
from lightning_rl.algos.qpg_common import split_updates
from lightning_rl.envs import make_env
from lightning_rl.replays import SamplesFromReplay
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import assert_same, make_trainer, params_vector

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(hidden_sizes=[16], q_hidden_sizes=[16])


def pendulum_sac(agent: SacAgent | None = None, batch_T: int = 16, batch_B: int = 2, **kwargs) -> SAC:
    settings = dict(batch_size=32, replay_size=50_000, replay_ratio=64, min_steps_learn=64, total_env_steps=256,
                    log_interval_steps=64)
    settings.update(kwargs)
    return SAC(agent or SacAgent(**SMALL), SerialSampler(env_id="Pendulum-v1", batch_T=batch_T, batch_B=batch_B),
               **settings)


def initialized(module: SAC) -> SAC:
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    return module


def end_of_episode_batch() -> SamplesFromReplay:
    """One stack ``[K=1, N=3]`` of the same transition (return 1, gamma^n 0.9): bootstrapped, cut
    by a time-out, and terminated."""
    obs = torch.tensor([[0.6, 0.8, -1.0]] * 3)
    next_obs = torch.tensor([[0.0, 1.0, 2.0]] * 3)
    zeros = torch.zeros(3)
    batch = SamplesFromReplay(
        agent_inputs=AgentInputs(obs, zeros[:, None], zeros),
        action=torch.tensor([[0.5]] * 3),
        return_=torch.ones(3),
        done=torch.tensor([False, False, True]),
        done_n=torch.tensor([False, False, True]),
        truncated_n=torch.tensor([False, True, False]),
        discount_n=torch.tensor([0.9, 0.9, 0.9]),
        target_inputs=AgentInputs(next_obs, zeros[:, None], zeros),
        idxs=torch.arange(3),
        is_weights=torch.ones(3),
    )
    return batch[None]


@pytest.mark.parametrize("bootstrap_timelimit", [True, False])
def test_timeouts_bootstrap_and_terminations_do_not(bootstrap_timelimit):
    torch.manual_seed(0)
    module = initialized(pendulum_sac(reward_scale=2.0, bootstrap_timelimit=bootstrap_timelimit))
    (mb,) = split_updates(module.agent, end_of_episode_batch(), module.reward_scale, module.bootstrap_timelimit)
    alpha = module.log_alpha.detach().exp()
    torch.manual_seed(1)
    y = module.loss(mb)["target"]
    # The same target by hand, with the same policy samples.
    torch.manual_seed(1)
    agent = module.agent
    with torch.no_grad():
        next_action, next_log_pi = module.policy_sample(mb.next_inputs)
        next_q = torch.minimum(agent.target_q1_model(*mb.next_inputs, next_action),
                               agent.target_q2_model(*mb.next_inputs, next_action))
    soft_value = next_q - alpha * next_log_pi
    assert float(y[0]) == pytest.approx(2.0 + 0.9 * float(soft_value[0]), rel=1e-6)
    if bootstrap_timelimit:
        assert float(y[1]) == pytest.approx(2.0 + 0.9 * float(soft_value[1]), rel=1e-6)
        assert abs(float(y[1]) - 2.0) > 1e-3
    else:
        assert float(y[1]) == 2.0
    assert float(y[2]) == 2.0  # terminated: the scaled return alone


def test_one_backward_gives_each_optimizer_exactly_its_own_gradients():
    torch.manual_seed(0)
    module = initialized(pendulum_sac())
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    terms = module.loss(mb)
    pi_params, q_params = module.agent.parameters_for("model"), module.agent.parameters_for("q")
    # The policy loss reaches no critic weight; each loss alone gives the gradients of its group.
    assert all(g is None for g in torch.autograd.grad(terms["pi_loss"], q_params, retain_graph=True, allow_unused=True))
    expected_pi = torch.autograd.grad(terms["pi_loss"], pi_params, retain_graph=True)
    expected_q = torch.autograd.grad(terms["q_loss"], q_params, retain_graph=True)
    expected_alpha = torch.autograd.grad(terms["alpha_loss"], [module.log_alpha], retain_graph=True)
    terms["loss"].backward()
    for p, g in zip(pi_params, expected_pi, strict=False):
        torch.testing.assert_close(p.grad, g)
    for p, g in zip(q_params, expected_q, strict=False):
        torch.testing.assert_close(p.grad, g)
    torch.testing.assert_close(module.log_alpha.grad, expected_alpha[0])
    assert all(p.requires_grad for p in q_params)


@pytest.mark.parametrize("target_entropy, direction", [(5.0, 1.0), (-5.0, -1.0)])
def test_alpha_moves_toward_the_target_entropy(target_entropy, direction):
    torch.manual_seed(0)
    # A 1-D action on [-1, 1] has at most log(2) entropy: 5 is out of reach (alpha must grow
    # to push entropy up), -5 far below the initial policy's (alpha must shrink).
    module = initialized(pendulum_sac(target_entropy=target_entropy, initial_alpha=0.5))
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    optimizer = torch.optim.Adam([module.log_alpha], lr=0.05)
    start = float(module.log_alpha)
    for _ in range(5):
        optimizer.zero_grad()
        module.loss(mb)["alpha_loss"].backward()
        optimizer.step()
    assert direction * (float(module.log_alpha) - start) == pytest.approx(5 * 0.05, rel=0.05)


def test_auto_target_entropy_is_minus_the_action_size():
    module = initialized(pendulum_sac())
    assert module.entropy_target == -1.0
    assert initialized(pendulum_sac(target_entropy=-0.3)).entropy_target == -0.3


def test_fit_steps_all_three_optimizers_once_per_replay_batch():
    pl.seed_everything(0)
    module = pendulum_sac()
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = (params_vector(pl_module.agent.model), params_vector(pl_module.agent.target_q1_model))

    make_trainer(callbacks=[Snapshot()]).fit(module)
    # 32 env steps per iteration, 64 * 32 / 32 = 64 updates each, from the 2nd iteration on.
    assert module.train_state.updates == 64 * (256 // 32 - 1)
    for optimizer in module.optimizers():
        assert int(optimizer.state_dict()["state"][0]["step"]) == module.train_state.updates
    assert not torch.equal(before[0], params_vector(module.agent.model))
    assert not torch.equal(before[1], params_vector(module.agent.target_q1_model))
    assert float(module.log_alpha) != 0.0
    metrics = module.trainer.callback_metrics
    assert {"train/q_loss", "train/pi_loss", "train/alpha", "train/entropy"} <= set(metrics)


def test_fixed_alpha_has_no_alpha_optimizer():
    pl.seed_everything(0)
    module = pendulum_sac(fixed_alpha=0.2, total_env_steps=128)
    make_trainer().fit(module)
    assert len(module.optimizers()) == 2
    assert float(module.log_alpha.exp()) == pytest.approx(0.2)
    assert float(module.trainer.callback_metrics["train/alpha"]) == pytest.approx(0.2)


@pytest.mark.parametrize("pretrain_uniform, std_range", [(True, (1.0, 1.3)), (False, (0.0, 0.4))])
def test_random_uniform_actions_before_min_steps_learn(pretrain_uniform, std_range):
    pl.seed_everything(0)
    # min_steps_learn is beyond the run: every stored action is a pretraining action.
    module = pendulum_sac(
        SacAgent(pretrain_std=0.1, **SMALL), batch_B=8, total_env_steps=1024, min_steps_learn=2048,
        pretrain_uniform=pretrain_uniform,
    )
    make_trainer().fit(module)
    actions = torch.as_tensor(module.replay.state_dict()["storage"]["samples.action"]).flatten()[:1024]
    # Uniform on Pendulum's [-2, 2] has std 4 / sqrt(12) = 1.15; the agent's noise 0.1 * 2.
    assert std_range[0] < float(actions.std()) < std_range[1]
    assert module.train_state.updates == 0


def test_exact_resume_restores_all_optimizers(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> SAC:
        pl.seed_everything(3)
        module = pendulum_sac(total_env_steps=10**6, n_step_return=3, clip_grad_norm=10.0, target_update_interval=2)
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    run(2, tmp_path / "part")
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 4 * 64
    assert resumed.train_state.updates == full.train_state.updates > 0
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    assert len(full.optimizers()) == 3
    for i, (a, b) in enumerate(zip(full.optimizers(), resumed.optimizers(), strict=False)):
        assert_same(a.state_dict(), b.state_dict(), f"optimizer {i}")
    assert_same(full.replay.state_dict(), resumed.replay.state_dict(), "replay")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target_update_tau=0.0), "target_update_tau"),
        (dict(target_update_tau=1.5), "target_update_tau"),
        (dict(target_update_interval=0), "target_update_interval"),
        (dict(learning_rate=-3e-4), "learning_rate"),
        (dict(q_learning_rate=0.0), "q_learning_rate"),
        (dict(alpha_learning_rate=float("nan")), "alpha_learning_rate"),
        (dict(fixed_alpha=0.0), "fixed_alpha"),
        (dict(initial_alpha=-1.0), "initial_alpha"),
        (dict(target_entropy="high"), "target_entropy"),
        (dict(reward_scale=0.0), "reward_scale"),
        (dict(clip_grad_norm=0.0), "clip_grad_norm"),
        (dict(q_target_clip=-1.0), "q_target_clip"),
        (dict(batch_size=0), "batch_size"),
        (dict(discount=1.5), "discount"),
        (dict(replay_ratio=0), "replay_ratio"),
        (dict(agent=DdpgAgent()), "SacAgent"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pendulum_sac(**kwargs)


@pytest.mark.slow
def test_sac_solves_pendulum():
    pl.seed_everything(1)
    # configs/sac/pendulum.yaml's settings, with a budget.
    module = pendulum_sac(
        SacAgent(hidden_sizes=[64, 64], q_hidden_sizes=[64, 64]), batch_T=25, batch_B=8, batch_size=128,
        replay_ratio=64, min_steps_learn=1000, n_step_return=2, learning_rate=1e-3, initial_alpha=0.2,
        total_env_steps=50_000, log_interval_steps=1000, torch_threads=1,
    )
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=-250.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[stop]).fit(module)
    assert float(module.trainer.callback_metrics["train/return_mean"]) >= -250.0, module.train_state
