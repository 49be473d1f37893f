"""Row 25: learning smoke gates (``slow``: CI runs them too).

* Identity: :class:`tests.toy_envs.IdentityEnv` with one-step episodes (observation: a one-hot
  target out of 4; reward 1 if the action is the target, so the best mean episode reward is
  1). PPO and DQN must reach a greedy mean reward >= 0.9 (SB3's ``test_identity`` threshold, 90%
  of the maximum), measured on 200 fresh episodes of a separately seeded gymnasium env, stepped
  here, not by the library.
* Atari: ``configs/dqn/pong.yaml`` and MuJoCo: ``configs/sac/halfcheetah.yaml`` through the CLI,
  with their algorithm, agent, network, env and update ratio kept but a budget of 4,096 env steps
  each, learning from 1,024 on (not the row's 10k: the module has to stay within a few minutes on
  two shared cores). They must finish the budget with finite losses and weights, after the
  number of updates the config's ratio gives (counted by hand).

CartPole >= 475 within a budget is gated in ``tests/algos/test_on_policy.py``
(``test_ppo_solves_cartpole``, ``test_a2c_solves_cartpole``), ``tests/algos/test_dqn.py``
(``test_dqn_solves_cartpole``) and ``tests/algos/test_categorical_dqn.py``; Pendulum learning in
``tests/algos/test_sac.py``, ``tests/algos/test_td3.py`` and ``tests/algos/test_ddpg.py``
(``test_*_solves_pendulum``, return >= -250). They are not run again here.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import CategoricalPgAgent, DqnAgent
from lightning_rl.algos import DQN, PPO
from lightning_rl.cli import main
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer
from tests.test_shipped_configs import RECORDED
from tests.toy_envs import IdentityEnv, greedy_mean_reward

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
N_TARGETS = 4
IDENTITY = functools.partial(IdentityEnv, n=N_TARGETS, episode_length=1)
SMOKE_STEPS = 4096


def test_ppo_learns_the_identity():
    pl.seed_everything(0)
    module = PPO(CategoricalPgAgent(hidden_sizes=[32]), SerialSampler(env_id=IDENTITY, batch_T=16, batch_B=4),
                 epochs=4, minibatches=2, learning_rate=3e-3, entropy_loss_coeff=0.0, total_env_steps=4096,
                 log_interval_steps=1024)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 4096
    assert greedy_mean_reward(module.agent, IDENTITY) >= 0.9


def test_dqn_learns_the_identity():
    pl.seed_everything(0)
    module = DQN(DqnAgent(hidden_sizes=[32], eps_steps_min=0, eps_steps_max=1024, eps_final=0.05, eps_eval=0.0),
                 SerialSampler(env_id=IDENTITY, batch_T=16, batch_B=4), batch_size=32, replay_size=10_000,
                 replay_ratio=8, min_steps_learn=256, target_update_interval=50, learning_rate=1e-3,
                 optimizer_eps=1e-8, total_env_steps=4096, log_interval_steps=1024)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 4096
    assert greedy_mean_reward(module.agent, IDENTITY) >= 0.9


def smoke(config: str, overrides: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Fit ``config`` through the CLI for :data:`SMOKE_STEPS` env steps; the last checkpoint."""
    monkeypatch.chdir(tmp_path)
    RECORDED.clear()
    prefix = "--model.init_args."
    main(["fit", "--config", str(ROOT / "configs" / config),
          f"{prefix}total_env_steps", str(SMOKE_STEPS), f"{prefix}log_interval_steps", "1024",
          "--trainer.enable_progress_bar", "false",
          "--trainer.callbacks+=tests.test_shipped_configs.RecordLosses", *overrides])
    ckpt = next(tmp_path.glob("runs/*/*/checkpoints/last.ckpt"))
    return torch.load(ckpt, weights_only=True)


def assert_finite_losses(expected_names: set[str]) -> None:
    assert expected_names <= RECORDED.keys(), sorted(RECORDED)
    for name, values in RECORDED.items():
        assert values and all(math.isfinite(v) for v in values), (name, values)


def assert_finite_weights(state_dict: dict) -> None:
    for name, value in state_dict.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            assert torch.isfinite(value).all(), name


def test_atari_dqn_pong_smoke(tmp_path, monkeypatch):
    prefix = "--model.init_args."
    state = smoke("dqn/pong.yaml", [
        f"{prefix}sampler.init_args.max_decorrelation_steps", "100", f"{prefix}replay_size", "8192",
        f"{prefix}min_steps_learn", "1024", f"{prefix}target_update_interval", "100",
        f"{prefix}agent.init_args.eps_steps_min", "1024", f"{prefix}agent.init_args.eps_steps_max", "4096",
    ], tmp_path, monkeypatch)
    train_state = state["lightning_rl"]["train_state"]
    assert train_state["env_steps"] == SMOKE_STEPS
    # 8 updates (replay_ratio 8 x 32 env steps / batch 32) in each iteration of 8 envs x 4 steps
    # that ends at or after min_steps_learn: the one reaching 1024 env steps and the 96 after it.
    assert train_state["updates"] == ((SMOKE_STEPS - 1024) // 32 + 1) * 8
    assert_finite_losses({"train/loss"})
    assert_finite_weights(state["state_dict"])


def test_mujoco_sac_halfcheetah_smoke(tmp_path, monkeypatch):
    prefix = "--model.init_args."
    state = smoke("sac/halfcheetah.yaml", [
        f"{prefix}min_steps_learn", "1024", f"{prefix}replay_size", "8192",
    ], tmp_path, monkeypatch)
    train_state = state["lightning_rl"]["train_state"]
    assert train_state["env_steps"] == SMOKE_STEPS
    # One update per env step (replay_ratio 256 / batch 256), 64 per iteration of 64 steps, in
    # each iteration that ends at or after min_steps_learn: the one reaching 1024 and the 48 after it.
    assert train_state["updates"] == ((SMOKE_STEPS - 1024) // 64 + 1) * 64
    assert_finite_losses({"train/loss", "train/q_loss", "train/pi_loss", "train/alpha_loss"})
    assert_finite_weights(state["state_dict"])
