"""DQN gradient updates per second on Pong-shaped data: our ``training_step`` path against a plain
PyTorch loop over the same model and the same replay (the ceiling).

Data: a gymnasium env with Pong's shapes (uint8 ``[4, 84, 84]`` frame stacks whose newest
frame is random noise, 6 actions) feeds a frame replay (each frame stored once); batches of 32
for :class:`~lightning_rl.models.AtariDqnModel` (Nature conv stack, 512 units), Huber loss,
Adam, gradient-norm clip 10 and a hard target copy every 100 updates in both.

* lightning_rl: ``Trainer.fit`` of :class:`~lightning_rl.algos.DQN` with a serial sampler of
  8 envs x 4 steps per iteration and ``replay_ratio`` giving ``--updates-per-itr`` updates per
  iteration: the ReplayDataset collects, appends, samples and stacks the ``K`` batches, and one
  ``training_step`` runs the ``K`` updates (manual optimization). Its rate counts the fit's wall
  time after the replay is warm, minus the time spent stepping envs and acting (the
  sampler's; printed too).
* plain PyTorch: ``sample_batch(32)``, move to the device, forward, loss, backward, clip, step,
  with a fresh copy of the same model on the same filled replay.

Replay sample time is the median ``sample_batch(32)`` latency (plus the ``[K]`` stacking our
dataset does). Both loops run alternately in blocks, so machine load slows them alike.

Target: our updates/s within 10% of the plain loop.

Usage::

    python benchmarks/dqn_atari_updates.py                      # CPU (GPU if present)
    python benchmarks/dqn_atari_updates.py --iterations 4 --blocks 2 --updates-per-itr 8
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

import gymnasium
import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from gymnasium import spaces

from lightning_rl.agents import DqnAgent
from lightning_rl.algos import DQN
from lightning_rl.datasets.replay import stack_batches
from lightning_rl.samplers import SerialSampler

BATCH = 32
TARGET_INTERVAL = 100
T, B = 4, 8


class PongShapedEnv(gymnasium.Env):
    """uint8 ``[4, 84, 84]`` stacks shifted by one random frame per step; 1000-step episodes."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, shape=(4, 84, 84), dtype=np.uint8)
        self.action_space = spaces.Discrete(6)
        self._stack = np.zeros((4, 84, 84), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._stack[:] = 0
        self._t = 0
        return self._stack.copy(), {}

    def step(self, action):
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = self.np_random.integers(0, 256, size=(84, 84), dtype=np.uint8)
        self._t += 1
        return self._stack.copy(), float(self.np_random.random() < 0.01), self._t >= 1000, False, {}


class _Timed(pl.Callback):
    """Wall time of the fit from the first training batch (replay warm) to the end."""

    def __init__(self, skip_batches: int) -> None:
        self.skip = skip_batches
        self.start = None
        self.sampler_time_at_start = 0.0
        self.updates_at_start = 0
        self.elapsed = 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        state = pl_module.train_state
        if state.itr == self.skip:
            self.start = time.perf_counter()
            self.sampler_time_at_start = state.sampler_time
            self.updates_at_start = state.updates

    def on_train_end(self, trainer, pl_module) -> None:
        self.elapsed = time.perf_counter() - self.start


def build_module(iterations: int, warm_itr: int, updates_per_itr: int) -> DQN:
    return DQN(
        DqnAgent(eps_steps_min=0, eps_steps_max=T * B),
        SerialSampler(env_id=PongShapedEnv, batch_T=T, batch_B=B),
        batch_size=BATCH, replay_size=20_000, replay_ratio=updates_per_itr * BATCH / (T * B),
        min_steps_learn=warm_itr * T * B, target_update_interval=TARGET_INTERVAL, learning_rate=2.5e-4,
        total_env_steps=(warm_itr + iterations) * T * B, log_interval_steps=(warm_itr + iterations) * T * B,
        checkpoint_replay=False, torch_threads=torch.get_num_threads(),
    )


def run_ours(iterations: int, warm_itr: int, updates_per_itr: int, accelerator: str) -> tuple[DQN, dict[str, float]]:
    module = build_module(iterations, warm_itr, updates_per_itr)
    # The first learning iteration (warm_itr) is excluded: it includes one-off allocations.
    timed = _Timed(skip_batches=warm_itr + 1)
    trainer = pl.Trainer(
        max_epochs=-1, accelerator=accelerator, devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[timed],
    )
    trainer.fit(module)
    state = module.train_state
    updates = state.updates - timed.updates_at_start
    sampler_s = state.sampler_time - timed.sampler_time_at_start
    return module, {
        "updates": updates,
        "updates_per_s": updates / (timed.elapsed - sampler_s),
        "updates_per_s_with_sampler": updates / timed.elapsed,
        "sampler_s": sampler_s,
    }


def plain_loop(module: DQN, n_updates: int, device: torch.device) -> float:
    """Updates per second of a plain PyTorch DQN loop on ``module``'s replay and model class."""
    model = copy.deepcopy(module.agent.model).to(device)
    target = copy.deepcopy(model).requires_grad_(False)
    optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4, eps=3.125e-4, fused=True)  # as DQN's
    replay = module.replay

    def update(i: int) -> None:
        batch = replay.sample_batch(BATCH)
        obs = batch.agent_inputs.observation.to(device, non_blocking=True)
        next_obs = batch.target_inputs.observation.to(device, non_blocking=True)
        action = batch.action.to(device, non_blocking=True).long()
        return_ = batch.return_.to(device, non_blocking=True)
        not_done = (~batch.done_n).to(device, non_blocking=True).float()
        discount = batch.discount_n.to(device, non_blocking=True)
        with torch.no_grad():
            y = return_ + not_done * discount * target(next_obs).max(-1).values
        q = model(obs).gather(-1, action.unsqueeze(-1)).squeeze(-1)
        loss = F.huber_loss(q, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        if (i + 1) % TARGET_INTERVAL == 0:
            target.load_state_dict(model.state_dict())

    update(0)
    _sync(device)
    start = time.perf_counter()
    for i in range(n_updates):
        update(i)
    _sync(device)
    return n_updates / (time.perf_counter() - start)


def sample_times_ms(module: DQN, updates_per_itr: int, calls: int = 200) -> dict[str, float]:
    replay = module.replay
    one, stacked = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        replay.sample_batch(BATCH)
        one.append(time.perf_counter() - t0)
    for _ in range(max(1, calls // updates_per_itr)):
        t0 = time.perf_counter()
        stack_batches([replay.sample_batch(BATCH) for _ in range(updates_per_itr)])
        stacked.append((time.perf_counter() - t0) / updates_per_itr)
    return {"sample_ms": 1e3 * statistics.median(one), "sample_and_stack_ms": 1e3 * statistics.median(stacked)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8, help="timed sampler iterations per block (ours)")
    parser.add_argument("--updates-per-itr", type=int, default=16, help="K: updates per sampler iteration")
    parser.add_argument("--warm-itr", type=int, default=40, help="iterations collected before learning starts")
    parser.add_argument("--blocks", type=int, default=3, help="alternating blocks of ours and plain")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    device = torch.device("cuda" if accelerator == "gpu" else "cpu")
    print(f"device {device}, torch threads {args.threads}, batch {BATCH}, K = {args.updates_per_itr} updates/iteration")
    ours, plain, sampler_share = [], [], []
    module = None
    for block in range(args.blocks):
        pl.seed_everything(block, verbose=False)
        module, stats = run_ours(args.iterations, args.warm_itr, args.updates_per_itr, accelerator)
        rate = plain_loop(module, stats["updates"], device)
        ours.append(stats["updates_per_s"])
        plain.append(rate)
        sampler_share.append(stats["updates_per_s_with_sampler"])
        print(f"block {block}: lightning_rl {stats['updates_per_s']:7.1f} upd/s "
              f"({stats['updates_per_s_with_sampler']:.1f} with env stepping, {stats['sampler_s']:.2f} s of it)   "
              f"plain {rate:7.1f} upd/s   ({stats['updates']} updates each)", flush=True)
    times = sample_times_ms(module, args.updates_per_itr)
    o, p = statistics.median(ours), statistics.median(plain)
    print()
    print(f"{'':14s} {'updates/s':>10s}")
    print(f"{'lightning_rl':14s} {o:10.1f}")
    print(f"{'plain PyTorch':14s} {p:10.1f}")
    print(f"replay sample_batch({BATCH}): {times['sample_ms']:.3f} ms; with [K] stacking: "
          f"{times['sample_and_stack_ms']:.3f} ms per batch")
    print(f"\nratio lightning_rl / plain = {o / p:.3f} (target >= 0.90)")


if __name__ == "__main__":
    main()
