"""PettingZoo's own multi-agent recipe: SuperSuit parameter sharing + Stable-Baselines3 PPO.

The recipe of PettingZoo's SB3 tutorials: the ``ParallelEnv`` becomes a vector env with one
slot per agent (``supersuit.pettingzoo_env_to_vec_env_v1``), ``concat_vec_envs_v1`` stacks
``--copies`` copies of it (8 in the tutorial), and one SB3 ``PPO("MlpPolicy")`` acts for every
agent of every copy (parameter sharing) with the tutorial's settings (``learning_rate=1e-3``,
``batch_size=256``, SB3's defaults otherwise: ``n_steps=2048``, 10 epochs, gamma 0.99, GAE
lambda 0.95, clip 0.2). Agents whose observation spaces differ are padded to the largest
(``supersuit.pad_observations_v0``), as the tutorials do.

**Env steps.** One env step is one parallel step of the whole env (every agent acts once). SB3
counts one timestep per agent slot, so ``SB3 timesteps = env steps * n_agents`` while every agent
lives for the whole episode (MPE's envs); ``--budget`` is in env steps and SB3 runs
``budget * n_agents`` timesteps.

**Returns.** Each finished episode of a copy gives its ``team`` return (the sum of all agents'
rewards over the episode, what lightning_rl's env adapter reports as the env's reward) and each
agent's own return; the return at an env-step point is the mean over the last 20 episodes
finished by then, as ``benchmarks/learning.py`` reports ours. Rows go to ``learning.csv`` in the
columns of ``benchmarks/learning.py`` (merge them with ``learning.py --merge``).

Usage::

    pip install -e ".[pettingzoo,bench,plot]"
    python benchmarks/pettingzoo_sb3.py --env mpe2.simple_spread_v3 --budget 300000 --seeds 1 2 3 \\
        --out benchmarks/results/pettingzoo_simple_spread/sb3
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

WINDOW = 20


def make_vec_env(env_module: str, copies: int, env_kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
    """The recipe's vector env (SB3 flavour) and the agent names, in slot order within a copy."""
    import supersuit as ss

    env = importlib.import_module(env_module).parallel_env(**env_kwargs)
    agents = list(env.possible_agents)
    shapes = {env.observation_space(a).shape for a in agents}
    if len(shapes) > 1:
        env = ss.pad_observations_v0(env)
    if any(env.action_space(a) != env.action_space(agents[0]) for a in agents):
        env = ss.pad_action_space_v0(env)
    venv = ss.pettingzoo_env_to_vec_env_v1(env)
    venv = ss.concat_vec_envs_v1(venv, copies, num_cpus=0, base_class="stable_baselines3")
    # SB3 seeds a vector env with venv.seed(seed), which SuperSuit's ConcatVecEnv lacks (it takes
    # reset(seed=...), copy i getting seed + i): seed it that way.
    venv.seed = lambda seed=None: [venv.venv.reset(seed=seed)] and [seed]
    return venv, agents


def run(env_module: str, seed: int, budget: int, copies: int, n_steps: int, env_kwargs: dict[str, Any]) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    venv, agents = make_vec_env(env_module, copies, env_kwargs)
    n = len(agents)
    curves: dict[str, list[tuple[int, float, float]]] = {name: [] for name in ["team", *agents]}
    start = time.perf_counter()

    class Record(BaseCallback):
        """Sums each copy's rewards per agent; a copy's episode ends when its agents' slots are done."""

        def _on_training_start(self) -> None:
            self.sums = np.zeros(copies * n)

        def _on_step(self) -> bool:
            self.sums += self.locals["rewards"]
            dones = self.locals["dones"]
            env_steps = self.num_timesteps // n
            for c in range(copies):
                slots = slice(c * n, (c + 1) * n)
                if dones[slots].all():
                    now = time.perf_counter() - start
                    curves["team"].append((env_steps, float(self.sums[slots].sum()), now))
                    for i, name in enumerate(agents):
                        curves[name].append((env_steps, float(self.sums[c * n + i]), now))
                    self.sums[slots] = 0.0
            return True

    model = PPO("MlpPolicy", venv, learning_rate=1e-3, batch_size=256, n_steps=n_steps, seed=seed, device="cpu",
                verbose=0)
    model.learn(total_timesteps=budget * n, callback=Record())
    venv.close()
    return curves


def at(curve: list[tuple[int, float, float]], env_steps: int) -> tuple[float, float]:
    done = [c for c in curve if c[0] <= env_steps]
    if not done:
        return math.nan, math.nan
    return float(np.mean([c[1] for c in done[-WINDOW:]])), done[-1][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="mpe2.simple_spread_v3", help="module with parallel_env()")
    parser.add_argument("--budget", type=int, required=True, help="env steps per run (parallel steps)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--copies", type=int, default=8, help="env copies (the tutorial's 8)")
    parser.add_argument("--n_steps", type=int, default=2048, help="SB3 n_steps per slot (SB3's default)")
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--name", default="sb3_supersuit", help="system name in the CSV")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    points = [args.budget * (i + 1) // args.points for i in range(args.points)]
    env_name = args.env.rsplit(".", 1)[-1]
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "learning.csv"
    fields = ["system", "algorithm", "env", "seed", "env_steps", "return", "wall_seconds", "agent"]
    with open(path, "w", newline="") as f:
        csv.DictWriter(f, fieldnames=fields).writeheader()
    for seed in args.seeds:
        curves = run(args.env, seed, args.budget, args.copies, args.n_steps, {})
        rows = []
        for agent, curve in curves.items():
            for p in points:
                ret, wall = at(curve, p)
                rows.append(dict(system=args.name, algorithm="ppo", env=env_name, seed=seed, env_steps=p,
                                 **{"return": ret}, wall_seconds=wall, agent=agent))
        with open(path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=fields).writerows(rows)
        final, wall = at(curves["team"], args.budget)
        print(f"{args.name} {env_name} seed {seed}: team return {final:8.2f} at {args.budget:,} env steps, "
              f"{wall:6.0f} s, {len(curves['team'])} episodes", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
