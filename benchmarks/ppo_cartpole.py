"""Wall time and env steps for PPO to reach a mean return of 475 on CartPole-v1.

lightning_rl's PPO (``configs/ppo/cartpole.yaml`` settings) against Stable-Baselines3's PPO with
the same hyperparameters (RL-zoo: 8 envs x 32 steps, batch 256, 20 epochs, gamma 0.98, GAE 0.8,
lr and clip range linear from 1e-3 and 0.2, separate 64x64 tanh MLPs), in the same process,
alternating seeds. "Mean return" is the mean of the last 100 finished training episodes for both.
SB3's callback checks it after every env step; lightning_rl's EarlyStopping at the end of each
Lightning epoch, every 2048 env steps as in the shipped config (up to 2048 steps late).

Usage::

    pip install -e ".[bench]"
    python benchmarks/ppo_cartpole.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytorch_lightning as pl
import torch

TARGET = 475.0
BUDGET = 200_000


def run_lightning_rl(seed: int, backend: str = "gymnasium", fast_paths: bool = True) -> tuple[float, int, bool]:
    """The shipped config's PPO; ``backend`` a ``VectorSampler`` backend ("gymnasium":
    gymnasium's NumPy CartPole vector env, which the shipped ``backend: auto`` picks) or "serial"
    (SerialSampler, the shipped sampler before 2026-11-26); ``fast_paths=False`` turns
    :mod:`lightning_rl.algos.private_fast_paths` off (same updates, public APIs only)."""
    from lightning_rl.agents import CategoricalPgAgent
    from lightning_rl.algos import PPO, private_fast_paths
    from lightning_rl.samplers import SerialSampler, VectorSampler

    private_fast_paths.enabled = fast_paths

    start = time.perf_counter()
    pl.seed_everything(seed, verbose=False)
    if backend == "serial":
        sampler = SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=8)
    else:
        sampler = VectorSampler(env_id="CartPole-v1", batch_T=32, batch_B=8, backend=backend)
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[64, 64]),
        sampler,
        discount=0.98, gae_lambda=0.8, ratio_clip=0.2, epochs=20, minibatches=1, value_loss_coeff=0.5,
        entropy_loss_coeff=0.0, learning_rate=1e-3, clip_grad_norm=0.5, normalize_advantage=True,
        linear_lr_schedule=True, total_env_steps=BUDGET, log_interval_steps=2048,
    )
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=TARGET, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[stop],
    )
    trainer.fit(module)
    elapsed = time.perf_counter() - start
    solved = float(trainer.callback_metrics.get("train/return_mean", 0.0)) >= TARGET
    return elapsed, module.train_state.env_steps, solved


def run_sb3(seed: int) -> tuple[float, int, bool]:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopAtTarget(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.solved = False

        def _on_rollout_end(self) -> None:
            buf = self.model.ep_info_buffer
            if buf and len(buf) >= 1 and np.mean([e["r"] for e in buf]) >= TARGET:
                self.solved = True

        def _on_step(self) -> bool:
            return not self.solved

    start = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = SB3PPO(
        "MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=lambda f: 1e-3 * f, clip_range=lambda f: 0.2 * f, vf_coef=0.5, max_grad_norm=0.5,
        seed=seed, device="cpu", verbose=0,
    )
    callback = StopAtTarget()
    model.learn(total_timesteps=BUDGET, callback=callback)
    elapsed = time.perf_counter() - start
    return elapsed, model.num_timesteps, callback.solved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both (default 1)")
    parser.add_argument("--fast-paths", choices=["on", "off", "both"], default="on",
                        help="lightning_rl with its private fast paths on, off (public APIs only), or both")
    parser.add_argument("--no-sb3", action="store_true", help="skip Stable-Baselines3")
    parser.add_argument("--backends", nargs="+", default=["gymnasium"], choices=["serial", "gymnasium", "sync"],
                        help="lightning_rl samplers to time: VectorSampler backends (gymnasium: the shipped "
                             "config's backend: auto on CartPole) and/or serial (SerialSampler)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.fast_paths]
    systems = [
        (f"lightning_rl/{b}" + ("" if fast else "/public"),
         lambda seed, b=b, fast=fast: run_lightning_rl(seed, b, fast))
        for b in args.backends for fast in modes
    ]
    if not args.no_sb3:
        systems.append(("sb3", run_sb3))
    rows = []
    for seed in args.seeds:
        for name, fn in systems:
            elapsed, steps, solved = fn(seed)
            rows.append((name, seed, elapsed, steps, solved))
            print(f"{name:22s} seed {seed}: {elapsed:7.1f} s  {steps:7d} env steps  solved={solved}", flush=True)
    print()
    print(f"{'framework':22s} {'mean s':>8s} {'mean env steps':>15s} {'solved':>7s}")
    means = {}
    for name, _ in systems:
        r = [row for row in rows if row[0] == name]
        means[name] = np.mean([x[2] for x in r])
        print(f"{name:22s} {means[name]:8.1f} {np.mean([x[3] for x in r]):15.0f} {sum(x[4] for x in r):4d}/{len(r)}")
    for name, _ in systems:
        if "sb3" in means and name != "sb3":
            print(f"time ratio {name} / sb3 = {means[name] / means['sb3']:.2f} (targets: <= 0.8 and <= 0.5)")
        if name.endswith("/public"):
            fast = name[: -len("/public")]
            gain = 1.0 - means[fast] / means[name]
            print(f"private fast paths: {fast} takes {100 * gain:.1f}% less wall time than {name}")


if __name__ == "__main__":
    main()
