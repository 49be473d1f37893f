"""R2D1: value rescaling, burn-in, stored states, input priorities, resume, errors, and learning on a POMDP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import DqnAgent, R2d1Agent
from lightning_rl.agents.base import AgentInputs
from lightning_rl.agents.recurrent import rnn_state_to_samples
from lightning_rl.algos import DQN, R2D1
from lightning_rl.algos.r2d1 import inv_value_rescale, value_rescale
from lightning_rl.cli import main
from lightning_rl.envs import CARTPOLE_NO_VELOCITY_ID, make_env
from lightning_rl.models import RnnState
from lightning_rl.replays import ReplayBuffer, SequenceSamplesFromReplay
from lightning_rl.runs import newest_checkpoint
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import assert_same, make_trainer

ROOT = Path(__file__).resolve().parents[2]
POMDP_SPACES = make_env(CARTPOLE_NO_VELOCITY_ID).spaces


def small_r2d1(total_env_steps: int = 2048, agent: R2d1Agent | None = None, **kwargs) -> R2D1:
    settings = dict(
        batch_size=8, batch_T=8, warmup_T=4, rnn_state_interval=4, n_step_return=2, discount=0.99,
        min_steps_learn=256, replay_size=4096, replay_ratio=4, target_update_interval=20, learning_rate=1e-3,
        log_interval_steps=256,
    )
    settings.update(kwargs)
    return R2D1(
        agent or R2d1Agent(hidden_sizes=(16,), lstm_size=16, head_size=16, eps_steps_min=0, eps_steps_max=640),
        SerialSampler(env_id=CARTPOLE_NO_VELOCITY_ID, batch_T=16, batch_B=4),
        total_env_steps=total_env_steps,
        **settings,
    )


def initialized(module: R2D1) -> R2D1:
    module.agent.initialize(POMDP_SPACES)
    return module


def sequence_batch(module: R2D1, N: int = 3, seed: int = 0, L: int | None = None) -> SequenceSamplesFromReplay:
    """A replay-shaped batch of ``N`` random sequences with no episode end (all rows valid)."""
    g = torch.Generator().manual_seed(seed)
    rows = module.warmup_T + module.batch_T
    L = rows + module.n_step_return if L is None else L
    H = module.agent.lstm_size
    return SequenceSamplesFromReplay(
        agent_inputs=AgentInputs(
            torch.randn(L, N, 2, generator=g), torch.randint(0, 2, (L, N), generator=g), torch.ones(L, N)
        ),
        action=torch.randint(0, 2, (L, N), generator=g),
        return_=torch.rand(rows, N, generator=g) * 3,
        done=torch.zeros(rows, N, dtype=torch.bool),
        done_n=torch.zeros(rows, N, dtype=torch.bool),
        truncated=torch.zeros(rows, N, dtype=torch.bool),
        truncated_n=torch.zeros(rows, N, dtype=torch.bool),
        discount_n=torch.full((rows, N), module.discount**module.n_step_return),
        n_steps=torch.full((rows, N), module.n_step_return, dtype=torch.long),
        init_rnn_state=RnnState(torch.randn(N, 1, H, generator=g), torch.randn(N, 1, H, generator=g)),
        idxs=torch.arange(N),
        is_weights=torch.ones(N),
    )


# ----- value rescaling -----


def test_value_rescale_by_hand():
    x = torch.tensor([3.0, -8.0, 0.0, 15.0], dtype=torch.float64)
    # sign(x) (sqrt(|x| + 1) - 1): sqrt(4) - 1 = 1, -(sqrt(9) - 1) = -2, 0, sqrt(16) - 1 = 3.
    torch.testing.assert_close(value_rescale(x, eps=0.0), torch.tensor([1.0, -2.0, 0.0, 3.0], dtype=torch.float64))
    torch.testing.assert_close(
        value_rescale(x, eps=1e-3), torch.tensor([1.003, -2.008, 0.0, 3.015], dtype=torch.float64)
    )
    torch.testing.assert_close(
        inv_value_rescale(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64), eps=0.0),
        torch.tensor([3.0, -8.0, 15.0], dtype=torch.float64),
    )
    torch.testing.assert_close(
        inv_value_rescale(torch.tensor([1.003, -2.008], dtype=torch.float64), eps=1e-3),
        torch.tensor([3.0, -8.0], dtype=torch.float64),
    )


@pytest.mark.parametrize("eps", [0.0, 1e-3, 0.1])
def test_value_rescale_round_trip(eps):
    magnitudes = torch.logspace(-6, 6, 500, dtype=torch.float64)
    x = torch.cat([-magnitudes.flip(0), torch.zeros(1, dtype=torch.float64), magnitudes])
    torch.testing.assert_close(inv_value_rescale(value_rescale(x, eps), eps), x, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(value_rescale(inv_value_rescale(x, eps), eps), x, rtol=1e-9, atol=1e-12)
    # float32, the training dtype: no cancellation error beyond a few ulps.
    x32 = torch.linspace(-1000.0, 1000.0, 2001)
    torch.testing.assert_close(inv_value_rescale(value_rescale(x32, eps), eps), x32, rtol=2e-6, atol=1e-5)


# ----- the sequence loss -----


def test_burn_in_rows_get_no_gradient_and_no_loss():
    module = initialized(small_r2d1(warmup_T=4, batch_T=6, n_step_return=2))
    batch = sequence_batch(module)
    observation = batch.agent_inputs.observation.clone().requires_grad_(True)
    batch = batch._replace(agent_inputs=batch.agent_inputs._replace(observation=observation))
    module.loss(batch)["loss"].backward()
    grad = observation.grad.abs().sum(dim=(1, 2))  # per row
    assert torch.all(grad[:4] == 0)  # burn-in: only warms up the state
    assert torch.all(grad[4:10] > 0)  # the training rows
    assert torch.all(grad[10:] == 0)  # bootstrap rows: targets only
    # The burn-in rows' actions and returns are not in the loss...
    loss = module.loss(batch)["loss"]
    changed = batch._replace(
        action=torch.cat([1 - batch.action[:4], batch.action[4:]]),
        return_=torch.cat([batch.return_[:4] + 100.0, batch.return_[4:]]),
    )
    assert module.loss(changed)["loss"] == loss
    # ...but their observations set the state the training rows start from.
    warm = batch.agent_inputs.observation.detach().clone()
    warm[:4] += 1.0
    other = batch._replace(agent_inputs=batch.agent_inputs._replace(observation=warm))
    assert module.loss(other)["loss"] != loss


def test_the_sequence_starts_from_the_stored_state():
    """A sequence with stored state ``S`` equals the same rows after running the agent from zeros
    over the steps that produced ``S`` (the burn-in of a longer sequence)."""
    short = initialized(small_r2d1(warmup_T=2, batch_T=5, n_step_return=2))
    long = small_r2d1(warmup_T=2 + 6, batch_T=5, n_step_return=2, agent=short.agent)
    batch = sequence_batch(long, N=4, seed=3)
    zeros = RnnState(torch.zeros_like(batch.init_rnn_state.h), torch.zeros_like(batch.init_rnn_state.c))
    batch = batch._replace(init_rnn_state=zeros)
    with torch.no_grad():
        _, state = short.agent(*batch.agent_inputs[:6], None)
    tail = SequenceSamplesFromReplay(
        agent_inputs=batch.agent_inputs[6:],
        action=batch.action[6:],
        return_=batch.return_[6:],
        done=batch.done[6:],
        done_n=batch.done_n[6:],
        truncated=batch.truncated[6:],
        truncated_n=batch.truncated_n[6:],
        discount_n=batch.discount_n[6:],
        n_steps=batch.n_steps[6:],
        init_rnn_state=rnn_state_to_samples(state),
        idxs=batch.idxs,
        is_weights=batch.is_weights,
    )
    expected, got = long.loss(batch), short.loss(tail)
    for name in ("loss", "priority", "q", "td_abs"):
        torch.testing.assert_close(got[name], expected[name])
    # Another stored state gives another loss: the state is used, not zeros.
    assert short.loss(tail._replace(init_rnn_state=zeros))["loss"] != got["loss"]


def test_rows_after_an_episode_end_and_truncated_steps_are_masked():
    module = initialized(small_r2d1(warmup_T=2, batch_T=6, n_step_return=1))
    batch = sequence_batch(module, N=2, seed=1)
    done = batch.done.clone()
    done[2 + 3, 0] = True  # sequence 0's training row 3 ends its episode (terminated)
    n_steps = batch.n_steps.clone()
    n_steps[2 + 1, 1] = 0  # sequence 1's training row 1 was truncated by a time limit
    batch = batch._replace(done=done, n_steps=n_steps, done_n=done.clone())
    terms = module.loss(batch)
    torch.testing.assert_close(terms["valid_fraction"], torch.tensor([4 / 6, 5 / 6]))

    def loss_with_return_at(row: int, b: int) -> float:
        return_ = batch.return_.clone()
        return_[2 + row, b] += 50.0
        return float(module.loss(batch._replace(return_=return_))["loss"].detach())

    base = float(terms["loss"].detach())
    assert loss_with_return_at(4, 0) == base  # after the episode end
    assert loss_with_return_at(1, 1) == base  # the truncated step
    assert loss_with_return_at(3, 0) != base  # the terminal step itself trains
    assert loss_with_return_at(2, 1) != base


def test_importance_weights_scale_each_sequence():
    module = initialized(small_r2d1())
    batch = sequence_batch(module, N=2)
    terms = module.loss(batch)
    halved = module.loss(batch._replace(is_weights=torch.tensor([0.5, 0.5])))
    torch.testing.assert_close(halved["loss"], 0.5 * terms["loss"])
    torch.testing.assert_close(halved["priority"], terms["priority"])


# ----- input priorities -----


class _Samples:
    """Just the fields of the sampler's ``Samples`` that input priorities read."""

    def __init__(self, reward, done, truncated, action, q):
        self.env = type("Env", (), dict(reward=reward, done=done, truncated=truncated))
        self.agent = type("Agent", (), dict(action=action, agent_info=type("Info", (), dict(q=q))))


def test_input_priorities_by_hand():
    module = small_r2d1(n_step_return=1, discount=0.5, value_scale_eps=0.0, pri_eta=0.5)
    # One env, 4 steps, n = 1: rows 0..2 bootstrap from the next row's max Q (inverse-rescaled).
    reward = np.array([[1.0], [0.0], [2.0], [0.0]], dtype=np.float32)
    done = np.zeros((4, 1), dtype=bool)
    q = np.array([[[0.0, 1.0]], [[3.0, 0.0]], [[0.0, 1.0]], [[1.0, 0.0]]], dtype=np.float32)
    action = np.array([[1], [0], [0], [1]])
    # h^-1(1) = 3, h^-1(3) = 15 (eps = 0); y = h(r + 0.5 * h^-1(max Q next)); td = |y - Q(s, a)|.
    # row 0: h(1 + 0.5 * 15) = h(8.5) = sqrt(9.5) - 1; Q = 1.   row 1: h(0 + 1.5); Q = 3.
    # row 2: h(2 + 0.5 * 3) = h(3.5); Q = 0.
    td = np.abs(np.array([np.sqrt(9.5) - 1 - 1, np.sqrt(2.5) - 1 - 3, np.sqrt(4.5) - 1 - 0]))
    expected = 0.5 * td.max() + 0.5 * td.mean() + 1e-6
    priorities = module.compute_input_priorities(_Samples(reward, done, np.zeros_like(done), action, q))
    np.testing.assert_allclose(priorities, np.full((4, 1), expected), rtol=1e-5)
    # A termination at row 0: row 0 does not bootstrap, rows after it belong to the next episode.
    done[0] = True
    priorities = module.compute_input_priorities(_Samples(reward, done, np.zeros_like(done), action, q))
    np.testing.assert_allclose(priorities, np.full((4, 1), abs(np.sqrt(2.0) - 1 - 1) + 1e-6), rtol=1e-5)


def test_input_priorities_reach_the_replay_as_sequences_become_valid():
    replay = ReplayBuffer(
        _replay_example(), size=64, B=2, n_step_return=1, prioritized=True, alpha=1.0, sequence_T=3,
        rnn_state_interval=2, default_priority=1.0,
    )
    T = 8
    rows = np.arange(T)[:, None] * np.ones((1, 2))
    priority = (10.0 + rows + 100.0 * np.arange(2)[None, :]).astype(np.float32)  # row t, env b: 10 + t + 100 b
    replay.append_samples(_replay_samples(T, priority))
    # A start needs its 3 + 1 rows and their 1-step targets written: rows 0 and 2 of both envs.
    batch = replay.sample_batch(4000)
    t = batch.idxs.numpy() // 2
    b = batch.idxs.numpy() % 2
    assert set(zip(t.tolist(), b.tolist(), strict=False)) == {(0, 0), (0, 1), (2, 0), (2, 1)}
    # Drawn in proportion to the input priorities 10, 110, 12, 112 (alpha = 1).
    counts = {k: int(((t == k[0]) & (b == k[1])).sum()) for k in [(0, 0), (0, 1), (2, 0), (2, 1)]}
    total = 10 + 110 + 12 + 112
    for (row, env), count in counts.items():
        assert count / 4000 == pytest.approx((10 + row + 100 * env) / total, abs=0.03)


def _replay_example():
    from lightning_rl.algos.r2d1 import PrioritizedSequenceSamplesToBuffer

    return PrioritizedSequenceSamplesToBuffer(
        observation=np.zeros(2, np.float32), action=np.int64(0), reward=np.float32(0), done=np.bool_(False),
        truncated=np.bool_(False), prev_action=np.int64(0), prev_reward=np.float32(0),
        prev_rnn_state=RnnState(np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32)),
        priority=np.float32(1.0),
    )


def _replay_samples(T: int, priority: np.ndarray):
    from lightning_rl.algos.r2d1 import PrioritizedSequenceSamplesToBuffer

    B = priority.shape[1]
    return PrioritizedSequenceSamplesToBuffer(
        observation=np.zeros((T, B, 2), np.float32), action=np.zeros((T, B), np.int64),
        reward=np.ones((T, B), np.float32), done=np.zeros((T, B), bool), truncated=np.zeros((T, B), bool),
        prev_action=np.zeros((T, B), np.int64), prev_reward=np.zeros((T, B), np.float32),
        prev_rnn_state=RnnState(np.zeros((T, B, 1, 4), np.float32), np.zeros((T, B, 1, 4), np.float32)),
        priority=priority,
    )


# ----- training runs -----


class _RecordingR2D1(R2D1):
    """Keeps the init_rnn_state of every replayed batch."""

    def loss(self, batch):
        self.seen_states = getattr(self, "seen_states", []) + [batch.init_rnn_state.h.detach().clone()]
        return super().loss(batch)


def test_fit_replays_stored_states_and_counts_updates_in_training_rows():
    pl.seed_everything(0)
    module = _RecordingR2D1(
        R2d1Agent(hidden_sizes=(16,), lstm_size=16, head_size=16, eps_steps_min=0, eps_steps_max=640),
        SerialSampler(env_id=CARTPOLE_NO_VELOCITY_ID, batch_T=16, batch_B=4),
        batch_size=8, batch_T=8, warmup_T=4, rnn_state_interval=4, n_step_return=2, min_steps_learn=256,
        replay_size=4096, replay_ratio=4, target_update_interval=20, total_env_steps=1024, log_interval_steps=256,
    )
    make_trainer().fit(module)
    # Iterations 4 .. 16 of 64 steps have reached min_steps_learn; replay_ratio 4 counts training
    # rows: 4 * 64 / (8 sequences * 8 rows) = 4 updates each.
    assert module.train_state.updates == 13 * 4
    assert len(module.seen_states) == 52
    # Stored LSTM states reach the loss (a zero state would mean none were stored).
    assert all(h.shape == (8, 1, 16) for h in module.seen_states)
    assert sum(bool((h != 0).any()) for h in module.seen_states) > 45
    assert module.replay.sequence_T == 12
    assert module.replay.storage.rnn_state_interval == 4


def test_exact_resume_matches_an_uninterrupted_run(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> R2D1:
        pl.seed_everything(3)
        module = small_r2d1(total_env_steps=10**6)
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    run(2, tmp_path / "part")
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 4 * 256
    assert full.train_state.updates > 0
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    assert_same(full.optimizers().state_dict(), resumed.optimizers().state_dict(), "optimizer")
    full_replay, resumed_replay = full.replay.state_dict(), resumed.replay.state_dict()
    # NaN marks "no set_beta" and never equals itself.
    assert np.isnan(full_replay["sampler"].pop("beta_set")) and np.isnan(resumed_replay["sampler"].pop("beta_set"))
    assert_same(full_replay, resumed_replay, "replay")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(warmup_T=-1), "warmup_T"),
        (dict(batch_T=0), "batch_T"),
        (dict(rnn_state_interval=0), "rnn_state_interval"),
        (dict(value_scale_eps=-0.1), "value_scale_eps"),
        (dict(pri_eta=1.5), "pri_eta"),
        (dict(discount=1.5), "discount"),
        (dict(target_update_tau=0.0), "target_update_tau"),
        (dict(agent=DqnAgent()), "R2d1Agent"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        small_r2d1(**kwargs)


def test_min_steps_learn_must_cover_one_sequence():
    # (4 warm-up + 8 training + 2 * 2) rows x 4 envs = 64 env steps before a sequence exists.
    module = small_r2d1(min_steps_learn=63)
    with pytest.raises(ValueError, match="min_steps_learn=63"):
        make_trainer().fit(module)


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cartpole_pomdp_config_runs(in_tmp):
    config = str(ROOT / "configs" / "r2d1" / "cartpole_pomdp.yaml")
    main(["fit", "--config", config, "--model.init_args.total_env_steps", "1600",
          "--model.init_args.min_steps_learn", "800", "--model.init_args.log_interval_steps", "800",
          "--trainer.enable_progress_bar", "false"])
    state = torch.load(newest_checkpoint(in_tmp / "runs" / "r2d1_cartpolenovelocity"),
                       weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1600
    assert state["lightning_rl"]["train_state"]["updates"] > 0


def test_pong_config_runs(in_tmp):
    config = str(ROOT / "configs" / "r2d1" / "pong.yaml")
    main(["fit", "--config", config, "--trainer.accelerator", "cpu", "--trainer.enable_progress_bar", "false",
          "--model.init_args.sampler.init_args.batch_T", "8", "--model.init_args.sampler.init_args.batch_B", "4",
          "--model.init_args.sampler.init_args.n_workers", "2",
          "--model.init_args.sampler.init_args.max_decorrelation_steps", "0",
          "--model.init_args.warmup_T", "2", "--model.init_args.batch_T", "4", "--model.init_args.batch_size", "2",
          "--model.init_args.rnn_state_interval", "4", "--model.init_args.n_step_return", "2",
          "--model.init_args.min_steps_learn", "64", "--model.init_args.replay_size", "512",
          "--model.init_args.replay_ratio", "4", "--model.init_args.total_env_steps", "96",
          "--model.init_args.log_interval_steps", "96"])
    state = torch.load(newest_checkpoint(in_tmp / "runs" / "r2d1_pong"), weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 96
    assert state["lightning_rl"]["train_state"]["updates"] > 0


# ----- learning: memory beats no memory -----


class _Track(pl.Callback):
    def __init__(self) -> None:
        self.history: list[float] = []

    def on_train_epoch_end(self, trainer, pl_module):
        value = trainer.callback_metrics.get("train/return_mean")
        if value is not None:
            self.history.append(float(value))


@pytest.mark.slow
def test_r2d1_beats_feed_forward_dqn_on_cartpole_without_velocities():
    """With position and angle only, a memoryless policy cannot tell which way the pole falls:
    DQN levels off near 45 steps; R2D1's LSTM infers the velocities from consecutive frames."""
    budget = 30_000
    pl.seed_everything(0)
    dqn = DQN(
        DqnAgent(hidden_sizes=(64, 64), eps_steps_min=0, eps_steps_max=8000, eps_final=0.02),
        SerialSampler(env_id=CARTPOLE_NO_VELOCITY_ID, batch_T=10, batch_B=8),
        batch_size=64, n_step_return=3, discount=0.99, min_steps_learn=2000, replay_size=50_000, replay_ratio=8,
        target_update_interval=100, learning_rate=1e-3, optimizer_eps=1e-8, clip_grad_norm=10.0, double_dqn=True,
        total_env_steps=budget, log_interval_steps=2000,
    )
    dqn_track = _Track()
    make_trainer(callbacks=[dqn_track]).fit(dqn)
    dqn_best = max(dqn_track.history)

    pl.seed_everything(0)
    r2d1 = R2D1(
        R2d1Agent(hidden_sizes=(64,), lstm_size=64, head_size=64, eps_steps_min=0, eps_steps_max=8000, eps_final=0.02),
        SerialSampler(env_id=CARTPOLE_NO_VELOCITY_ID, batch_T=10, batch_B=8),
        batch_size=32, batch_T=20, warmup_T=10, rnn_state_interval=10, n_step_return=3, discount=0.99,
        min_steps_learn=2000, replay_size=50_000, replay_ratio=32, target_update_interval=100, learning_rate=1e-3,
        optimizer_eps=1e-8, clip_grad_norm=10.0, total_env_steps=budget, log_interval_steps=2000,
    )
    r2d1_track = _Track()
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=2 * dqn_best, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[r2d1_track, stop]).fit(r2d1)
    r2d1_best = max(r2d1_track.history)
    print(f"return_mean within {budget} env steps: DQN {dqn_best:.1f} {dqn_track.history}, "
          f"R2D1 {r2d1_best:.1f} {r2d1_track.history}")
    assert dqn_best < 80.0, dqn_track.history
    assert r2d1_best >= 2 * dqn_best, (dqn_track.history, r2d1_track.history)


def test_sequence_replay_rows_are_transitions_plus_the_lstm_state_and_priority():
    from lightning_rl.algos.replay_setup import (
        PrioritizedSequenceSamplesToBuffer,
        SamplesToBuffer,
        SequenceSamplesToBuffer,
    )

    transition = ("observation", "action", "reward", "done", "truncated", "prev_action", "prev_reward")
    assert SamplesToBuffer._fields == transition
    assert SequenceSamplesToBuffer._fields == (*transition, "prev_rnn_state")
    assert PrioritizedSequenceSamplesToBuffer._fields == (*transition, "prev_rnn_state", "priority")
