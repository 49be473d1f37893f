"""Row 21: DDP on two CPU ranks (gloo) whose data are uneven never hangs.

An epoch is a fixed number of sampler iterations on every rank (``log_interval_steps // (T * B *
world size)``: both budgets count all ranks, ``RLModule.iterations_per_epoch``), whatever the
episodes do, so batch counts are equal by
construction; what differs between ranks is the episodes. Here rank 0's envs end an episode
every 3 steps and rank 1's never end one (the env's episode length depends on its seed, and the
sampler seeds env ``b`` of rank ``r`` with ``seed + r * B + b``), so episode statistics exist on
one rank only. Checked:

* PPO and DQN finish their budget; every rank ran the same number of batches in every epoch
  (2 = 64 env steps per epoch over both ranks / (16 per batch x 2 ranks), by hand);
* the episode metrics, logged from the rank that has episodes, are synced on both ranks: both
  report rank 0's values (every episode returns 3, 2 envs x 48 steps / 3 = 32 episodes);
* an evaluation that finishes episodes on rank 0 only either reports rank 0's episodes on both
  ranks or ends the run with an error naming the problem, well within the 60 s collective
  timeout; never a hang.

Each run is a subprocess (``python -m`` this module, which Lightning's launcher starts again
as rank 1) in its own process group with a hard timeout, so a hang fails the test instead of
hanging CI; the whole run must take under 120 s wall.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
from gymnasium import spaces
from pytorch_lightning.strategies import DDPStrategy

ROOT = Path(__file__).resolve().parents[2]
#: Seeds whose episodes last 3 steps: rank 0's training envs (0, 1) and rank 0's eval env
#: (``seed + world_size * B + rank * eval_n_envs`` = 4). Every other env never ends an episode.
SHORT_SEEDS = (0, 1, 4)
WALL_LIMIT = 120.0


class SeedLengthEnv(gymnasium.Env):
    """Reward 1 per step; episodes last 3 steps if the env was seeded with one of ``short_seeds``,
    10**6 steps otherwise. Observation ``[t]``, action ``Discrete(2)`` (ignored)."""

    def __init__(self, short_seeds: tuple[int, ...] = SHORT_SEEDS) -> None:
        self.observation_space = spaces.Box(0.0, 1e6, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.short_seeds = tuple(short_seeds)
        self._length, self._t = 10**6, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._length = 3 if seed in self.short_seeds else 10**6
        self._t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any):
        self._t += 1
        return np.array([self._t], np.float32), 1.0, self._t >= self._length, False, {}


class Record(pl.Callback):
    """Batches per epoch and the final logged metrics of this rank, written to ``rank<r>.json``."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.batches_per_epoch: list[int] = []

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.batches_per_epoch.append(0)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.batches_per_epoch[-1] += 1

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        record = {
            "batches_per_epoch": self.batches_per_epoch,
            "dataset_len": len(trainer.train_dataloader),
            "env_steps": pl_module.train_state.env_steps,
            "metrics": {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(("train/", "eval/"))},
        }
        Path(self.out_dir, f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def build(algo: str, evaluate: bool) -> pl.LightningModule:
    from lightning_rl.agents import CategoricalPgAgent, DqnAgent
    from lightning_rl.algos import DQN, PPO
    from lightning_rl.samplers import SerialSampler

    eval_kwargs: dict[str, Any] = {"eval_n_envs": 1, "eval_max_steps": 10} if evaluate else {}
    sampler = SerialSampler(env_id=SeedLengthEnv, batch_T=8, batch_B=2, **eval_kwargs)
    # 192 env steps over both ranks: 96 per rank, 6 batches of 16, 3 epochs of 64 (32 per rank).
    common: dict[str, Any] = dict(total_env_steps=192, log_interval_steps=64, seed=0)
    if algo == "ppo":
        return PPO(CategoricalPgAgent(hidden_sizes=[8]), sampler, minibatches=2, epochs=1, **common)
    return DQN(DqnAgent(hidden_sizes=[8]), sampler, batch_size=8, replay_size=256, min_steps_learn=16,
               replay_ratio=1, **common)


def fit(out_dir: str, algo: str, evaluate: bool) -> None:
    """One DDP run (rank 0 starts rank 1 by running this module again)."""
    from lightning_rl.callbacks import EvaluationCallback

    callbacks: list[pl.Callback] = [Record(out_dir)]
    if evaluate:
        callbacks.append(EvaluationCallback())
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, max_epochs=-1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=datetime.timedelta(seconds=60)),
    )
    trainer.fit(build(algo, evaluate))


def run_ddp(tmp_path: Path, algo: str, evaluate: bool = False) -> tuple[subprocess.CompletedProcess, float]:
    """Run :func:`fit` in a subprocess group; kill the whole group if it outlives the wall limit."""
    cmd = [sys.executable, "-m", "tests.reliability.test_r21_ddp_uneven", str(tmp_path), algo, str(int(evaluate))]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=WALL_LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"DDP run hung: killed after {WALL_LIMIT:.0f} s\n{out[-2000:]}\n{err[-4000:]}")
    finally:
        # Rank 1 is in the same process group; nothing of the run may outlive the test.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), time.monotonic() - start


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_uneven_episodes_give_equal_batches_and_synced_metrics(tmp_path, algo):
    proc, wall = run_ddp(tmp_path, algo)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert wall < WALL_LIMIT
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for record in ranks:
        assert record["batches_per_epoch"] == [2, 2, 2]
        assert record["dataset_len"] == 2
        assert record["env_steps"] == 96
    # Rank 0: 2 envs x 48 steps in episodes of 3 steps, each returning 3; rank 1: no episode.
    expected = {"train/return_mean": 3.0, "train/length_mean": 3.0, "train/episodes": 32.0,
                "train/epoch_return_mean": 3.0, "train/epoch_return_max": 3.0, "train/epoch_return_min": 3.0}
    for record in ranks:
        assert {k: record["metrics"].get(k) for k in expected} == expected


def test_an_evaluation_with_episodes_on_one_rank_only_syncs_or_fails_fast_with_a_clear_error(tmp_path):
    proc, wall = run_ddp(tmp_path, "ppo", evaluate=True)
    # Well inside the 60 s collective timeout either way: no rank waits for the other.
    assert wall < 60.0
    if proc.returncode != 0:
        assert "no evaluation episode finished" in proc.stderr, proc.stderr[-4000:]
        return
    # Or the evaluation is synced: both ranks report rank 0's episodes (each returns 3).
    for r in range(2):
        metrics = json.loads((tmp_path / f"rank{r}.json").read_text())["metrics"]
        assert metrics["eval/return_mean"] == 3.0


if __name__ == "__main__":
    fit(sys.argv[1], sys.argv[2], bool(int(sys.argv[3])))
