"""Row 2: DQN and SAC resumed mid-episode, after learning started, in a new process continue
exactly as if never stopped, replay included.

As row 1 (:func:`~tests.reliability.exact_resume.resume_matches_uninterrupted_run`: this process
runs 2N iterations; it runs N and saves; a new process with another global seed resumes and runs
N more), on CPU with ``Trainer(deterministic=True)`` and 2 envs, checkpointing after
``min_steps_learn`` while the envs are inside an episode. Besides row 1's state, compared right
after the reload and at the end: the replay's arrays, write cursor, rows written and ``full``
flag, its sum tree (priorities), ``beta`` and generator, the target networks, DQN's epsilon and
SAC's ``log_alpha``, and the replay side files of the final checkpoints; then one more replay
batch drawn from each run has the same indices.

* DQN on CartPole: double, dueling, 3-step returns, prioritized replay, a linear learning-rate
  schedule, a fractional number of updates per iteration (3 1/3: the carried fraction is state)
  and a replay that has wrapped around by the save (``full``, cursor mid-ring).
* SAC on Pendulum: 2-step returns, three optimizers each with an ``ExponentialLR`` scheduler,
  uniform random actions before ``min_steps_learn``, a replay that is partly filled.

CUDA's generator is not covered: the test runs on CPU.
"""

from __future__ import annotations

import functools

import pytest
import torch

from lightning_rl.agents import DqnAgent, SacAgent
from lightning_rl.algos import DQN, SAC
from lightning_rl.samplers import SerialSampler
from tests.reliability.exact_resume import SEED, keep_determinism_flag, resume_matches_uninterrupted_run

T, B = 8, 2


def build_dqn() -> DQN:
    return DQN(
        DqnAgent(hidden_sizes=[16], dueling=True, eps_steps_min=0, eps_steps_max=256, eps_final=0.05),
        SerialSampler(env_id="CartPole-v1", batch_T=T, batch_B=B),
        batch_size=24, replay_size=80, replay_ratio=5, min_steps_learn=48, n_step_return=3, double_dqn=True,
        prioritized_replay=True, pri_beta_steps=100, target_update_interval=5, linear_lr_schedule=True,
        learning_rate=1e-3, optimizer_eps=1e-8, total_env_steps=2048, log_interval_steps=T * B, seed=SEED,
        torch_threads=1,
    )


def build_sac() -> SAC:
    return SAC(
        SacAgent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler(env_id="Pendulum-v1", batch_T=T, batch_B=B),
        batch_size=16, replay_size=1000, replay_ratio=8, min_steps_learn=32, n_step_return=2,
        target_update_interval=2, clip_grad_norm=10.0,
        lr_scheduler=functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.9),
        total_env_steps=10**6, log_interval_steps=T * B, seed=SEED, torch_threads=1,
    )


@pytest.fixture(autouse=True)
def _restore_torch_flags():
    yield from keep_determinism_flag()


def assert_saved_mid_episode_after_learning_started(saved: dict, min_steps_learn: int) -> None:
    assert saved["train_state"]["env_steps"] > min_steps_learn
    assert saved["train_state"]["updates"] > 0
    # Each env's TimeLimit counts the steps of its running episode: none has just been reset.
    assert all(env["elapsed_steps"] > 0 for env in saved["envs"]), [env["elapsed_steps"] for env in saved["envs"]]
    assert all(info["Length"] > 0 for info in saved["traj_infos"])


def test_dqn_resumed_in_a_new_process_matches_an_uninterrupted_run(tmp_path):
    n, batch_size = 6, 24
    full, part, resumed, wall = resume_matches_uninterrupted_run(
        tmp_path, f"{__name__}:build_dqn", n, next_batch_size=batch_size)
    assert wall < 30, wall
    saved = part["at_save"][str(n)]
    assert_saved_mid_episode_after_learning_started(saved, min_steps_learn=48)
    # By hand: 16 env steps per iteration, 5 * 16 / 24 = 10/3 updates from the 3rd iteration on
    # (48 steps), the fraction carried over: 13 updates by iteration 6 (credit 1/3), 33 by 12.
    assert saved["train_state"]["env_steps"] == n * T * B
    assert saved["train_state"]["updates"] == saved["global_step"] == 13
    assert saved["train_state"]["update_credit"] == pytest.approx(1 / 3)
    final = resumed["final"]
    assert final["train_state"]["updates"] == final["global_step"] == 33
    # 40 rows per env: 48 written by the save (wrapped, cursor at 8), 96 at the end (cursor 16).
    assert saved["replay_counters"] == {"cursor": 8, "rows_written": 48, "full": True,
                                        "beta": pytest.approx(0.4 + 0.6 * 13 / 100)}
    assert final["replay_counters"]["cursor"] == 16
    # Epsilon anneals 1 -> 0.05 over 256 env steps; iteration 6 started after 80 and acted with
    # the epsilon of that step count.
    assert saved["epsilon"]["eps_sample"] == pytest.approx(1 - 0.95 * 80 / 256)
    # Linear schedule: iteration 6's updates ran at 1e-3 * (1 - 80 / 2048).
    assert saved["lr"] == [[pytest.approx(1e-3 * (1 - 80 / 2048))]]
    # The next prioritized batch: same rows in both runs (and not one row over and over).
    assert torch.equal(full["next_idxs"], resumed["next_idxs"])
    assert len(set(full["next_idxs"].tolist())) > 1


def test_sac_resumed_in_a_new_process_matches_an_uninterrupted_run(tmp_path):
    n, batch_size = 5, 16
    full, part, resumed, wall = resume_matches_uninterrupted_run(
        tmp_path, f"{__name__}:build_sac", n, next_batch_size=batch_size)
    assert wall < 30, wall
    saved = part["at_save"][str(n)]
    assert_saved_mid_episode_after_learning_started(saved, min_steps_learn=32)
    # Pendulum's episodes last 200 steps: 40 per env at the save, 80 at the end.
    assert [env["elapsed_steps"] for env in saved["envs"]] == [40, 40]
    assert [env["elapsed_steps"] for env in resumed["final"]["envs"]] == [80, 80]
    # By hand: 8 * 16 / 16 = 8 updates per iteration from the 2nd (32 steps) on.
    assert saved["train_state"]["updates"] == 8 * (n - 1)
    assert resumed["final"]["train_state"]["updates"] == 8 * (2 * n - 1)
    # Three optimizers, each scheduled: lr 3e-4 * 0.9 per iteration.
    assert saved["lr"] == [[pytest.approx(3e-4 * 0.9**n)]] * 3
    assert saved["replay_counters"]["rows_written"] == n * T
    assert not saved["replay_counters"]["full"]
    assert float(saved["log_alpha"]) != 0.0  # alpha has moved from 1: its state matters
    assert torch.equal(full["next_idxs"], resumed["next_idxs"])
    assert len(set(full["next_idxs"].tolist())) > 1
