"""DQN on Lightning: hand-checked targets and loss, priorities, resume, Atari, CLI, learning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import nn

from lightning_rl.agents import AgentInputs, CatDqnAgent, DqnAgent
from lightning_rl.algos import DQN
from lightning_rl.callbacks import EvaluationCallback
from lightning_rl.cli import main
from lightning_rl.envs import make_env
from lightning_rl.replays import FrameReplayStorage, SamplesFromReplay
from lightning_rl.runs import newest_checkpoint
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer, params_vector
from tests.toy_envs import make_constant_reward_env

ROOT = Path(__file__).resolve().parents[2]


def cartpole_dqn(total_env_steps: int = 2048, agent: DqnAgent | None = None, **kwargs) -> DQN:
    settings = dict(
        batch_size=32, replay_size=5000, replay_ratio=8, min_steps_learn=256, target_update_interval=20,
        learning_rate=1e-3, optimizer_eps=1e-8, log_interval_steps=512,
    )
    settings.update(kwargs)
    agent = agent or DqnAgent(hidden_sizes=[32], eps_steps_min=0, eps_steps_max=1280, eps_final=0.05)
    return DQN(agent, SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4), total_env_steps=total_env_steps,
               **settings)


def assert_same(a, b, where: str) -> None:
    """Exact equality of nested state (tensors, arrays, dicts, lists, scalars; NaN equals NaN)."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


# ----- the loss, checked by hand -----


def linear_dqn(**kwargs) -> DQN:
    """A DQN whose networks are single linear layers: ``Q(s) = W s`` on CartPole's 4-D states."""
    module = cartpole_dqn(agent=DqnAgent(hidden_sizes=[]), **kwargs)
    module.agent.initialize(make_env("CartPole-v1").spaces)

    def set_weights(model: nn.Module, rows: list[list[float]]) -> None:
        (linear,) = [m for m in model.modules() if isinstance(m, nn.Linear)]
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(rows))
            linear.bias.zero_()

    set_weights(module.agent.model, [[0, 0, 1, 0], [0, 0, 0, 1]])  # online: Q = (s2, s3)
    set_weights(module.agent.target_model, [[1, 0, 0, 0], [0, 1, 0, 0]])  # target: Q = (s0, s1)
    return module


def tiny_batch(is_weights: list[float] | None = None) -> SamplesFromReplay:
    """Three transitions: bootstrapped, terminated, and a 2-step window (gamma 0.9) cut by a timeout."""
    obs = torch.tensor([[0.0, 0.0, 1.0, 2.0]] * 3)
    next_obs = torch.tensor([[1.0, 3.0, 5.0, 2.0], [7.0, 7.0, 7.0, 7.0], [2.0, -1.0, 0.0, 4.0]])
    zeros = torch.zeros(3)
    return SamplesFromReplay(
        agent_inputs=AgentInputs(obs, zeros.long(), zeros),
        action=torch.tensor([0, 1, 0]),
        return_=torch.tensor([0.5, 1.0, 0.25]),
        done=torch.tensor([False, True, False]),
        done_n=torch.tensor([False, True, False]),
        truncated_n=torch.tensor([False, False, True]),
        discount_n=torch.tensor([0.9, 0.9, 0.81]),
        target_inputs=AgentInputs(next_obs, zeros.long(), zeros),
        idxs=torch.arange(3),
        is_weights=torch.tensor(is_weights or [1.0, 1.0, 1.0]),
    )


def test_td_target_by_hand():
    batch = tiny_batch()
    # Target Q(s_n) = (1, 3), (7, 7), (2, -1); online Q(s_n) = (5, 2), (7, 7), (0, 4).
    # DQN: max of the target net -> 0.5 + 0.9 * 3, 1 (terminated), 0.25 + 0.81 * 2.
    torch.testing.assert_close(linear_dqn().loss(batch)["target"], torch.tensor([3.2, 1.0, 1.87]))
    # Double DQN: the online net picks (0, -, 1), the target net values them: 1 and -1.
    torch.testing.assert_close(linear_dqn(double_dqn=True).loss(batch)["target"], torch.tensor([1.4, 1.0, -0.56]))


@pytest.mark.parametrize(
    "kwargs, is_weights, loss, td_abs",
    [
        # Q(s, a) = (1, 2, 1); delta = (2.2, -1, 0.87); Huber: |d| - 0.5 beyond 1, else d^2 / 2.
        # The new priorities are |delta| (+ 1e-6 when sent to the replay).
        (dict(), None, (1.7 + 0.5 + 0.37845) / 3, [2.2, 1.0, 0.87]),
        (dict(delta_clip=None), None, (2.42 + 0.5 + 0.37845) / 3, [2.2, 1.0, 0.87]),
        # Double: delta = (0.4, -1, -1.56).
        (dict(double_dqn=True), None, (0.08 + 0.5 + 1.06) / 3, [0.4, 1.0, 1.56]),
        # Prioritized: the losses are weighted by the importance weights.
        (dict(prioritized_replay=True), [1.0, 0.5, 0.25], (1.7 + 0.25 + 0.0946125) / 3, [2.2, 1.0, 0.87]),
    ],
)
def test_loss_and_td_errors_by_hand(kwargs, is_weights, loss, td_abs):
    module = linear_dqn(**kwargs)
    terms = module.loss(tiny_batch(is_weights))
    assert float(terms["loss"].detach()) == pytest.approx(loss, rel=1e-5)
    torch.testing.assert_close(terms["td_abs"], torch.tensor(td_abs))
    assert terms["loss"].requires_grad
    torch.testing.assert_close(terms["q"], torch.tensor([1.0, 2.0, 1.0]))


@pytest.mark.parametrize("n_step_return", [1, 3])
def test_time_limits_bootstrap_instead_of_ending_the_return(n_step_return):
    # Reward 1 forever, cut by a 5-step time limit, constant observation: Q = 1 / (1 - 0.5) = 2
    # only if truncations bootstrap (treated as terminations it would average 1.61).
    pl.seed_everything(0)
    module = DQN(
        DqnAgent(hidden_sizes=[8]),
        SerialSampler(env_id=make_constant_reward_env, env_kwargs=dict(max_episode_steps=5), batch_T=10, batch_B=2),
        discount=0.5, n_step_return=n_step_return, delta_clip=None, batch_size=32, replay_size=500, replay_ratio=16,
        min_steps_learn=40, target_update_interval=10, learning_rate=1e-2, optimizer_eps=1e-8, total_env_steps=600,
        log_interval_steps=200,
    )
    make_trainer().fit(module)
    q = module.agent(torch.zeros(1, 1), torch.zeros(1).long(), torch.zeros(1))
    torch.testing.assert_close(q, torch.full((1, 2), 2.0), atol=0.05, rtol=0)


def test_loss_gradient_reaches_only_the_online_network():
    module = linear_dqn(double_dqn=True)
    module.loss(tiny_batch())["loss"].backward()
    assert all(p.grad is not None for p in module.agent.parameters_for("model"))
    assert all(p.grad is None for p in module.agent.target_model.parameters())


# ----- the training loop -----


class _RecordingDQN(DQN):
    """Records the weights each collection acts with, the weights after each training step and
    the priorities sent to the replay."""

    def setup(self, stage: str) -> None:
        super().setup(stage)
        self.collected_with, self.after_step, self.sent = [], [], []
        obtain = self.sampler.obtain_samples

        def recording_obtain(itr: int):
            self.collected_with.append(params_vector(self.agent.model))
            return obtain(itr)

        self.sampler.obtain_samples = recording_obtain
        if self.prioritized_replay:
            update = self.replay.update_batch_priorities

            def recording_update(idxs, priorities):
                self.sent.append((idxs.clone(), priorities.clone()))
                update(idxs, priorities)

            self.replay.update_batch_priorities = recording_update

    def training_step(self, batch, batch_idx):
        super().training_step(batch, batch_idx)
        self.after_step.append(params_vector(self.agent.model))


def test_updates_follow_the_replay_ratio_and_collections_use_the_latest_weights():
    pl.seed_everything(0)
    # 64 env steps per iteration, replay ratio 8, batch 32: 16 updates per iteration after 256 steps.
    module = _RecordingDQN(DqnAgent(hidden_sizes=[16]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4),
                           batch_size=32, replay_ratio=8, min_steps_learn=256, replay_size=2000, learning_rate=1e-3,
                           total_env_steps=64 * 8, log_interval_steps=128, target_update_interval=16)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 512
    assert module.train_state.updates == 16 * 5  # iterations 4 .. 8
    for i in range(1, 8):
        assert torch.equal(module.collected_with[i], module.after_step[i - 1])
    # Every 16 updates the target network became a copy of the online one.
    assert torch.equal(params_vector(module.agent.target_model), params_vector(module.agent.model))


def test_direct_updates_match_lightnings_path_and_count_global_steps():
    class CountBackward(pl.Callback):
        def __init__(self):
            self.calls = 0

        def on_after_backward(self, trainer, pl_module):
            self.calls += 1

    results = {}
    runs = [("direct", True, []), ("lightning", False, []), ("hooked", True, [CountBackward()])]
    for name, direct, callbacks in runs:
        pl.seed_everything(0)
        module = cartpole_dqn(total_env_steps=512, direct_updates=direct)
        trainer = make_trainer(callbacks=callbacks)
        trainer.fit(module)
        assert module._direct == (name == "direct")
        assert trainer.global_step == module.train_state.updates == 80
        results[name] = params_vector(module.agent.model)
    # A callback that hooks into backward is called for every update (Lightning's path).
    assert callbacks[0].calls == 80
    torch.testing.assert_close(results["direct"], results["lightning"], rtol=0, atol=0)
    torch.testing.assert_close(results["hooked"], results["lightning"], rtol=0, atol=0)


def test_soft_target_updates_move_the_target_part_way():
    pl.seed_everything(0)
    module = cartpole_dqn(total_env_steps=320, target_update_tau=0.01, target_update_interval=1)
    target_before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal target_before
            target_before = params_vector(pl_module.agent.target_model)

    make_trainer(callbacks=[Snapshot()]).fit(module)
    target, online = params_vector(module.agent.target_model), params_vector(module.agent.model)
    assert module.train_state.updates == 32
    assert not torch.equal(target, target_before)
    # 32 Polyak steps of 1% cover at most 1 - 0.99 ** 32 = 28% of the way to the online weights.
    assert (target - target_before).norm() < 0.4 * (online - target_before).norm()


def test_prioritized_training_sends_td_errors_back_and_changes_sampling():
    pl.seed_everything(0)
    module = _RecordingDQN(
        DqnAgent(hidden_sizes=[16]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4),
        batch_size=32, replay_ratio=8, min_steps_learn=256, replay_size=2000, learning_rate=1e-3,
        total_env_steps=64 * 6, log_interval_steps=128, prioritized_replay=True, pri_alpha=0.6,
        pri_beta_init=0.4, pri_beta_steps=100,
    )
    make_trainer().fit(module)
    replay = module.replay
    assert len(module.sent) == 3  # one call per training step, all K batches at once
    idxs, priorities = module.sent[-1]
    assert idxs.shape == priorities.shape == (16 * 32,)
    # The sum tree holds priority ** alpha for the last step's samples (the last write wins).
    last = {int(i): float(p) for i, p in zip(idxs, priorities, strict=False)}
    ids = torch.tensor(list(last))
    B, T = replay.B, replay.T
    slots = ((ids // B) % T) * B + ids % B
    leaves = replay.sampler.tree.get(slots.numpy())
    np.testing.assert_allclose(leaves, np.array(list(last.values())) ** 0.6, rtol=1e-5)
    # beta anneals with updates (sample_batch calls): 48 of 100.
    assert replay.beta == pytest.approx(0.4 + 0.6 * 48 / 100)
    # Raising a few priorities makes those samples dominate the next draws.
    favoured = ids[:3]
    replay.update_batch_priorities(favoured, torch.full((3,), 1e4))
    drawn = torch.cat([replay.sample_batch(32).idxs for _ in range(20)])
    assert torch.isin(drawn, favoured).float().mean() > 0.5


def test_epsilon_follows_the_agent_schedule_and_vector_epsilon_works():
    pl.seed_everything(0)
    module = cartpole_dqn(total_env_steps=64 * 5, agent=DqnAgent(hidden_sizes=[16], eps_steps_min=64, eps_steps_max=192,
                                                                eps_final=0.1))
    make_trainer().fit(module)
    assert module.agent.eps_sample == pytest.approx(0.1)
    pl.seed_everything(0)
    vector = cartpole_dqn(total_env_steps=64 * 5, agent=DqnAgent(hidden_sizes=[16], eps_final_min=0.01,
                                                                eps_final=0.4, eps_steps_min=0, eps_steps_max=128))
    make_trainer().fit(vector)
    eps = vector.agent.eps_sample
    assert eps.shape == (4,)
    torch.testing.assert_close(eps, torch.tensor(np.logspace(-2, np.log10(0.4), 4), dtype=torch.float32))


def test_linear_lr_schedule_decays_per_iteration():
    pl.seed_everything(0)
    module = cartpole_dqn(total_env_steps=64 * 8, linear_lr_schedule=True, learning_rate=1e-3)
    make_trainer().fit(module)
    # The last of 8 iterations (itr 7 when its updates ran) trains at 1/8 of the initial rate.
    assert module.optimizers().param_groups[0]["lr"] == pytest.approx(1e-3 / 8)


def test_exact_resume_matches_an_uninterrupted_run(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> DQN:
        pl.seed_everything(3)
        module = cartpole_dqn(
            total_env_steps=10**6, log_interval_steps=256, prioritized_replay=True, n_step_return=3,
            double_dqn=True, agent=DqnAgent(hidden_sizes=[16], dueling=True, eps_steps_min=0, eps_steps_max=1920),
        )
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(6, tmp_path / "full")
    part = run(3, tmp_path / "part")
    assert len(list((tmp_path / "part").glob("last.ckpt.replay-*"))) == 1
    part_eps = part.agent.eps_sample
    resumed = run(6, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 6 * 256
    assert resumed.train_state.updates == full.train_state.updates > 0
    assert part_eps > resumed.agent.eps_sample == full.agent.eps_sample
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    assert_same(full.optimizers().state_dict(), resumed.optimizers().state_dict(), "optimizer")
    assert_same(full.replay.state_dict(), resumed.replay.state_dict(), "replay")


def test_tiny_atari_run_uses_frame_replay():
    pl.seed_everything(0)
    module = DQN(
        DqnAgent(dueling=True, eps_steps_min=0, eps_steps_max=320),
        SerialSampler(env_id="ALE/Pong-v5", batch_T=16, batch_B=2),
        batch_size=8, replay_size=400, replay_ratio=0.5, min_steps_learn=96, n_step_return=3, double_dqn=True,
        prioritized_replay=True, target_update_interval=4, total_env_steps=192, log_interval_steps=96,
    )
    make_trainer().fit(module)
    assert isinstance(module.replay.storage, FrameReplayStorage)
    assert module.train_state.env_steps == 192
    assert module.train_state.updates == 4 * 2  # 32 * 0.5 / 8 per iteration, iterations 3 .. 6
    assert module.replay.n_stored == 192
    batch = module.replay.sample_batch(4)
    assert batch.agent_inputs.observation.dtype == torch.uint8
    assert batch.agent_inputs.observation.shape == (4, 4, 84, 84)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(delta_clip=0.0), "delta_clip"),
        (dict(target_update_tau=0.0), "target_update_tau"),
        (dict(target_update_tau=1.5), "target_update_tau"),
        (dict(target_update_interval=0), "target_update_interval"),
        (dict(learning_rate=-1e-3), "learning_rate"),
        (dict(optimizer_eps=0.0), "optimizer_eps"),
        (dict(clip_grad_norm=0.0), "clip_grad_norm"),
        (dict(discount=1.5), "discount"),
        (dict(batch_size=0), "batch_size"),
        (dict(replay_ratio=0), "replay_ratio"),
        (dict(n_step_return=0), "n_step_return"),
        (dict(min_steps_learn=-1), "min_steps_learn"),
        (dict(prioritized_replay=True, pri_beta_steps=0), "pri_beta_steps"),
        (dict(prioritized_replay=True, pri_alpha=-0.5), "pri_alpha"),
        (dict(linear_lr_schedule=True, total_env_steps=None), "total_env_steps"),
        (dict(agent=CatDqnAgent()), "DqnAgent"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cartpole_dqn(**kwargs)


def test_cli_fit_and_resume_with_the_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = str(ROOT / "configs" / "dqn" / "cartpole.yaml")
    quiet = ["--model.init_args.log_interval_steps", "256", "--model.init_args.min_steps_learn", "256",
             "--model.init_args.replay_ratio", "1", "--trainer.enable_progress_bar", "false"]
    main(["fit", "--config", config, "--model.init_args.total_env_steps", "512", *quiet])
    last = newest_checkpoint(tmp_path / "runs" / "dqn_cartpole")
    assert last.exists() and len(list(last.parent.glob("last.ckpt.replay-*"))) == 1
    main(["fit", "--config", config, "--model.init_args.total_env_steps", "1024", *quiet, "--ckpt_path", "last"])
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1024
    assert state["lightning_rl"]["train_state"]["updates"] == 4 * 4  # 256 * 1 / 64 per iteration, 4 iterations


# ----- learning -----


def solve_cartpole(module: DQN) -> float:
    """Fit until an evaluation (10 greedy episodes, every 2048 env steps) averages 475; its mean."""
    stop = pl.callbacks.EarlyStopping(
        monitor="eval/return_mean", mode="max", stopping_threshold=475.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    # save_best=False: no best.ckpt (without a logger it would go to ./checkpoints, in the repository).
    evaluation = EvaluationCallback(every_n_epochs=1, deterministic=True, save_best=False)
    make_trainer(callbacks=[evaluation, stop]).fit(module)
    return float(module.trainer.callback_metrics["eval/return_mean"])


#: Fast CartPole settings: RL-zoo's lr scale, 3-step double DQN, one update per 4 env steps
#: (batch 64), a [64, 64] MLP; about 15-40k env steps and 10-30 s on 2 cores.
FAST_CARTPOLE = dict(
    batch_size=64, replay_size=100_000, replay_ratio=16, min_steps_learn=1000, n_step_return=3, double_dqn=True,
    target_update_interval=100, learning_rate=1e-3, optimizer_eps=1e-8, total_env_steps=100_000,
    log_interval_steps=2048,
)
CARTPOLE_SAMPLER = dict(env_id="CartPole-v1", batch_T=64, batch_B=1, eval_n_envs=10, eval_max_trajectories=10,
                        eval_max_steps=500)


@pytest.mark.slow
def test_dqn_solves_cartpole():
    pl.seed_everything(1)
    module = DQN(
        DqnAgent(hidden_sizes=[64, 64], eps_steps_min=0, eps_steps_max=5120, eps_final=0.02),
        SerialSampler(**CARTPOLE_SAMPLER), **FAST_CARTPOLE,
    )
    assert solve_cartpole(module) >= 475.0, module.train_state
